// tandem.js — the JS API: `const model = await load(source)`, then `await model.<method>(...inputs)`.
// One ESM code path for browsers and Node (node/index.js adds file paths). Every method call runs
// in FIFO order on the model; inputs are written straight into their planned place in linear
// memory; outputs are copied out (views into the heap would go stale when memory grows).
import { instantiateRuntime } from './loader.js';

const DEFAULT_WASM = new URL('./tandem.wasm', import.meta.url);

const ARRAY_OF = { float32: Float32Array, int64: BigInt64Array, bool: Uint8Array };

/** An error from tandem; `code` is stable (the runtime's status name, e.g. 'TDM_ERR_TRUNCATED'). */
export class TandemError extends Error {
  constructor(code, message) {
    super(`${code}: ${message}`);
    this.name = 'TandemError';
    this.code = code;
  }
}

/** A tensor: `dtype` ('float32' | 'int64' | 'bool'), `shape` (array of numbers), `data` (an owned
 * typed array: Float32Array, BigInt64Array or Uint8Array). */
export class Tensor {
  constructor(dtype, data, shape) {
    const Arr = ARRAY_OF[dtype];
    if (!Arr) throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `unknown dtype '${dtype}'; use float32, int64 or bool`);
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

async function bytesOf(source) {
  if (source instanceof Uint8Array) return source;
  if (source instanceof ArrayBuffer) return new Uint8Array(source);
  if (ArrayBuffer.isView(source)) return new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
  if (typeof Response !== 'undefined' && source instanceof Response) return new Uint8Array(await source.arrayBuffer());
  if (typeof source === 'string' || source instanceof URL) {
    const res = await fetch(source);
    if (!res.ok) throw new TandemError('TDM_ERR_NOT_FOUND', `fetching ${source} failed: HTTP ${res.status}`);
    return new Uint8Array(await res.arrayBuffer());
  }
  throw new TandemError('TDM_ERR_INVALID_ARGUMENT', 'load(source): source must be a URL, a path (Node), bytes or a Response');
}

/** The runtime's exports with helpers for strings and memory. */
class Runtime {
  constructor(exports) {
    this.x = exports;
    this.dtypeNames = {};
    for (let code = 1; exports.tdm_dtype_size(code) > 0; code++) this.dtypeNames[code] = this.str(exports.tdm_dtype_name(code));
  }
  bytes(ptr, n) { return new Uint8Array(this.x.memory.buffer, ptr, n); }
  str(ptr) {
    if (!ptr) return '';
    const mem = new Uint8Array(this.x.memory.buffer);
    let end = ptr;
    while (mem[end] !== 0) end++;
    return new TextDecoder().decode(mem.subarray(ptr, end));
  }
  error(status) {
    return new TandemError(this.str(this.x.tdm_status_string(status)), this.str(this.x.tdm_last_error()));
  }
  check(status) { if (status !== 0) throw this.error(status); }
}

function ioSpecs(rt, program, m, io) {
  const x = rt.x;
  const specs = [];
  for (let i = 0; i < x.tdm_method_io_count(program, m, io); i++) {
    const shape = [];
    for (let d = 0; d < x.tdm_method_io_rank(program, m, io, i); d++) shape.push(Number(x.tdm_method_io_dim(program, m, io, i, d)));
    specs.push({ name: rt.str(x.tdm_method_io_name(program, m, io, i)), dtype: rt.dtypeNames[x.tdm_method_io_dtype(program, m, io, i)], shape });
  }
  return specs;
}

function toTensor(value, spec, where) {
  const numel = spec.shape.reduce((a, b) => a * b, 1);
  if (value instanceof Tensor) return value;
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') {
    if (numel !== 1) throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${where}: a single number was given, expected ${spec.dtype}[${spec.shape}]`);
    const Arr = ARRAY_OF[spec.dtype];
    const v = spec.dtype === 'int64' ? BigInt(value) : Number(value);
    return new Tensor(spec.dtype, Arr.of(v), spec.shape);
  }
  for (const [dtype, Arr] of Object.entries(ARRAY_OF)) {
    if (value instanceof Arr) {
      if (value.length !== numel) {
        throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${where}: expected ${spec.dtype}[${spec.shape}] (${numel} elements), given a ${Arr.name} of ${value.length}`);
      }
      return new Tensor(dtype, value, spec.shape);
    }
  }
  throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${where}: expected a Tensor, a typed array or a number, given ${value === null ? 'null' : typeof value}`);
}

/** A loaded program with one session: each method is an async function on the model. */
export class Model {
  #rt; #program; #session; #queue = Promise.resolve(); #disposed = false; #index = new Map();

  constructor(rt, program, session) {
    this.#rt = rt;
    this.#program = program;
    this.#session = session;
    const x = rt.x;
    this.methods = [];
    for (let m = 0; m < x.tdm_program_method_count(program); m++) {
      const name = rt.str(x.tdm_program_method_name(program, m));
      const spec = { name, inputs: ioSpecs(rt, program, m, 0), outputs: ioSpecs(rt, program, m, 1) };
      this.methods.push(spec);
      this.#index.set(name, m);
      if (!(name in this)) Object.defineProperty(this, name, { value: (...inputs) => this.call(name, ...inputs), enumerable: true });
    }
  }

  /** Call a method by name; the same as `model[name](...inputs)`. */
  call(name, ...inputs) {
    return this.#enqueue(() => this.#run(name, inputs, null));
  }

  /** Call a method and time each of its ops: resolves to `{ outputs, ops: [{ index, name, ms }],
   * totalMs }`, where `outputs` is what the call would resolve to. */
  profile(name, ...inputs) {
    return this.#enqueue(() => {
      const ops = [];
      const outputs = this.#run(name, inputs, ops);
      return { outputs, ops, totalMs: ops.reduce((a, o) => a + o.ms, 0) };
    });
  }

  #enqueue(fn) {
    const result = this.#queue.then(fn, fn);
    this.#queue = result.catch(() => {});
    return result;
  }

  #run(name, inputs, profile) {
    if (this.#disposed) throw new TandemError('TDM_ERR_DISPOSED', `${name}(): the model was disposed`);
    const m = this.#index.get(name);
    if (m === undefined) throw new TandemError('TDM_ERR_NOT_FOUND', `no method '${name}'; the program has ${[...this.#index.keys()].join(', ')}`);
    const spec = this.methods[m];
    if (inputs.length !== spec.inputs.length) {
      throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${name}() takes ${spec.inputs.length} input(s), ${inputs.length} given`);
    }
    // Validate every input before writing any of them.
    const tensors = inputs.map((v, i) => {
      const s = spec.inputs[i];
      const where = `${name}() input ${i} '${s.name}'`;
      const t = toTensor(v, s, where);
      if (t.dtype !== s.dtype || t.shape.length !== s.shape.length || t.shape.some((d, k) => d !== s.shape[k])) {
        throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${where}: expected ${s.dtype}[${s.shape}], given ${t.dtype}[${t.shape}]`);
      }
      return t;
    });
    const rt = this.#rt, x = rt.x;
    tensors.forEach((t, i) => {
      const src = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
      rt.bytes(x.tdm_session_input(this.#session, m, i), src.length).set(src);
    });
    if (profile) {
      const n = x.tdm_method_op_count(this.#program, m);
      const buf = x.tdm_malloc(8 * n + 8);
      if (!buf) throw new TandemError('TDM_ERR_OUT_OF_MEMORY', 'cannot allocate the profile buffer');
      try {
        rt.check(x.tdm_session_run_profiled(this.#session, m, buf));
        const ms = new Float64Array(x.memory.buffer, buf, n);
        for (let k = 0; k < n; k++) profile.push({ index: k, name: rt.str(x.tdm_method_op_name(this.#program, m, k)), ms: ms[k] });
      } finally {
        x.tdm_free(buf);
      }
    } else {
      rt.check(x.tdm_session_run(this.#session, m));
    }
    const outs = spec.outputs.map((s, i) => {
      const Arr = ARRAY_OF[s.dtype];
      const n = s.shape.reduce((a, b) => a * b, 1);
      const data = new Arr(n);
      new Uint8Array(data.buffer).set(rt.bytes(x.tdm_session_output(this.#session, m, i), data.byteLength));
      return new Tensor(s.dtype, data, s.shape);
    });
    return outs.length === 0 ? undefined : outs.length === 1 ? outs[0] : outs;
  }

  /** Free the model's wasm memory; pending and later calls reject with TDM_ERR_DISPOSED. */
  dispose() {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#rt.x.tdm_session_free(this.#session);
    this.#rt.x.tdm_program_free(this.#program);
  }

  [Symbol.dispose]() { this.dispose(); }
}

/**
 * Load a .tandem program. `source`: a URL, bytes (ArrayBuffer / typed array), or a Response (and a
 * file path in Node). `options.wasm`: where tandem.wasm is (URL or bytes); defaults to the file
 * beside this module.
 */
export async function load(source, options = {}) {
  const wasm = options.wasm ?? DEFAULT_WASM;
  const key = wasm instanceof URL || typeof wasm === 'string' ? String(wasm) : wasm;
  const exports = await instantiateRuntime(key, async () => bytesOf(wasm));
  const rt = new Runtime(exports);
  const bytes = await bytesOf(source);
  const x = rt.x;
  const ptr = x.tdm_malloc(bytes.length);
  if (!ptr && bytes.length) throw new TandemError('TDM_ERR_OUT_OF_MEMORY', `cannot allocate ${bytes.length} bytes for the program`);
  rt.bytes(ptr, bytes.length).set(bytes);
  const out = x.tdm_malloc(8);
  try {
    rt.check(x.tdm_program_load_owned(ptr, bytes.length, out)); // frees ptr on failure too
    const program = new Uint32Array(x.memory.buffer, out, 1)[0];
    const st = x.tdm_session_create(program, out);
    if (st !== 0) {
      const err = rt.error(st);
      x.tdm_program_free(program);
      throw err;
    }
    return new Model(rt, program, new Uint32Array(x.memory.buffer, out, 1)[0]);
  } finally {
    x.tdm_free(out);
  }
}
