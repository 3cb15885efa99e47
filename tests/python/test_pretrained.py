"""`python -m tandem export DIR -o FILE` on a checkpoint folder made here (tests/models/checkpoint.py: a
seeded tiny Llama, a byte-level BPE trained locally, a chat template in tokenizer_config.json), run as a
user runs it; the tokenizer in the file (tandem.load(f).tokenizer) against transformers' own; greedy
generation in the runtime against transformers' generate; and the errors for folders that lack something."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

import tandem
import tandem.runtime as runtime
import tandem.transformers
from conftest import ROOT
from models.checkpoint import CHATS, TEXTS, make_checkpoint, reference_cases
from tandem.cli import main as cli
from tandem.runtime import _library


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt") / "tiny-llama"
    model, tokenizer = make_checkpoint(folder)
    out = folder.parent / "tiny.tandem"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    r = subprocess.run(
        [
            sys.executable,
            "-W",
            "ignore",
            "-m",
            "tandem",
            "export",
            str(folder),
            "-o",
            str(out),
            "--max-cache-len",
            "48",
            "--max-prompt-len",
            "8",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return folder, out, model, tokenizer, r


def test_the_command_exports_verifies_and_summarizes(exported):
    folder, out, _, tokenizer, r = exported
    assert r.returncode == 0, r.stderr
    assert out.is_file()
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"{out}: ") and "llama model through the causal recipe" in lines[0]
    assert "methods: prefill, decode, decode_topk, reset" in r.stdout
    m = tandem.load(out)
    md = m.metadata
    assert (md["max_cache_len"], md["max_prompt_len"], md["vocab_size"]) == (48, 8, len(tokenizer))
    state = _library().tdm_program_state_size(m._program)  # the runtime's own number
    assert state >= 2 * 2 * (2 * 48 * 8 * 4)  # 2 layers x keys/values [1, 2 kv heads, 48, 8] float32
    assert f"state: {state / 1024:.1f} KiB per session (KV cache of 48 positions, prompts of up to 8 tokens" in r.stdout
    assert "tokenizer: BPE, 400 tokens (5 added; bos '<s>', eos '<|im_end|>', pad '<pad>'), a chat template of" in r.stdout
    assert "same top token: yes" in r.stdout
    assert "verifying against eager PyTorch" in r.stderr  # the progress display's stages


def test_the_tokenizer_in_the_file_is_transformers_own(exported):
    folder, out, _, ref, _ = exported
    m = tandem.load(out)
    assert "tokenizer" not in m.metadata
    tok = m.tokenizer
    assert tok is m.tokenizer  # built once
    assert (tok.bos_token, tok.eos_token, tok.pad_token) == (ref.bos_token, ref.eos_token, ref.pad_token)
    assert tok.all_special_tokens == ref.all_special_tokens
    for text in TEXTS:
        ids = ref(text)["input_ids"]
        assert tok(text)["input_ids"] == ids, text
        assert tok.decode(ids) == ref.decode(ids)
        assert tok.decode(ids, skip_special_tokens=True) == ref.decode(ids, skip_special_tokens=True)
    for messages in CHATS:
        for gen in (False, True):
            assert tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen) == ref.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=gen
            )
    # stored once, UTF-8 (a byte-level vocabulary's 'Ġ' is not escaped), the chat template beside it
    data = out.read_bytes()
    assert data.count(json.dumps(ref.chat_template, ensure_ascii=False)[1:-1].encode()) == 1
    assert "Ġ".encode() in data and b"\\u0120" not in data


def test_greedy_generation_in_the_runtime_equals_transformers_generate(exported):
    _, out, model, tokenizer, _ = exported
    want = reference_cases(model, tokenizer)["generate"]
    m = tandem.load(out)
    ids = m.tokenizer(want["prompt"])["input_ids"]
    assert ids == want["prompt_ids"] and len(ids) > m.metadata["max_prompt_len"]
    for at in range(0, len(ids), 8):  # a prompt longer than max_prompt_len, in pieces
        logits = tandem.transformers.prefill(m, torch.tensor([ids[at : at + 8]]))
    got = []
    while len(got) < want["max_new_tokens"]:
        nxt = int(logits.argmax())
        if nxt == tokenizer.eos_token_id:
            break
        got.append(nxt)
        logits = m.decode(torch.tensor([[nxt]]))
    assert got == want["tokens"]


def test_generate_takes_text_and_chat_messages_through_the_files_tokenizer(exported):
    _, out, model, tokenizer, _ = exported
    cases = reference_cases(model, tokenizer)
    with tandem.load(out) as m:
        for case, prompt in (
            (cases["generate"], cases["generate"]["prompt"]),
            (cases["chat_generate"], cases["chat_generate"]["messages"]),
        ):
            m.reset()
            got = tandem.generate(m, prompt, max_new_tokens=12)
            assert got == case["tokens"] and len(got) > 0
            assert int(m.read_state(m.metadata["position_state"])) == len(case["prompt_ids"]) + len(got)
            assert m.tokenizer.decode(got, skip_special_tokens=True) == case["text"]


def test_inspect_summarizes_the_tokenizer(exported, capsys):
    _, out, _, _, _ = exported
    assert cli(["inspect", str(out)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("tokenizer:"))
    assert "BPE, 400 tokens" in line and "a chat template of" in line and "KiB" in line


def test_a_folder_without_a_tokenizer_exports_without_one_and_quantized(exported, tmp_path, capsys):
    folder = tmp_path / "no-tok"
    shutil.copytree(exported[0], folder)
    (folder / "tokenizer.json").unlink()
    program, report = tandem.transformers.export_pretrained(
        folder, tmp_path / "q.tandem", max_cache_len=16, max_prompt_len=4, quantize="int8"
    )
    assert report["tokenizer"] is None and report["quantize"] == "int8"
    assert report["verify"]["top1_equal"]
    m = tandem.load(tmp_path / "q.tandem")
    assert m.tokenizer is None and "tokenizer" not in program.metadata


@pytest.mark.parametrize(
    "damage, message",
    [
        ("config.json", "has no config.json"),
        ("model.safetensors", "has no weights: none of model.safetensors"),
        ("folder", "is not a folder"),
    ],
)
def test_a_folder_that_lacks_something_is_one_line_naming_it(exported, tmp_path, capsys, damage, message):
    folder = tmp_path / "broken"
    if damage != "folder":
        shutil.copytree(exported[0], folder)
        (folder / damage).unlink()
    assert cli(["export", str(folder), "-o", str(tmp_path / "x.tandem")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("tandem: export: ") and message in err[-1]
    assert not (tmp_path / "x.tandem").exists()


def test_bad_options_are_errors_before_anything_loads(exported, tmp_path, capsys):
    assert cli(["export", str(exported[0]), "-o", str(tmp_path / "x.tandem"), "--dtype", "float16"]) == 1
    assert "tandem computes in float32" in capsys.readouterr().err
    assert cli(["export", str(exported[0]), "-o", str(tmp_path / "x.tandem"), "--max-cache-len", "8", "--max-prompt-len", "9"]) == 1
    assert "max_prompt_len must be in [1, max_cache_len=8]" in capsys.readouterr().err


def test_a_speech_model_exports_from_the_command_with_its_input_shape_and_generates_as_transformers(tmp_path, wasm_lib):
    # Speech2Text takes filterbank features whose shape its config does not give: --encoder-input-shape
    from models import zoo

    folder = tmp_path / "speech"
    model, tokenizer = zoo.make_checkpoint("Speech2TextForConditionalGeneration", folder)
    inputs = zoo.encoder_input(model, tokenizer, folder)
    shape = ",".join(map(str, inputs["input_features"].shape))
    out = tmp_path / "speech.tandem"
    assert cli(["export", str(folder), "-o", str(out), "--quiet"]) == 1  # no shape: the recipe asks for it
    assert cli(["export", str(folder), "-o", str(out), "--quiet", "--max-cache-len", "16", "--encoder-input-shape", shape]) == 0
    want = zoo.reference_seq2seq(model, inputs)
    with tandem.load(out) as m:
        assert m.metadata["encoder_input_shape"] == list(inputs["input_features"].shape)
        assert zoo.greedy_seq2seq(m, inputs) == want
    saved = runtime._lib, runtime.BACKEND
    runtime._lib, runtime.BACKEND = wasm_lib, "wasm"
    try:
        with tandem.load(out) as m:
            assert zoo.greedy_seq2seq(m, inputs) == want
    finally:
        runtime._lib, runtime.BACKEND = saved


def test_encoder_options_are_refused_for_a_decoder_only_model_and_an_audio_lm_without_a_placeholder_is_refused(exported, tmp_path, capsys):
    out = str(tmp_path / "x.tandem")
    assert cli(["export", str(exported[0]), "-o", out, "--encoder-input-shape", "1,80,x"]) == 1
    assert "--encoder-input-shape '1,80,x': give positive sizes" in capsys.readouterr().err
    assert cli(["export", str(exported[0]), "-o", out, "--encoder-input-shape", "1,80,3000"]) == 1
    assert "encoder_input_shape: only an encoder-decoder takes it" in capsys.readouterr().err
    from models import zoo

    folder = tmp_path / "voxtral"
    zoo.make_checkpoint("VoxtralForConditionalGeneration", folder)  # its config's audio_token_id is None
    assert cli(["export", str(folder), "-o", out, "--encoder-input-shape", "1,128,3000"]) == 1
    err = capsys.readouterr().err
    assert "VoxtralForConditionalGeneration: its config names no audio placeholder token (audio_token_id or audio_token_index)" in err
    assert not (tmp_path / "x.tandem").exists()
