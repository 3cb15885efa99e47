// model.js — Program (a loaded program, shared by the sessions made from it), Model (a session
// run on this thread) and createModel (a runtime instance with one program in it).
import { instantiateRuntime, importsMemory, sharedMemory } from './loader.js';
import { startPool, canBlock } from './threads.js';
import { TandemError, abortError } from './errors.js';
import { ARRAY_OF, Tensor, numelOf, toTensor, checkTensor, checkBytes, byteView } from './tensor.js';
import { DEFAULT_FLAG_FRACTION, splitOptions, forkState } from './options.js';
import { Runtime } from './runtime.js';
import { streamInto } from './source.js';
import { SAVED_STATE } from './schema.js';

// The saved-state header (docs/format.md; python/tandem/schema.py declares it): magic u32, format u32,
// layout fingerprint u64, the writer's program id u64, byte count u64.
const { magic: STATE_MAGIC, format: STATE_VERSION, bytes: STATE_HEADER, offset: AT } = SAVED_STATE;

export const RUN = Symbol('tandem.run'); // Model's entry for the worker side: no option parsing
export const WRITTEN = Symbol('tandem.written'); // the inputs a method changes, for the worker side

export const PREPARE = Symbol('prepare'), TOKENIZER_TEXT = Symbol('tokenizerText');
/** For web/webgpu/: the wasm model's program and session (the loader and verifier of a WebGPU
 * model), and why a model asked for 'auto' stayed on wasm. */
export const INTERNALS = Symbol('internals'), DEVICE_REASON = Symbol('deviceReason');

/** web/tokenizer.js, imported only for a file that carries a tokenizer. */
export async function loadTokenizer(text) {
  const { createTokenizer } = await import('./tokenizer.js');
  return createTokenizer(text);
}

/** A deep-frozen copy of plain data (specs handed to callers). */
export function frozenCopy(v) {
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
        dims[rt.str(x.tdm_method_dim_name(handle, m, d))] = { min: Number(x.tdm_method_dim_min(handle, m, d)),
          max: Number(x.tdm_method_dim_max(handle, m, d)) };
      }
      const dynamic = Object.keys(dims).length > 0;
      const name = rt.str(x.tdm_program_method_name(handle, m));
      // 'name#k': another version of method 'name' (the runtime picks the one that fits the state)
      this.methodSpecs.push({ name, inputs: this.#io(m, 0, dynamic), outputs: this.#io(m, 1, dynamic), dims,
        version: name.includes('#') });
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
    // an input the method changes (an output '<input>!') says so; the output is not a result
    const input = (m) => (v) => (m.outputs.some((o) => o.name === `${v.name}!`) ? { ...io(v), mutated: true } : io(v));
    this.methods = frozenCopy(this.methodSpecs.filter((m) => !m.version).map((m) => ({ name: m.name, inputs: m.inputs.map(input(m)),
      outputs: m.outputs.filter((o) => !o.name.endsWith('!')).map(io), dims: m.dims })));
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
        specs.push({ name: rt.str(x.tdm_method_io_name(handle, m, io, i)), dtype: rt.dtypeNames[x.tdm_method_io_dtype(handle, m, io, i)],
          shape, nbytes: x.tdm_method_io_nbytes(handle, m, io, i), exprs, dynamic: exprs.some((e) => e !== '') });
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

/** model.<name> for each method, except names the model already has (its own API, which
 * tandem.export rejects: python/tandem/names.py) and `then`, which would make the model a thenable
 * that `await load()` never settles. Every method stays reachable as model.call(name, ...). */
/** The indices of the inputs a method changes (its outputs named '<input>!'). */
function writtenInputs(spec) {
  return spec.outputs.filter((s) => s.name.endsWith('!')).map((s) => spec.inputs.findIndex((v) => v.name === s.name.slice(0, -1)));
}

/** Writes an input's new value (a tensor) into what the caller passed: a typed array, or a tensor
 * whose data is one (a Tensor, onnxruntime-web's), of that type and length; other forms (numbers,
 * plain arrays) cannot take it. */
export function writeBack(given, t) {
  const into = ArrayBuffer.isView(given) ? given : given && ArrayBuffer.isView(given.data) ? given.data : null;
  if (into && into.constructor === t.data.constructor && into.length === t.data.length) into.set(t.data);
}

