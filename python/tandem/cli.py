"""The command line (`tandem` once installed, or `python -m tandem`): `inspect FILE`, `check FILE`,
and `export DIR -o FILE` (a transformers checkpoint folder to a .tandem file, with its tokenizer:
tandem/recipes/pretrained.py).

inspect and check load the file with the runtime's own verifier, through the backend tandem.load
uses (tandem.runtime.BACKEND: the native library in a built clone, else the packaged tandem.wasm).
`inspect` prints what the file holds (`--dts`: as TypeScript declarations, tandem/typings.py);
`check` also runs every method once on zero inputs. `export` shows its stages as a progress bar on
stderr (`--quiet`: nothing but errors). Results go to stdout, progress and errors to stderr. A
user's error (a file that cannot be read or does not verify, a folder that is not a checkpoint, a
missing optional package) is one line on stderr and exit status 1, never a traceback.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import struct
import sys
import time
from pathlib import Path

from .runtime import TandemError, _library, _load_program
from .schema import CONSTANT, CONSTANTS_HEAD, HEADER, SECTION, SECTIONS

DESCRIPTION = """Inspect, check and export .tandem files: programs whose methods share mutable
state (a KV cache, a streaming buffer), run by the tandem runtime in Python, Node
and the browser."""

COMMANDS = {
    "inspect": "print what a .tandem file holds: methods, state, metadata, sizes",
    "check": "verify a .tandem file and run every method once on zero inputs",
    "export": "export a local transformers checkpoint folder to a .tandem file",
}

EPILOG = """examples:
  python -m tandem export my-model/ -o my-model.tandem
  python -m tandem inspect my-model.tandem
  python -m tandem check my-model.tandem

`python -m tandem COMMAND --help` describes a command's options."""

TRANSFORMERS_MISSING = "export needs the transformers package: pip install 'tandem-runtime[transformers]'"


class CliError(Exception):
    """A failure reported as one line, without a traceback."""


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise CliError(f"cannot read '{path}': {e.strerror or e}") from None


def _constants(data: bytes) -> tuple:
    """(count, bytes) of the constants section, read from a file the runtime verified, with the
    layout of docs/format.md (python/tandem/schema.py); versions 1 and 2 share it."""
    constants_id = next(i for i, name in SECTIONS.items() if name == "constants")
    for i in range(struct.unpack_from("<I", data, HEADER.offset["section_count"])[0]):
        sid, _, off, _ = struct.unpack_from(SECTION.fmt, data, HEADER.size + i * SECTION.size)
        if sid == constants_id:
            break
    else:
        return None, None
    count, at, total = struct.unpack_from(CONSTANTS_HEAD.fmt, data, off)[0], off + CONSTANTS_HEAD.size, 0
    for _ in range(count):
        fields = dict(zip(CONSTANT.names, struct.unpack_from(CONSTANT.fmt, data, at)))
        total += fields["nbytes"]
        at += CONSTANT.size + 8 * fields["rank"]
    return count, total


