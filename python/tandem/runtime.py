"""tandem.load: run a .tandem program from Python, to check an export before shipping it. Tensors
in, tensors out, state kept between calls.

Two backends with one interface (the tdm_* functions of include/tandem.h plus a few helpers):
- "native": the C runtime built in the clone (build/native/libtandem.so, or the library named by
  TANDEM_LIB), through ctypes. Used when it exists: the developer's setup.
- "wasm": the same tandem.wasm the browser runs, shipped inside the installed package and run by
  the `wasmtime` package (python/tandem/wasm.py). No C compiler or clone needed.
`BACKEND` says which one this process uses; TANDEM_BACKEND=native|wasm chooses explicitly.
"""

from __future__ import annotations

import ctypes
import json
import os
import struct
from pathlib import Path
from typing import NamedTuple, Union

import torch

from . import schema
from .errors import TandemError
from .ir import DTYPE_CODE, DTYPE_NAME, TORCH_DTYPE
from .schema import API, result_kind

_PACKAGE = Path(__file__).resolve().parent
_REPO = _PACKAGE.parents[1]  # the clone, when the package is run from python/ in one
_lib = None


def _native_path():
    """The native library to use, or None: TANDEM_LIB, else the clone's build next to the package."""
    env = os.environ.get("TANDEM_LIB")
    if env:
        return Path(env)
    built = _REPO / "build" / "native" / "libtandem.so"
    return built if built.exists() else None


def _wasm_path() -> Path:
    """tandem.wasm shipped in the package (pip install), else the clone's web/tandem.wasm."""
    for c in (_PACKAGE / "tandem.wasm", _REPO / "web" / "tandem.wasm"):
        if c.exists():
            return c
    return _PACKAGE / "tandem.wasm"


def _choose_backend() -> str:
    forced = os.environ.get("TANDEM_BACKEND")
    if forced:
        if forced not in ("native", "wasm"):
            raise ValueError(f"TANDEM_BACKEND must be 'native' or 'wasm', not '{forced}'")
        return forced
    return "native" if _native_path() is not None else "wasm"


BACKEND: str = _choose_backend()


# ctypes for the C types of include/tandem.h (schema.API): pointers as ints, strings as bytes.
_CTYPES = {
    "void": None,
    "str": ctypes.c_char_p,
    "ptr": ctypes.c_void_p,
    "size": ctypes.c_size_t,
    "u32": ctypes.c_uint32,
    "i32": ctypes.c_int,
    "i64": ctypes.c_int64,
    "u64": ctypes.c_uint64,
    "f64": ctypes.c_double,
}
_POINTERS = {
    "char*": ctypes.c_char_p,
    "tdm_program**": ctypes.POINTER(ctypes.c_void_p),
    "tdm_session**": ctypes.POINTER(ctypes.c_void_p),
    "double*": ctypes.POINTER(ctypes.c_double),
    "int64_t*": ctypes.POINTER(ctypes.c_int64),
    "const int64_t*": ctypes.POINTER(ctypes.c_int64),
}


def _ctype(c_type: str):
    return _POINTERS[c_type] if c_type in _POINTERS else _CTYPES[result_kind(c_type)]


