"""transformers' own registries of generative model classes, each built tiny from its config class
(tests/python/test_registry_walk.py): `causal_lm_classes()` lists every class registered for causal
LM (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES), `seq2seq_classes()` those for text and speech
sequence-to-sequence, `shrink(config)` (tests/models/shrink.py) makes any config small by the roles
its fields' names give them (layers, heads, widths, vocabulary, experts), never by a per-model table,
`make_checkpoint(name, folder)` saves the seeded tiny model with a small byte-level BPE tokenizer
(tests/models/checkpoint.py) as a user's checkpoint folder, and `walk` keeps the first of SHRINKS
that builds and generates."""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path

if not __package__:  # run as a script: tests/ holds the models package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models import audio, codec
from models.shrink import SHRINKS, shrink  # noqa: F401 (tests build configs with zoo.shrink)

# ---- the walk ------------------------------------------------------------------------------------

PROMPT = "hello world the model reads a token"  # 13 tokens with the walk's tokenizer
NEW_TOKENS = 8
MAX_CACHE_LEN, MAX_PROMPT_LEN = 32, 4  # the prompt is longer than one prefill: it goes in pieces
LIMIT_S = 300  # CPU seconds a class may take in `main`'s walk (the process's, all its threads)


def causal_lm_classes() -> list[str]:
    """Every class transformers registers for causal LM (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES; a class
    registered under several model types once), sorted."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return sorted(set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values()))


def seq2seq_classes() -> list[str]:
    """Every class transformers registers for sequence-to-sequence generation from text or speech
    (MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES) and not
    for causal LM, once, sorted."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES,
    )

    names = set(MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES.values()) | set(MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES.values())
    return sorted(names - set(causal_lm_classes()))


def sample(classes: list[str], seed: int, k: int) -> list[str]:
    import random

    return sorted(random.Random(seed).sample(classes, min(k, len(classes))))


@functools.lru_cache(maxsize=1)
def _tokenizer():
    from models.checkpoint import make_tokenizer

    return make_tokenizer()


def make_checkpoint(class_name: str, folder: Path, audio_lm: bool = False, **how):
    """Saves the class, built from its own config class shrunk (shrink, with `how`: one of SHRINKS) and
    seeded, with the small tokenizer in `folder` (an audio LM's with its audio placeholder: audio.py);
    returns (model as transformers loads it from the folder, tokenizer)."""
    import torch
    import transformers

    tokenizer = audio.tokenizer(_tokenizer()) if audio_lm else _tokenizer()
    cls = getattr(transformers, class_name)
    config = cls.config_class()
    ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id}
    shrink(config, len(tokenizer), {**ids, "decoder_start_token_id": tokenizer.bos_token_id}, **how)
    if audio_lm:
        audio.configure(config, tokenizer)
        codec.configure(config)
    torch.manual_seed(0)
    model = cls(config).eval()
    gen = getattr(model, "generation_config", None)
    if getattr(config, "is_encoder_decoder", False) and gen is not None and gen.decoder_start_token_id is None:
        gen.decoder_start_token_id = tokenizer.pad_token_id  # as a released checkpoint's generation_config.json has it (T5's)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return cls.from_pretrained(str(folder), local_files_only=True, dtype=torch.float32).eval(), tokenizer


def reference(model, ids: list[int], inputs: dict | None = None, new_tokens: int = NEW_TOKENS) -> list[int]:
    """transformers' greedy generate: new_tokens tokens after `ids` (no stop token, no processors), with
    the forward's other inputs (an audio LM's audio) where given."""
    import torch
    from transformers import GenerationConfig

    # greedy alone: none of the generation defaults a model ships (forced end tokens, repetition penalties)
    config = GenerationConfig(do_sample=False, max_new_tokens=new_tokens, eos_token_id=None, pad_token_id=0)
    model.generation_config = config
    with torch.no_grad():
        tokens = torch.tensor([ids])  # every position attended (the mask is not derived from a pad id)
        out = model.generate(tokens, attention_mask=torch.ones_like(tokens), generation_config=config, **(inputs or {}))
    return out[0, len(ids) :].tolist()


