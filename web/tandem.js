// tandem.js — the JS API: `const model = await load(source)`, then `await model.<method>(...inputs)`.
// One ESM code path for browsers and Node (node/index.js adds file paths and worker_threads).
// Calls on a model run in FIFO order; inputs are read when the call is made and written straight
// into their planned place in linear memory; outputs are copied out (views into the heap would go
// stale when memory grows). Every pointer and size from wasm is read as unsigned: linear memory
// may grow to 4 GiB, and wasm returns i32.
import { compileRuntime, instantiateRuntime, importsMemory, sharedMemory } from './loader.js';
import { startPool, threadsAvailable, defaultThreads, canBlock, MAX_THREADS } from './threads.js';

export { prefill, generate, sample, splitPrompt, position } from './lm.js';
export { streamAudio, Resampler } from './audio.js';

// The four builds beside this module: [one thread, threads] for each SIMD level (CMakeLists.txt).
const BUILDS = { simd128: ['tandem.wasm', 'tandem-mt.wasm'], relaxed: ['tandem-relaxed.wasm', 'tandem-mt-relaxed.wasm'] };
const besideThisModule = (name) => new URL(`./${name}`, import.meta.url);

// (func (param v128 v128 v128) (result v128) local.get 0 local.get 1 local.get 2 f32x4.relaxed_madd)
const RELAXED_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 8, 1, 96, 3, 123, 123, 123, 1, 123, 3, 2, 1, 0,
  10, 13, 1, 11, 0, 32, 0, 32, 1, 32, 2, 253, 133, 2, 11]);
let relaxed;
/** Whether this engine runs relaxed SIMD (Chrome 114+, Firefox 145+, Node 22+; Node 20 with
 * --experimental-wasm-relaxed-simd), which the relaxed builds need. */
function relaxedSimdAvailable() {
  relaxed ??= WebAssembly.validate(RELAXED_PROBE);
  return relaxed;
}

/** options.simd: undefined (relaxed SIMD where the engine has it), 'relaxed' or 'simd128'. */
function simdLevel(simd) {
  if (simd === undefined) return relaxedSimdAvailable() ? 'relaxed' : 'simd128';
  if (simd !== 'relaxed' && simd !== 'simd128') {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `simd must be 'relaxed' or 'simd128', given ${String(simd)}`);
  }
  if (simd === 'relaxed' && !relaxedSimdAvailable()) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', "simd: 'relaxed' asked, but this engine has no relaxed SIMD (Chrome 114+, Firefox 145+, Node 22+, or Node 20 with --experimental-wasm-relaxed-simd); leave simd unset to use it where available");
  }
  return simd;
}
const ARRAY_OF = { float32: Float32Array, int64: BigInt64Array, bool: Uint8Array, int32: Int32Array };
const STATE_MAGIC = 0x534d4454; // 'TDMS' little-endian: saved-state bytes
const STATE_VERSION = 2;
const STATE_HEADER = 32; // magic u32, version u32, layout fingerprint u64, writer's program id u64, byte count u64 (docs/format.md)

/** An error from tandem; `code` is stable (the runtime's status name, e.g. 'TDM_ERR_TRUNCATED',
 * or a JS-side one: 'TDM_ERR_DISPOSED', 'TDM_ERR_WORKER_DIED', 'TDM_ERR_ABORTED', 'TDM_ERR_DEVICE':
 * load(..., { device: 'webgpu' }) cannot run the program on WebGPU, web/webgpu/). A call cancelled
 * by its AbortSignal rejects with one whose `name` is 'AbortError' (as fetch's does). */
export class TandemError extends Error {
  constructor(code, message) {
    super(`${code}: ${message}`);
    this.name = code === 'TDM_ERR_ABORTED' ? 'AbortError' : 'TandemError';
    this.code = code;
  }
}

/** The rejection of a call whose signal aborted; `ran` says whether the call had started (its
 * state change, if any, is kept) or was removed before it ran. */
function abortError(what, signal, ran) {
  const e = new TandemError('TDM_ERR_ABORTED', ran
    ? `${what}(): aborted while it ran; it finished, its state change is kept, its result was discarded`
    : `${what}(): aborted before it ran; the state is as if it was never called`);
  if (signal.reason !== undefined) e.cause = signal.reason;
  return e;
}

// ---- call options ---------------------------------------------------------------------------------
// A method call's last argument is its options when it is a plain object ({...}, not a Tensor or any
// class instance) whose own keys are all option names; an input never is one (a Tensor-like plain
// object has dtype, data and shape). So model.forward(x, { signal }) and model.call(name, x, { signal }).
const CALL_OPTIONS = new Set(['signal']);

function isPlainObject(v) {
  if (v === null || typeof v !== 'object') return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** [inputs, options] of a call's arguments (see CALL_OPTIONS). */
function splitOptions(what, args) {
  const last = args[args.length - 1];
  if (!isPlainObject(last) || !Object.keys(last).every((k) => CALL_OPTIONS.has(k))) return [args, {}];
  const { signal } = last;
  if (signal !== undefined && signal !== null && !(typeof signal.aborted === 'boolean' && typeof signal.addEventListener === 'function')) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${what}(): options.signal must be an AbortSignal`);
  }
  return [args.slice(0, -1), { signal: signal ?? undefined }];
}

const FORK_STATES = ['initial', 'copy'];

/** fork(options)'s state: 'initial' (the default) or 'copy'. */
function forkState(options) {
  if (options === undefined) return 'initial';
  if (!isPlainObject(options)) throw new TandemError('TDM_ERR_INVALID_ARGUMENT', "fork(options): options must be an object such as { state: 'copy' }");
  const unknown = Object.keys(options).filter((k) => k !== 'state');
  if (unknown.length) throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `fork(options): unknown option '${unknown[0]}'; the options are: state`);
  const state = options.state ?? 'initial';
  if (!FORK_STATES.includes(state)) throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `fork(options): state must be 'initial' or 'copy', given ${JSON.stringify(state) ?? String(state)}`);
  return state;
}

/** A tensor: `dtype` ('float32' | 'int64' | 'bool' | 'int32'), `shape` (array of numbers), `data`
 * (an owned typed array: Float32Array, BigInt64Array, Uint8Array or Int32Array). */
export class Tensor {
  constructor(dtype, data, shape) {
    const Arr = ARRAY_OF[dtype];
    if (!Arr) throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `unknown dtype '${dtype}'; use float32, int64, bool or int32`);
    if (Array.isArray(data)) data = dtype === 'int64' ? Arr.from(data, BigInt) : Arr.from(data, (x) => Number(x));
    if (!(data instanceof Arr)) throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${dtype} data must be a ${Arr.name} or an array`);
    shape = shape === undefined ? [data.length] : Array.from(shape, Number);
    const numel = shape.reduce((a, b) => a * b, 1);
    if (numel !== data.length) {
      throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `shape [${shape}] holds ${numel} elements but data has ${data.length}`);
    }
    this.dtype = dtype;
    this.data = data;
    this.shape = shape;
  }
}

const RUN = Symbol('tandem.run'); // Model's entry for the worker side: no option parsing

const numelOf = (shape) => shape.reduce((a, b) => a * b, 1);