class NativeLibrary:
    """libtandem through ctypes: each tdm_* function with its C signature (pointers as ints,
    strings as bytes), and the helpers the wasm backend has too."""

    def __init__(self, path: Path):
        lib = ctypes.CDLL(str(path))
        for fn in API:  # every function of include/tandem.h, as python/tandem/schema.py declares it
            f = getattr(lib, fn.name)
            f.restype, f.argtypes = _ctype(fn.ret), [_ctype(t) for t in fn.params]
            setattr(self, fn.name, f)
        self._cdll = lib

    @staticmethod
    def write(ptr: int, src_address: int, n: int) -> None:
        ctypes.memmove(ptr, src_address, n)

    @staticmethod
    def read(dst_address: int, ptr: int, n: int) -> None:
        ctypes.memmove(dst_address, ptr, n)

    def load_program(self, data: bytes):
        """(status, program): tdm_program_load on `data`."""
        out = ctypes.c_void_p()
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        return self.tdm_program_load(buf, len(data), ctypes.byref(out)), out.value

    def load_program_laid_out(self, layout):
        """(status, program): tdm_program_load_owned on the file that `layout` (format.FileLayout)
        writes straight into the runtime's memory: the file's one copy."""
        ptr = self.tdm_malloc(layout.size or 1)
        if not ptr:
            return self.load_program(layout.to_bytes())
        ctypes.memset(ptr, 0, layout.size)
        layout.write_into(memoryview((ctypes.c_char * layout.size).from_address(ptr)).cast("B"))
        out = ctypes.c_void_p()
        return self.tdm_program_load_owned(ptr, layout.size, ctypes.byref(out)), out.value

    def session_create(self, program: int):
        out = ctypes.c_void_p()
        return self.tdm_session_create(program, ctypes.byref(out)), out.value

    def set_input_shape(self, session: int, method: int, i: int, dims) -> int:
        arr = (ctypes.c_int64 * max(len(dims), 1))(*dims)
        return self.tdm_session_set_input_shape(session, method, i, arr, len(dims))

    def dim_expr(self, program: int, method: int, io: int, i: int, d: int) -> str:
        buf = ctypes.create_string_buffer(256)
        self.tdm_method_io_dim_expr(program, method, io, i, d, buf, 256)
        return buf.value.decode()

    def run_profiled(self, session: int, method: int, n: int):
        """(status, [milliseconds of each of the method's n ops])."""
        ms = (ctypes.c_double * max(n, 1))()
        return self.tdm_session_run_profiled(session, method, ms), list(ms[:n])


def _library():
    """The runtime of this process's BACKEND (loaded once): NativeLibrary or wasm.WasmLibrary."""
    global _lib
    if _lib is not None:
        return _lib
    if BACKEND == "native":
        path = _native_path()
        if path is None or not path.exists():
            raise RuntimeError("the native tandem library was not found: build it with `npm run build` (or set TANDEM_LIB)")
        _lib = NativeLibrary(path)
    else:
        path = _wasm_path()
        if not path.exists():
            raise RuntimeError(
                f"tandem.wasm is not in the package ({path}): install it with `npm run wheel && pip install dist/*.whl` from the clone"
            )
        try:
            from .wasm import WasmLibrary
        except ImportError as e:
            raise RuntimeError(f"the wasm backend needs the `wasmtime` package ({e}): pip install wasmtime") from None
        _lib = WasmLibrary(path)
    return _lib


def _load_program(lib, data: bytes) -> int:
    """A verified program handle for `data`; raises TandemError if the verifier rejects it."""
    status, program = lib.load_program(data)
    _check(status)
    return program


def _check(status: int) -> None:
    if status != 0:
        lib = _library()
        raise TandemError(lib.tdm_status_string(status).decode(), lib.tdm_last_error().decode())


class _IO:
    def __init__(self, lib, p, m, io, i):
        self.name = lib.tdm_method_io_name(p, m, io, i).decode()
        self.dtype = TORCH_DTYPE[lib.tdm_method_io_dtype(p, m, io, i)]
        rank = lib.tdm_method_io_rank(p, m, io, i)
        self.shape = tuple(lib.tdm_method_io_dim(p, m, io, i, d) for d in range(rank))  # at the maximum of any dims
        self.nbytes = lib.tdm_method_io_nbytes(p, m, io, i)
        # per dim: '' when static, else its expression of the method's dims ('n', 'n + 1')
        self.exprs = tuple(lib.dim_expr(p, m, io, i, d) if lib.tdm_method_dim_count(p, m) else "" for d in range(rank))
        self.dynamic = any(self.exprs)


class OpProfile(NamedTuple):
    """One op of a profiled call: its time, the bytes it writes (its outputs' bytes; an update in
    place such as a KV-cache row write counts only the rows it writes), the part of those that lands
    in the state region, and whether it writes more than the profile's flag_fraction of the state."""

    index: int
    name: str
    ms: float
    bytes_written: int
    state_bytes_written: int
    flagged: bool


