"""Files of every .tandem format version this runtime reads (docs/format.md, "Versions"), and saved
state of every saved-state format it reads: tests/fixtures/formats/vN/ holds the programs of
tests/fixtures/formats/format_models.py as the exporter of format version N wrote them (kept in the tree, not
made again: they are what users of those versions have), and today's exporter writes the current
version. Each loads on both backends and runs a call sequence equal to eager; a state saved by one
version's program loads into every other's (the same state layout)."""

import struct
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
FORMATS = ROOT / "tests" / "fixtures" / "formats"
sys.path.insert(0, str(FORMATS))
import format_models as models  # noqa: E402

import tandem  # noqa: E402
from tandem import schema  # noqa: E402
from tandem.runtime import TandemError  # noqa: E402

CURRENT = 4
VERSIONS = [1, 2, 3, CURRENT]
CALLS = {  # name -> the call sequence, as (method, inputs)
    "shared": [("forward", (torch.tensor([v]),)) for v in (1.5, -0.25)] + [("reset", ()), ("forward", (torch.tensor([2.0]),))],
    "stream": [("forward", (torch.randn(1, 4, generator=torch.Generator().manual_seed(i)),)) for i in range(3)]
    + [("reset", ()), ("forward", (torch.ones(1, 4),))],
    "cache": [("forward", (torch.full((1, 3), float(i)),)) for i in range(1, 4)] + [("reset", ()), ("forward", (torch.ones(1, 3),))],
}


def _data(name: str, version: int) -> bytes:
    if version == CURRENT:
        module, methods = models.programs()[name]
        return tandem.export(module, methods).to_bytes()
    return (FORMATS / f"v{version}" / f"{name}.tandem").read_bytes()


def _eager(name: str) -> list:
    module, _ = models.programs()[name]
    outs = []
    for method, inputs in CALLS[name]:
        with torch.no_grad():
            out = getattr(module, method)(*inputs)
        outs.append(None if out is None else out.clone())
    return outs


def test_the_stored_files_are_of_every_earlier_version():
    for version in VERSIONS[:-1]:
        files = sorted((FORMATS / f"v{version}").glob("*.tandem"))
        assert [f.stem for f in files] == sorted(CALLS), f"v{version}: {files}"
        for f in files:
            assert struct.unpack_from("<4sI", f.read_bytes()) == (b"TNDM", version), f
    assert struct.unpack_from("<4sI", _data("shared", CURRENT)) == (b"TNDM", CURRENT)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_format_version_runs_equal_to_eager(backend, name, version):
    model = tandem.load(_data(name, version))
    assert sorted(model.methods) == ["forward", "reset"]
    if version == 1:
        assert model.metadata == {}  # version 1 has no metadata section
    for (method, inputs), want in zip(CALLS[name], _eager(name)):
        got = getattr(model, method)(*inputs)
        if want is None:
            assert got is None or got == () or got == [], (method, got)
        else:
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_state_saved_by_one_version_loads_into_every_other(backend, name):
    """A program's state layout (names, dtypes, shapes) is what saved state is checked against, so the
    same model in any file version takes each other's saved state, and the next call equals eager's."""

    def body(saved):  # the saved state without the writer's program id (bytes 16 to 24)
        return saved[:16] + saved[24:]

    saved = {}
    for version in VERSIONS:
        model = tandem.load(_data(name, version))
        for method, inputs in CALLS[name][:2]:
            getattr(model, method)(*inputs)
        saved[version] = model.save_state()
        assert struct.unpack_from("<4sI", saved[version]) == (schema.SAVED_STATE_MAGIC, schema.SAVED_STATE_FORMAT)
    assert len({body(s) for s in saved.values()}) == 1, "the same calls left different state in different file versions"
    (method, inputs), want = CALLS[name][2], _eager(name)[2]
    for into in VERSIONS:
        for src in VERSIONS:
            fresh = tandem.load(_data(name, into))
            fresh.load_state(saved[src])
            assert body(fresh.save_state()) == body(saved[src])
            got = getattr(fresh, method)(*inputs)
            if want is not None:
                torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_saved_state_of_format_1_is_refused_with_the_state_unchanged(backend):
    """Format 1 (a 24-byte header without the program id) is not read: the error says to save again."""
    model = tandem.load(_data("cache", CURRENT))
    model.forward(torch.ones(1, 3))
    before = model.save_state()
    body = before[schema.SAVED_STATE.size :]
    fingerprint = struct.unpack_from(schema.SAVED_STATE.fmt, before)[2]
    old = struct.pack("<4sIQQ", schema.SAVED_STATE_MAGIC, 1, fingerprint, len(body)) + bytes(len(body))
    with pytest.raises(TandemError, match="format 1.*save the state again"):
        model.load_state(old)
    assert model.save_state() == before


def test_int4_weights_of_a_version_3_file_are_refused_by_name(backend):
    """Version 4 changed the int4 weights' layout (blocks of 8 k): a version 3 file with int4 weights
    is refused with the constant's name and what to do, never misread; without them it still loads."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(32, 8)
    data = bytearray(tandem.export(lin, {"forward": (torch.randn(1, 32),)}, quantize="int4").to_bytes())
    struct.pack_into("<I", data, 4, 3)
    with pytest.raises(TandemError, match="int4 weights of a version 3 file.*re-export"):
        tandem.load(bytes(data))