def greedy(m, ids: list[int]) -> list[int]:
    """The same greedy generation in the runtime: the prompt through prefill (in max_prompt_len
    pieces), then decode."""
    import torch

    from tandem.transformers import prefill

    m.reset()
    logits = prefill(m, torch.tensor([ids]))
    got = []
    while len(got) < NEW_TOKENS:
        got.append(int(logits.argmax()))
        if len(got) < NEW_TOKENS:
            logits = m.decode(torch.tensor([[got[-1]]]))
    return got


def encoder_input(model, tokenizer, folder: Path):
    """What the walk gives an encoder-decoder's encoder: the prompt's token ids, or one second of seeded
    noise through the model's own feature extractor (transformers' class for its model type, or its
    encoder's for a composite, with its defaults but as many mel bins as the config reads, saved in the
    checkpoint folder as a user's would be): {main_input_name (a composite's encoder's): tensor}."""
    import inspect

    import torch

    name = model.main_input_name
    params = inspect.signature(model.generate).parameters.items()
    need = [k for k, p in params if p.default is p.empty and p.kind == p.POSITIONAL_OR_KEYWORD]
    name = need[0] if need else name  # what its generate requires (Pop2Piano's input_features)
    if name == "input_ids":
        return {name: torch.tensor([tokenizer(PROMPT)["input_ids"]])}
    import transformers
    from transformers.models.auto.feature_extraction_auto import FEATURE_EXTRACTOR_MAPPING_NAMES

    encoder = getattr(model.config, "encoder", None)  # a composite's (SpeechEncoderDecoderConfig) encoder config
    types = [model.config.model_type] + ([encoder.model_type] if isinstance(encoder, transformers.PretrainedConfig) else [])
    cls = next((FEATURE_EXTRACTOR_MAPPING_NAMES[t] for t in types if t in FEATURE_EXTRACTOR_MAPPING_NAMES), None)
    if cls is None:
        raise ValueError(f"{model.config.model_type} registers no feature extractor to make its {name} with")
    extractor = getattr(transformers, cls)()
    bins = audio.mel_bins(model.config)  # the extractor makes as many mel bins as the config reads
    sizes = {k: bins for k in ("feature_size", "num_mel_bins", "n_mels") if bins and getattr(extractor, k, bins) != bins}
    if sizes:
        extractor = getattr(transformers, cls)(**sizes)
    extractor.save_pretrained(folder)
    rate = int(getattr(extractor, "sampling_rate", 16000))
    seeded = torch.Generator().manual_seed(0)
    noise = (torch.rand(rate, generator=seeded) * 0.2 - 0.1).numpy()
    features = extractor(noise, sampling_rate=rate, return_tensors="pt")
    if name not in features and encoder is not None:  # a composite's forward takes its encoder's input by name
        name = getattr(model, "encoder", model).main_input_name
    if name not in features:
        raise ValueError(f"{cls} gives {sorted(features)}, not the {name} that {type(model).__name__} takes")
    return {name: features[name].float()}


def reference_seq2seq(model, inputs: dict) -> list[int]:
    """transformers' greedy generate of an encoder-decoder: NEW_TOKENS tokens after its decoder start."""
    import torch
    from transformers import GenerationConfig

    from tandem.recipes.seq2seq import decoder_start

    start = decoder_start(model)
    config = GenerationConfig(
        do_sample=False,
        max_new_tokens=NEW_TOKENS,
        min_new_tokens=NEW_TOKENS,
        eos_token_id=None,
        pad_token_id=0,
        decoder_start_token_id=start,
    )
    model.generation_config = config
    with torch.no_grad():
        out = model.generate(**inputs, generation_config=config)
    return out[0, -NEW_TOKENS:].tolist()


def greedy_seq2seq(m, inputs: dict) -> list[int]:
    """The same in the runtime: encode, then decode from the decoder start token."""
    import torch

    m.reset()
    m.encode(next(iter(inputs.values())))
    start = m.metadata.get("decoder_start_token_id")
    token, got = (start[0] if isinstance(start, list) else start or 0), []
    while len(got) < NEW_TOKENS:
        token = int(m.decode(torch.tensor([[token]])).argmax())
        got.append(token)
    return got


