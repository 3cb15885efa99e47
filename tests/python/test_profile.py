"""model.profile: every op of a call timed, the same outputs as the call, the bytes each op writes
(state and scratch) and the flag on an op that rewrites more of the state than flag_fraction."""

import torch
from torch import nn

import tandem
from models.families import make_transformer


def test_profile_times_every_op_and_returns_the_same_outputs():
    module, spec, eager, calls = make_transformer(capacity=16)
    program = tandem.export(module, spec)
    a, b = tandem.load(program.to_bytes()), tandem.load(program.to_bytes())
    tokens = calls[0][1][0]
    torch.testing.assert_close(a.prefill(tokens), b.prefill(tokens))
    token = torch.tensor([[3]])
    out, ops = b.profile("decode", token)
    torch.testing.assert_close(out, a.decode(token))
    assert [o.name for o in ops] == [op.name for op in program.method("decode").ops]
    assert [o.index for o in ops] == list(range(len(ops)))
    assert all(o.ms >= 0 for o in ops) and sum(o.ms for o in ops) > 0


def test_profile_counts_the_bytes_each_op_writes():
    """A decode step of the transformer (2 layers, 4 heads of 16, cache 64): each index_put writes one
    row of K or V in place, the state gets those rows and the position, every other op writes its
    outputs' bytes, and nothing is flagged; an op rewriting the whole state is."""
    module, spec, _, calls = make_transformer()
    program = tandem.export(module, spec)
    m = tandem.load(program.to_bytes())
    m.prefill(calls[0][1][0])
    _, ops = m.profile("decode", torch.tensor([[3]]))
    row = 4 * 16 * 4  # one position of K or V: heads x head dim x float32
    puts = [o for o in ops if o.name == "index_put"]
    assert len(puts) == 4 and all(o.bytes_written == row == o.state_bytes_written for o in puts)
    assert sum(o.state_bytes_written for o in ops) == 4 * row + 8  # the new rows and the int64 position
    for o, op in zip(ops, program.method("decode").ops):
        if o.name != "index_put":
            assert o.bytes_written == sum(v.nbytes for v in op.outs), o
    assert not any(o.flagged for o in ops)
    _, ops = m.profile("decode", torch.tensor([[4]]), flag_fraction=0)
    assert [o.flagged for o in ops] == [o.bytes_written > 0 for o in ops] and any(o.flagged for o in ops)

    class Decay(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.zeros(64, 16))
            self.register_buffer("pos", torch.zeros((), dtype=torch.long))

        def forward(self, x):
            self.cache.mul_(0.5)  # writes the whole cache: what the flag is for
            self.pos.add_(1)
            return x + 1

    m = tandem.load(tandem.export(Decay(), {"forward": (torch.zeros(2),)}).to_bytes())
    _, ops = m.profile("forward", torch.zeros(2))
    flagged = [o for o in ops if o.flagged]
    assert len(flagged) == 1 and flagged[0].state_bytes_written == 64 * 16 * 4