class _Program:
    """A loaded program handle shared by a model and its forks: freed with the last of their sessions."""

    def __init__(self, lib, data: bytes):
        self.lib, self.handle, self.sessions = lib, 0, 0
        self.handle = _load_program(lib, data)

    def session(self) -> int:
        """A new session on the program (the caller frees it with release)."""
        status, session = self.lib.session_create(self.handle)
        _check(status)
        self.sessions += 1
        return session

    def release(self, session: int) -> None:
        """Free `session`, and the program with its last session."""
        lib = self.lib
        if getattr(lib, "closed", False):  # the wasm instance is gone at interpreter exit
            return
        lib.tdm_session_free(session)
        self.sessions -= 1
        if self.sessions == 0:
            self.free()

    def free(self) -> None:
        if self.handle and not getattr(self.lib, "closed", False):
            self.lib.tdm_program_free(self.handle)
        self.handle = 0

    def __del__(self):
        if not self.sessions:  # a program whose first session failed
            self.free()


class Model:
    """A loaded program with one session: one Python method per program method. `fork()` makes
    another session on the same program; `close()` (or leaving a `with` block) frees this one."""

    def __init__(self, data: bytes):
        lib = self._lib = _library()
        self._session = 0
        self._shared = _Program(lib, data)
        self._program = self._shared.handle
        self._session = self._shared.session()  # on failure _Program.__del__ frees the program
        p = self._program
        self.metadata = {}
        self._tokenizer_entry = self._tokenizer = None
        self._growing = {}
        for i in range(lib.tdm_program_metadata_count(p)):
            name = lib.tdm_program_metadata_name(p, i).decode()
            try:
                value = json.loads(lib.tdm_program_metadata_value(p, i).decode())
            except ValueError:  # __del__ frees the session and the program
                raise TandemError("TDM_ERR_MALFORMED", f"metadata '{name}' is not JSON: the file is corrupt") from None
            if name == "tokenizer":  # tandem/tokenizer.py: read by .tokenizer, not a value of .metadata
                from .tokenizer import check_entry

                self._tokenizer_entry = check_entry(value)
            elif name == "growing_state":  # tandem/growing.py: state name -> [its length's state, dim]
                self._growing = value
            else:
                self.metadata[name] = value
        self.methods = {}
        self.dims = {}  # method -> {dim name: (min, max)}
        for m in range(lib.tdm_program_method_count(p)):
            name = lib.tdm_program_method_name(p, m).decode()
            if "#" in name:
                continue  # 'name#k': another version of method 'name' (the runtime picks the one that fits the state)
            ins = [_IO(lib, p, m, 0, i) for i in range(lib.tdm_method_io_count(p, m, 0))]
            outs = [_IO(lib, p, m, 1, i) for i in range(lib.tdm_method_io_count(p, m, 1))]
            self.methods[name] = (m, ins, outs)
            self.dims[name] = {
                lib.tdm_method_dim_name(p, m, d).decode(): (lib.tdm_method_dim_min(p, m, d), lib.tdm_method_dim_max(p, m, d))
                for d in range(lib.tdm_method_dim_count(p, m))
            }

    def __getattr__(self, name: str):
        """Each program method as an attribute (made on access, so a model holds no reference to
        itself and is freed as soon as it is dropped); a name the model has for itself (close, fork,
        metadata, ...) stays reachable by call()."""
        methods = self.__dict__.get("methods")
        if methods is None or name not in methods:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

        def call(*inputs):
            return self.call(name, *inputs)

        call.__name__ = name
        return call

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.__dict__.get("methods", ())))

    def fork(self, state: str = "initial") -> "Model":
        """A new model on the same loaded program (the weights are not loaded again) with its own
        session: its state the initial values (state="initial", the default, as JS's fork) or a copy
        of this model's (state="copy"). The two are independent afterwards; each is closed on its own, and the
        program is freed with the last of them."""
        if state not in ("copy", "initial"):
            raise TandemError("TDM_ERR_INVALID_ARGUMENT", f"fork(state={state!r}): give 'copy' or 'initial'")
        self._alive("fork")
        new = object.__new__(type(self))
        new.__dict__.update({k: v for k, v in self.__dict__.items() if k != "_session"})  # the program's description, shared
        new._session = 0
        new._session = self._shared.session()
        if state == "copy":
            n = self._lib.tdm_program_state_size(self._program)
            if n:
                buf = torch.empty(n, dtype=torch.uint8)
                self._lib.read(buf.data_ptr(), self._lib.tdm_session_state(self._session), n)
                self._lib.write(self._lib.tdm_session_state(new._session), buf.data_ptr(), n)
        return new

    def chat(self, **options) -> "Chat":  # noqa: F821
        """A conversation over this language-model program that keeps its KV cache between turns
        (tandem.chat.Chat; as JS's model.chat): `chat = m.chat(system="..."); reply = chat.send("Hi!")`.
        Options: system, messages, tokenizer, max_new_tokens, temperature, top_k, top_p, seed, stop,
        snapshots."""
        from .chat import Chat

        return Chat(self, **options)

    def close(self) -> None:
        """Free this model's session (and the program with the last session on it, forks included).
        A second close does nothing; any other call afterwards raises TandemError TDM_ERR_DISPOSED."""
        session, self._session = getattr(self, "_session", 0), 0
        if session:
            self._shared.release(session)

    def __enter__(self) -> "Model":
        self._alive("with")
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _alive(self, what: str) -> None:
        if not self._session:
            raise TandemError("TDM_ERR_DISPOSED", f"{what}(): the model was closed")

    @property
    def tokenizer(self):
        """The tokenizer the file carries (tandem.transformers.export_pretrained stores it) as a transformers
        PreTrainedTokenizerFast, built on first use; None when the file has none."""
        if self._tokenizer is None and self._tokenizer_entry is not None:
            from .tokenizer import rebuild

            self._tokenizer = rebuild(self._tokenizer_entry)
        return self._tokenizer

    def call(self, name: str, *inputs):
        """Call method `name`; returns a tensor, a tuple of tensors, or None. Every method is reachable
        this way, also one whose name the model uses for itself (a file not made by tandem.export)."""
        return self._call(name, inputs, None)

    run = call  # the earlier name of call

    def profile(self, name: str, *inputs, flag_fraction: float = 0.05):
        """Call method `name` timing each op: returns (outputs, [OpProfile, ...]). An op is flagged
        when it writes more than flag_fraction of the state's bytes (in a decode step, a KV-cache
        update should write only its new rows)."""
        if not flag_fraction >= 0:
            raise TandemError("TDM_ERR_INVALID_ARGUMENT", f"flag_fraction must be >= 0, given {flag_fraction}")
        ops = []
        outputs = self._call(name, inputs, ops)
        lib, p, m = self._lib, self._program, self.methods[name][0]
        limit = flag_fraction * lib.tdm_program_state_size(p)
        return outputs, [
            OpProfile(k, op, ms, written, lib.tdm_method_op_state_bytes_written(p, m, k), written > limit)
            for k, (op, ms) in enumerate(ops)
            for written in [lib.tdm_method_op_bytes_written(p, m, k)]
        ]

    def _call(self, name: str, inputs: tuple, profile):
        self._alive(name)
        if name not in self.methods:
            raise TandemError("TDM_ERR_NOT_FOUND", f"no method '{name}'; the program has {sorted(self.methods)}")
        m, ins, outs = self.methods[name]
        if len(inputs) != len(ins):
            raise TandemError("TDM_ERR_INVALID_ARGUMENT", f"{name}() takes {len(ins)} inputs, {len(inputs)} given")
        staged = []
        for spec, x in zip(ins, inputs):
            if not isinstance(x, torch.Tensor):
                x = torch.tensor(x, dtype=spec.dtype)
            same_rank = x.dim() == len(spec.shape)
            # dynamic dims: checked by the runtime
            fixed = same_rank and all(e or a == b for e, a, b in zip(spec.exprs, x.shape, spec.shape))
            if x.dtype != spec.dtype or not fixed:
                want = [e or d for e, d in zip(spec.exprs, spec.shape)]
                raise TandemError(
                    "TDM_ERR_INVALID_ARGUMENT",
                    f"{name}() input '{spec.name}': expected {DTYPE_NAME[DTYPE_CODE[spec.dtype]]}{want}, given {x.dtype}{list(x.shape)}",
                )
            staged.append(x.detach().contiguous().cpu())
        lib = self._lib
        for i, (spec, x) in enumerate(zip(ins, staged)):
            if spec.dynamic:  # before any byte is written: a size out of range changes nothing
                _check(lib.set_input_shape(self._session, m, i, list(x.shape)))
        for i, x in enumerate(staged):
            if x.numel():
                lib.write(lib.tdm_session_input(self._session, m, i), x.data_ptr(), x.numel() * x.element_size())
        if profile is None:
            _check(lib.tdm_session_run(self._session, m))
        else:
            n = lib.tdm_method_op_count(self._program, m)
            status, ms = lib.run_profiled(self._session, m, n)
            _check(status)
            profile.extend((lib.tdm_method_op_name(self._program, m, k).decode(), ms[k]) for k in range(n))
        if outs and not lib.tdm_session_output(self._session, m, 0):
            return None  # the version that ran returns None (a Python branch the method was exported in versions for)
        results = []
        for i, spec in enumerate(outs):
            shape = spec.shape
            if spec.dynamic:  # the call's actual shape
                shape = tuple(lib.tdm_session_io_dim(self._session, m, 1, i, d) for d in range(len(shape)))
            t = torch.empty(shape, dtype=spec.dtype)
            if t.numel():
                lib.read(t.data_ptr(), lib.tdm_session_output(self._session, m, i), t.numel() * t.element_size())
            results.append(t)
        # '<input>!': the new value of an input the method changes (x.add_(1)), written back as eager would
        written = {spec.name[:-1]: t for spec, t in zip(outs, results) if spec.name.endswith("!")}
        results = results[: len(results) - len(written)]
        for spec, x in zip(ins, inputs):
            if spec.name in written and isinstance(x, torch.Tensor):
                with torch.no_grad():
                    x.copy_(written[spec.name])
        if not results:
            return None
        return results[0] if len(results) == 1 else tuple(results)

    def reset_state(self) -> None:
        """Put every state tensor back to its initial value."""
        self._alive("reset_state")
        self._lib.tdm_session_reset_state(self._session)

    def _state_slot(self, name: str):
        """(index, shape, torch dtype) of the state tensor `name`."""
        lib, p = self._lib, self._program
        names = []
        for i in range(lib.tdm_program_state_count(p)):
            names.append(lib.tdm_state_name(p, i).decode())
            if names[-1] == name:
                return i, tuple(lib.tdm_state_dim(p, i, d) for d in range(lib.tdm_state_rank(p, i))), TORCH_DTYPE[lib.tdm_state_dtype(p, i)]
        raise TandemError("TDM_ERR_NOT_FOUND", f"no state tensor named '{name}'; the program has {', '.join(names) or 'none'}")

    def read_state(self, name: str) -> torch.Tensor:
        """A copy of one state tensor; a state that grows at its current length."""
        self._alive("read_state")
        lib, p = self._lib, self._program
        i, shape, dtype = self._state_slot(name)
        t = torch.empty(shape, dtype=dtype)
        lib.read(t.data_ptr(), lib.tdm_session_state(self._session) + lib.tdm_state_offset(p, i), lib.tdm_state_nbytes(p, i))
        if name in self._growing:
            length, dim = self._growing[name]
            return t.narrow(dim, 0, int(self.read_state(length))).clone()
        return t

    def write_state(self, name: str, value) -> None:
        """Overwrite one state tensor with `value` (its dtype and shape, as read_state gives)."""
        self._alive("write_state")
        lib, p = self._lib, self._program
        i, shape, dtype = self._state_slot(name)
        t = value if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=dtype)
        if t.dtype != dtype or tuple(t.shape) != shape:
            raise TandemError(
                "TDM_ERR_INVALID_ARGUMENT",
                f"write_state('{name}'): expected {DTYPE_NAME[DTYPE_CODE[dtype]]}{list(shape)}, given {t.dtype}{list(t.shape)}",
            )
        t = t.detach().contiguous().cpu()
        if t.numel():
            lib.write(lib.tdm_session_state(self._session) + lib.tdm_state_offset(p, i), t.data_ptr(), lib.tdm_state_nbytes(p, i))

    def seed(self, n: int) -> None:
        """Restart the program's random generator (its `__rng__` state: [seed, calls]) at seed n, as
        the JS model.seed(n) does: the same seed gives the same numbers natively and in wasm."""
        self._alive("seed")
        n = int(n)
        if not -(2**63) <= n < 2**64:
            raise TandemError("TDM_ERR_INVALID_ARGUMENT", f"seed({n}): a seed is a 64-bit integer")
        try:
            self._state_slot("__rng__")
        except TandemError:
            raise TandemError(
                "TDM_ERR_NOT_FOUND",
                "seed(): this program draws no random numbers (it has no '__rng__' "
                "state; tandem adds it when a method uses torch.randn, normal_, rand, ...)",
            ) from None
        self.write_state("__rng__", torch.tensor([n - 2**64 if n >= 2**63 else n, 0], dtype=torch.long))

    def save_state(self) -> bytes:
        """The whole state region as bytes, behind the header JS saveState writes (schema.SAVED_STATE:
        the program's layout fingerprint and byte count), so load_state here and loadState in JS
        take each other's bytes and refuse another program's."""
        self._alive("save_state")
        lib, p = self._lib, self._program
        n = lib.tdm_program_state_size(p)
        t = torch.empty(n, dtype=torch.uint8)
        if n:
            lib.read(t.data_ptr(), lib.tdm_session_state(self._session), n)
        head = schema.SAVED_STATE.pack(
            schema.SAVED_STATE_MAGIC, schema.SAVED_STATE_FORMAT, lib.tdm_program_fingerprint(p), lib.tdm_program_id(p), n
        )
        return head + bytes(t.numpy().tobytes())

    def load_state(self, data: bytes) -> None:
        """Put back state that save_state (or JS saveState) gave, of a program with this state layout;
        any other bytes are a TDM_ERR_STATE_MISMATCH and the state is left as it was."""
        self._alive("load_state")
        lib, p, rec = self._lib, self._program, schema.SAVED_STATE
        n = lib.tdm_program_state_size(p)
        data = bytes(data)
        if len(data) < rec.size or data[:4] != schema.SAVED_STATE_MAGIC:
            raise TandemError("TDM_ERR_STATE_MISMATCH", "load_state: these bytes are not saved tandem state")
        _, fmt, fingerprint, _, nbytes = struct.unpack_from(rec.fmt, data)
        if fmt != schema.SAVED_STATE_FORMAT:
            raise TandemError(
                "TDM_ERR_STATE_MISMATCH",
                f"load_state: saved-state format {fmt}; this tandem reads format {schema.SAVED_STATE_FORMAT}: save the state again",
            )
        if fingerprint != lib.tdm_program_fingerprint(p):
            raise TandemError("TDM_ERR_STATE_MISMATCH", "load_state: the state was saved from a program with another state layout")
        if nbytes != n or len(data) != rec.size + n:
            raise TandemError("TDM_ERR_STATE_MISMATCH", f"load_state: expected {n} bytes of state, given {len(data) - rec.size}")
        if n:
            t = torch.frombuffer(bytearray(data[rec.size :]), dtype=torch.uint8)
            lib.write(lib.tdm_session_state(self._session), t.data_ptr(), n)

    def __del__(self):
        if getattr(self, "_shared", None) is not None:
            self.close()


def load(source: Union[str, os.PathLike, bytes, bytearray]) -> Model:
    """Load a .tandem program (a path or the file's bytes) into the runtime (see BACKEND). The model
    is a context manager: `with tandem.load(path) as m:` closes it on leaving the block."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return Model(bytes(source))
    with open(source, "rb") as f:
        return Model(f.read())


def verify(data) -> None:
    """Load `data` (the file's bytes, or a format.FileLayout, which the native runtime takes without
    a copy of the file in Python) with the runtime's own verifier and free it; raises TandemError
    if it fails."""
    lib = _library()
    if not isinstance(data, (bytes, bytearray, memoryview)):
        if not hasattr(lib, "load_program_laid_out"):
            data = data.to_bytes()
        else:
            status, program = lib.load_program_laid_out(data)
            _check(status)
            lib.tdm_program_free(program)
            return
    lib.tdm_program_free(_load_program(lib, bytes(data)))
