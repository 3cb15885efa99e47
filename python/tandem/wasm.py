"""The runtime as WebAssembly: the same tandem.wasm the browser runs, instantiated with the
`wasmtime` package, behind the interface of the native library (python/tandem/runtime.py).

Pointers and size_t are wasm i32 values, read back as unsigned 32-bit offsets into the module's
linear memory; strings come back as bytes (as ctypes' c_char_p gives them); tensors are copied
between torch and linear memory with memmove at the memory's current base address (read anew on
every copy: the memory may grow, and move, during any call).
"""

from __future__ import annotations

import atexit
import ctypes
import threading
import time
from pathlib import Path

import wasmtime

from .schema import API, result_kind

# How each export's result is read, from the C types python/tandem/schema.py declares (web/runtime.js
# reads the same through web/schema.js): a pointer or size_t is unsigned in C and an i32 in wasm; a
# C string is read out of linear memory into bytes (None for NULL); a uint64_t is an i64 in wasm,
# signed on the way out.
_UNSIGNED = {f.name for f in API if result_kind(f.ret) in ("ptr", "size")}
_STRINGS = {f.name for f in API if result_kind(f.ret) == "str"}
_U64 = {f.name for f in API if result_kind(f.ret) == "u64"}

_MASK32 = 0xFFFFFFFF
_MASK64 = (1 << 64) - 1


def _host_functions() -> dict:
    """What tandem.wasm may import (web/loader.js gives the browser the same two)."""
    return {
        "tdm_now_ms": lambda: time.perf_counter() * 1e3,
        "emscripten_notify_memory_growth": lambda index: None,  # bases are read anew on every copy
    }


class WasmLibrary:
    """One instance of tandem.wasm: tdm_* functions with the native library's calling conventions
    (see runtime.NativeLibrary), and copies between torch tensors and linear memory."""

    def __init__(self, path: Path):
        engine = wasmtime.Engine()
        self._store = store = wasmtime.Store(engine)
        self._lock = threading.Lock()
        # At exit the store may be torn down before the Models whose __del__ frees their session:
        # from then on frees are skipped (the process is ending; calling in would crash wasmtime).
        self.closed = False
        atexit.register(setattr, self, "closed", True)
        module = wasmtime.Module.from_file(engine, str(path))
        host = _host_functions()
        imports = []
        for imp in module.imports:
            fn = host.get(imp.name)
            if fn is None:  # the runtime does no I/O: anything else is a build mistake

                def fn(*args, _name=f"{imp.module}.{imp.name}"):
                    raise RuntimeError(f"tandem.wasm called the unexpected import {_name}")

            imports.append(wasmtime.Func(store, imp.type, fn))
        exports = wasmtime.Instance(store, module, imports).exports(store)
        self._memory = exports["memory"]
        if "_initialize" in exports:
            exports["_initialize"](store)
        for name in exports:
            if name.startswith("tdm_"):
                setattr(self, name, self._wrap(name, exports[name]))

    def _wrap(self, name: str, func: "wasmtime.Func"):
        store, string_at, lock = self._store, self._string, self._lock
        func = _fast_caller(store, func) or func
        # One thread at a time in the instance: a wasmtime Store is not thread-safe, and ctypes
        # releases the GIL during the call.

        if name in _STRINGS:

            def call(*args):
                with lock:
                    return string_at(func(store, *args) & _MASK32)
        elif name in _UNSIGNED:

            def call(*args):
                with lock:
                    return func(store, *args) & _MASK32
        elif name in _U64:

            def call(*args):
                with lock:
                    return func(store, *args) & _MASK64
        else:

            def call(*args):
                with lock:
                    return func(store, *args)

        call.__name__ = name
        return call

    # Memory

    def _base(self, ptr: int, n: int) -> int:
        """The host address of linear memory at `ptr`, after checking that n bytes fit."""
        if ptr + n > self._memory.data_len(self._store):
            raise RuntimeError(f"tandem.wasm: {n} bytes at {ptr} lie outside linear memory")
        return ctypes.addressof(self._memory.data_ptr(self._store).contents) + ptr

    def _string(self, ptr: int):
        return None if ptr == 0 else ctypes.string_at(self._base(ptr, 0))

    def write(self, ptr: int, src_address: int, n: int) -> None:
        """Copy n bytes from host address src_address to linear memory at ptr."""
        ctypes.memmove(self._base(ptr, n), src_address, n)

    def read(self, dst_address: int, ptr: int, n: int) -> None:
        """Copy n bytes from linear memory at ptr to host address dst_address."""
        ctypes.memmove(dst_address, self._base(ptr, n), n)

    def malloc(self, n: int) -> int:
        p = self.tdm_malloc(n)
        if not p:
            raise MemoryError(f"out of memory allocating {n} bytes in the wasm heap")
        return p

    def load_program(self, data: bytes):
        """(status, program): tdm_program_load on a copy of `data` in linear memory."""
        buf = self.malloc(len(data) or 1)
        out = self.malloc(8)
        try:
            self._base(buf, len(data))
            self._memory.write(self._store, data, buf)
            status = self.tdm_program_load(buf, len(data), out)
            return status, self._u32(out)
        finally:
            self.tdm_free(out)
            self.tdm_free(buf)

    def set_input_shape(self, session: int, method: int, i: int, dims) -> int:
        """tdm_session_set_input_shape with the dims copied into linear memory."""
        buf = self.malloc(8 * max(len(dims), 1))
        try:
            self._memory.write(self._store, b"".join(int(d).to_bytes(8, "little", signed=True) for d in dims), buf)
            return self.tdm_session_set_input_shape(session, method, i, buf, len(dims))
        finally:
            self.tdm_free(buf)

    def dim_expr(self, program: int, method: int, io: int, i: int, d: int) -> str:
        """tdm_method_io_dim_expr as a str ('' for a static dim)."""
        buf = self.malloc(256)
        try:
            self.tdm_method_io_dim_expr(program, method, io, i, d, buf, 256)
            return self._string(buf).decode()
        finally:
            self.tdm_free(buf)

    def session_create(self, program: int):
        out = self.malloc(8)
        try:
            return self.tdm_session_create(program, out), self._u32(out)
        finally:
            self.tdm_free(out)

    def run_profiled(self, session: int, method: int, n: int):
        """(status, [milliseconds of each of the method's n ops])."""
        ms = self.malloc(8 * max(n, 1))
        try:
            status = self.tdm_session_run_profiled(session, method, ms)
            times = (ctypes.c_double * max(n, 1))()
            self.read(ctypes.addressof(times), ms, 8 * n)
            return status, list(times[:n])
        finally:
            self.tdm_free(ms)

    def _u32(self, ptr: int) -> int:
        v = ctypes.c_uint32()
        self.read(ctypes.addressof(v), ptr, 4)
        return v.value