/** Bytes of a source: bytes as they are, a Response or URL read (with progress when asked). */
/** `source` as bytes (a Uint8Array over them) or, for a URL or Response, as a Response. */
async function sourceOf(source) {
  if (source instanceof Uint8Array) return source;
  if (source instanceof ArrayBuffer) return new Uint8Array(source);
  if (ArrayBuffer.isView(source)) return new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
  let res = source;
  if (typeof source === 'string' || source instanceof URL) {
    try {
      res = await fetch(source);
    } catch (e) {
      throw new TandemError('TDM_ERR_NOT_FOUND', `fetching ${source} failed: ${e.message}`);
    }
    if (!res.ok) throw new TandemError('TDM_ERR_NOT_FOUND', `fetching ${source} failed: HTTP ${res.status}`);
  }
  if (typeof Response === 'undefined' || !(res instanceof Response)) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', 'load(source): source must be a URL, a path (Node), bytes or a Response');
  }
  return res;
}

/** Calls fn(chunk) for each chunk of a Response's body, with progress; returns the byte count. */
async function eachChunk(res, onProgress, fn) {
  const total = Number(res.headers.get('content-length')) || undefined;
  let loaded = 0;
  onProgress?.({ loaded, total });
  if (!res.body) {
    const all = new Uint8Array(await res.arrayBuffer());
    fn(all);
    onProgress?.({ loaded: all.length, total });
    return all.length;
  }
  for (const reader = res.body.getReader(); ;) {
    let r;
    try {
      r = await reader.read();
    } catch (e) {
      throw new TandemError('TDM_ERR_NOT_FOUND', `reading the program failed after ${loaded} bytes: ${e.message}`);
    }
    if (r.done) return loaded;
    fn(r.value);
    loaded += r.value.length;
    onProgress?.({ loaded, total });
  }
}

let streamsMove;
/** Whether a ReadableStream can be transferred to a worker (Chrome 87+, Firefox 103+, Node 18+). */
function streamsTransferable() {
  if (streamsMove === undefined) {
    try {
      const s = new ReadableStream();
      structuredClone(s, { transfer: [s] });
      streamsMove = true;
    } catch {
      streamsMove = false;
    }
  }
  return streamsMove;
}

/** A Response's body as a stream to transfer to the model's worker, which streams it into its
 * memory as load() does inline; progress is reported here as the worker reads each chunk. null
 * where streams cannot be transferred (the caller then reads the body and transfers the bytes). */
function bodyForWorker(res, onProgress) {
  if (!res.body || !streamsTransferable()) return null;
  const total = Number(res.headers.get('content-length')) || undefined;
  let loaded = 0;
  onProgress?.({ loaded, total });
  const stream = res.body.pipeThrough(new TransformStream({
    transform(chunk, c) {
      c.enqueue(chunk);
      loaded += chunk.length;
      onProgress?.({ loaded, total });
    },
  }));
  return { stream, length: total };
}

export async function bytesOf(source, onProgress) {
  const res = await sourceOf(source);
  if (res instanceof Uint8Array) return res;
  if (!onProgress || !res.body) return new Uint8Array(await res.arrayBuffer());
  const parts = [];
  const n = await eachChunk(res, onProgress, (c) => parts.push(c));
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}

/** Streams a Response's body into the runtime's memory: [ptr (tdm_malloc'd), length]. With a
 * content-length the buffer is allocated once and JS holds one chunk at a time (a 1 GB program
 * never exists as a JS copy); without one (or a body longer than it, as a compressed one
 * decodes), the buffer doubles as it fills. */
async function streamInto(rt, res, onProgress) {
  let cap = Math.max(Number(res.headers.get('content-length')) || 0, 1 << 16);
  let ptr = rt.malloc(cap), at = 0;
  try {
    await eachChunk(res, onProgress, (c) => {
      if (at + c.length > cap) {
        cap = Math.max(at + c.length, 2 * cap);
        const bigger = rt.malloc(cap);
        rt.heap(Uint8Array).copyWithin(bigger, ptr, ptr + at);
        rt.x.tdm_free(ptr);
        ptr = bigger;
      }
      rt.heap(Uint8Array).set(c, ptr + at);
      at += c.length;
    });
  } catch (e) {
    rt.x.tdm_free(ptr);
    throw e;
  }
  return [ptr, at];
}

// Exports that return a pointer or a size_t: wasm gives them as i32, negative from 2 GiB up.
const UNSIGNED_RESULTS = [
  'tdm_status_string', 'tdm_last_error', 'tdm_dtype_size', 'tdm_dtype_name', 'tdm_malloc',
  'tdm_program_method_name', 'tdm_method_io_name', 'tdm_method_io_nbytes', 'tdm_state_name',
  'tdm_program_metadata_name', 'tdm_program_metadata_value',
  'tdm_state_offset', 'tdm_state_nbytes', 'tdm_program_state_size', 'tdm_program_scratch_size',
  'tdm_session_state', 'tdm_session_input', 'tdm_session_output', 'tdm_method_op_name',
  'tdm_method_op_bytes_written', 'tdm_method_op_state_bytes_written', 'tdm_session_io_nbytes', 'tdm_method_dim_name',
];

/** The runtime's exports with helpers for strings and memory. */
class Runtime {
  constructor(exports) {
    this.x = { ...exports };
    for (const name of UNSIGNED_RESULTS) {
      const f = exports[name];
      this.x[name] = (a, b, c, d) => f(a, b, c, d) >>> 0; // at most 4 parameters; extra ones are ignored
    }
    this.dtypeNames = {};
    // Dtype codes are append-only but not contiguous (4 and 5 are weight-only dtypes a build may
    // lack): every code below 64 that the runtime knows.
    for (let code = 1; code < 64; code++) {
      if (exports.tdm_dtype_size(code) > 0) this.dtypeNames[code] = this.str(exports.tdm_dtype_name(code));
    }
  }
  /** Threads the runtime's methods run on (the pool, web/threads.js, when more than one). */
  get threads() { return this.pool?.threads ?? 1; }
  /** 'relaxed' when the build's kernels use relaxed SIMD (fused multiply-add), else 'simd128'. */
  get simd() { return this.x.tdm_build_features() & 2 ? 'relaxed' : 'simd128'; }
  bytes(ptr, n) { return new Uint8Array(this.x.memory.buffer, ptr, n); }
  /** A view of all of linear memory as Arr (cached, renewed when memory grows): copies in and out
   * of the heap then need no new view per call. */
  heap(Arr) {
    const buf = this.x.memory.buffer;
    if (this.heapBuffer !== buf) {
      this.heapBuffer = buf;
      this.heaps = new Map();
    }
    let h = this.heaps.get(Arr);
    if (!h) this.heaps.set(Arr, (h = new Arr(buf)));
    return h;
  }
  /** Copies typed array `a` into linear memory at ptr. */
  write(ptr, a) {
    const size = a.BYTES_PER_ELEMENT;
    if (ptr % size === 0) this.heap(a.constructor).set(a, ptr / size);
    else this.bytes(ptr, a.byteLength).set(byteView(a));
  }
  /** A new Arr holding the n elements at ptr. */
  read(ptr, Arr, n) {
    const size = Arr.BYTES_PER_ELEMENT;
    if (ptr % size === 0) return this.heap(Arr).slice(ptr / size, ptr / size + n);
    const a = new Arr(n);
    byteView(a).set(this.bytes(ptr, n * size));
    return a;
  }
  str(ptr) {
    if (!ptr) return '';
    const mem = new Uint8Array(this.x.memory.buffer);
    let end = ptr;
    while (mem[end] !== 0) end++;
    return new TextDecoder().decode(mem.slice(ptr, end)); // a copy: TextDecoder refuses shared memory
  }
  error(status) { return new TandemError(this.str(this.x.tdm_status_string(status)), this.str(this.x.tdm_last_error())); }
  check(status) { if (status !== 0) throw this.error(status); }
  malloc(n) {
    // wasm32 addresses 4 GiB; a larger size would wrap in the i32 argument
    const p = n < 2 ** 32 ? this.x.tdm_malloc(n) : 0;
    if (!p) throw new TandemError('TDM_ERR_OUT_OF_MEMORY', `out of memory allocating ${n} bytes in the wasm heap`);
    return p;
  }
  /** Runs fn(ptr) with a temporary u32 out-parameter; returns [fn's result, the u32]. */
  withOut(fn) {
    const out = this.malloc(8);
    try {
      const r = fn(out);
      return [r, new Uint32Array(this.x.memory.buffer, out, 1)[0]];
    } finally {
      this.x.tdm_free(out);
    }
  }
}

