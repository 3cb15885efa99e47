"""The Python model's lifetime (native and wasm) and language-model API: Model.fork() (a session on the same program,
from the initial values or a copy of the state, independent afterwards) against eager copies of the module over call sequences;
`with tandem.load(...)` / close() (sessions and the program freed once, calls afterwards refused);
tandem.generate against transformers' greedy generate on a seeded tiny Llama, its stops, and its
sampled ids against the JS package's generate() on the same file and seed."""

import copy
import json
import shutil
import subprocess

import pytest
import torch
from torch import nn

import tandem
import tandem.transformers as tt
from conftest import ROOT
from tandem.runtime import _library

transformers = pytest.importorskip("transformers")


class Recurrent(nn.Module):
    """A state h carried between calls, and a counter of the calls."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.w = nn.Linear(4, 4)
        self.register_buffer("h", torch.zeros(1, 4))
        self.register_buffer("calls", torch.zeros(1, dtype=torch.long))

    def forward(self, x):
        self.h.copy_(torch.tanh(self.w(x) + 0.5 * self.h))
        self.calls.add_(1)
        return self.h * 2

    def reset(self):
        self.h.zero_()
        self.calls.zero_()


@pytest.fixture(scope="module")
def recurrent():
    m = Recurrent().eval()
    data = tandem.export(copy.deepcopy(m), {"forward": (torch.zeros(1, 4),), "reset": ()}).to_bytes()
    return m, data


def _inputs(n, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(1, 4, generator=g) for _ in range(n)]


def test_fork_copies_the_state_and_then_runs_on_its_own(recurrent, backend):
    module, data = recurrent
    eager, m = copy.deepcopy(module), tandem.load(data)
    with torch.no_grad():
        for x in _inputs(3, 1):
            torch.testing.assert_close(m.forward(x), eager(x))
        f, eager_f = m.fork(state="copy"), copy.deepcopy(eager)
        fresh, eager_fresh = m.fork(), copy.deepcopy(module)
        assert torch.equal(f.read_state("h"), m.read_state("h")) and int(f.read_state("calls")) == 3
        assert int(fresh.read_state("calls")) == 0
        # interleaved: each follows its own eager copy, none sees another's calls
        for x, y, z in zip(_inputs(4, 2), _inputs(4, 3), _inputs(4, 4)):
            torch.testing.assert_close(m.forward(x), eager(x))
            torch.testing.assert_close(f.forward(y), eager_f(y))
            torch.testing.assert_close(fresh.forward(z), eager_fresh(z))
        f.reset()
        eager_f.reset()
        x = _inputs(1, 5)[0]
        torch.testing.assert_close(f.forward(x), eager_f(x))
        torch.testing.assert_close(m.forward(x), eager(x))
    assert [int(t.read_state("calls")) for t in (m, f, fresh)] == [8, 1, 4]
    m.close()  # the program stays loaded for the forks
    torch.testing.assert_close(f.forward(x), eager_f(x))
    with pytest.raises(tandem.TandemError, match="fork\\(state='both'\\): give 'copy' or 'initial'"):
        f.fork(state="both")


def test_a_fork_of_a_fork_and_saved_state_move_between_them(recurrent, backend):
    _, data = recurrent
    m = tandem.load(data)
    for x in _inputs(2, 6):
        m.forward(x)
    g = m.fork(state="copy").fork(state="copy")
    assert int(g.read_state("calls")) == 2 and torch.equal(g.read_state("h"), m.read_state("h"))
    h, saved = g.read_state("h"), g.save_state()
    g.forward(torch.ones(1, 4))
    m.forward(torch.ones(1, 4))
    m.load_state(saved)  # the same program: its state layout
    assert torch.equal(m.read_state("h"), h) and not torch.equal(g.read_state("h"), h)
    assert int(m.read_state("calls")) == 2 and int(g.read_state("calls")) == 3


class _Spy:
    """Counts the sessions and programs the runtime frees, forwarding to it."""

    def __init__(self, monkeypatch):
        lib, self.sessions, self.programs = _library(), [], []
        free_session, free_program = lib.tdm_session_free, lib.tdm_program_free
        monkeypatch.setattr(lib, "tdm_session_free", lambda s: (self.sessions.append(s), free_session(s))[1])
        monkeypatch.setattr(lib, "tdm_program_free", lambda p: (self.programs.append(p), free_program(p))[1])


def test_with_closes_and_the_program_goes_with_its_last_session(recurrent, backend, monkeypatch):
    _, data = recurrent
    spy = _Spy(monkeypatch)
    with tandem.load(data) as m:
        out = m.forward(torch.ones(1, 4))
        f = m.fork(state="copy")
        session, program = m._session, m._program
    assert out.shape == (1, 4)
    assert spy.sessions == [session] and spy.programs == []  # the fork keeps the program
    m.close()  # a second close does nothing
    assert spy.sessions == [session]
    for call in (
        lambda: m.forward(torch.ones(1, 4)),
        lambda: m.call("reset"),
        lambda: m.read_state("h"),
        lambda: m.write_state("h", torch.zeros(1, 4)),
        m.reset_state,
        m.save_state,
        m.fork,
        lambda: m.profile("forward", torch.ones(1, 4)),
        lambda: m.__enter__(),
    ):
        with pytest.raises(tandem.TandemError) as e:
            call()
        assert e.value.code == "TDM_ERR_DISPOSED" and "the model was closed" in str(e.value)
    assert torch.equal(f.forward(torch.ones(1, 4)), f.read_state("h") * 2) and int(f.read_state("calls")) == 2
    fork_session = f._session
    f.close()
    assert spy.sessions == [session, fork_session] and spy.programs == [program]
    f.close()
    assert spy.programs == [program]


def test_a_model_dropped_without_close_is_freed(recurrent, backend, monkeypatch):
    _, data = recurrent
    spy = _Spy(monkeypatch)
    m = tandem.load(data)
    program = m._program
    del m
    assert spy.programs == [program] and len(spy.sessions) == 1


# --- generate ---------------------------------------------------------------------------------

EOS = 2


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=EOS,
        pad_token_id=0,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    path = tmp_path_factory.mktemp("lm") / "llama.tandem"
    tt.export_causal_lm(model, max_cache_len=32, max_prompt_len=4, sample_top_k=8).save(path)
    return model, path


def _greedy(model, prompt, n):
    """transformers' generate(do_sample=False): the new ids, up to and without eos."""
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=n, pad_token_id=0)[0, len(prompt) :].tolist()
    return out[: out.index(EOS)] if EOS in out else out