def _fast_caller(store: "wasmtime.Store", func: "wasmtime.Func"):
    """func(store, *args) without Func.__call__'s per-call type lookups and conversions (which cost
    more than the call itself on a small method): argument and result cells are made once and wasmtime's C API is called on them
    directly. Built on wasmtime's ctypes bindings, which are not its public API: None when they
    differ from what this expects (then Func.__call__ is used). Not reentrant per function, which
    is enough: the runtime's imports never call back into it."""
    try:
        from wasmtime import Trap, WasmtimeError, _bindings
        from wasmtime import _ffi as ffi

        raw_call = _bindings._wasmtime_func_call

        def value(c):
            return int(getattr(c, "value", c))

        # valtype kind -> (wasmtime_val_t kind, union field)
        fields = {
            value(ffi.WASM_I32): (value(ffi.WASMTIME_I32), "i32"),
            value(ffi.WASM_I64): (value(ffi.WASMTIME_I64), "i64"),
            value(ffi.WASM_F32): (value(ffi.WASMTIME_F32), "f32"),
            value(ffi.WASM_F64): (value(ffi.WASMTIME_F64), "f64"),
        }
        ty = func.type(store)
        kinds = [value(ffi.wasm_valtype_kind(t.ptr())) for t in ty.params]
        result_kinds = [value(ffi.wasm_valtype_kind(t.ptr())) for t in ty.results]
        context, fptr = store._context(), ctypes.byref(func._func)
    except (ImportError, AttributeError, TypeError):  # another version of wasmtime
        return None
    if any(k not in fields for k in kinds + result_kinds) or len(result_kinds) > 1:
        return None
    args = (ffi.wasmtime_val_t * max(len(kinds), 1))()
    results = (ffi.wasmtime_val_t * 1)()
    for cell, k in zip(args, kinds):
        cell.kind = fields[k][0]
    setters = [(cell.of, fields[k][1]) for cell, k in zip(args, kinds)]
    nargs, nresults = len(kinds), len(result_kinds)
    result_field = fields[result_kinds[0]][1] if result_kinds else None
    trap_type = ctypes.POINTER(ffi.wasm_trap_t)

    def call(_store, *values):
        if len(values) != nargs:
            raise TypeError(f"expected {nargs} arguments, given {len(values)}")
        for (cell, field), v in zip(setters, values):
            setattr(cell, field, v)
        trap = trap_type()
        error = raw_call(context, fptr, args, nargs, results, nresults, ctypes.byref(trap))
        if error:
            raise WasmtimeError._from_ptr(error)
        if trap:
            raise Trap._from_ptr(trap)
        return getattr(results[0].of, result_field) if result_field else None

    return call
