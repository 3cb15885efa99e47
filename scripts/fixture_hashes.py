"""Exports every fixture program and prints the sha256 of each .tandem file, so a change that should
leave the exporter's output alone (a restructuring, a rename) can be checked byte for byte.

    python scripts/fixture_hashes.py build/hashes            # export into build/hashes, print the hashes
    python scripts/fixture_hashes.py build/hashes --save before.txt
    python scripts/fixture_hashes.py build/hashes --check before.txt   # exit 1 on any difference

The programs are those npm test exports (scripts/test.sh): tests/fixtures/make.py, and the ops and
random-program cases tests/python/test_ops.py and test_programs.py record when TANDEM_OPS_FIXTURES and
TANDEM_PROGRAM_FIXTURES are set (those tests are run here, with pytest). Each test starts from
torch.manual_seed(0) (this file is also loaded as a pytest plugin, -p fixture_hashes), so the buffers
test_ops.py fills at random are the same whatever order or worker ran the tests.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The tests that write ops fixtures (tests/python/test_ops.py's _record callers) and program fixtures.
RECORDING_TESTS = [
    "tests/python/test_ops.py::test_op_matches_eager",
    "tests/python/test_ops.py::test_eager_attention_is_one_attention_op_over_the_kv_heads",
    "tests/python/test_ops.py::test_quantized_op_matches_reference_quantization",
    "tests/python/test_programs.py::test_random_program_matches_eager",
]

try:  # as a pytest plugin: one seed per test
    import pytest

    @pytest.fixture(autouse=True)
    def _fixture_hashes_seed():
        import torch
        torch.manual_seed(0)
except ImportError:  # pragma: no cover - the script itself needs pytest only to export
    pass


def export(out: Path, jobs: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "scripts"), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-W", "ignore", str(ROOT / "tests/fixtures/make.py"), str(out / "fixtures")],
                   check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    for sub in ("ops", "programs"):
        for f in (out / sub).glob("*") if (out / sub).exists() else ():
            f.unlink()
    env.update(TANDEM_OPS_FIXTURES=str(out / "ops"), TANDEM_PROGRAM_FIXTURES=str(out / "programs"))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "fixture_hashes", *RECORDING_TESTS]
    if jobs > 1:
        cmd += ["-n", str(jobs)]
    subprocess.run(cmd, check=True, cwd=ROOT, env=env)


def hashes(out: Path) -> dict:
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.rglob("*.tandem"))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="the folder to export into (emptied of earlier ops/programs fixtures)")
    ap.add_argument("--save", type=Path, help="write the hashes to this file")
    ap.add_argument("--check", type=Path, help="compare with hashes saved earlier; exit 1 on any difference")
    ap.add_argument("--no-export", action="store_true", help="hash what is already in OUT")
    ap.add_argument("-n", "--jobs", type=int, default=2, help="pytest workers (pytest-xdist)")
    args = ap.parse_args()
    if not args.no_export:
        export(args.out, args.jobs)
    now = hashes(args.out)
    text = "".join(f"{h}  {name}\n" for name, h in now.items())
    if args.save:
        args.save.write_text(text)
    if not args.check:
        if not args.save:
            sys.stdout.write(text)
        print(f"{len(now)} programs", file=sys.stderr)
        return 0
    before = dict(reversed(line.split("  ", 1)) for line in args.check.read_text().splitlines() if line)
    before = {k.strip(): v for k, v in before.items()}
    changed = sorted(k for k in before.keys() & now.keys() if before[k] != now[k])
    missing, new = sorted(before.keys() - now.keys()), sorted(now.keys() - before.keys())
    for label, names in (("changed", changed), ("missing", missing), ("new", new)):
        for n in names:
            print(f"{label}: {n}")
    same = len(before.keys() & now.keys()) - len(changed)
    print(f"{same} of {len(before)} programs byte-identical; {len(changed)} changed, {len(missing)} missing, {len(new)} new")
    return 1 if changed or missing or new else 0


if __name__ == "__main__":
    sys.exit(main())