export function defineMethods(model, methods) {
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
    program.methodSpecs.forEach((m, i) => m.version || this.#index.set(m.name, i));
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

  /** For the worker side: the indices of the inputs method `name` changes (written back to the caller). */
  [WRITTEN](name) { return writtenInputs(this.#program.methodSpecs[this.#index.get(name)]); }

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
      dv.setUint32(AT.magic, STATE_MAGIC, true);
      dv.setUint32(AT.format, STATE_VERSION, true);
      dv.setBigUint64(AT.fingerprint, p.fingerprint, true);
      dv.setBigUint64(AT.programId, p.programId, true);
      dv.setBigUint64(AT.nbytes, BigInt(n), true);
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
      if (b.length < AT.format + 4 || dv.getUint32(AT.magic, true) !== STATE_MAGIC) {
        throw new TandemError('TDM_ERR_STATE_MISMATCH', 'loadState: these bytes are not saved tandem state');
      }
      if (dv.getUint32(AT.format, true) !== STATE_VERSION || b.length < STATE_HEADER) {
        throw new TandemError('TDM_ERR_STATE_MISMATCH',
          `loadState: saved-state format ${dv.getUint32(AT.format, true)}; this tandem reads format ${STATE_VERSION}: ` +
          'save the state again with this version');
      }
      if (dv.getBigUint64(AT.fingerprint, true) !== p.fingerprint) {
        throw new TandemError('TDM_ERR_STATE_MISMATCH', 'loadState: the state was saved from a program with another state layout');
      }
      if (dv.getBigUint64(AT.nbytes, true) !== BigInt(p.stateBytes) || b.length !== STATE_HEADER + p.stateBytes) {
        throw new TandemError('TDM_ERR_STATE_MISMATCH',
          `loadState: expected ${p.stateBytes} bytes of state, given ${b.length - STATE_HEADER}`);
      }
      p.rt.bytes(this.#stateBase(), p.stateBytes).set(b.subarray(STATE_HEADER));
    });
  }

  /** Restart the program's random generator at seed `n` (an integer Number or a BigInt, 64 bits):
   * writes its `__rng__` state, [seed, calls], as [n, 0] (docs/ops.md, Random sampling). The same
   * seed gives the same numbers here, natively and in Python (model.seed(n)). */
  seed(n) {
    return settle(() => {
      this.#alive('seed');
      const big = typeof n === 'bigint' ? n : Number.isSafeInteger(n) ? BigInt(n) : null;
      if (big === null || big < -(2n ** 63n) || big >= 2n ** 64n) {
        throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
          `seed(${String(n)}): a seed is a 64-bit integer (a Number that is a safe integer, or a BigInt)`);
      }
      if (!this.#program.stateLayout.some((t) => t.name === '__rng__')) {
        throw new TandemError('TDM_ERR_NOT_FOUND', "seed(): this program draws no random numbers (it has no '__rng__' state; " +
          'tandem adds it when a method uses torch.randn, normal_, rand, ...)');
      }
      const s = this.#stateSpec('__rng__');
      this.#program.rt.write(this.#stateBase() + s.offset, new BigInt64Array([BigInt.asIntN(64, big), 0n]));
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
    if (!s) throw new TandemError('TDM_ERR_NOT_FOUND',
      `no state tensor '${name}'; the program has ${this.#program.stateLayout.map((t) => t.name).join(', ') || 'none'}`);
    return s;
  }

  #run(name, inputs, profile) {
    this.#alive(name);
    const m = this.#index.get(name);
    if (m === undefined) throw new TandemError('TDM_ERR_NOT_FOUND',
      `no method '${name}'; the program has ${[...this.#index.keys()].join(', ')}`);
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
    const all = spec.outputs.map((s, i) => {
      // a dynamic output has the call's actual shape
      const shape = s.dynamic ? s.shape.map((_, d) => Number(x.tdm_session_io_dim(this.#session, m, 1, i, d))) : s.shape;
      const data = rt.read(x.tdm_session_output(this.#session, m, i), ARRAY_OF[s.dtype], numelOf(shape));
      return new Tensor(s.dtype, data, shape);
    });
    // '<input>!': the new value of an input the method changes (x.add_(1)), written into the caller's array
    const outs = all.filter((_, i) => !spec.outputs[i].name.endsWith('!'));
    spec.outputs.forEach((s, i) => {
      if (s.name.endsWith('!')) writeBack(inputs[spec.inputs.findIndex((v) => v.name === s.name.slice(0, -1))], all[i]);
    });
    return outs.length === 0 ? undefined : outs.length === 1 ? outs[0] : outs;
  }
}

/** A profile's totals and the ops writing more than `fraction` of the state's bytes. */
export function summarizeProfile(outputs, ops, stateBytes, fraction) {
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
      if (strict) throw e instanceof TandemError ? e
        : new TandemError(e.code ?? 'TDM_ERR_WORKER', `threads: ${threads} requested, the pool did not start: ${e.message}`);
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
