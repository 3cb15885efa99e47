"""`python -m tandem inspect` and `check`, run as a user runs them (a subprocess), against what the
exporter's Program and the runtime say about the same file; and on files that are not programs."""

import hashlib
import json
import os
import re
import subprocess
import sys

import pytest
import torch
from torch import nn

import tandem
from conftest import ROOT
from models.families import MODELS
from tandem.cli import main
from tandem.format import VERSION
from tandem.ir import CONST, DTYPE_NAME
from tandem.runtime import _library


def run(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    return subprocess.run(
        [sys.executable, "-W", "ignore", "-m", "tandem", *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def transformer(tmp_path_factory):
    module, spec, _, _ = MODELS["transformer"]()
    program = tandem.export(module, spec)
    path = tmp_path_factory.mktemp("cli") / "transformer.tandem"
    program.save(path)
    return path, program


def constant_bytes(program):
    """The constants the writer stores: each distinct content once (docs/format.md)."""
    seen = {}
    for m in program.methods:
        for op in m.ops:
            for v in op.ins + op.outs:
                if v.storage.kind == CONST:
                    t = v.storage.tensor
                    seen[(str(t.dtype), tuple(t.shape), hashlib.sha256(t.numpy().tobytes()).digest())] = t.numel() * t.element_size()
    return len(seen), sum(seen.values())


def test_inspect_prints_what_the_program_holds(transformer):
    path, program = transformer
    model = tandem.load(path)
    lib = _library()
    state_bytes = lib.tdm_program_state_size(model._program)  # the runtime's own numbers
    scratch_bytes = lib.tdm_program_scratch_size(model._program)
    n_const, const_bytes = constant_bytes(program)
    assert state_bytes == 64 + 4 * (4 * 64 * 16 * 4)  # pos (int64, its slot padded to 64 bytes), 4 float32 caches [1,4,64,16]

    r = run("inspect", "--json", path)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["file_bytes"] == path.stat().st_size == len(program.to_bytes())
    assert info["format_version"] == VERSION == 4
    assert (info["constant_count"], info["constant_bytes"]) == (n_const, const_bytes)
    assert const_bytes > 400_000  # the weights
    assert (info["state_bytes"], info["scratch_bytes"]) == (state_bytes, scratch_bytes)
    assert [m["name"] for m in info["methods"]] == [m.name for m in program.methods] == ["prefill", "decode", "reset"]
    for got, m in zip(info["methods"], program.methods):
        assert got["ops"] == len(m.ops), m.name
        for kind, ios in (("inputs", m.inputs), ("outputs", m.outputs)):
            assert [(t["name"], t["dtype"], t["shape"], t["bytes"]) for t in got[kind]] == [
                (n, DTYPE_NAME[v.dtype], list(v.shape), v.nbytes) for n, v in ios
            ], (m.name, kind)
    assert [(s["name"], s["dtype"], s["shape"], s["bytes"], s["offset"]) for s in info["state"]] == [
        (s.name, DTYPE_NAME[s.dtype], list(s.shape), s.nbytes, s.offset) for s in program.states
    ]

    r = run("inspect", path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"{path}: tandem format version {VERSION}, {len(program.to_bytes())} bytes (")
    assert f"constants: {n_const} tensors, {const_bytes} bytes (" in r.stdout
    assert f"state: 5 tensors, {state_bytes} bytes (64.1 KiB) per session" in r.stdout
    assert f"scratch: {scratch_bytes} bytes" in r.stdout
    assert re.search(r"^  blocks\.1\.attn\.v_cache +float32\[1,4,64,16\] +16384 bytes$", r.stdout, re.M)
    assert re.search(r"^  pos +int64\[\] +8 bytes$", r.stdout, re.M)
    for m in program.methods:
        assert f"  {m.name}: {len(m.ops)} ops, " in r.stdout
    assert "    in  args_0: int64[1,8]" in r.stdout and "    out output: float32[1,48]" in r.stdout
    assert "  reset: 5 ops, 0 inputs, 0 outputs" in r.stdout


class Indexed(nn.Module):
    """`write(i)` stores at i + 10 of a 4-element buffer: on a zero input, out of range."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(4))

    def write(self, i):
        self.cache[i + 10] = 1.0
        return self.cache.sum().reshape(1)

    def forward(self, x):
        self.cache.add_(x)
        return self.cache


def test_check_runs_every_method_and_reports_each(transformer, tmp_path):
    path, _ = transformer
    r = run("check", path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == f"{path}: verified; 3 methods, each run once on zero inputs from the initial state"
    for name in ("prefill", "decode", "reset"):
        assert re.search(rf"^  {name}: OK \(\d+\.\d\d ms\)$", r.stdout, re.M), name

    m = Indexed()
    tandem.export(m, {"write": tandem.Method(m.write, (torch.tensor([0]),)), "forward": (torch.zeros(4),)}).save(tmp_path / "i.tandem")
    r = run("check", tmp_path / "i.tandem")
    assert r.returncode == 1
    assert re.search(r"^  write: TDM_ERR_INDEX: .*index 10 is out of range", r.stdout, re.M)
    assert re.search(r"^  forward: OK ", r.stdout, re.M)  # the other method still runs
    assert r.stderr == "tandem: 1 of 2 methods failed\n"


def bad_files(tmp_path, good):
    data = good.read_bytes()
    files = {
        "missing": (tmp_path / "nope.tandem", "cannot read .*nope.tandem.*No such file"),
        "truncated": (tmp_path / "truncated.tandem", "not a valid tandem program: TDM_ERR_TRUNCATED: .*truncated"),
        "garbage": (tmp_path / "garbage.tandem", "not a valid tandem program: TDM_ERR_BAD_MAGIC"),
        "empty": (tmp_path / "empty.tandem", "not a valid tandem program: TDM_ERR_(BAD_MAGIC|TRUNCATED)"),
        "corrupt": (tmp_path / "corrupt.tandem", "not a valid tandem program: TDM_ERR_MALFORMED"),
        "directory": (tmp_path, "cannot read .*Is a directory"),
    }
    files["truncated"][0].write_bytes(data[: len(data) // 2])
    files["garbage"][0].write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    files["empty"][0].write_bytes(b"")
    corrupt = bytearray(data)
    corrupt[16] = 9  # the section count
    files["corrupt"][0].write_bytes(bytes(corrupt))
    return files


@pytest.mark.parametrize("command", ["inspect", "check"])
def test_bad_files_are_one_line_and_a_nonzero_exit(transformer, tmp_path, capsys, command):
    """Each bad file through the command's entry point in this process (tandem.cli.main, what
    `python -m tandem` calls; an exception would fail the test), and one of them through a real
    `python -m tandem` process (each starts torch: a few seconds)."""
    for what, (path, message) in bad_files(tmp_path, transformer[0]).items():
        code = main([command, str(path)])
        out, err = capsys.readouterr()
        assert code == 1, (what, out, err)
        assert out == "", what
        assert err.count("\n") == 1 and err.startswith("tandem: "), (what, err)
        assert re.search(message, err), (what, err)
    path, message = bad_files(tmp_path, transformer[0])["corrupt"]
    r = run(command, path)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Traceback" not in r.stdout + r.stderr
    assert r.stdout == "" and r.stderr.count("\n") == 1 and re.search(message, r.stderr), r.stderr


def test_docs_api_md_names_every_public_python_name_and_command():
    """docs/api.md has an entry (a heading with an example) for each name in tandem.__all__, each
    public attribute of tandem.Model and each command of `python -m tandem`."""
    doc = (ROOT / "docs" / "api.md").read_text()
    python = doc[doc.index("\n## Python") :]
    sections = {}
    for part in re.split(r"\n(?=#{2,4} )", python):
        m = re.match(r"#{2,4} `([\w.]+(?: -m tandem \w+)?)", part)
        if m:
            sections[m.group(1)] = part
    wanted = [f"tandem.{n}" for n in tandem.__all__]
    wanted += [f"Model.{n}" for n in dir(tandem.Model) if not n.startswith("_")]
    from tandem.cli import COMMANDS

    wanted += [f"python -m tandem {c}" for c in COMMANDS]
    assert {"tandem.export", "Model.read_state", "python -m tandem check"} <= set(wanted)
    missing = [n for n in wanted if n not in sections]
    assert missing == [], f"public Python names without an entry in docs/api.md: {missing}"
    no_example = [n for n in wanted if "```" not in sections[n]]
    assert no_example == [], f"entries without an example: {no_example}"


def test_inspect_prints_the_metadata(tmp_path):
    program = tandem.export(
        torch.nn.Linear(2, 2), {"forward": (torch.ones(2),)}, metadata={"max_cache_len": 7, "eos_token_id": [1, 2], "model_type": "tiny"}
    )
    path = tmp_path / "meta.tandem"
    program.save(path)
    info = json.loads(run("inspect", path, "--json").stdout)
    assert info["metadata"] == {"max_cache_len": 7, "eos_token_id": [1, 2], "model_type": "tiny"}
    text = run("inspect", path).stdout
    assert "metadata: 3 entries" in text and "  eos_token_id: [1, 2]" in text and '  model_type: "tiny"' in text


def _help(capsys, *args):
    with pytest.raises(SystemExit) as e:
        main(list(args))
    o, err = capsys.readouterr()
    assert e.value.code == 0 and err == ""
    return o


def test_help_lists_every_command_with_what_it_does(capsys, monkeypatch):
    from tandem.cli import COMMANDS

    assert set(COMMANDS) == {"inspect", "check", "export"}
    monkeypatch.setenv("COLUMNS", "100")
    r = run("--help")  # as a user runs it
    assert r.returncode == 0 and r.stderr == ""
    assert re.search(r"Inspect, check and export \.tandem files", r.stdout)
    for name, help in COMMANDS.items():
        assert re.search(rf"^    {name} +{re.escape(help)}$", r.stdout, re.M), (name, r.stdout)
        assert help in _help(capsys, name, "--help")
    assert "-q, --quiet" in _help(capsys, "export", "--help")
    v = _help(capsys, "--version")
    assert re.fullmatch(rf"tandem-runtime {re.escape(tandem.__version__)} \(writes .tandem format version {VERSION}; .*\)\n", v)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    pytest.importorskip("transformers")
    from models.checkpoint import make_checkpoint

    folder = tmp_path_factory.mktemp("cli-ckpt") / "tiny-llama"
    make_checkpoint(folder)
    return folder


def test_export_quiet_prints_nothing_and_progress_goes_to_stderr(checkpoint, tmp_path, capsys):
    out = tmp_path / "quiet.tandem"
    assert main(["export", str(checkpoint), "-o", str(out), "--max-cache-len", "16", "--max-prompt-len", "4", "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")
    assert tandem.load(out).metadata["max_cache_len"] == 16  # it did export
    out2 = tmp_path / "loud.tandem"
    assert main(["export", str(checkpoint), "-o", str(out2), "--max-cache-len", "16", "--max-prompt-len", "4", "--no-verify"]) == 0
    o, e = capsys.readouterr()
    # stdout: the summary alone; stderr (not a terminal here): one line per stage
    assert o.startswith(f"{out2}: ") and "methods: prefill, decode, decode_topk, reset" in o and "[1/" not in o
    assert e.splitlines() == [f"[1/3] loading {checkpoint} ...", "[2/3] exporting (causal recipe) ...", f"[3/3] writing {out2} ..."]
    assert out2.read_bytes() == out.read_bytes()


def test_progress_on_a_terminal_is_a_tqdm_bar():
    import io

    from tandem.recipes.pretrained import Progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    p = Progress(stream)
    p.plan(2)
    p.stage("loading")
    p.stage("exporting")
    seconds = p.done()
    text = stream.getvalue()
    assert seconds >= 0 and "\r" in text and text.endswith("\n")
    frames = [f for f in re.split(r"[\r\n]", text) if f.strip()]
    assert re.search(r"^loading \|.*\| 0/2 stages \[00:00\]", frames[0]), frames
    assert any(re.search(r"^exporting \|.*\| 1/2 stages", f) for f in frames), frames
    assert re.search(r"^done \|[#█]+\| 2/2 stages \[00:0\d\]", frames[-1]), frames
    quiet = Progress(None)
    quiet.stage("loading")
    assert quiet.done() >= 0


@pytest.mark.parametrize("quiet", [[], ["--quiet"]])
def test_export_without_transformers_names_the_install(tmp_path, capsys, monkeypatch, quiet):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    (folder / "model.safetensors").write_bytes(b"")
    for name in [n for n in sys.modules if n == "transformers" or n.startswith("transformers.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` raises ModuleNotFoundError
    assert main(["export", str(folder), "-o", str(tmp_path / "x.tandem"), *quiet]) == 1
    o, e = capsys.readouterr()
    assert o == "" and e == "tandem: export needs the transformers package: pip install 'tandem-runtime[transformers]'\n"
    assert not (tmp_path / "x.tandem").exists()


def test_the_transformers_extra_is_declared():
    text = (ROOT / "python" / "pyproject.toml").read_text()
    assert re.search(r'^\[project\.optional-dependencies\]\ntransformers = \["transformers>=[\d.]+"\]', text, re.M)
    deps = re.search(r"^dependencies = \[(.*)\]$", text, re.M).group(1)
    assert '"tqdm>=' in deps
    pins = (ROOT / "python" / "requirements.txt").read_text()
    assert re.search(r"^tqdm==", pins, re.M) and re.search(r"^transformers==", pins, re.M)


def test_an_output_that_cannot_be_written_is_one_line(checkpoint, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["export", str(checkpoint), "-o", str(blocker / "x.tandem"), "--max-cache-len", "8", "--max-prompt-len", "4", "-q"]) == 1
    o, e = capsys.readouterr()
    assert o == "" and e.count("\n") == 1 and e.startswith("tandem: export: ") and str(blocker) in e, e


class Typed(nn.Module):
    """For `inspect --dts`: an input changed in place beside a one-element int64 input (forward's
    inputs keep their names), two outputs of two dtypes, a method without inputs or outputs."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(2, 3))

    def forward(self, x, n):
        x.add_(1.0)
        self.total.add_(x * n)
        return self.total.clone()

    def pair(self, a, b):
        return a + b, self.total.sum().to(torch.int64).reshape(1)

    def reset(self):
        self.total.zero_()


def test_inspect_dts_types_each_method_for_the_js_package(tmp_path):
    program = tandem.export(Typed(), {"forward": (torch.ones(2, 3), torch.tensor(2)), "pair": (torch.ones(4), torch.ones(4)), "reset": ()})
    path = tmp_path / "my-typed_model.tandem"
    program.save(path)
    r = run("inspect", "--dts", path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    text = r.stdout
    assert text.startswith("// The methods of my-typed_model.tandem, typed for the tandem-runtime package")
    assert "import type { CallOptions, InputOf, Model, Tensor } from 'tandem-runtime';" in text
    assert "export interface MyTypedModel extends Model<MyTypedMethods> {" in text
    # each method with its input names as parameters, with and without call options
    params = "x: InputOf<'float32'>, n: InputOf<'int64'> | number | bigint"
    assert (
        f"  forward({params}): Promise<Tensor<'float32'>>;\n  forward({params}, options: CallOptions): Promise<Tensor<'float32'>>;" in text
    )
    assert "  pair(args_0: InputOf<'float32'>, args_1: InputOf<'float32'>): Promise<[Tensor<'float32'>, Tensor<'int64'>]>;" in text
    assert "  reset(): Promise<undefined>;\n  reset(options: CallOptions): Promise<undefined>;" in text
    # shapes and the input changed in place in the doc comments
    assert "   * forward(x: float32[2, 3] (changed in place), n: int64[]) -> output: float32[2, 3]" in text
    assert "An input changed in place gets its new value written into the typed array or tensor data given for it." in text
    # run's feeds and outputs by the file's names ('x!', the new value of x, is no output)
    feeds = "    readonly feeds: {\n      /** float32[2, 3]; changed in place */\n      readonly x: InputOf<'float32'>;\n"
    assert feeds in text
    assert "      /** int64[1] */\n      readonly output1: Tensor<'int64'>;" in text
    assert "x!" not in text
    assert "  readonly reset: {\n    readonly feeds: Record<string, never>;\n    readonly outputs: Record<string, never>;\n  };" in text
    assert " | null" not in text  # no method returns None in a version
    named = run("inspect", "--dts", "--dts-name", "Stepper", path).stdout
    assert named.count("export interface Stepper extends Model<StepperMethods>") == 1


class Reserved(nn.Module):
    def forward(self, new, options, delete):
        return new + options + delete


def test_inspect_dts_renames_parameters_that_typescript_reserves(tmp_path):
    path = tmp_path / "3d.tandem"
    tandem.export(Reserved(), {"forward": (torch.ones(2), torch.ones(2), torch.ones(2))}).save(path)
    text = run("inspect", "--dts", path).stdout
    assert "export interface T3dModel extends Model<T3dMethods> {" in text
    sig = "new_: InputOf<'float32'>, options: InputOf<'float32'>, delete_: InputOf<'float32'>"
    assert f"  forward({sig}): Promise<Tensor<'float32'>>;" in text
    assert f"  forward({sig}, options_: CallOptions): Promise<Tensor<'float32'>>;" in text
    assert "      readonly new: InputOf<'float32'>;" in text, "a property may be named so: run's feeds keep the names"


def test_inspect_dts_types_a_version_returning_none_as_null_and_a_dynamic_dim_as_its_expression(tmp_path):
    from cases import CASES

    for name in ("delayed", "dynamic_appender"):
        module, spec, _, _ = CASES[name]()
        tandem.export(module, spec).save(tmp_path / f"{name}.tandem")
    text = run("inspect", "--dts", tmp_path / "delayed.tandem").stdout
    assert "  forward(x: InputOf<'float32'>): Promise<Tensor<'float32'> | null>;" in text
    assert "      readonly output: Tensor<'float32'>;\n    } | null;" in text
    assert "forward#" not in text, "versions are one method"
    text = run("inspect", "--dts", tmp_path / "dynamic_appender.tandem").stdout
    assert "   * forward(x: float32[1, n, 4]) -> output0: float32[1, n + 1, 4]," in text
    assert "   * Dim n: 1 to 8." in text
    assert "  forward(x: InputOf<'float32'>): Promise<[" in text and "| number" not in text