/** A deep-frozen copy of plain data (specs handed to callers). */
const PREPARE = Symbol('prepare'), TOKENIZER_TEXT = Symbol('tokenizerText');
/** For web/webgpu/: the wasm model's program and session (the loader and verifier of a WebGPU
 * model), and why a model asked for 'auto' stayed on wasm. */
const INTERNALS = Symbol('internals'), DEVICE_REASON = Symbol('deviceReason');
const DEVICES = ['wasm', 'webgpu', 'auto'];

/** web/tokenizer.js, imported only for a file that carries a tokenizer. */
async function loadTokenizer(text) {
  const { createTokenizer } = await import('./tokenizer.js');
  return createTokenizer(text);
}

function frozenCopy(v) {
  if (Array.isArray(v)) return Object.freeze(v.map(frozenCopy));
  if (v && typeof v === 'object') return Object.freeze(Object.fromEntries(Object.entries(v).map(([k, e]) => [k, frozenCopy(e)])));
  return v;
}

/** A loaded program in one wasm instance, shared by the sessions (models) made from it. */
class Program {
  constructor(rt, handle) {
    this.rt = rt;
    this.handle = handle;
    this.refs = 0;
    const x = rt.x;
    // Private specs, which calls are validated against (with each input's and state tensor's byte
    // size as the C side reports it); callers get frozen copies without the sizes.
    this.methodSpecs = [];
    for (let m = 0; m < x.tdm_program_method_count(handle); m++) {
      const dims = {};
      for (let d = 0; d < x.tdm_method_dim_count(handle, m); d++) {
        dims[rt.str(x.tdm_method_dim_name(handle, m, d))] = { min: Number(x.tdm_method_dim_min(handle, m, d)), max: Number(x.tdm_method_dim_max(handle, m, d)) };
      }
      const dynamic = Object.keys(dims).length > 0;
      this.methodSpecs.push({ name: rt.str(x.tdm_program_method_name(handle, m)), inputs: this.#io(m, 0, dynamic), outputs: this.#io(m, 1, dynamic), dims });
    }
    this.stateLayout = [];
    for (let i = 0; i < x.tdm_program_state_count(handle); i++) {
      const shape = [];
      for (let d = 0; d < x.tdm_state_rank(handle, i); d++) shape.push(Number(x.tdm_state_dim(handle, i, d)));
      const spec = { name: rt.str(x.tdm_state_name(handle, i)), dtype: rt.dtypeNames[x.tdm_state_dtype(handle, i)], shape };
      this.stateLayout.push({ ...spec, offset: x.tdm_state_offset(handle, i), nbytes: x.tdm_state_nbytes(handle, i) });
    }
    const strip = ({ name, dtype, shape }) => ({ name, dtype, shape });
    // A dynamic dim appears in a spec's shape as its expression: the dim's name ('n') or 'n + 1'.
    const io = ({ name, dtype, shape, exprs }) => ({ name, dtype, shape: shape.map((d, k) => (exprs && exprs[k]) || d) });
    this.methods = frozenCopy(this.methodSpecs.map((m) => ({ name: m.name, inputs: m.inputs.map(io), outputs: m.outputs.map(io), dims: m.dims })));
    this.state = frozenCopy(this.stateLayout.map(strip));
    this.stateBytes = x.tdm_program_state_size(handle);
    this.scratchBytes = x.tdm_program_scratch_size(handle);
    this.fingerprint = BigInt.asUintN(64, BigInt(x.tdm_program_fingerprint(handle)));
    this.programId = BigInt.asUintN(64, BigInt(x.tdm_program_id(handle)));
    const metadata = {};
    this.tokenizerText = null; // the 'tokenizer' entry's JSON, parsed by web/tokenizer.js when loaded
    this.tokenizer = null;
    for (let i = 0; i < x.tdm_program_metadata_count(handle); i++) {
      const name = rt.str(x.tdm_program_metadata_name(handle, i)), text = rt.str(x.tdm_program_metadata_value(handle, i));
      if (name === 'tokenizer') {
        this.tokenizerText = text;
        continue;
      }
      try {
        metadata[name] = JSON.parse(text);
      } catch {
        throw new TandemError('TDM_ERR_MALFORMED', `metadata '${name}' is not JSON: the file is corrupt`);
      }
    }
    this.metadata = frozenCopy(metadata);
  }

  /** Inputs (io 0) or outputs (1): shape at the maximum of any dims; for a method with dims,
   * `exprs` gives each dim's expression ('' when static) and `dynamic` whether any is not static. */
  #io(m, io, hasDims) {
    const { rt, handle } = this, x = rt.x;
    const specs = [];
    const buf = hasDims ? rt.malloc(256) : 0;
    try {
      for (let i = 0; i < x.tdm_method_io_count(handle, m, io); i++) {
        const shape = [], exprs = [];
        for (let d = 0; d < x.tdm_method_io_rank(handle, m, io, i); d++) {
          shape.push(Number(x.tdm_method_io_dim(handle, m, io, i, d)));
          if (buf) exprs.push(x.tdm_method_io_dim_expr(handle, m, io, i, d, buf, 256) ? rt.str(buf) : '');
        }
        specs.push({ name: rt.str(x.tdm_method_io_name(handle, m, io, i)), dtype: rt.dtypeNames[x.tdm_method_io_dtype(handle, m, io, i)], shape,
          nbytes: x.tdm_method_io_nbytes(handle, m, io, i), exprs, dynamic: exprs.some((e) => e !== '') });
      }
    } finally {
      if (buf) x.tdm_free(buf);
    }
    return specs;
  }

  /** Builds the tokenizer the file carries (once per program: the models forked from it share it). */
  async loadTokenizer() {
    if (this.tokenizerText !== null && !this.tokenizer) this.tokenizer = await loadTokenizer(this.tokenizerText);
  }

  newSession() {
    const [st, session] = this.rt.withOut((out) => this.rt.x.tdm_session_create(this.handle, out));
    this.rt.check(st);
    this.refs++;
    return session;
  }

  release() {
    if (--this.refs > 0) return;
    this.rt.x.tdm_program_free(this.handle);
    this.rt.pool?.stop(); // the last model of this runtime: end its thread workers
  }
}

const ARRAY_TYPES = Object.entries(ARRAY_OF);

/** An input as { dtype, data, shape } (a Tensor, or a typed array / number taking spec's shape).
 * `where()` names the input in messages; it is only called on errors (calls stay cheap). */
function toTensor(value, spec, where) {
  const numel = numelOf(spec.shape);
  if (value instanceof Tensor) return value;
  if (value && typeof value === 'object' && 'dtype' in value && 'data' in value && 'shape' in value) {
    return new Tensor(value.dtype, value.data, value.shape); // a Tensor that crossed a worker boundary
  }
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') {
    if (numel !== 1) throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${where()}: a single number was given, expected ${spec.dtype}[${spec.shape}]`);
    const v = spec.dtype === 'int64' ? BigInt(value) : Number(value);
    return new Tensor(spec.dtype, ARRAY_OF[spec.dtype].of(v), spec.shape);
  }
  for (const [dtype, Arr] of ARRAY_TYPES) {
    if (value instanceof Arr && spec.dynamic && spec.exprs.filter((e) => e).length === 1) {
      // one dynamic dim: its size follows from the length (checked against its bounds by the runtime)
      const k = spec.exprs.findIndex((e) => e), rest = numelOf(spec.shape.filter((_, j) => j !== k));
      if (rest === 0 || value.length % rest !== 0) {
        throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${where()}: expected ${spec.dtype}[${spec.shape.map((d, j) => spec.exprs[j] || d)}], given a ${Arr.name} of ${value.length}, not a multiple of ${rest}`);
      }
      return { dtype, data: value, shape: spec.shape.map((d, j) => (j === k ? value.length / rest : d)) };
    }
    if (value instanceof Arr) {
      if (value.length !== numel) {
        throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${where()}: expected ${spec.dtype}[${spec.shape}] (${numel} elements), given a ${Arr.name} of ${value.length}`);
      }
      return { dtype, data: value, shape: spec.shape };
    }
  }
  const hint = isPlainObject(value) ? ` with keys ${Object.keys(value).join(', ') || 'none'} (call options are the last argument and take only: ${[...CALL_OPTIONS].join(', ')})` : '';
  throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${where()}: expected a Tensor, a typed array or a number, given ${value === null ? 'null' : typeof value}${hint}`);
}

