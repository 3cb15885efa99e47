"""python/tandem/format.py's two ways of writing a program: Program.save streams the file section by
section, the data section straight from the constants' tensors (so a 1B model's file is never whole in
memory), and Program.to_bytes() copies each part to its offset in one buffer. On programs with
every kind of section content (shared and int64 state, state with initial data, constants shared by
methods, a transposed weight, int4 codes, metadata) the two are byte-identical, and the streamed file
is laid out as docs/format.md says: the header's size is the file's, each section where the table
puts it, each constant's bytes those of its tensor, zeros between them."""

import struct
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import tandem
from tandem import schema
from tandem.ir import CONST, flat_ops

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "formats"))
import format_models as models  # noqa: E402


class _Mixed(nn.Module):
    """A transposed (non-contiguous) weight, the same constant reached twice, state with initial data."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.w = nn.Parameter(torch.randn(6, 5, generator=g).t())  # [5, 6], strides (1, 5)
        self.twin = nn.Parameter(self.w.detach().clone())
        self.register_buffer("acc", torch.arange(6.0).reshape(1, 6))

    def forward(self, x):
        self.acc.add_(x @ self.w + x @ self.twin)
        return self.acc

    def reset(self):
        self.acc.fill_(1.0)


def _program(name: str):
    if name == "mixed":
        return tandem.export(_Mixed(), {"forward": (torch.ones(1, 5),), "reset": ()}, metadata={"name": "mixed", "rate": 24000})
    if name == "int4":
        torch.manual_seed(0)
        return tandem.export(nn.Linear(64, 16), {"forward": (torch.randn(2, 64),)}, quantize="int4")
    module, methods = models.programs()[name]
    return tandem.export(module, methods)


def _read(record, buf: bytes, off: int) -> tuple:
    return struct.unpack_from(record.fmt, buf, off)


def _blobs(streamed: bytes, table: dict, head, record, blob_of) -> list:
    """(record fields, the bytes it points at in the data section) for each record of a section."""
    off = table[0]
    count = _read(head, streamed, off)[-1]
    off += head.size
    out = []
    for _ in range(count):
        fields = _read(record, streamed, off)
        off += record.size + 8 * fields[2]
        out.append((fields, blob_of(fields)))
    return out


@pytest.mark.parametrize("name", ["shared", "stream", "cache", "mixed", "int4"])
def test_saved_file_is_to_bytes_and_laid_out_as_the_format_says(name, tmp_path):
    program = _program(name)
    path = tmp_path / "p.tandem"
    program.save(path)  # streamed: to_bytes() has not run
    streamed = path.read_bytes()
    assert streamed == program.to_bytes()

    head = _read(schema.HEADER, streamed, 0)
    assert head[:3] == (schema.MAGIC, schema.VERSION, len(streamed))
    table = {}
    for i in range(head[3]):
        sid, _, off, size = _read(schema.SECTION, streamed, schema.HEADER.size + i * schema.SECTION.size)
        table[schema.SECTIONS[sid]] = (off, size)
    assert sorted(table) == sorted(schema.SECTIONS.values())
    data_off, data_size = table["data"]
    assert data_off % schema.ALIGN == 0
    data = streamed[data_off : data_off + data_size]
    covered = bytearray(data_size)

    def blob(at: int, nbytes: int) -> bytes:
        assert at % schema.ALIGN == 0 and at + nbytes <= data_size
        covered[at : at + nbytes] = b"\1" * nbytes
        return data[at : at + nbytes]

    # every constant's bytes are those of a tensor its program reads, each content once
    tensors = {
        v.storage.tensor.contiguous().numpy().tobytes()
        for m in program.methods
        for op in flat_ops(m.ops)
        for v in op.ins
        if v.storage.kind == CONST
    }
    consts = _blobs(streamed, table["constants"], schema.CONSTANTS_HEAD, schema.CONSTANT, lambda c: blob(c[4], c[5]))
    assert consts and all(b in tensors for _, b in consts)
    assert len({(c[1], b) for c, b in consts}) == len(consts)
    # every state's initial data, where it has some, is its value at export
    inits = {st.name: st.init.contiguous().numpy().tobytes() for st in program.states}
    states = _blobs(streamed, table["states"], schema.STATES_HEAD, schema.STATE, lambda s: blob(s[7], s[6]) if s[3] else None)
    assert len(states) == len(program.states)
    for st, (fields, b) in zip(program.states, states):
        assert (b if fields[3] else bytes(st.nbytes)) == inits[st.name], st.name
    assert any(fields[3] for fields, _ in states) == (name in ("mixed", "shared"))
    assert all(c or not b for c, b in zip(covered, data)), "nonzero bytes between the blobs"
    tandem.load(streamed)  # the runtime's reader verifies the rest