PROMPTS = [[5, 9, 3, 17, 40, 22, 11], [1, 30], [7]]


@pytest.mark.parametrize("prompt", PROMPTS, ids=["7-tokens-in-pieces", "2-tokens", "1-token"])
def test_greedy_generate_equals_transformers(lm, prompt):
    model, path = lm
    want = _greedy(model, prompt, 12)
    assert len(want) >= 3
    with tandem.load(path) as m:
        seen = []
        got = tandem.generate(m, prompt, max_new_tokens=12, on_token=seen.append)
        assert got == want == seen
        # every id went into the cache (the last one too), as JS generate() leaves it: ready to continue
        assert int(m.read_state(m.metadata["position_state"])) == len(prompt) + len(got)
        m.reset()
        assert tandem.generate(m, torch.tensor([prompt]), max_new_tokens=12) == want  # a tensor [1, n] too


def test_generate_stops_at_eos_max_new_tokens_and_a_full_cache(lm):
    model, path = lm
    prompt = PROMPTS[0]
    want = _greedy(model, prompt, 12)
    m = tandem.load(path)
    assert tandem.generate(m, prompt, max_new_tokens=3) == want[:3]
    m.reset()
    k = next(i for i in range(1, len(want)) if want[i] not in want[:i])  # an id not made before
    assert tandem.generate(m, prompt, max_new_tokens=12, eos=want[k]) == want[:k]
    m.reset()
    assert tandem.generate(m, prompt, max_new_tokens=12, eos=[want[0], 63]) == []
    m.reset()
    assert tandem.generate(m, prompt, max_new_tokens=0) == []
    m.reset()
    # eos=() never stops early: the cache (32 positions) fills; its last position's logits give one more id
    full = tandem.generate(m, prompt, max_new_tokens=100, eos=())
    assert len(full) == 32 - len(prompt) + 1
    assert int(m.read_state(m.metadata["position_state"])) == 32
    with pytest.raises(tandem.TandemError, match="TDM_ERR_INDEX"):
        tandem.generate(m, [1], max_new_tokens=1)


def test_generate_refuses_what_it_cannot_run(lm, recurrent):
    _, path = lm
    m = tandem.load(path)
    for kwargs, message in [
        ({"max_new_tokens": -1}, "max_new_tokens must be an int >= 0"),
        ({"temperature": -1.0}, "temperature must be a number >= 0"),
        ({"top_k": -2}, "top_k must be an int >= 0"),
        ({"top_p": 0}, "top_p must be a number in \\(0, 1\\]"),
    ]:
        with pytest.raises(tandem.TandemError, match=message):
            tandem.generate(m, [1, 2], **kwargs)
    with pytest.raises(tandem.TandemError, match="the prompt is empty"):
        tandem.generate(m, [])
    with pytest.raises(tandem.TandemError, match="the prompt is text, but the file carries no tokenizer"):
        tandem.generate(m, "hello")
    with pytest.raises(tandem.TandemError, match="not a language model of the causal-LM recipe"):
        tandem.generate(tandem.load(recurrent[1]), [1])
    assert int(m.read_state(m.metadata["position_state"])) == 0  # nothing ran


SAMPLINGS = [
    {"temperature": 0.8, "top_k": 5, "seed": 7},  # from decode_topk's 8 best
    {"temperature": 1.3, "top_k": 0, "top_p": 0.9, "seed": 3},  # the whole vocabulary: decode
    {"temperature": 0.5, "top_k": 20, "seed": 11},  # more than K=8: decode
]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_sampled_ids_are_the_js_packages_with_the_same_seed(lm):
    _, path = lm
    prompt = PROMPTS[0]
    got = []
    for s in SAMPLINGS:
        with tandem.load(path) as m:
            got.append(tandem.generate(m, prompt, max_new_tokens=16, **s))  # JS stops at the file's eos too
    assert all(len(g) >= 4 for g in got) and len(set(map(tuple, got))) == len(got)
    js_options = [{"temperature": s["temperature"], "topK": s["top_k"], "topP": s.get("top_p", 1), "seed": s["seed"]} for s in SAMPLINGS]
    script = f"""
import {{ load, generate }} from './node/index.js';
const out = [];
for (const o of {json.dumps(js_options)}) {{
  const m = await load({json.dumps(str(path))});
  const ids = [];
  for await (const id of generate(m, {json.dumps(prompt)}, {{ ...o, maxTokens: 16 }})) ids.push(id);
  out.push(ids);
  m.dispose();
}}
console.log(JSON.stringify(out));
"""
    r = subprocess.run(["node", "--input-type=module", "-e", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == got