function checkTensor(t, spec, where) {
  // a dynamic dim takes any size here: tdm_session_set_input_shape checks it (TDM_ERR_SHAPE)
  const fixed = (k) => !(spec.dynamic && spec.exprs[k]);
  if (t.dtype !== spec.dtype || t.shape.length !== spec.shape.length || t.shape.some((d, k) => fixed(k) && d !== spec.shape[k]) ||
      t.shape.some((d) => !Number.isSafeInteger(d) || d < 0)) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${where()}: expected ${spec.dtype}[${spec.shape.map((d, k) => (fixed(k) ? d : spec.exprs[k]))}], given ${t.dtype}[${t.shape}]`);
  }
  if (t.data.length !== numelOf(t.shape)) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${where()}: data has ${t.data.length} elements (a detached buffer?), shape needs ${numelOf(t.shape)}`);
  }
}

/** The byte length the C side reports for this input or state tensor (tdm_method_io_nbytes,
 * tdm_state_nbytes): what is written into linear memory. */
function checkBytes(t, nbytes, where) {
  if (t.data.byteLength !== nbytes) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${where()}: data has ${t.data.byteLength} bytes, the runtime expects ${nbytes}`);
  }
}

function byteView(a) { return new Uint8Array(a.buffer, a.byteOffset, a.byteLength); }

/** model.<name> for each method, except names the model already has (its own API, which
 * tandem.export rejects: python/tandem/names.py) and `then`, which would make the model a thenable
 * that `await load()` never settles. Every method stays reachable as model.call(name, ...). */
function defineMethods(model, methods) {
  for (const { name } of methods) {
    if (!(name in model) && name !== 'then') {
      Object.defineProperty(model, name, { value: (...inputs) => model.call(name, ...inputs), enumerable: true });
    }
  }
}

/** fn() run now, as a settled promise: a throw becomes a rejection. */
function settle(fn) {
  try {
    return Promise.resolve(fn());
  } catch (e) {
    return Promise.reject(e);
  }
}

/** A session on a loaded program, run on this thread: each program method is an async function.
 * A call runs when it is made (so its inputs are read then, and calls run in the order made) and
 * returns a settled promise. */
export class Model {
  #program; #session; #disposed = false; #index = new Map(); #flagFraction;

  constructor(program, flagFraction = DEFAULT_FLAG_FRACTION) {
    this.#program = program;
    this.#flagFraction = flagFraction;
    this.#session = program.newSession();
    program.methodSpecs.forEach((m, i) => this.#index.set(m.name, i));
    defineMethods(this, program.methods);
  }

  /** [{ name, inputs: [{ name, dtype, shape }], outputs: [...] }], deep-frozen */
  get methods() { return this.#program.methods; }
  /** [{ name, dtype, shape }], one per state tensor, deep-frozen */
  get state() { return this.#program.state; }
  /** Named values stored with the program ({ max_cache_len: 512, ... }), deep-frozen */
  get metadata() { return this.#program.metadata; }
  /** The tokenizer the file carries (web/tokenizer.js), or null when it has none (or it was loaded
   * with { tokenizer: false }). */
  get tokenizer() { return this.#program.tokenizer; }
  /** Internal: builds the tokenizer (load() awaits it). */
  [PREPARE]() { return this.#program.loadTokenizer(); }
  [TOKENIZER_TEXT]() { return this.#program.tokenizerText; }

  /** Where the methods run: 'wasm' here ('webgpu' for a model from web/webgpu/). */
  get device() { return 'wasm'; }
  /** With load(..., { device: 'auto' }): why the model runs on wasm (no adapter, the ops without a
   * WebGPU kernel); else null. */
  get deviceReason() { return this[DEVICE_REASON] ?? null; }
  [INTERNALS]() { return { program: this.#program, session: this.#session }; }

  /** Threads this model's methods run on (1 where shared memory is unavailable). */
  get threads() { return this.#program.rt.threads; }
  /** The SIMD level of the runtime build running it: 'relaxed' (fused multiply-add) or 'simd128'. */
  get simd() { return this.#program.rt.simd; }
  /** Bytes of the wasm instance's linear memory (shared by the models forked from this one). */
  get memoryBytes() { return this.#program.rt.x.memory.buffer.byteLength; }
  /** Bytes of one session's state region and scratch arena. */
  get stateBytes() { return this.#program.stateBytes; }
  get scratchBytes() { return this.#program.scratchBytes; }

  /** Call a method by name; the same as `model[name](...inputs)`. The last argument may be call
   * options, `{ signal }`: a call made with an already-aborted signal rejects with an AbortError
   * without running (inline, a call runs when it is made, so a later abort cannot stop it). */
  call(name, ...args) {
    return settle(() => {
      const [inputs, { signal }] = splitOptions(name, args);
      this.#alive(name);
      if (signal?.aborted) throw abortError(name, signal, false);
      return this.#run(name, inputs, null);
    });
  }

  /** Call a method and time each of its ops: resolves to `{ outputs, ops, totalMs, bytesWritten,
   * stateBytesWritten, stateBytes, flagged }`, where `outputs` is what the call would resolve to,
   * each op is `{ index, name, ms, bytesWritten, stateBytesWritten }` (bytes of its outputs; an
   * update in place counts only the rows it writes), and `flagged` lists the ops that write more
   * than `profileFlagFraction` (a load option, default 0.05) of the state's bytes. Takes call
   * options as call() does. */
  profile(name, ...args) {
    return settle(() => {
      const [inputs, { signal }] = splitOptions(name, args);
      this.#alive(name);
      if (signal?.aborted) throw abortError(name, signal, false);
      return this[RUN](name, inputs, true);
    });
  }

  /** For the worker side: a call whose arguments are all inputs (the caller's options were taken
   * off before the call was posted), run now. */
  [RUN](name, inputs, profile) {
    if (!profile) return this.#run(name, inputs, null);
    const ops = [];
    const outputs = this.#run(name, inputs, ops);
    return summarizeProfile(outputs, ops, this.#program.stateBytes, this.#flagFraction);
  }

  /** A copy of one state tensor. */
  readState(name) {
    return settle(() => {
      const s = this.#stateSpec(name);
      const data = this.#program.rt.read(this.#stateBase() + s.offset, ARRAY_OF[s.dtype], numelOf(s.shape));
      return new Tensor(s.dtype, data, s.shape);
    });
  }

  /** Overwrite one state tensor (dtype and shape as in `model.state`). */
  writeState(name, value) {
    return settle(() => {
      const s = this.#stateSpec(name);
      const where = () => `writeState('${name}')`;
      const t = toTensor(value, s, where);
      checkTensor(t, s, where);
      checkBytes(t, s.nbytes, where);
      this.#program.rt.write(this.#stateBase() + s.offset, t.data);
    });
  }

  /** The whole state region as bytes, to restore later with loadState (on this program only). */
  saveState() {
    return settle(() => {
      this.#alive('saveState');
      const p = this.#program, n = p.stateBytes;
      const out = new Uint8Array(STATE_HEADER + n);
      const dv = new DataView(out.buffer);
      dv.setUint32(0, STATE_MAGIC, true);
      dv.setUint32(4, STATE_VERSION, true);
      dv.setBigUint64(8, p.fingerprint, true);
      dv.setBigUint64(16, p.programId, true);
      dv.setBigUint64(24, BigInt(n), true);
      out.set(p.rt.bytes(this.#stateBase(), n), STATE_HEADER);
      return out;
    });
  }

  /** Restore bytes from saveState. Bytes of another program, or of the wrong size, are rejected
   * and the state is left as it was. */
  loadState(bytes) {
    return settle(() => {
      this.#alive('loadState');
      const p = this.#program;
      const b = bytes instanceof ArrayBuffer ? new Uint8Array(bytes) : ArrayBuffer.isView(bytes) ? byteView(bytes) : null;
      if (!b) throw new TandemError('TDM_ERR_INVALID_ARGUMENT', 'loadState(bytes): give the Uint8Array that saveState returned');
      const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
      if (b.length < 8 || dv.getUint32(0, true) !== STATE_MAGIC) {
        throw new TandemError('TDM_ERR_STATE_MISMATCH', 'loadState: these bytes are not saved tandem state');
      }
      if (dv.getUint32(4, true) !== STATE_VERSION || b.length < STATE_HEADER) {
        throw new TandemError('TDM_ERR_STATE_MISMATCH', `loadState: saved-state format ${dv.getUint32(4, true)}; this tandem reads format ${STATE_VERSION}: save the state again with this version`);
      }
      if (dv.getBigUint64(8, true) !== p.fingerprint) {
        throw new TandemError('TDM_ERR_STATE_MISMATCH', 'loadState: the state was saved from a program with another state layout');
      }
      if (dv.getBigUint64(24, true) !== BigInt(p.stateBytes) || b.length !== STATE_HEADER + p.stateBytes) {
        throw new TandemError('TDM_ERR_STATE_MISMATCH', `loadState: expected ${p.stateBytes} bytes of state, given ${b.length - STATE_HEADER}`);
      }
      p.rt.bytes(this.#stateBase(), p.stateBytes).set(b.subarray(STATE_HEADER));
    });
  }

  /** Put every state tensor back to its initial value. */
  resetState() {
    return settle(() => {
      this.#alive('resetState');
      this.#program.rt.x.tdm_session_reset_state(this.#session);
    });
  }

  /** A new model on the same program: its own state, the same weights. Its state starts at the
   * initial values, or with `{ state: 'copy' }` as a copy of this model's current state. */
  async fork(options) {
    const state = forkState(options);
    this.#alive('fork');
    const f = new Model(this.#program, this.#flagFraction);
    if (state === 'copy') {
      const rt = this.#program.rt, src = this.#stateBase();
      rt.heap(Uint8Array).copyWithin(f.#stateBase(), src, src + this.#program.stateBytes);
    }
    return f;
  }

  /** Free the session (and the program with its last session); later calls reject with
   * TDM_ERR_DISPOSED. */
  dispose() {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#program.rt.x.tdm_session_free(this.#session);
    this.#program.release();
  }

  [Symbol.dispose]() { this.dispose(); }

  #alive(what) {
    if (this.#disposed) throw new TandemError('TDM_ERR_DISPOSED', `${what}(): the model was disposed`);
  }

  #stateBase() { return this.#program.rt.x.tdm_session_state(this.#session); }

  #stateSpec(name) {
    this.#alive('state');
    const s = this.#program.stateLayout.find((t) => t.name === name);
    if (!s) throw new TandemError('TDM_ERR_NOT_FOUND', `no state tensor '${name}'; the program has ${this.#program.stateLayout.map((t) => t.name).join(', ') || 'none'}`);
    return s;
  }

  #run(name, inputs, profile) {
    this.#alive(name);
    const m = this.#index.get(name);
    if (m === undefined) throw new TandemError('TDM_ERR_NOT_FOUND', `no method '${name}'; the program has ${[...this.#index.keys()].join(', ')}`);
    const spec = this.#program.methodSpecs[m];
    if (inputs.length !== spec.inputs.length) {
      throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${name}() takes ${spec.inputs.length} input(s), ${inputs.length} given`);
    }
    // Validate every input before writing any of them.
    const tensors = inputs.map((v, i) => {
      const s = spec.inputs[i];
      const where = () => `${name}() input ${i} '${s.name}'`;
      const t = toTensor(v, s, where);
      checkTensor(t, s, where);
      checkBytes(t, s.dynamic ? numelOf(t.shape) * t.data.BYTES_PER_ELEMENT : s.nbytes, where);
      return t;
    });
    const rt = this.#program.rt, x = rt.x, program = this.#program.handle;
    if (spec.inputs.some((s) => s.dynamic)) { // each dynamic input's actual shape, before any byte is written
      const dims = rt.malloc(8 * 8);
      try {
        tensors.forEach((t, i) => {
          if (!spec.inputs[i].dynamic) return;
          new BigInt64Array(x.memory.buffer, dims, 8).set(t.shape.map((d) => BigInt(d)));
          rt.check(x.tdm_session_set_input_shape(this.#session, m, i, dims, t.shape.length));
        });
      } finally {
        x.tdm_free(dims);
      }
    }
    let buf = 0, n = 0;
    if (profile) {
      n = x.tdm_method_op_count(program, m);
      buf = rt.malloc(8 * n + 8);
    }
    try {
      tensors.forEach((t, i) => rt.write(x.tdm_session_input(this.#session, m, i), t.data));
      rt.check(profile ? x.tdm_session_run_profiled(this.#session, m, buf) : x.tdm_session_run(this.#session, m));
      if (profile) {
        const ms = new Float64Array(x.memory.buffer, buf, n);
        for (let k = 0; k < n; k++) {
          profile.push({
            index: k, name: rt.str(x.tdm_method_op_name(program, m, k)), ms: ms[k],
            bytesWritten: x.tdm_method_op_bytes_written(program, m, k),
            stateBytesWritten: x.tdm_method_op_state_bytes_written(program, m, k),
          });
        }
      }
    } finally {
      if (buf) x.tdm_free(buf);
    }
    const outs = spec.outputs.map((s, i) => {
      // a dynamic output has the call's actual shape
      const shape = s.dynamic ? s.shape.map((_, d) => Number(x.tdm_session_io_dim(this.#session, m, 1, i, d))) : s.shape;
      const data = rt.read(x.tdm_session_output(this.#session, m, i), ARRAY_OF[s.dtype], numelOf(shape));
      return new Tensor(s.dtype, data, shape);
    });
    return outs.length === 0 ? undefined : outs.length === 1 ? outs[0] : outs;
  }
}

const DEFAULT_FLAG_FRACTION = 0.05;

function checkFlagFraction(f) {
  if (f === undefined) return DEFAULT_FLAG_FRACTION;
  if (typeof f !== 'number' || !(f >= 0)) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `profileFlagFraction must be a number >= 0, given ${f}`);
  }
  return f;
}

/** A profile's totals and the ops writing more than `fraction` of the state's bytes. */
function summarizeProfile(outputs, ops, stateBytes, fraction) {
  const sum = (key) => ops.reduce((a, o) => a + o[key], 0);
  return {
    outputs, ops, totalMs: sum('ms'), bytesWritten: sum('bytesWritten'), stateBytesWritten: sum('stateBytesWritten'),
    stateBytes, flagged: ops.filter((o) => o.bytesWritten > fraction * stateBytes),
  };
}

/** Instantiate the runtime from a compiled module and load a program into it: `bytes` (a
 * Uint8Array) or a Response streamed into the runtime's memory. `threads` > 1
 * needs the threaded build (tandem-mt.wasm) and `spawnThread()`, a port to a new pool worker; when
 * `strict` is false, a pool that cannot start leaves the model on one thread. */
export async function createModel(module, bytes, flagFraction, { threads = 1, spawnThread, strict = true, onProgress } = {}) {
  const threaded = importsMemory(module);
  const rt = new Runtime(await instantiateRuntime(module, threaded ? { memory: sharedMemory(), canBlock: canBlock() } : {}));
  if (threaded && threads > 1) {
    try {
      rt.pool = await startPool(rt.x, module, threads, spawnThread, (st) => rt.check(st));
    } catch (e) {
      if (strict) throw e instanceof TandemError ? e : new TandemError(e.code ?? 'TDM_ERR_WORKER', `threads: ${threads} requested, the pool did not start: ${e.message}`);
    }
  }
  let ptr, length;
  try {
    if (bytes instanceof Uint8Array) {
      [ptr, length] = [rt.malloc(bytes.length || 1), bytes.length];
      rt.bytes(ptr, length).set(bytes);
    } else {
      [ptr, length] = await streamInto(rt, bytes, onProgress);
    }
  } catch (e) {
    rt.pool?.stop();
    throw e;
  }
  const [st, handle] = rt.withOut((out) => rt.x.tdm_program_load_owned(ptr, length, out)); // frees ptr on failure too
  let program;
  try {
    rt.check(st);
    program = new Program(rt, handle);
    return new Model(program, flagFraction);
  } catch (e) {
    if (st === 0 && (!program || program.refs === 0)) rt.x.tdm_program_free(handle);
    rt.pool?.stop();
    throw e;
  }
}

// ---- worker mode ------------------------------------------------------------------------------

const reviveError = (e) => new TandemError(e.code, e.message.replace(`${e.code}: `, ''));

function tensorOut(t) {
  return t instanceof Tensor ? { dtype: t.dtype, shape: t.shape, data: t.data } : t;
}

function transferables(value, list = []) {
  if (value instanceof Tensor || (value && value.data && ArrayBuffer.isView(value.data))) list.push(value.data.buffer);
  else if (Array.isArray(value)) value.forEach((v) => transferables(v, list));
  else if (value instanceof Uint8Array) list.push(value.buffer);
  else if (value && typeof value === 'object' && value.outputs !== undefined) transferables(value.outputs, list);
  return list;
}

const revive = (v) => (Array.isArray(v) ? v.map(revive) : v && v.dtype && v.data ? new Tensor(v.dtype, v.data, v.shape) : v);

/** A copy of a request's arguments, made when the request is made (so the caller may refill its
 * arrays at once), and the buffers the copy owns: they are transferred to the worker, not copied
 * again. Typed arrays over a SharedArrayBuffer are copied too. Throws on what cannot be sent (a
 * detached buffer, a function). */
function snapshot(args) {
  const transfer = [];
  const copy = (v) => {
    if (ArrayBuffer.isView(v)) {
      const c = v instanceof DataView ? new Uint8Array(v.buffer, v.byteOffset, v.byteLength).slice() : v.slice();
      transfer.push(c.buffer);
      return c;
    }
    if (v instanceof ArrayBuffer) { const c = v.slice(0); transfer.push(c); return c; }
    if (v instanceof Tensor || (v && typeof v === 'object' && 'dtype' in v && 'data' in v && 'shape' in v)) {
      return { dtype: v.dtype, shape: structuredClone(v.shape), data: copy(v.data) };
    }
    return structuredClone(v);
  };
  return { args: args.map(copy), transfer };
}

const sendError = (e) => (e instanceof TandemError ? e
  : new TandemError('TDM_ERR_INVALID_ARGUMENT', `cannot send this call's arguments to the worker: ${e.message}`));

/** The same API as Model, run by a worker (a Web Worker, or a worker_threads worker in Node).
 * Inputs are copied when the call is made; outputs are transferred back, not copied. Calls wait in
 * a FIFO queue on this side and go to the worker one at a time, so a call whose signal aborts while
 * it waits is removed from the queue without running. If the worker dies, pending and later calls
 * reject with TDM_ERR_WORKER_DIED. */
export class WorkerModel {
  #port; #id; #shared; #info; #disposed = false; #flagFraction;

  /** Always 'wasm' (WebGPU runs on the calling thread only); deviceReason as on Model. */
  get device() { return 'wasm'; }
  get deviceReason() { return this[DEVICE_REASON] ?? null; }

  constructor(port, id, info, shared, flagFraction = DEFAULT_FLAG_FRACTION) {
    this.#port = port;
    this.#flagFraction = flagFraction;
    this.#id = id;
    this.#shared = shared;
    this.#info = frozenCopy(info);
    shared.refs++;
    defineMethods(this, this.#info.methods);
  }

  /** [{ name, inputs: [{ name, dtype, shape }], outputs: [...] }], deep-frozen */
  get methods() { return this.#info.methods; }
  /** [{ name, dtype, shape }], one per state tensor, deep-frozen */
  get state() { return this.#info.state; }
  /** Named values stored with the program ({ max_cache_len: 512, ... }), deep-frozen */
  get metadata() { return this.#info.metadata; }
  /** The tokenizer the file carries, run on this thread (web/tokenizer.js), or null. */
  get tokenizer() { return this.#shared.tokenizer ?? null; }
  get stateBytes() { return this.#info.stateBytes; }
  get scratchBytes() { return this.#info.scratchBytes; }
  /** Threads the worker's runtime runs methods on. */
  get threads() { return this.#info.threads; }
  /** The SIMD level of the worker's runtime build: 'relaxed' or 'simd128'. */
  get simd() { return this.#info.simd; }

  /** A request to the worker; `args` are copied now. `what` names it in errors. */
  #request(type, args = [], { signal, what = type } = {}) {
    if (this.#disposed) return Promise.reject(new TandemError('TDM_ERR_DISPOSED', `${what}(): the model was disposed`));
    let copy;
    try {
      copy = snapshot(args);
    } catch (e) {
      return Promise.reject(sendError(e));
    }
    return this.#shared.request({ type, model: this.#id, args: copy.args }, { transfer: copy.transfer, signal, what });
  }

  /** A method call: the last argument may be call options ({ signal }, see Model.call). */
  #invoke(type, name, args) {
    let inputs, options;
    try {
      [inputs, options] = splitOptions(name, args);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#request(type, [name, ...inputs], { signal: options.signal, what: name });
  }

  call(name, ...args) { return this.#invoke('call', name, args).then(revive); }
  async profile(name, ...args) {
    const r = await this.#invoke('profile', name, args);
    return summarizeProfile(revive(r.outputs), r.ops, r.stateBytes, this.#flagFraction);
  }
  readState(name) { return this.#request('readState', [name]).then(revive); }
  writeState(name, value) { return this.#request('writeState', [name, tensorOut(value)]); }
  saveState() { return this.#request('saveState'); }
  loadState(bytes) { return this.#request('loadState', [bytes]); }
  resetState() { return this.#request('resetState'); }
  /** Bytes of the worker's wasm linear memory. */
  memoryBytes() { return this.#request('memoryBytes'); }

  /** A new model in the same worker, on the same program (see Model.fork). */
  async fork(options) {
    const state = forkState(options);
    const { id, info } = await this.#request('fork', [{ state }]);
    return new WorkerModel(this.#port, id, info, this.#shared, this.#flagFraction);
  }

  /** Frees the model in the worker; pending calls reject with TDM_ERR_DISPOSED. The worker ends
   * with its last model. */
  dispose() {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#shared.dispose(this.#id);
  }

  [Symbol.dispose]() { this.dispose(); }
}

/** Message plumbing for one worker: a FIFO queue of requests, of which one at a time is in the
 * worker (so a waiting one can still be removed), replies, termination. */
class WorkerLink {
  constructor(port) {
    this.port = port;
    this.next = 1;
    this.queue = [];      // requests not yet posted, in call order
    this.inflight = null; // the request the worker has, until its reply arrives
    this.refs = 0;
    this.died = null; // the TandemError every call gets once the worker is gone
    port.onMessage((msg) => {
      const r = this.inflight;
      if (!r || msg.id !== r.id) return;
      this.inflight = null;
      r.reply(msg); // dropped if the call was aborted or its model disposed meanwhile
      this.#pump();
    });
    port.onError((what) => this.#die(what));
  }

  /** The worker failed (an uncaught error, a message that cannot be read, or it exited): it is
   * ended, and every pending and later call rejects with TDM_ERR_WORKER_DIED. */
  #die(what) {
    if (this.died) return;
    this.died = new TandemError('TDM_ERR_WORKER_DIED', `the model's worker ${what}; this model cannot be used any more, load it again`);
    const all = this.inflight ? [this.inflight, ...this.queue] : this.queue;
    this.inflight = null;
    this.queue = [];
    for (const r of all) r.fail(this.died);
    this.port.busy?.(false);
    this.port.terminate();
  }

  /** Queue `msg`; resolves to the worker's result. `signal` aborts it: removed if still queued,
   * otherwise (in the worker) it finishes and its result is dropped. */
  request(msg, { transfer = [], signal, what = msg.type } = {}) {
    if (this.died) return Promise.reject(this.died);
    if (signal?.aborted) return Promise.reject(abortError(what, signal, false));
    return new Promise((resolve, reject) => {
      const id = this.next++;
      const r = { id, msg: { ...msg, id }, transfer, model: msg.model, done: false };
      const onAbort = () => {
        const i = this.queue.indexOf(r);
        if (i >= 0) {
          this.queue.splice(i, 1);
          this.#idle();
        }
        r.fail(abortError(what, signal, i < 0));
      };
      const finish = () => {
        r.done = true;
        signal?.removeEventListener('abort', onAbort);
      };
      r.fail = (e) => { if (!r.done) { finish(); reject(e); } };
      r.reply = (m) => {
        if (r.done) return;
        finish();
        if (m.error) reject(reviveError(m.error));
        else resolve(m.result);
      };
      signal?.addEventListener('abort', onAbort);
      this.queue.push(r);
      this.port.busy?.(true);
      this.#pump();
    });
  }

  /** Post the next request when the worker has none. */
  #pump() {
    while (!this.inflight && this.queue.length && !this.died) {
      const r = this.queue.shift();
      try {
        this.port.post(r.msg, r.transfer);
        this.inflight = r;
      } catch (e) {
        r.fail(sendError(e));
      }
    }
    this.#idle();
  }

  #idle() { if (!this.inflight && this.queue.length === 0) this.port.busy?.(false); }

  dispose(model) {
    // The worker frees the model when it reads this, after the request it has now.
    if (!this.died) this.port.post({ type: 'dispose', model, id: 0 });
    const err = () => new TandemError('TDM_ERR_DISPOSED', 'the model was disposed before this call ran');
    if (this.inflight?.model === model) this.inflight.fail(err());
    this.queue = this.queue.filter((r) => r.model !== model || (r.fail(err()), false));
    this.#idle();
    if (--this.refs === 0) this.port.terminate();
  }
}

function browserWorker() {
  const w = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
  return {
    post: (m, t) => w.postMessage(m, t),
    onMessage: (f) => w.addEventListener('message', (e) => f(e.data)),
    onError: (f) => {
      w.addEventListener('error', (e) => f(`failed: ${e.message ?? e}`));
      w.addEventListener('messageerror', () => f('sent a message that could not be read'));
    },
    terminate: () => w.terminate(),
  };
}

/** `program`: the bytes, or { stream, length } (bodyForWorker), transferred to the worker. */
async function loadInWorker(module, program, spawn, flagFraction, pool, withTokenizer) {
  const port = await spawn();
  const link = new WorkerLink(port);
  link.refs++; // held until the first model exists
  try {
    const transfer = [program instanceof Uint8Array ? program.buffer : program.stream];
    const { id, info: { tokenizerText, ...info } } = await link.request({ type: 'init', args: [module, program, pool] }, { transfer, what: 'load' });
    const model = new WorkerModel(port, id, info, link, flagFraction);
    try {
      // the tokenizer runs on this thread (its calls are synchronous), shared by the forks
      link.tokenizer = tokenizerText != null && withTokenizer ? await loadTokenizer(tokenizerText) : null;
    } catch (e) {
      model.dispose();
      throw e;
    }
    return model;
  } catch (e) {
    port.terminate();
    throw e;
  } finally {
    link.refs--;
  }
}

/** options.threads: undefined (the default, defaultThreads()) or an integer 1 to MAX_THREADS. */
function checkThreads(n) {
  if (n === undefined) return undefined;
  if (!Number.isInteger(n) || n < 1 || n > MAX_THREADS) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `threads must be an integer from 1 to ${MAX_THREADS}, given ${String(n)}`);
  }
  return n;
}

function browserThread() {
  const w = new Worker(new URL('./thread.js', import.meta.url), { type: 'module' });
  return {
    post: (m, t) => w.postMessage(m, t),
    onMessage: (f) => w.addEventListener('message', (e) => f(e.data)),
    onError: (f) => w.addEventListener('error', (e) => f(`failed: ${e.message ?? e}`)),
    terminate: () => w.terminate(),
  };
}

/**
 * Load a .tandem program. `source`: a URL, bytes (ArrayBuffer / typed array), or a Response (and a
 * file path in Node). Options:
 * - `threads`: how many threads a method's parallel parts run on (GEMM/GEMV panels, attention
 *   rows, convolution channels); outputs are bit-identical for every count. Default: the cores
 *   up to 4 (navigator.hardwareConcurrency). Needs shared memory: in a page that is not
 *   cross-origin isolated (COOP/COEP headers) the model runs on one thread, and `model.threads`
 *   says so. An explicit count whose workers cannot start rejects the load;
 * - `simd`: 'relaxed' or 'simd128', the build's SIMD level. Default: 'relaxed' where the engine
 *   has relaxed SIMD (its fused multiply-add: faster matrix products, results that may differ in
 *   the last bits between machines), else 'simd128'. `model.simd` says which runs;
 * - `wasm`: a runtime build to use instead of the files beside this module (URL or bytes:
 *   tandem.wasm or tandem-relaxed.wasm);
 * - `wasmThreads`: the same for the threaded build used when threads > 1 (tandem-mt.wasm or
 *   tandem-mt-relaxed.wasm);
 * - `worker: true`: run the runtime in a worker, behind the same API (its thread pool, if any, is
 *   started by that worker);
 * - `onProgress({ loaded, total })`: called while a URL source downloads;
 * - `profileFlagFraction`: `model.profile()` flags the ops writing more than this fraction of the
 *   state's bytes (default 0.05: in a decode step, a KV-cache update should write only new rows).
 */
export async function load(source, options = {}) {
  const device = options.device ?? 'wasm';
  if (!DEVICES.includes(device)) throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `device must be 'wasm', 'webgpu' or 'auto', given ${String(device)}`);
  if (device === 'webgpu' && options.worker) throw new TandemError('TDM_ERR_INVALID_ARGUMENT', "device: 'webgpu' runs on the calling thread; leave worker unset (or use device: 'auto', which runs a worker model on wasm)");
  const asked = checkThreads(options.threads);
  // A wasm given without wasmThreads: where the threaded build is, is unknown; one thread.
  const threadedBuild = options.wasm === undefined || options.wasmThreads !== undefined;
  if (asked > 1 && !threadedBuild) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `threads: ${asked} needs options.wasmThreads (where tandem-mt.wasm is) when options.wasm is given`);
  }
  const threads = threadsAvailable() && threadedBuild ? asked ?? defaultThreads(options._cores) : 1;
  const level = simdLevel(options.simd);
  const wasm = await ((threads > 1 ? options.wasmThreads : options.wasm) ?? (options._wasmFile ?? besideThisModule)(BUILDS[level][threads > 1 ? 1 : 0]));
  const key = wasm instanceof URL || typeof wasm === 'string' ? String(wasm) : wasm;
  const module = await compileRuntime(key, () => bytesOf(wasm));
  const flagFraction = checkFlagFraction(options.profileFlagFraction);
  const src = await sourceOf(source);
  const pool = { threads, strict: asked !== undefined };
  if (options.worker) {
    // The caller keeps its bytes: a copy is transferred to the worker. A Response's body is
    // transferred as a stream, and the worker streams it into its memory.
    const program = src instanceof Uint8Array ? src.slice() : bodyForWorker(src, options.onProgress) ?? await bytesOf(src, options.onProgress);
    const wm = await loadInWorker(module, program, options._spawnWorker ?? browserWorker, flagFraction, pool, options.tokenizer !== false);
    if (device === 'auto') wm[DEVICE_REASON] = 'worker: true runs on wasm (the WebGPU backend runs on the calling thread only)';
    return wm;
  }
  // A Response streams into the runtime's memory (no full copy in JS); bytes are copied there.
  let model = await createModel(module, src, flagFraction, { ...pool, spawnThread: options._spawnThread ?? browserThread, onProgress: options.onProgress });
  if (device !== 'wasm') {
    const { onDevice } = await import('./webgpu/model.js');
    model = await onDevice(model, device, { Tensor, TandemError, INTERNALS, DEVICE_REASON, toTensor, checkTensor, checkBytes, numelOf, ARRAY_OF, PREPARE, TOKENIZER_TEXT });
  }
  if (options.tokenizer !== false) {
    try {
      await model[PREPARE]();
    } catch (e) {
      model.dispose();
      throw e;
    }
  }
  return model;
}

/** The worker side: serves one port (see web/worker.js and node/worker.js). */
export function serveWorker(port, { spawnThread = browserThread } = {}) {
  const models = new Map();
  let nextId = 1;
  const infoOf = (m) => ({ methods: m.methods, state: m.state, metadata: m.metadata, stateBytes: m.stateBytes, scratchBytes: m.scratchBytes, threads: m.threads, simd: m.simd });
  const add = (m) => { const id = nextId++; models.set(id, m); return { id, info: infoOf(m) }; };
  // the first model of the worker: its tokenizer's JSON goes to the caller's thread, which builds it
  const first = (m) => { const r = add(m); r.info.tokenizerText = m[TOKENIZER_TEXT](); return r; };
  port.onMessage(async (msg) => {
    if (msg.type === 'dispose') {
      models.get(msg.model)?.dispose();
      models.delete(msg.model);
      return;
    }
    try {
      let result;
      if (msg.type === 'init') {
        const [module, program, pool] = msg.args;
        const src = program instanceof Uint8Array ? program
          : new Response(program.stream, { headers: program.length ? { 'content-length': String(program.length) } : {} });
        result = first(await createModel(module, src, undefined, { ...pool, spawnThread }));
      } else {
        const m = models.get(msg.model);
        if (!m) throw new TandemError('TDM_ERR_DISPOSED', `${msg.type}(): the model was disposed`);
        const a = msg.args;
        switch (msg.type) {
          case 'call': result = tensorOutAll(m[RUN](a[0], a.slice(1), false)); break;
          case 'profile': { const r = m[RUN](a[0], a.slice(1), true); result = { ...r, outputs: tensorOutAll(r.outputs) }; break; }
          case 'readState': result = tensorOut(await m.readState(a[0])); break;
          case 'writeState': result = await m.writeState(a[0], revive(a[1])); break;
          case 'saveState': result = await m.saveState(); break;
          case 'loadState': result = await m.loadState(a[0]); break;
          case 'resetState': result = await m.resetState(); break;
          case 'memoryBytes': result = m.memoryBytes; break;
          case 'fork': result = add(await m.fork(a[0])); break;
          default: throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `unknown request ${msg.type}`);
        }
      }
      port.post({ id: msg.id, result }, transferables(result));
    } catch (e) {
      port.post({ id: msg.id, error: { code: e.code ?? 'TDM_ERR_WORKER', message: e.message } });
    }
  });
}

function tensorOutAll(v) { return Array.isArray(v) ? v.map(tensorOut) : tensorOut(v); }