def describe(data: bytes) -> dict:
    """What a .tandem file holds, as plain data (the `inspect --json` output). Raises TandemError
    if the runtime's verifier rejects the file."""
    lib = _library()
    prog = _load_program(lib, data)
    try:
        p = prog

        def tensor(name, dtype, rank, dim, nbytes):
            return {
                "name": name.decode(),
                "dtype": lib.tdm_dtype_name(dtype).decode(),
                "shape": [dim(d) for d in range(rank)],
                "bytes": nbytes,
            }

        def io(m, kind):
            ts = [
                tensor(
                    lib.tdm_method_io_name(p, m, kind, i),
                    lib.tdm_method_io_dtype(p, m, kind, i),
                    lib.tdm_method_io_rank(p, m, kind, i),
                    lambda d: lib.tdm_method_io_dim(p, m, kind, i, d),
                    lib.tdm_method_io_nbytes(p, m, kind, i),
                )
                for i in range(lib.tdm_method_io_count(p, m, kind))
            ]
            if lib.tdm_method_dim_count(p, m):  # per dim: its expression of the method's dims ('n', 'n + 1'), '' when static
                for i, t in enumerate(ts):
                    t["exprs"] = [lib.dim_expr(p, m, kind, i, d) for d in range(len(t["shape"]))]
            return ts

        def dims(m):  # dynamic dims: shapes above are at their maximum
            return {
                lib.tdm_method_dim_name(p, m, d).decode(): {"min": lib.tdm_method_dim_min(p, m, d), "max": lib.tdm_method_dim_max(p, m, d)}
                for d in range(lib.tdm_method_dim_count(p, m))
            }

        methods = [
            {
                "name": lib.tdm_program_method_name(p, m).decode(),
                "ops": lib.tdm_method_op_count(p, m),
                "inputs": io(m, 0),
                "outputs": io(m, 1),
                "dims": dims(m),
            }
            for m in range(lib.tdm_program_method_count(p))
        ]
        state = []
        for i in range(lib.tdm_program_state_count(p)):
            t = tensor(
                lib.tdm_state_name(p, i),
                lib.tdm_state_dtype(p, i),
                lib.tdm_state_rank(p, i),
                lambda d: lib.tdm_state_dim(p, i, d),
                lib.tdm_state_nbytes(p, i),
            )
            t["offset"] = lib.tdm_state_offset(p, i)
            state.append(t)
        count, const_bytes = _constants(data)
        return {
            "file_bytes": len(data),
            "format_version": struct.unpack_from("<I", data, 4)[0],
            "constant_count": count,
            "constant_bytes": const_bytes,
            "state_bytes": lib.tdm_program_state_size(p),
            "scratch_bytes": lib.tdm_program_scratch_size(p),
            "fingerprint": f"{lib.tdm_program_fingerprint(p):016x}",
            "program_id": f"{lib.tdm_program_id(p):016x}",
            "metadata": {
                lib.tdm_program_metadata_name(p, i).decode(): json.loads(lib.tdm_program_metadata_value(p, i).decode())
                for i in range(lib.tdm_program_metadata_count(p))
            },
            "tokenizer_bytes": next(
                (
                    len(lib.tdm_program_metadata_value(p, i))
                    for i in range(lib.tdm_program_metadata_count(p))
                    if lib.tdm_program_metadata_name(p, i) == b"tokenizer"
                ),
                0,
            ),
            "state": state,
            "methods": methods,
        }
    finally:
        lib.tdm_program_free(prog)


def check(data: bytes) -> list:
    """Run every method once on zero inputs, each from the initial state: [(method, error message
    or None, milliseconds)]. Raises TandemError if the runtime's verifier rejects the file."""
    import torch

    from .runtime import Model

    model = Model(data)
    results = []
    for name, (_, ins, _) in model.methods.items():
        model.reset_state()
        zeros = [torch.zeros(spec.shape, dtype=spec.dtype) for spec in ins]
        t0 = time.perf_counter()
        try:
            model.call(name, *zeros)
            results.append((name, None, (time.perf_counter() - t0) * 1e3))
        except TandemError as e:
            results.append((name, str(e), (time.perf_counter() - t0) * 1e3))
    return results


def _size(n) -> str:
    if n is None:
        return "unknown (a format this version of tandem does not write)"
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n} bytes ({n / k:.1f} {unit})"
    return f"{n} bytes"