def _line(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:300]


def build(class_name: str, folder: Path, seq2seq: bool, how: dict):
    """The class's checkpoint in folder/checkpoint, shrunk as `how` says, and transformers' own greedy
    tokens: (model, tokenizer, encoder or audio inputs, prompt ids, tokens). Raises where either fails."""
    import shutil

    from tandem.recipes.audio_lm import audio_token_id, streams_audio

    shutil.rmtree(folder / "checkpoint", ignore_errors=True)
    audio_lm = seq2seq and audio.is_audio_lm(class_name)
    model, tokenizer = make_checkpoint(class_name, folder / "checkpoint", audio_lm=audio_lm, **how)
    inputs, ids, want = {}, None, None
    if audio_lm and codec.is_codec_config(model.config):
        inputs, ids, want = codec.build(model, folder / "checkpoint", NEW_TOKENS)
    elif audio_lm:
        inputs = audio.audio_input(model, folder / "checkpoint")
        # (one with no placeholder that does not stream its audio: what the walk checks is the export's refusal)
        if audio_token_id(model.config) is not None or streams_audio(model):
            ids, full = audio.prompt(model, tokenizer, PROMPT, inputs, NEW_TOKENS)
            want = reference(model, ids, full)
    elif seq2seq:
        inputs = encoder_input(model, tokenizer, folder / "checkpoint")
        want = reference_seq2seq(model, inputs)
    else:
        ids = tokenizer(PROMPT)["input_ids"]
        want = reference(model, ids)
    return model, tokenizer, inputs, ids, want


def _default_builds(class_name: str, why: str) -> str:
    """`why`, or that transformers' own code fails the same way at the class's default config (built on
    the meta device: no weights)."""
    import torch
    import transformers

    cls = getattr(transformers, class_name)
    try:
        with torch.device("meta"):
            cls(cls.config_class())
    except Exception as e:
        if _line(e) == why:
            return f"{DEFAULT_FAILS}: {why}"
    return why


DEFAULT_FAILS = "transformers' own code does not build it at its default config either"


def walk(class_name: str, folder: Path, wasm_lib) -> tuple[str, str] | None:
    """One class through the walk: None when it passes, else (stage, why): 'build' (its shrunk config
    does not build, or transformers' own generate fails on it), 'export' (`python -m tandem export`
    fails: its error line), 'native' / 'wasm' (the runtime's greedy tokens differ from generate's, or
    a call fails)."""
    import contextlib
    import io

    import tandem
    import tandem.runtime as runtime
    from tandem.cli import main as cli
    from tandem.recipes.audio_lm import NotAnAudioLM, streams_audio

    seq2seq = class_name in seq2seq_classes()  # an encoder-decoder, or an audio LM (audio.py)
    built = None
    for how in SHRINKS:  # the first shrink that builds and generates (shrink.py)
        try:
            built = build(class_name, folder, seq2seq, how)
            break
        except TimeoutError:  # `main`'s limit, not a shrink that fails
            raise
        except NotAnAudioLM as e:  # it built: the audio-LM recipe's own probe refuses it, as the export would
            return "export", _line(e)
        except Exception as e:
            error = e
    if built is None:
        return "build", _default_builds(class_name, _line(error))
    model, tokenizer, inputs, ids, want = built
    audio_lm = seq2seq and not model.config.is_encoder_decoder
    out = folder / "model.tandem"
    err = io.StringIO()
    cache = MAX_CACHE_LEN if not audio_lm or ids is None else len(ids) + NEW_TOKENS
    args = ["export", str(folder / "checkpoint"), "-o", str(out), "--quiet", "--max-cache-len", str(cache), "--sample-top-k", "0"]
    if not seq2seq or audio_lm:
        args += ["--max-prompt-len", str(MAX_PROMPT_LEN)]
    if "input_ids" in inputs:
        args += ["--max-source-len", str(MAX_CACHE_LEN)]
    elif inputs and not streams_audio(model):  # (a streaming model takes its audio with each token: no one shape)
        args += ["--encoder-input-shape", ",".join(map(str, next(iter(inputs.values())).shape))]
    try:
        with contextlib.redirect_stderr(err):
            rc = cli(args)
    except Exception as e:  # an error the command did not turn into its one line
        return "export", _line(e)
    if rc != 0:
        text = " ".join(err.getvalue().split())
        at = text.rfind("tandem: export: ")
        return "export", (text[at:].removeprefix("tandem: export: ") if at >= 0 else text.removeprefix("tandem: "))[:300]
    if want is None:
        return "export", "an audio LM with no audio placeholder token exported: the export should refuse it"
    for backend in ("native", "wasm"):
        saved = runtime._lib, runtime.BACKEND
        if backend == "wasm":
            runtime._lib, runtime.BACKEND = wasm_lib, "wasm"
        try:
            with tandem.load(out) as m:
                if "audio_frames" in m.metadata:
                    got = codec.greedy(m, ids, inputs, NEW_TOKENS)
                elif audio_lm:
                    got = audio.greedy(m, ids, inputs, NEW_TOKENS)
                else:
                    got = greedy_seq2seq(m, inputs) if seq2seq else greedy(m, ids)
        except Exception as e:
            return backend, _line(e)
        finally:
            runtime._lib, runtime.BACKEND = saved
        if got != want:
            return backend, f"greedy tokens {got} differ from transformers' generate {want}"
    return None


