"""The package as people install it: `npm run wheel` (scripts/wheel.sh) gives one universal wheel
holding the exporter and the runtime's tandem.wasm, with package.json's version; installed into a
fresh venv (torch, wasmtime and transformers taken from this venv through a .pth file, nothing
downloaded) it exports, loads and runs models from a folder outside the clone
(tests/python/installed_package.py). A plain clone without the wasm says in one line what to run."""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

import tandem
from tandem.format import VERSION as FORMAT_VERSION

ROOT = Path(__file__).resolve().parents[2]
WASM = ROOT / "web" / "tandem.wasm"
PACKAGE_VERSION = json.loads((ROOT / "package.json").read_text())["version"]
pytest.importorskip("wasmtime")


def clean_env():
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TANDEM_LIB", "TANDEM_BACKEND")}


def test_one_version_for_both_packages():
    """package.json is the source of truth: the clone's tandem.__version__ and --version say it."""
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?(a|b|rc|dev)\d+)?", PACKAGE_VERSION), PACKAGE_VERSION
    assert tandem.__version__ == PACKAGE_VERSION
    out = subprocess.run(
        [sys.executable, "-m", "tandem", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**clean_env(), "PYTHONPATH": str(ROOT / "python")},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"tandem-runtime {PACKAGE_VERSION} (writes .tandem format version {FORMAT_VERSION};"), out.stdout
    assert "version" not in (ROOT / "python" / "pyproject.toml").read_text().split("[project]")[1].split("dynamic")[0], (
        "pyproject.toml must not state a version of its own (setup.py takes package.json's)"
    )


def test_plain_clone_says_in_one_line_what_to_run(tmp_path):
    """`pip install ./python` in a clone where no wasm was built yet stops at once with one line."""
    clone = tmp_path / "clone"
    shutil.copytree(
        ROOT / "python",
        clone / "python",
        symlinks=True,
        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tandem.wasm", "_version.py"),
    )
    shutil.copy(ROOT / "package.json", clone)
    shutil.copy(ROOT / "LICENSE", clone)
    (clone / "web").mkdir()
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "-w",
            str(tmp_path / "out"),
            str(clone / "python"),
        ],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode != 0
    lines = [line.strip() for line in (pip.stdout + pip.stderr).splitlines() if line.strip().startswith("tandem:")]
    assert lines == [
        "tandem: web/tandem.wasm is missing (a plain clone has no wasm build yet): run `npm run wheel` "
        "and `pip install dist/*.whl`, or `npm run build` and then `pip install ./python`"
    ], pip.stdout + pip.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel `npm run wheel` made (scripts/test.sh passes its path in TANDEM_WHEEL), else one
    built here by the same script."""
    assert WASM.exists(), "web/tandem.wasm is missing: run `npm run build`"
    given = os.environ.get("TANDEM_WHEEL")
    if given:
        path = Path(given).resolve()
        assert path.name == f"tandem_runtime-{PACKAGE_VERSION}-py3-none-any.whl" and path.exists(), path
        return path
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        ["bash", str(ROOT / "scripts" / "wheel.sh"), str(out)], cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=300
    )
    assert built.returncode == 0, built.stdout + built.stderr
    path = Path(built.stdout.strip().splitlines()[-1])
    assert path == out / f"tandem_runtime-{PACKAGE_VERSION}-py3-none-any.whl" and path.exists(), built.stdout
    return path


def test_the_wheel_holds_the_package_the_wasm_and_the_metadata(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = f"tandem_runtime-{PACKAGE_VERSION}.dist-info"
        src = ROOT / "python" / "tandem"
        sources = {p.relative_to(src).as_posix() for p in src.rglob("*.py")}
        assert {n.split("/", 1)[1] for n in names if n.startswith("tandem/") and n.endswith(".py")} == sources | {"_version.py"}
        assert z.read("tandem/tandem.wasm") == WASM.read_bytes(), "the wheel's tandem.wasm is not the clone's build"
        assert f'version = "{PACKAGE_VERSION}"' in z.read("tandem/_version.py").decode()
        assert not any(n.startswith(("tests/", "src/", "web/")) for n in names), sorted(names)
        assert z.read(f"{info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
        wheel_info = z.read(f"{info}/WHEEL").decode()
        meta = z.read(f"{info}/METADATA").decode().split("\n\n")[0]
    assert "Tag: py3-none-any" in wheel_info and "Root-Is-Purelib: true" in wheel_info, wheel_info
    fields = {}
    for line in meta.splitlines():
        key, _, value = line.partition(": ")
        fields.setdefault(key, []).append(value)
    assert fields["Name"] == ["tandem-runtime"] and fields["Version"] == [PACKAGE_VERSION]
    assert fields["License-Expression"] == ["MIT"] and fields["Requires-Python"] == [">=3.10"]
    assert {d.split(";")[0].replace(" ", "") for d in fields["Requires-Dist"]} >= {"torch>=2.4", "wasmtime>=20", "tqdm>=4.60"}
    assert "Operating System :: OS Independent" in fields["Classifier"]
    assert "Programming Language :: Python :: 3.10" in fields["Classifier"]


def test_the_wheel_in_a_fresh_venv_exports_loads_and_runs_outside_the_clone(wheel, tmp_path):
    """A fresh venv (not --system-site-packages) whose torch and wasmtime are this venv's (a .pth
    file); this venv's pip installs the wheel into it (`pip --python`: no ensurepip, a second saved)
    with --no-index --no-deps; installed_package.py checks that every dependency the wheel declares
    is there, at a version it allows, and runs models from a folder outside the clone."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "zz-torch-from-tandem-venv.pth").write_text(str(Path(torch.__file__).parents[1]) + "\n")
    py = venv / "bin" / "python"
    env = clean_env()
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(py),
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--disable-pip-version-check",
            str(wheel),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(ROOT / "tests" / "cases.py", work)
    shutil.copy(ROOT / "tests" / "python" / "installed_package.py", work)
    run = subprocess.run(
        [str(py), "-W", "ignore", "installed_package.py", str(work), str(venv), PACKAGE_VERSION],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0 and run.stdout.strip().endswith("OK"), run.stdout + run.stderr
    # the console script the wheel installs, run from the work folder
    version = subprocess.run([str(venv / "bin" / "tandem"), "--version"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    want = f"tandem-runtime {PACKAGE_VERSION} (writes .tandem format version {FORMAT_VERSION}; runtime backend: wasm)"
    assert version.stdout.strip() == want, version


def test_the_wheel_lists_every_package_of_the_source_tree():
    """setuptools ships only the packages pyproject.toml lists: a new folder of python/tandem/ left out
    of it gives a wheel that fails at import (tandem.lowering once did)."""
    src = ROOT / "python" / "tandem"
    found = {".".join(p.parent.relative_to(src.parent).parts) for p in src.rglob("__init__.py")}
    listed = set(
        re.search(r"^packages = \[([^\]]*)\]", (ROOT / "python" / "pyproject.toml").read_text(), re.M)
        .group(1)
        .replace('"', "")
        .replace(" ", "")
        .split(",")
    )
    assert listed == found, f"python/pyproject.toml [tool.setuptools] packages: add {sorted(found - listed)}, drop {sorted(listed - found)}"
