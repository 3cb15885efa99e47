"""Exports every fixture program and prints the sha256 of each .tandem file, so a change that should
leave the exporter's output alone (a restructuring, a rename) can be checked byte for byte.

    python scripts/fixture_hashes.py build/hashes --save before.txt   # export into build/hashes, save the hashes
    python scripts/fixture_hashes.py build/hashes --check before.txt  # again after the change: exit 1 on any difference

The programs are those npm test exports (scripts/test.sh): tests/fixtures/make.py's, and the ops and
random-program cases that tests/python/test_ops.py and test_random_programs.py record when TANDEM_OPS_FIXTURES
and TANDEM_PROGRAM_FIXTURES are set. By default those cases are exported here directly, the way the
tests export them, without running them (the runtime and eager comparisons are the tests' job), in
`--jobs` processes; each case starts from fixed seeds (torch's and test_ops.py's generator), so the
bytes do not depend on which cases ran before. `--pytest` runs the recording tests themselves instead
(this file is then a pytest plugin that seeds torch before each test; test_ops.py's generator still
depends on test order, so compare only runs with the same -n).
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
    "tests/python/test_random_programs.py::test_random_program_matches_eager",
]

try:  # as a pytest plugin: one seed per test
    import pytest

    @pytest.fixture(autouse=True)
    def _fixture_hashes_seed():
        import torch

        torch.manual_seed(0)
except ImportError:  # pragma: no cover - the script itself needs pytest only to export
    pass


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "scripts"), os.environ.get("PYTHONPATH", "")])}


def export(out: Path, jobs: int, use_pytest: bool, make: bool = True) -> None:
    out.mkdir(parents=True, exist_ok=True)
    env = _env()
    for sub in ("ops", "programs"):
        for f in (out / sub).glob("*") if (out / sub).exists() else ():
            f.unlink()
    if use_pytest:
        env.update(TANDEM_OPS_FIXTURES=str(out / "ops"), TANDEM_PROGRAM_FIXTURES=str(out / "programs"))
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "fixture_hashes", *RECORDING_TESTS]
        subprocess.run(cmd + (["-n", str(jobs)] if jobs > 1 else []), check=True, cwd=ROOT, env=env)
    else:
        workers = [
            subprocess.Popen([sys.executable, "-W", "ignore", __file__, str(out), "--worker", f"{k}/{jobs}"], cwd=ROOT, env=env)
            for k in range(jobs)
        ]
        if any(w.wait() for w in workers):
            raise SystemExit("an export worker failed")
    if make:
        subprocess.run(
            [sys.executable, "-W", "ignore", str(ROOT / "tests/fixtures/make.py"), str(out / "fixtures")],
            check=True,
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
        )


def _cases():
    """(name, folder, export) for every case test_ops.py and test_random_programs.py record, as they export it."""
    for p in (ROOT / "python", ROOT / "tests", ROOT / "tests/python"):
        sys.path.insert(0, str(p))
    import torch

    # test_ops.py builds its modules (nn.Conv2d, nn.Linear, ...) on import, from torch's global
    # generator, whose seed at start differs from process to process: fix it first.
    torch.manual_seed(0)
    import programs
    import tandem
    import test_ops as T
    import test_random_programs

    def reseed():
        torch.manual_seed(0)
        T.g.manual_seed(0)

    def op_case(fn, inputs):
        return lambda: T.export_case(fn, inputs)[2]

    def eager_case(groups, tq, tk, d, form, masked):
        def run():
            hkv = 2
            q, k, v = T.r(1, hkv * groups, tq, d), T.r(1, hkv, tk, d), T.r(1, hkv, tk, d)
            mask = T._causal_mask(tq, tk, fill=torch.finfo(torch.float32).min if tq > 1 else float("-inf"))
            inputs = (q, k, v, mask) if masked else (q, k, v)
            module = T.Fn(lambda *xs: T._eager(*xs[:3], mask=xs[3] if masked else None, groups=groups, **form), [])
            return tandem.export(module, {"forward": inputs}).to_bytes()

        return run

    def quant_case(module, inputs, mode, group, skip):
        def run():
            return tandem.export(
                module.eval(), {"forward": inputs}, quantize=mode, quantize_group=group, quantize_skip=list(skip)
            ).to_bytes()

        return run

    def program_case(seed):
        def run():
            plan = programs.make_plan(seed)
            module = programs.Planned(plan)
            return tandem.export(module, programs.method_specs(plan, module)).to_bytes()

        return run

    for p in T.CASES:
        yield p.id, "ops", reseed, op_case(*p.values[:2])
    for p in T.EAGER:
        yield p.id, "ops", reseed, eager_case(*p.values)
    for p in T.QCASES:
        yield p.id, "ops", reseed, quant_case(*p.values)
    for seed in sorted(set(range(test_random_programs.COUNT)) | set(test_random_programs.REGRESSIONS)):
        yield f"program_{seed}", "programs", reseed, program_case(seed)


def _worker(out: Path, part: str) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    k, n = (int(x) for x in part.split("/"))
    for i, (name, sub, reseed, run) in enumerate(_cases()):
        if i % n != k:
            continue
        reseed()
        (out / sub).mkdir(parents=True, exist_ok=True)
        (out / sub / f"{name}.tandem").write_bytes(run())


def hashes(out: Path) -> dict:
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.rglob("*.tandem"))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="the folder to export into (emptied of earlier ops/programs fixtures)")
    ap.add_argument("--save", type=Path, help="write the hashes to this file")
    ap.add_argument("--check", type=Path, help="compare with hashes saved earlier; exit 1 on any difference")
    ap.add_argument("--no-export", action="store_true", help="hash what is already in OUT")
    ap.add_argument("-n", "--jobs", type=int, default=2, help="processes (with --pytest: pytest-xdist workers)")
    ap.add_argument("--pytest", action="store_true", help="run the recording tests instead of exporting their cases here")
    ap.add_argument("--no-make", action="store_true", help="keep OUT/fixtures from an earlier run (skip tests/fixtures/make.py)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # K/N: export every N-th case from the K-th
    args = ap.parse_args()
    if args.worker:
        _worker(args.out, args.worker)
        return 0
    if not args.no_export:
        export(args.out, args.jobs, args.pytest, make=not args.no_make)
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