REASONS = [  # (pattern of the walk's error, the reason docs/models.md names), first match wins
    (
        r"is not a causal LM",
        "not causal (a position's logits change with the tokens after it), so the uncached recipe, the one left when its own "
        "cache cannot be used, refuses it",
    ),
    (
        r"gives logits .* away from transformers' generate's",
        "its forward with no cache does not give transformers' generate's logits, so the uncached recipe, the one left when "
        "its own cache cannot be used, refuses it",
    ),
    (r"uses operators tandem does not support yet", "operators tandem does not support: {ops}"),
    (
        r"GuardOnDataDependentSymNode|data-dependent|TORCHDYNAMO_EXTENDED_DEBUG_CREATE_SYMBOL",
        "a size or branch depends on the cache length at run time ({where})",
    ),
    (r"'\.item\(\)'", "reads a tensor value into Python (.item()) where a size or branch follows from it"),
    (r"keeps a fixed-size recurrent state", "the command refuses --max-cache-len for a model with recurrent layers"),
    (r"takes no transformers Cache|not a transformers Cache", "its forward keeps its state outside a transformers Cache"),
    (r"greedy tokens", "greedy tokens differ from transformers' generate"),
    (r"update_indexer", "DeepSeek sparse attention keeps its indexer keys in a cache layer of their own, not a static KV layer"),
    (r"uses cache of its own", "keeps a cache of its own, not a transformers StaticCache"),
    (r"TimeoutError", f"its export took more than the walk's {LIMIT_S} s"),
    (
        r"get_seq_length. can only be called on Attention layers",
        "no layer keeps a cache of its own (an assistant's layers all read its backbone's): generate cannot measure the prompt",
    ),
    (r"on complex tensors is not supported", "an op on complex tensors that tandem does not compute as pairs of floats: {ops}"),
    (r"complex64|complex128", "a complex tensor as an input, output or state (tandem computes complex values inside a method)"),
    (r"requires the torchaudio library", "its feature extractor needs torchaudio, which the walk's environment does not have"),
    (r"registers no feature extractor to make its audio", "its model type registers no feature extractor to make its audio with"),
    (
        r"config names no audio placeholder token",
        "no audio placeholder token in its config, and it does not stream its audio with every token as VoxtralRealtime "
        "does, so the audio-LM recipe refuses it",
    ),
    (r"requires (the )?\w+ library", "its feature extractor needs libraries the test environment does not install: {libs}"),
    (r"logits differ from eager PyTorch", "the export's check finds its first logits further from transformers' than 1e-3 of their scale"),
]


