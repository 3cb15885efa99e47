"""A local transformers checkpoint folder to one .tandem file (`python -m tandem export DIR -o FILE`).

    program, report = tandem.transformers.export_pretrained("my-model/", "my-model.tandem")

The folder is read as transformers reads it, with local_files_only=True (nothing is downloaded):
config.json, the weights (model.safetensors, sharded safetensors with their index, or
pytorch_model.bin), and the tokenizer (tokenizer.json with tokenizer_config.json; optional, but
without it the file carries no tokenizer). The recipe follows the config: an encoder-decoder goes to
export_seq2seq (T5, BART, Marian, Whisper, ...), a decoder-only model that transformers registers for
speech or sequence-to-sequence generation only (an audio LM: Qwen2-Audio, Voxtral, ...) to
export_audio_lm (its audio of the shape encoder_input_shape; none for one that streams its audio with
every token: VoxtralRealtime), or to export_codec_lm where each position reads a frame of its own codec's
codes (Kyutai's speech-to-text: `encode` of its audio of that shape), a model whose own cache has
recurrent layers (Mamba, Mamba2, FalconMamba: found from transformers' StaticCache built from the
config) to export_causal_lm one token per step, any
other causal LM to export_causal_lm over a static KV cache (or, for a model with no usable cache, over
the token ids seen so far: the report's recipe is then 'uncached'). max_cache_len is the attention
layers' capacity, for a hybrid (attention beside recurrent or conv layers) as for any other; a model
without attention layers has no KV cache and records it as unused. The tokenizer, its special tokens and
its chat template are stored once, as the metadata entry `tokenizer` (tandem/tokenizer.py).
After exporting, the file is loaded by the runtime and its first method outputs compared with
eager PyTorch on the same inputs (verify=True).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from ..ir import ExportError
from ..tokenizer import ENTRY, entry, summary
from .audio_lm import export_audio_lm
from .causal_lm import export_causal_lm, has_attention_layers, is_recurrent, prefill
from .codec_lm import export_codec_lm, is_codec_lm
from .seq2seq import export_seq2seq

WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


class Progress:
    """The export's stages on `stream` (stderr). On a terminal a tqdm progress bar over the stages,
    naming the current one and redrawn twice a second with the time the export has run, so a long
    torch.export shows it is alive; elsewhere (a log file, a pipe) one line per stage. `stream=None`:
    silent. `total` (or plan(total)) is the number of stages the bar counts."""

    def __init__(self, stream=sys.stderr, total: int | None = None):
        self.stream, self.total = stream, total
        self._stage, self._count, self._bar = None, 0, None
        self._t0 = self._start = time.perf_counter()
        self._stop = threading.Event()
        self._thread = None
        self.tty = bool(stream) and hasattr(stream, "isatty") and stream.isatty()

    def plan(self, total: int) -> None:
        """The number of stages to come."""
        self.total = total
        if self._bar is not None:
            self._bar.total = total

    def stage(self, what: str) -> None:
        """The next stage begins (the one before it is done)."""
        self._end_stage()
        self._stage, self._t0 = what, time.perf_counter()
        self._count += 1
        if not self.stream:
            return
        if not self.tty:
            of = f"/{self.total}" if self.total else ""
            print(f"[{self._count}{of}] {what} ...", file=self.stream, flush=True)
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(
                desc=what,
                total=self.total,
                file=self.stream,
                bar_format="{desc} |{bar}| {n_fmt}/{total_fmt} stages [{elapsed}]",
                dynamic_ncols=True,
                leave=True,
            )
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        self._bar.set_description_str(what)

    def _tick(self):
        while not self._stop.wait(0.5):
            bar = self._bar
            if bar is not None:
                bar.refresh()

    def _end_stage(self):
        if self._stage and self._bar is not None:
            self._bar.update(1)
        self._stage = None

    def done(self) -> float:
        """Every stage is done: ends the display; the seconds since the Progress was made."""
        self._end_stage()
        if self._bar is not None:
            self._bar.set_description_str("done")
        self.close()
        return time.perf_counter() - self._start

    def close(self) -> None:
        """Ends the display where it is (an export that failed: the bar stays at its stage). Idempotent."""
        self._stop.set()
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _check_folder(path: Path) -> dict:
    """config.json as a dict; an ExportError naming what is missing."""
    if not path.is_dir():
        raise ExportError(
            f"'{path}' is not a folder: give a transformers checkpoint folder (config.json, "
            "model.safetensors, tokenizer.json), as save_pretrained writes it"
        )
    if not (path / "config.json").is_file():
        raise ExportError(
            f"'{path}' has no config.json: it is not a transformers checkpoint folder (save the model with model.save_pretrained(folder))"
        )
    if not any((path / w).is_file() for w in WEIGHTS):
        raise ExportError(
            f"'{path}' has no weights: none of {', '.join(WEIGHTS)} is there (save the model with model.save_pretrained(folder))"
        )
    try:
        return json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise ExportError(f"'{path / 'config.json'}' cannot be read as JSON: {e}") from None


def load_tokenizer(path: Path):
    """The folder's fast tokenizer (AutoTokenizer, local files only) and its tokenizer_config.json, or
    (None, why) when the folder has none."""
    if not (path / "tokenizer.json").is_file():
        present = [f for f in ("tokenizer.model", "vocab.json", "vocab.txt", "spiece.model") if (path / f).is_file()]
        why = (
            f"no tokenizer.json (the folder has {', '.join(present)}: save a fast tokenizer with "
            "AutoTokenizer.from_pretrained(folder).save_pretrained(folder))"
            if present
            else "no tokenizer.json"
        )
        return None, why
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as e:  # transformers' own message names the file
        raise ExportError(f"'{path}': transformers cannot load the tokenizer: {type(e).__name__}: {e}") from e
    config = {}
    if (path / "tokenizer_config.json").is_file():
        try:
            config = json.loads((path / "tokenizer_config.json").read_text())
        except ValueError as e:
            raise ExportError(f"'{path / 'tokenizer_config.json'}' is not JSON: {e}") from None
    return tokenizer, config


def _family(config: dict, path: Path) -> str:
    """'seq2seq', 'audio', 'recurrent' or 'causal' from config.json: an encoder-decoder, a decoder-only
    model transformers registers for speech or sequence-to-sequence generation only (an audio LM), a model
    whose own cache (transformers' StaticCache built from the config) has recurrent layers, or any other
    causal LM."""
    if config.get("is_encoder_decoder"):
        return "seq2seq"
    import transformers
    from transformers.models.auto import modeling_auto as auto

    kind = config.get("model_type")
    takes_source = kind in auto.MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES or kind in auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES
    if takes_source and kind not in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return "audio"  # a decoder-only model that generates from audio merged into its token stream

    try:
        loaded = transformers.AutoConfig.from_pretrained(str(path), local_files_only=True)
    except Exception as e:
        raise ExportError(f"'{path / 'config.json'}': transformers cannot read it ({type(e).__name__}: {e})") from e
    return "recurrent" if is_recurrent(loaded) else "causal"


def _model_class(config: dict, family: str):
    """The class config.json names (architectures), else the Auto class of the family."""
    import transformers

    for name in config.get("architectures") or []:
        cls = getattr(transformers, name, None)
        if cls is not None:
            return cls
    if family == "seq2seq":
        from transformers.models.auto.modeling_auto import MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES

        speech = config.get("model_type") in MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES
        return transformers.AutoModelForSpeechSeq2Seq if speech else transformers.AutoModelForSeq2SeqLM
    return transformers.AutoModelForCausalLM


def export_pretrained(
    path,
    output=None,
    *,
    max_cache_len: int | None = None,
    max_prompt_len: int | None = None,
    quantize: str | None = None,
    dtype: str = "float32",
    sample_top_k: int | None = 64,
    tokenizer: bool = True,
    verify: bool = True,
    progress=None,
    **options,
):
    """Export the transformers checkpoint folder `path` (see the module docstring); saves to `output`
    when given. Returns (program, report): report is a dict with the recipe, the methods, the state
    and file sizes, the tokenizer's summary and the verification's largest difference.

    max_cache_len: KV-cache positions of the attention layers (default: the config's
    max_position_embeddings, at most 1024; a model without attention layers has none and records one
    given as unused); max_prompt_len: the longest prefill (default min(128, max_cache_len));
    quantize: None, "int8" or "int4" (weights of linear layers and embeddings); dtype: the compute
    dtype, "float32" (the one tandem runs); tokenizer=False: store no tokenizer; progress: a Progress
    (stage lines on stderr), or None for none. Other `options` go to the recipe."""
    import torch
    import transformers

    progress = progress or Progress(None)
    path = Path(path)
    if dtype not in ("float32", "fp32", torch.float32):
        raise ExportError(
            f"dtype {dtype!r}: tandem computes in float32 (give dtype='float32'); for smaller files "
            "store the weights quantized with quantize='int8' or 'int4'"
        )
    if quantize not in (None, "int8", "int4"):
        raise ExportError(f"quantize {quantize!r}: give None, 'int8' or 'int4'")
    config = _check_folder(path)
    family = _family(config, path)

    progress.plan(2 + bool(verify) + (output is not None))
    progress.stage(f"loading {path}")
    transformers.utils.logging.disable_progress_bar()  # the stages above are the progress display
    tok, tok_config = load_tokenizer(path) if tokenizer else (None, "tokenizer=False")
    auto = _model_class(config, family)
    try:
        model = auto.from_pretrained(str(path), local_files_only=True, dtype=torch.float32).eval()
    except Exception as e:
        raise ExportError(
            f"'{path}': transformers cannot load the model ({config.get('model_type', '?')}, "
            f"{', '.join(config.get('architectures') or []) or 'no architectures'}) with {auto.__name__}: "
            f"{type(e).__name__}: {e}"
        ) from e
    metadata = dict(options.pop("metadata", None) or {})
    if tok is not None:
        metadata[ENTRY] = entry(tok, tok_config)

    progress.stage(f"exporting ({family} recipe{', ' + quantize if quantize else ''})")
    text = model.config.get_text_config(decoder=True)
    if family == "seq2seq":
        limit = getattr(model.config, "max_target_positions", None) or getattr(text, "max_position_embeddings", None) or 448
        max_cache_len = int(max_cache_len or min(limit, 1024))
        program = export_seq2seq(model, max_cache_len=max_cache_len, metadata=metadata, quantize=quantize, **options)
    elif family == "audio":
        if options.get("max_source_len") is not None:
            kind = config.get("model_type", "?")
            raise ExportError(f"max_source_len: a {kind} model takes audio of a fixed shape; give encoder_input_shape")
        options.pop("max_source_len", None)
        max_cache_len = int(max_cache_len or min(getattr(text, "max_position_embeddings", None) or 1024, 1024))
        max_prompt_len = int(max_prompt_len or min(128, max_cache_len))
        export_audio = export_codec_lm if is_codec_lm(model) else export_audio_lm
        program = export_audio(
            model,
            options.pop("encoder_input_shape", None),
            max_cache_len=max_cache_len,
            max_prompt_len=max_prompt_len,
            sample_top_k=sample_top_k,
            metadata=metadata,
            quantize=quantize,
            **options,
        )
    else:
        given = [k for k in ("encoder_input_shape", "max_source_len") if options.get(k) is not None]
        if given:
            raise ExportError(
                f"{', '.join(given)}: only an encoder-decoder takes it, and this {config.get('model_type', '?')} model is a "
                f"decoder-only LM (leave it out)"
            )
        for k in ("encoder_input_shape", "max_source_len"):
            options.pop(k, None)
        if family == "recurrent":
            # max_cache_len is the attention layers' capacity (a model without any records it as unused)
            if max_cache_len is None and has_attention_layers(model):
                max_cache_len = int(min(getattr(text, "max_position_embeddings", None) or 1024, 1024))
            # the Mamba path scans a chunk in one step; others unroll one model step per token
            max_prompt_len = int(max_prompt_len or (32 if config.get("model_type") == "mamba" else 16))
            if max_cache_len is not None:
                max_prompt_len = min(max_prompt_len, int(max_cache_len))
        else:
            limit = getattr(text, "max_position_embeddings", None) or 1024
            max_cache_len = int(max_cache_len or min(limit, 1024))
            max_prompt_len = int(max_prompt_len or min(128, max_cache_len))
        program = export_causal_lm(
            model,
            max_cache_len=max_cache_len,
            max_prompt_len=max_prompt_len,
            sample_top_k=sample_top_k,
            metadata=metadata,
            quantize=quantize,
            **options,
        )

    data = program.to_bytes()
    uncached = program.metadata.get("uncached") if family != "seq2seq" else None
    report = {
        "recipe": "uncached" if uncached else family,
        "uncached": uncached,  # why the model's own cache is not used (the uncached recipe), else None
        "model_type": config.get("model_type"),
        "methods": [m.name for m in program.methods],
        "state_bytes": max((s.offset + s.nbytes for s in program.states), default=0),  # the region, as the writer laid it out
        "file_bytes": len(data),
        "tokenizer": summary(metadata[ENTRY]) if tok is not None else None,
        "tokenizer_missing": None if tok is not None else tok_config,
        "tokenizer_bytes": len(json.dumps(metadata[ENTRY], ensure_ascii=False, separators=(",", ":")).encode()) if tok is not None else 0,
        "max_cache_len": program.metadata.get("max_cache_len", max_cache_len),  # None: a recurrent state alone
        "max_prompt_len": max_prompt_len,
        "quantize": quantize,
    }
    if family == "audio":  # what prefill_audio (an LM over its codec's codes: encode) takes
        streamed = ("audio_input", "audio_chunk_shape", "audio_frames_per_token")
        placed = ("audio_input", "audio_input_shape", "audio_token_id", "audio_tokens")
        coded = ("audio_input", "audio_input_shape", "audio_frames")
        md = program.metadata
        keys = streamed if md.get("audio_streaming") else coded if "audio_frames" in md else placed
        report["audio"] = {k: md[k] for k in keys}
    if verify:
        progress.stage("verifying against eager PyTorch")
        report["verify"] = _verify(model, data, family, tok)
    if output is not None:
        progress.stage(f"writing {output}")
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_bytes(data)
    report["seconds"] = progress.done()
    return program, report


def _verify(model, data: bytes, family: str, tok) -> dict:
    """Load the file with the runtime (its verifier checks every invariant) and compare the first
    outputs with eager on the same inputs: {"checked": what ran, "max_abs_diff": float, "top1_equal": bool}."""
    import torch

    from ..runtime import load

    m = load(data)
    md = m.metadata
    vocab = int(md["vocab_size"])
    with torch.no_grad():
        if family == "seq2seq":
            if "max_source_len" in md:  # token ids
                ids = tok("Hello, world! 1 2 3")["input_ids"] if tok is not None else [1, 2, 3]
                ids = [i % vocab for i in ids][: md["max_source_len"]] or [1 % vocab]
                features, shape = torch.tensor([ids]), [1, len(ids)]
            else:
                shape = md["encoder_input_shape"]
                features = torch.randn(shape, generator=torch.Generator().manual_seed(0))
            start = md.get("decoder_start_token_id")
            start = start[0] if isinstance(start, list) else (start if start is not None else 0)
            token = torch.tensor([[start]])
            m.encode(features)
            got = m.decode(token)
            # the first step's logits as transformers' generate computes them (its masks and cache)
            from transformers import GenerationConfig

            how = GenerationConfig(
                do_sample=False, max_new_tokens=1, output_logits=True, return_dict_in_generate=True, decoder_start_token_id=start
            )
            out = model.generate(**{md.get("encoder_input", model.main_input_name): features}, generation_config=how)
            want = out.logits[0]
            checked = f"encode(input {list(shape)}) then decode(token {start})"
        elif family == "audio" and "audio_frames" in md:
            got, want, checked = _verify_codec(model, m, md, tok)
        elif family == "audio":
            got, want, checked = _verify_audio(model, m, md, tok)
        else:
            n = min(int(md["max_prompt_len"]), 8)
            ids = tok("Hello, world! 1 2 3")["input_ids"][:n] if tok is not None else []
            ids = [i for i in ids if 0 <= i < vocab] or [1 % vocab]
            tokens = torch.tensor([ids])
            got = prefill(m, tokens)
            import inspect

            # positions as transformers' generate gives them (and the recipe), to a forward that takes them
            takes = "position_ids" in inspect.signature(model.forward).parameters
            positions = {"position_ids": torch.arange(tokens.shape[1])[None]} if takes else {}
            want = model(tokens, **positions).logits[:, -1]
            checked = f"prefill of {len(ids)} tokens"
    diff = float((got - want.float()).abs().max())
    return {"checked": checked, "max_abs_diff": diff, "top1_equal": bool(got.argmax() == want.argmax()), "scale": float(want.abs().max())}


def _verify_audio(model, m, md: dict, tok) -> tuple:
    """prefill_audio of the audio's placeholders and a few text tokens, on seeded noise of the audio
    input's shape, in the runtime and in the model's own forward: (runtime logits, eager logits, what ran)."""
    import torch

    vocab = int(md["vocab_size"])
    if md.get("audio_streaming"):  # the audio of every token with it
        text = tok("Hello, world!")["input_ids"] if tok is not None else [1]
        text = [i for i in text if 0 <= i < vocab][: md["max_prompt_len"]] or [1 % vocab]
        shape = md["audio_chunk_shape"][:-1] + [md["audio_frames_per_token"] * len(text)]
        audio = torch.randn(shape, generator=torch.Generator().manual_seed(0))
        tokens = torch.tensor([text])
        got = m.prefill_audio(tokens, audio)
        want = model(input_ids=tokens, **{md["audio_input"]: audio}, num_delay_tokens=md["num_delay_tokens"]).logits[:, -1]
        return got, want, f"prefill_audio of {len(text)} tokens with their audio {shape}"
    text = tok("Hello, world!")["input_ids"] if tok is not None else [1]
    text = [i for i in text if 0 <= i < vocab and i != md["audio_token_id"]][: md["max_prompt_len"]] or [1 % vocab]
    tokens = torch.tensor([[md["audio_token_id"]] * md["audio_tokens"] + text])
    audio = torch.randn(md["audio_input_shape"], generator=torch.Generator().manual_seed(0))
    masks = {k: torch.ones(s, dtype=torch.long) for k, s in md["audio_masks"].items()}
    got = m.prefill_audio(tokens, audio)
    want = model(input_ids=tokens, **{md["audio_input"]: audio}, **masks, **md.get("audio_options", {})).logits[:, -1]
    return got, want, f"prefill_audio of {md['audio_tokens']} audio placeholders and {len(text)} tokens, audio {md['audio_input_shape']}"


def _verify_codec(model, m, md: dict, tok) -> tuple:
    """encode of seeded noise of the audio input's shape, then prefill of the start token and one text token (its
    position reads the first frame's codes), in the runtime and in the model's own forward given the codec's
    codes as generate gives them: (runtime logits, eager logits, what ran)."""
    import torch

    vocab = int(md["vocab_size"])
    text = tok("Hello")["input_ids"] if tok is not None else [1]
    bos = md["bos_token_id"] if isinstance(md["bos_token_id"], int) else 0
    ids = [bos, next((i for i in text if 0 <= i < vocab), 1 % vocab)]
    audio = torch.rand(md["audio_input_shape"], generator=torch.Generator().manual_seed(0)) * 0.2 - 0.1
    m.encode(audio)
    got = m.prefill(torch.tensor([ids]))
    codes = model.codec_model.encode(audio).audio_codes[:, :, :1].transpose(1, 2)  # frame 0: position 1's
    first = torch.full((1, 1, md["num_codebooks"]), md["audio_bos_token_id"])
    inputs = torch.cat([torch.tensor([ids])[:, :, None], torch.cat([first, codes], dim=1)], dim=2)
    want = model(input_ids=inputs).logits[:, -1]
    return got, want, f"encode of audio {md['audio_input_shape']} then prefill of {len(ids)} tokens"


def print_report(report: dict, output, file=None) -> None:
    """The command's summary, on `file` (default: sys.stdout at the time of the call)."""
    file = file or sys.stdout

    def size(n):
        for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if n >= k:
                return f"{n / k:.1f} {unit}"
        return f"{n} bytes"

    p = lambda *a: print(*a, file=file)  # noqa: E731
    p(
        f"{output}: {size(report['file_bytes'])}, a {report['model_type']} model through the {report['recipe']} recipe"
        f"{' (weights ' + report['quantize'] + ')' if report['quantize'] else ''}, in {report['seconds']:.1f} s"
    )
    p(f"  methods: {', '.join(report['methods'])}")
    cache = report["max_cache_len"]
    held = "no KV cache: a recurrent state" if cache is None else f"KV cache of {cache} positions"
    if report.get("uncached"):
        held = f"the token ids of up to {cache} positions, no cache"
        p(f"  no usable cache: {report['uncached']}")
        p(f"  so each prefill and decode runs the model's whole forward over all {cache} positions")
    p(
        f"  state: {size(report['state_bytes'])} per session"
        f" ({held}"
        f"{', prompts of up to ' + str(report['max_prompt_len']) + ' tokens per prefill' if report['max_prompt_len'] else ''})"
    )
    a = report.get("audio")
    if a and "audio_chunk_shape" in a:
        p(
            f"  audio: prefill_audio and decode_audio take {a['audio_input']} of {a['audio_frames_per_token']} mel frames with "
            f"each token ({a['audio_chunk_shape']} a token)"
        )
    elif a and "audio_frames" in a:
        p(f"  audio: encode takes {a['audio_input']} {a['audio_input_shape']}, {a['audio_frames']} frames of its codec's codes")
    elif a:
        p(
            f"  audio: prefill_audio takes {a['audio_input']} {a['audio_input_shape']} with {a['audio_tokens']} placeholder tokens "
            f"(id {a['audio_token_id']}) among its tokens"
        )
    if report["tokenizer"]:
        p(f"  tokenizer: {report['tokenizer']}; {size(report['tokenizer_bytes'])} in the file")
    else:
        p(f"  tokenizer: none ({report['tokenizer_missing']}): generate() will take and give token ids only")
    v = report.get("verify")
    if v:
        p(
            f"  verified: {v['checked']} in the runtime vs eager PyTorch: largest logit difference {v['max_abs_diff']:.2e}"
            f" (logits up to {v['scale']:.2f}), same top token: {'yes' if v['top1_equal'] else 'NO'}"
        )


def tolerance(report: dict) -> float:
    """The largest logit difference a float32 export may show against eager (quantized ones are not held to it)."""
    return 1e-3 * max(1.0, report["verify"]["scale"])


def env_progress(quiet: bool = False):
    """A Progress on stderr, silent when `quiet` or TANDEM_QUIET is set."""
    return Progress(None if quiet or os.environ.get("TANDEM_QUIET") else sys.stderr)