def _n(count, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _t(t: dict) -> str:
    return f"{t['dtype']}[{','.join(str(d) for d in t['shape'])}]"


def _print_inspect(path: str, info: dict) -> None:
    print(f"{path}: tandem format version {info['format_version']}, {_size(info['file_bytes'])}")
    if info["constant_count"] is None:
        print(f"constants: {_size(None)}")
    else:
        print(f"constants: {_n(info['constant_count'], 'tensor')}, {_size(info['constant_bytes'])}")
    print(f"state: {_n(len(info['state']), 'tensor')}, {_size(info['state_bytes'])} per session (layout fingerprint {info['fingerprint']})")
    width = max([len(s["name"]) for s in info["state"]] + [4])
    for s in info["state"]:
        note = ""
        if s["name"] == "__rng__":  # lowering/random.py: the program's random generator
            note = "  random generator [seed, calls] (Philox4x32-10; not torch's stream; model.seed(n))"
        print(f"  {s['name']:<{width}}  {_t(s):<20} {s['bytes']} bytes{note}")
    print(f"scratch: {_size(info['scratch_bytes'])} per session")
    if info["metadata"]:
        print(f"metadata: {len(info['metadata'])} entries")
        for k, v in info["metadata"].items():
            if k == "tokenizer" and isinstance(v, dict):  # large: one line (inspect --json has it all)
                from .tokenizer import summary

                print(f"  tokenizer: {summary(v)}; {_size(info['tokenizer_bytes'])}")
            else:
                print(f"  {k}: {json.dumps(v)}")
    print(f"methods: {len(info['methods'])}")
    for m in info["methods"]:
        print(f"  {m['name']}: {_n(m['ops'], 'op')}, {_n(len(m['inputs']), 'input')}, {_n(len(m['outputs']), 'output')}")
        for name, b in m.get("dims", {}).items():
            print(f"    dim {name}: {b['min']} to {b['max']} (shapes below at the maximum)")
        for kind, ts in (("in ", m["inputs"]), ("out", m["outputs"])):
            for t in ts:
                print(f"    {kind} {t['name']}: {_t(t)}")


def _version_line() -> str:
    from .format import VERSION
    from .runtime import BACKEND
    from .version import __version__

    return f"tandem-runtime {__version__} (writes .tandem format version {VERSION}; runtime backend: {BACKEND})"


def _missing_transformers(e: ImportError) -> bool:
    name = getattr(e, "name", None) or ""
    return name == "transformers" or name.startswith("transformers.")


def _writable(path: Path) -> None:
    """Raises OSError when `path` cannot be written: its folder cannot be made or written to, or it is a folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
    if not os.access(path.parent, os.W_OK):
        raise PermissionError(errno.EACCES, "Permission denied", str(path.parent))


def _seq2seq_options(args) -> dict:
    """--encoder-input-shape and --max-source-len as export_seq2seq's options (only those given)."""
    out = {}
    if args.encoder_input_shape is not None:
        try:
            shape = tuple(int(d) for d in args.encoder_input_shape.replace("x", ",").split(","))
        except ValueError:
            shape = ()
        if not shape or min(shape) < 1:
            raise CliError(
                f"export: --encoder-input-shape {args.encoder_input_shape!r}: give positive sizes separated by commas, e.g. 1,80,3000"
            )
        out["encoder_input_shape"] = shape
    if args.max_source_len is not None:
        out["max_source_len"] = args.max_source_len
    return out


def _export(args) -> int:
    import warnings

    from .ir import ExportError
    from .recipes.pretrained import env_progress, export_pretrained, print_report, tolerance

    progress = env_progress(args.quiet)
    try:
        _writable(Path(args.output))  # before minutes of export
        with warnings.catch_warnings():
            if args.quiet:
                import transformers

                warnings.simplefilter("ignore")
                transformers.utils.logging.set_verbosity_error()
            _, report = export_pretrained(
                args.folder,
                args.output,
                max_cache_len=args.max_cache_len,
                max_prompt_len=args.max_prompt_len,
                quantize=args.quantize,
                dtype=args.dtype,
                sample_top_k=args.sample_top_k or None,
                **_seq2seq_options(args),
                tokenizer=not args.no_tokenizer,
                verify=not args.no_verify,
                progress=progress,
            )
    except ImportError as e:
        if _missing_transformers(e):
            raise CliError(TRANSFORMERS_MISSING) from None
        raise
    except ExportError as e:
        raise CliError(f"export: {e}") from None
    except TandemError as e:
        raise CliError(f"export: the exported file does not run in the runtime: {e}") from None
    except OSError as e:  # writing the output, say
        raise CliError(f"export: {e.strerror or e}{f' (at {e.filename})' if e.filename else ''}") from None
    finally:
        progress.close()
    if not args.quiet:
        print_report(report, args.output)
    v = report.get("verify")
    if v and not args.quantize and not v["max_abs_diff"] <= tolerance(report):
        print(
            f"tandem: export: the file's logits differ from eager PyTorch by {v['max_abs_diff']:.3g} (more than "
            f"{tolerance(report):.3g}); {args.output} was written, but do not trust it: please report this model",
            file=sys.stderr,
        )
        return 1
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tandem", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=_version_line())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    for name, help in COMMANDS.items():
        p = sub.add_parser(name, help=help, description=help)
        if name == "export":
            p.add_argument("folder", help="a transformers checkpoint folder (as save_pretrained writes it); nothing is downloaded")
            p.add_argument("-o", "--output", required=True, help="the .tandem file to write")
            p.add_argument(
                "--max-cache-len",
                type=int,
                help="KV-cache positions, or the token ids a model with no usable cache holds (default: max_position_embeddings, <= 1024)",
            )
            p.add_argument("--max-prompt-len", type=int, help="the longest prefill in one call (default: min(128, max-cache-len))")
            p.add_argument("--quantize", choices=["int8", "int4"], help="store linear, embedding (and with int8 expert) weights quantized")
            p.add_argument("--dtype", default="float32", help="the compute dtype: float32 (the one tandem runs)")
            p.add_argument("--sample-top-k", type=int, default=64, help="K of decode_topk (0: no decode_topk)")
            p.add_argument(
                "--encoder-input-shape",
                metavar="N,...",
                help="an encoder-decoder over features or samples, or an audio LM: the shape of one encoder (audio) input as its "
                "forward takes it, e.g. 1,80,3000 (Whisper's is known from its config)",
            )
            p.add_argument(
                "--max-source-len",
                type=int,
                help="an encoder-decoder over token ids: the longest source (default: min(512, its positions))",
            )
            p.add_argument("--no-tokenizer", action="store_true", help="store no tokenizer in the file")
            p.add_argument("--no-verify", action="store_true", help="skip running the file against eager PyTorch")
            p.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors (no progress bar, no summary)")
            continue
        p.add_argument("file")
        if name == "inspect":
            p.add_argument("--json", action="store_true", help="print the same as JSON")
            p.add_argument(
                "--dts", action="store_true", help="print TypeScript declarations of the file's methods for the JS package (a .d.ts)"
            )
            p.add_argument("--dts-name", metavar="NAME", help="the interface --dts declares (default: from the file's name: MyModel)")
    args = parser.parse_args(argv)
    try:
        if args.command == "export":
            return _export(args)
        data = _read(args.file)
        try:
            if args.command == "inspect":
                info = describe(data)
                if args.dts:
                    from .typings import dts, type_name

                    name = Path(args.file).name
                    print(dts(info, name, args.dts_name or type_name(name.split(".")[0])), end="")
                elif args.json:
                    print(json.dumps(info, indent=1))
                else:
                    _print_inspect(args.file, info)
                return 0
            results = check(data)
        except TandemError as e:
            raise CliError(f"'{args.file}' is not a valid tandem program: {e}") from None
        print(f"{args.file}: verified; {_n(len(results), 'method')}, each run once on zero inputs from the initial state")
        failed = 0
        for name, error, ms in results:
            print(f"  {name}: {'OK' if error is None else error} ({ms:.2f} ms)")
            failed += error is not None
        if failed:
            print(f"tandem: {failed} of {_n(len(results), 'method')} failed", file=sys.stderr)
            return 1
        return 0
    except CliError as e:
        print(f"tandem: {e}", file=sys.stderr)
        return 1
    except RuntimeError as e:  # e.g. the native library is not built
        print(f"tandem: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("tandem: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `... | head`
        sys.stderr.close()
        return 0
