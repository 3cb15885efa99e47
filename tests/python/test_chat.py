"""Model.chat (tandem/chat.py): a conversation that keeps its KV cache between turns, on a seeded tiny
Llama checkpoint (tests/models/checkpoint.py, 384 positions, prompts of up to 16 tokens per prefill
call) exported with its tokenizer and chat template, and the same weights with 64 positions. Each
turn's prefilled tokens are counted from the model's own calls, and every reply is checked against a
fresh session on a forked model that prefills the same conversation in full (greedy: equal tokens).

Most cases give the session a character tokenizer (CharTokenizer), whose decode and encode are
inverses for every id, so a reply's text renders back to exactly the ids the cache holds."""

import json
import shutil
import subprocess

import pytest
import torch

import tandem
import tandem.transformers as tt
from models.checkpoint import make_checkpoint
from tandem.recipes.pretrained import export_pretrained

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
BOS, START, END = 0, 3, 4  # the checkpoint's <s>, <|im_start|>, <|im_end|> (its eos_token_id)
CJK = 0x4E00


def encode(text: str) -> list:
    """Text as ids: a character U+4E00 + i is id i (what decode writes), any other its code point."""
    return [ord(c) - CJK if ord(c) >= CJK else ord(c) for c in text]


class CharTokenizer:
    @staticmethod
    def decode(ids, skip_special_tokens=False):
        return "".join(chr(CJK + int(i)) for i in ids)

    @staticmethod
    def apply_chat_template(messages, tokenize=True, add_generation_prompt=False, **_):
        """'<s>' then '<|im_start|>role\\ncontent<|im_end|>\\n' per message, the checkpoint's template."""
        ids = [BOS]
        for m in messages:
            ids += [START, *encode(f"{m['role']}\n{m['content']}"), END, *encode("\n")]
        if add_generation_prompt:
            ids += [START, *encode("assistant\n")]
        return ids


def render(messages):
    return CharTokenizer.apply_chat_template(messages, add_generation_prompt=True)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """(the 384-position file with its tokenizer, the 64-position file of the same weights)."""
    out = tmp_path_factory.mktemp("chat")
    model, _ = make_checkpoint(out / "checkpoint", seed=3, max_position_embeddings=384)
    big = out / "chat.tandem"
    export_pretrained(out / "checkpoint", big, max_cache_len=384, max_prompt_len=16, sample_top_k=16, verify=False)
    small = out / "chat64.tandem"
    tt.export_causal_lm(model, max_cache_len=64, max_prompt_len=16, sample_top_k=16).save(small)
    return big, small


def spy(m):
    """Records the model's method calls as (name, tokens) (its forks': in fork.calls)."""
    calls = []
    call, fork = type(m).call.__get__(m), type(m).fork.__get__(m)

    def recorded(name, *inputs):
        calls.append((name, inputs[0].shape[-1] if inputs else 0))
        return call(name, *inputs)

    def forked(state="initial"):
        f = fork(state)
        f.calls = spy(f)
        return f

    m.call, m.fork = recorded, forked
    return calls


def prefilled(calls) -> int:
    return sum(n for name, n in calls if name == "prefill")


def fresh(m, messages, text, **options):
    """A fresh session on a fork of m (initial state) holding `messages`, sent `text`: the reference."""
    with m.fork() as f:
        chat = f.chat(tokenizer=CharTokenizer, messages=messages, max_new_tokens=4, **options)
        reply = chat.send(text)
        assert prefilled(f.calls) == chat.stats.prompt_tokens and chat.stats.restored == "reset"
        return reply


def say(i):
    return f"q{i}, and?"