def reason(stage: str, why: str) -> str:
    """The walk's error as docs/models.md names it: a named reason where one is known, else the error."""
    for pattern, text in REASONS:
        if re.search(pattern, why):
            ops = ", ".join(dict.fromkeys(re.findall(r"(?:aten|transformers)\.\w+", why))) or "?"
            where = (re.findall(r"\(at ([\w.]+:\d+)", why) or ["?"])[0]
            libs = ", ".join(dict.fromkeys(re.findall(r"requires (?:the )?(\w+) library", why)))
            return text.format(ops=ops, where=where, libs=libs)
    if stage == "build" and not why.startswith(DEFAULT_FAILS):
        return f"its config shrunk to a tiny size does not build or generate in transformers: {why}"
    return why


def table(rows: list[dict]) -> str:
    """docs/models.md's table rows, one per class that does not pass, sorted by class."""
    out = ["| class | stage | why |", "|---|---|---|"]
    for r in sorted(rows, key=lambda r: r["class"]):
        if r["stage"]:
            why = reason(r["stage"], r["why"]).replace("|", "/").strip()
            why = why if len(why) <= 200 else why[:197].rstrip() + "..."
            out.append(f"| `{r['class']}` | {r['stage']} | {why} |")
    return "\n".join(out)


def main(argv=None) -> None:
    """`python tests/models/zoo.py [CLASS ...] [--out FILE.jsonl]`: walks the classes (default: all),
    one JSON line per class ({"class", "stage", "why"}; stage null: passed) on stdout and appended to
    --out (classes already there are skipped, so a walk can resume). `--table FILE.jsonl ...`: prints
    the pass count and docs/models.md's table from such files."""
    import argparse
    import json
    import signal
    import sys
    import tempfile
    import time
    import warnings

    root = Path(__file__).resolve().parents[2]
    sys.path[:0] = [str(root / "python"), str(root / "tests")]
    parser = argparse.ArgumentParser()
    parser.add_argument("classes", nargs="*")
    parser.add_argument("--out")
    parser.add_argument("--table", nargs="+", metavar="FILE.jsonl", help="print docs/models.md's table from walks' results")
    args = parser.parse_args(argv)
    if args.table:
        rows = {}
        for f in args.table:
            rows.update({r["class"]: r for r in map(json.loads, Path(f).read_text().splitlines())})
        for classes, what in (
            (causal_lm_classes(), "causal-LM classes"),
            (seq2seq_classes(), "encoder-decoder and speech-to-text classes"),
        ):
            if not set(rows) & set(classes):
                continue  # a group the files do not cover
            assert set(rows) >= set(classes), f"no result for {sorted(set(classes) - set(rows))}"
            group = [rows[c] for c in classes]
            print(f"{sum(r['stage'] is None for r in group)} of the {len(classes)} {what}\n")
            print(table(group) + "\n")
        return
    warnings.simplefilter("ignore")
    import transformers

    from tandem.wasm import WasmLibrary

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    done = set()
    if args.out and Path(args.out).is_file():
        done = {json.loads(line)["class"] for line in Path(args.out).read_text().splitlines() if line.strip()}
    lib = WasmLibrary(root / "web" / "tandem.wasm")

    def timeout(*_):
        raise TimeoutError(f"the class took more than {LIMIT_S} s of CPU time")

    signal.signal(signal.SIGPROF, timeout)  # CPU time, so that a walk on a loaded machine times out as on an idle one
    for name in args.classes or causal_lm_classes() + seq2seq_classes():
        if name in done:
            continue
        t0, c0 = time.perf_counter(), time.process_time()
        signal.setitimer(signal.ITIMER_PROF, LIMIT_S)
        try:
            with tempfile.TemporaryDirectory() as d:
                result = walk(name, Path(d), lib)
        except TimeoutError as e:
            result = ("export", _line(e))
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        row = {"class": name, "stage": result and result[0], "why": result and result[1], "seconds": round(time.perf_counter() - t0, 1)}
        row["cpu_seconds"] = round(time.process_time() - c0, 1)
        print(json.dumps(row), flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