def test_ten_turns_prefill_only_each_turns_new_tokens_and_turn_ten_equals_a_fresh_prefill(files, backend):
    with tandem.load(files[0]) as m:
        calls = spy(m)
        chat = m.chat(tokenizer=CharTokenizer, system="be brief", max_new_tokens=4)
        cached, added = 0, []
        for i in range(1, 11):
            calls.clear()
            prompt = render(chat.messages + [{"role": "user", "content": say(i)}])
            reply = chat.send(say(i))
            s = chat.stats
            assert prefilled(calls) == len(prompt) - cached, f"turn {i}"
            assert (s.prompt_tokens, s.cached_tokens, s.prefill_tokens) == (len(prompt), cached, len(prompt) - cached)
            assert s.restored == ("reset" if i == 1 else "cache") and s.dropped_messages == 0
            assert s.new_tokens == len(encode(reply))
            pieces = -(-(len(prompt) - cached) // 16)
            assert [c[0] for c in calls] == ["prefill"] * pieces + ["decode_topk"] * s.new_tokens
            assert s.ttft_ms > 0 and s.total_ms >= s.ttft_ms and (s.new_tokens < 2 or s.tokens_per_second > 0)
            cached = len(prompt) + s.new_tokens
            added.append(len(prompt) - s.cached_tokens)
        # <|im_end|> \n closing reply 9, <|im_start|> user \n message <|im_end|> \n, <|im_start|> assistant \n
        assert added[9] == 2 + 1 + len(encode(f"user\n{say(10)}")) + 2 + 1 + len(encode("assistant\n"))
        history = chat.messages
        assert len(history) == 21 and history[0] == {"role": "system", "content": "be brief"}
        assert history[20]["content"] == fresh(m, history[:19], say(10)) != ""


def test_regenerate_prefills_nothing_and_sampled_replies_differ(files):
    with tandem.load(files[0]) as m:
        calls = spy(m)
        chat = m.chat(tokenizer=CharTokenizer, max_new_tokens=4)
        for i in range(1, 4):
            chat.send(say(i))
        first = chat.messages[-1]["content"]
        calls.clear()
        assert chat.regenerate() == first
        assert prefilled(calls) == 0 and (chat.stats.restored, chat.stats.prefill_tokens) == ("snapshot", 0)
        assert first == fresh(m, chat.messages[:4], say(3))
        twin = chat.fork()
        a = chat.regenerate(temperature=1.5, max_new_tokens=8)
        b = chat.regenerate(temperature=1.5, max_new_tokens=8)
        assert a != b
        twin.undo()
        assert twin.send(say(3), temperature=1.5, max_new_tokens=8) == a  # the same generator state, another path
        twin.close()
        with pytest.raises(tandem.TandemError, match="does not end with a reply"):
            m.chat(tokenizer=CharTokenizer).regenerate()


def test_undo_continues_from_the_snapshot_where_the_turn_began(files):
    with tandem.load(files[0]) as m:
        calls = spy(m)
        chat = m.chat(tokenizer=CharTokenizer, max_new_tokens=4)
        for i in range(1, 4):
            chat.send(say(i))
        kept = chat.messages
        cached = len(render(kept[:5])) + len(encode(kept[5]["content"]))
        chat.send(say(4))
        chat.undo()
        assert chat.messages == kept
        calls.clear()
        reply = chat.send("another question")
        assert (chat.stats.restored, chat.stats.cached_tokens) == ("snapshot", cached)
        assert prefilled(calls) == len(render(kept + [{"role": "user", "content": "another question"}])) - cached
        assert reply == fresh(m, kept, "another question")
        for _ in range(3):
            chat.undo()
        assert chat.messages == kept[:2]
        assert chat.send(say(9)) == fresh(m, kept[:2], say(9))
        chat.undo()
        chat.undo()
        with pytest.raises(tandem.TandemError, match="no user message"):
            chat.undo()


def test_fork_branches_into_independent_sessions(files):
    with tandem.load(files[0]) as m:
        spy(m)
        chat = m.chat(tokenizer=CharTokenizer, system="be brief", max_new_tokens=4)
        for i in range(1, 3):
            chat.send(say(i))
        base = chat.messages
        with chat.fork() as branch:
            assert branch.model is not m
            branch.model.calls.clear()
            right = branch.send("right")
            left = chat.send("left")
            assert branch.stats.restored == chat.stats.restored == "cache"
            assert branch.stats.cached_tokens == chat.stats.cached_tokens
            assert prefilled(branch.model.calls) == branch.stats.prefill_tokens < branch.stats.prompt_tokens / 3
            assert left == fresh(m, base, "left") and right == fresh(m, base, "right")
            assert [c["content"] for c in (chat.messages[5], branch.messages[5])] == ["left", "right"]
        with pytest.raises(tandem.TandemError, match="closed"):
            branch.send("x")
        with pytest.raises(tandem.TandemError, match="closed"):
            branch.model.reset()
        assert chat.send(say(3)) == fresh(m, chat.messages[:7], say(3))


def test_a_full_cache_drops_the_oldest_turns_and_prefills_the_kept_text(files):
    with tandem.load(files[1]) as m:
        assert m.metadata["max_cache_len"] == 64
        calls = spy(m)
        chat = m.chat(tokenizer=CharTokenizer, system="hi", max_new_tokens=4)
        for turn in range(6):
            calls.clear()
            before = chat.messages
            reply = chat.send(f"q{turn}")
            s = chat.stats
            assert s.prompt_tokens + 4 <= 64
            if s.dropped_messages:
                break
        else:
            pytest.fail("the cache never filled up")
        kept = chat.messages[:-1]
        assert kept == [before[0], *before[1 + s.dropped_messages :], {"role": "user", "content": f"q{turn}"}]
        assert len(render(before + [{"role": "user", "content": f"q{turn}"}])) + 4 > 64
        assert (s.restored, s.cached_tokens, s.prefill_tokens) == ("reset", 0, s.prompt_tokens) and prefilled(calls) == s.prompt_tokens
        assert reply == fresh(m, kept[:-1], f"q{turn}")
        messages = chat.messages
        with pytest.raises(tandem.TandemError, match="64") as e:
            chat.send("x" * 80)
        assert e.value.code == "TDM_ERR_INDEX" and chat.messages == messages


def test_the_files_tokenizer_streams_text(files):
    with tandem.load(files[0]) as m:
        chat = m.chat(system="You are terse.", max_new_tokens=6)
        for text in ["Hello world", "the model reads a token", "and the cache keeps it"]:
            pieces, ids = [], []
            reply = chat.send(text, on_text=pieces.append, on_token=ids.append)
            assert "".join(pieces) == reply == m.tokenizer.decode(ids, skip_special_tokens=True)
            assert chat.stats.new_tokens == len(ids)
        messages = chat.messages
        with m.fork() as f:
            ref = f.chat(messages=messages[:5], max_new_tokens=6)
            assert ref.send(messages[5]["content"]) == messages[6]["content"]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_sampled_replies_are_the_js_sessions_with_the_same_seed(files):
    turns = ["Hello world", "the model reads a token", "and the cache keeps it"]
    with tandem.load(files[0]) as m:
        chat = m.chat(system="You are terse.", max_new_tokens=8, temperature=1.2, top_k=10, seed=7)
        got = [chat.send(t) for t in turns] + [chat.regenerate()]
    script = f"""
import {{ load }} from './node/index.js';
const m = await load({json.dumps(str(files[0]))});
const chat = m.chat({{ system: 'You are terse.', maxNewTokens: 8, temperature: 1.2, topK: 10, seed: 7 }});
const out = [];
for (const t of {json.dumps(turns)}) out.push(await chat.send(t));
out.push(await chat.regenerate());
console.log(JSON.stringify(out));
"""
    r = subprocess.run(["node", "--input-type=module", "-e", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == got
    assert len(set(got)) >= 3


def test_options_are_checked(files, tmp_path):
    with tandem.load(files[0]) as m:
        with pytest.raises(TypeError):
            m.chat(max_new_token=3)
        for bad in [dict(temperature=-1), dict(snapshots=-1), dict(messages=[{"role": "user"}]), dict(top_p=0)]:
            with pytest.raises(tandem.TandemError, match="chat"):
                m.chat(**bad)
        chat = m.chat(tokenizer=CharTokenizer)
        with pytest.raises(tandem.TandemError, match="unknown option 'max_tokens'"):
            chat.send("x", max_tokens=3)
        with pytest.raises(tandem.TandemError, match="text must be a string"):
            chat.send(3)
        assert chat.messages == [] and chat.stats is None
    torch.manual_seed(0)
    plain = tmp_path / "plain.tandem"

    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("n", torch.zeros(()))

        def forward(self, x):
            self.n.add_(1)
            return x + self.n

    tandem.export(Counter(), {"forward": (torch.zeros(2),)}).save(plain)
    with tandem.load(plain) as p, pytest.raises(tandem.TandemError, match="not a language model"):
        p.chat()
