// model.js — Model, the public model: the API a user calls (methods as functions, state I/O, fork,
// dispose) over a backend that runs it: wasm on this thread (web/wasm-backend.js), wasm in a worker
// (web/worker-backend.js) or WebGPU (web/webgpu/backend.js). The model checks every argument,
// converts inputs, keeps calls in a FIFO queue and writes the saved-state header; a backend only
// runs what it is handed. A backend is an object with:
//   info         plain data: { methods, state, metadata (the model hands out frozen copies),
//                methodSpecs (each method's inputs and outputs with nbytes and dynamic dims),
//                stateLayout ([{ name, dtype, shape, offset, nbytes }]), stateBytes, scratchBytes,
//                fingerprint, programId (BigInt), threads, simd, device, tokenizerText }
//   run(m, tensors, profile)   method index m on checked inputs: its outputs, every one (also an
//                input's new value, '<input>!'), or null where the version that ran returns None;
//                with profile { outputs, ops }
//   readState(s) / writeState(s, data)   one state tensor's typed array, by layout entry
//   saveState() / loadState(bytes)       the state region's bytes (no header)
//   resetState(), fork(copy) (a new backend on the same program, its state a copy of this one's
//                when copy is true)
//   memory()     bytes of the instance's linear memory, a number, at once
//   dispose()    frees the session; an operation in flight finishes or rejects
// Each of the others may return a value or a promise; one that returns a value has run when it
// returns. A model's queue hands its backend one operation at a time.
import { TandemError, abortError } from './errors.js';
import { Tensor, numelOf, toTensor, checkTensor, checkBytes, byteView } from './tensor.js';
import { CALL_OPTIONS, DEFAULT_FLAG_FRACTION, isPlainObject, splitOptions, parseForkOptions, WASM_PATHS } from './options.js';
import { SAVED_STATE } from './schema.js';
import { Chat } from './chat.js';

// The saved-state header (docs/format.md; python/tandem/schema.py declares it): magic u32, format u32,
// layout fingerprint u64, the writer's program id u64, byte count u64.
const { magic: STATE_MAGIC, format: STATE_VERSION, bytes: STATE_HEADER, offset: AT } = SAVED_STATE;

/** load()'s step that builds the tokenizer a file carries: not public API. */
export const BUILD_TOKENIZER = Symbol('tandem.buildTokenizer');

/** A deep-frozen copy of plain data (specs handed to callers). */
export function frozenCopy(v) {
  if (Array.isArray(v)) return Object.freeze(v.map(frozenCopy));
  if (v && typeof v === 'object') return Object.freeze(Object.fromEntries(Object.entries(v).map(([k, e]) => [k, frozenCopy(e)])));
  return v;
}

/** web/tokenizer.js, imported only for a file that carries a tokenizer. */
async function loadTokenizer(text) {
  const { createTokenizer } = await import('./tokenizer.js');
  return createTokenizer(text);
}

/** Writes an input's new value (a tensor) into what the caller passed: a typed array, or a tensor
 * whose data is one (a Tensor, onnxruntime-web's), of that type and length; other forms (numbers,
 * plain arrays) cannot take it. */
function writeBack(given, t) {
  const into = ArrayBuffer.isView(given) ? given : given && ArrayBuffer.isView(given.data) ? given.data : null;
  if (into && into.constructor === t.data.constructor && into.length === t.data.length) into.set(t.data);
}

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

/** A profile's totals and the ops writing more than `fraction` of the state's bytes. */
function summarizeProfile(outputs, ops, stateBytes, fraction) {
  const sum = (key) => ops.reduce((a, o) => a + o[key], 0);
  return {
    outputs, ops, totalMs: sum('ms'), bytesWritten: sum('bytesWritten'), stateBytesWritten: sum('stateBytesWritten'),
    stateBytes, flagged: ops.filter((o) => o.bytesWritten > fraction * stateBytes),
  };
}

/** A single tensor passed where run() takes its feeds object (a plain object is read as feeds, also
 * one whose inputs are named 'data' and 'shape'). */
const isTensorLike = (v) => v instanceof Tensor || (!isPlainObject(v) && 'data' in v && ('shape' in v || 'dims' in v));
const copyOf = (t) => new Tensor(t.dtype, t.data.slice(), t.shape);
const isPromise = (v) => typeof v?.then === 'function';

/** The first n entries along dim of a state tensor's data (a state that grows, at its length). */
function prefixOf(s, data, n, dim) {
  const shape = s.shape.slice();
  const capacity = shape[dim];
  shape[dim] = n;
  const inner = numelOf(shape.slice(dim + 1)), outer = numelOf(shape.slice(0, dim));
  const out = new data.constructor(outer * n * inner);
  for (let o = 0; o < outer; o++) out.set(data.subarray(o * capacity * inner, (o * capacity + n) * inner), o * n * inner);
  return new Tensor(s.dtype, out, shape);
}

/** What a model and its forks share: the backend's frozen info, the method index, the tokenizer,
 * the load options the model keeps. */
function sharedOf(info, { flagFraction = DEFAULT_FLAG_FRACTION, deviceReason = null, wasmPaths } = {}) {
  const index = new Map();
  info.methodSpecs.forEach((m, i) => m.version || index.set(m.name, i));
  // State that grows (python/tandem/growing.py): name -> [its length's state name, its dim].
  const { growing_state: growing = {}, ...metadata } = info.metadata;
  return {
    methodSpecs: info.methodSpecs, stateLayout: info.stateLayout, index, flagFraction, deviceReason, wasmPaths,
    growing, methods: frozenCopy(info.methods), state: frozenCopy(info.state), metadata: frozenCopy(metadata),
    tokenizerText: info.tokenizerText ?? null, tokenizer: null,
  };
}

/** A session on a loaded program: each program method is an async function, `model.<name>(...)`.
 * Calls and state operations run in the order made (a FIFO queue): an operation made while none is
 * waiting starts when it is made (on wasm inline it has finished when the call returns); one that
 * fails rejects without holding up the next. Not constructed directly: load() makes models. */
export class Model {
  #backend; #shared; #disposed = false;
  #queue = [];      // operations not started, in call order
  #running = null;  // the operation the backend is running (an asynchronous one)

  /** `backend` (see the top of this file); `shared`: the model's it was forked from, or the load
   * options it keeps ({ flagFraction, deviceReason, wasmPaths }). */
  constructor(backend, shared = {}) {
    this.#backend = backend;
    this.#shared = shared.methodSpecs ? shared : sharedOf(backend.info, shared);
    defineMethods(this, this.#shared.methods);
  }

  /** [{ name, inputs: [{ name, dtype, shape }], outputs: [...] }], deep-frozen */
  get methods() { return this.#shared.methods; }
  /** [{ name, dtype, shape }], one per state tensor, deep-frozen */
  get state() { return this.#shared.state; }
  /** Named values stored with the program ({ max_cache_len: 512, ... }), deep-frozen */
  get metadata() { return this.#shared.metadata; }
  /** The tokenizer the file carries (web/tokenizer.js, run on this thread), or null when it has none
   * (or it was loaded with { tokenizer: false }). */
  get tokenizer() { return this.#shared.tokenizer; }
  /** Where the methods run: 'wasm' or 'webgpu'. */
  get device() { return this.#backend.info.device; }
  /** With load(..., { device: 'auto' }): why the model runs on wasm (no adapter, the ops without a
   * WebGPU kernel, worker: true); else null. */
  get deviceReason() { return this.#shared.deviceReason; }
  /** options.wasmPaths as resolved by load (web/options.js WASM_PATHS), or undefined. */
  get [WASM_PATHS]() { return this.#shared.wasmPaths; }
  /** Threads this model's methods run on (1 where shared memory is unavailable, and on WebGPU). */
  get threads() { return this.#backend.info.threads; }
  /** The SIMD level of the runtime build running it: 'relaxed' (fused multiply-add) or 'simd128'. */
  get simd() { return this.#backend.info.simd; }
  /** Bytes of the wasm instance's linear memory (shared by the models forked from this one); in a
   * worker, as of the last reply from it. */
  get memoryBytes() { return this.#backend.memory(); }
  /** Bytes of one session's state region and scratch arena. */
  get stateBytes() { return this.#backend.info.stateBytes; }
  get scratchBytes() { return this.#backend.info.scratchBytes; }

  /** Builds the tokenizer the file carries (load() awaits it; the forks share it). */
  async [BUILD_TOKENIZER]() {
    const s = this.#shared;
    if (s.tokenizerText !== null && !s.tokenizer) s.tokenizer = await loadTokenizer(s.tokenizerText);
  }

  /** Call a method by name; the same as `model[name](...inputs)`. The last argument may be call
   * options, `{ signal }`: a call whose signal aborts before it starts rejects with an AbortError
   * without running; one aborted while it runs finishes, and its result is dropped. */
  call(name, ...args) { return this.#invoke(name, args, false); }

  /** Call a method and time each of its ops: resolves to `{ outputs, ops, totalMs, bytesWritten,
   * stateBytesWritten, stateBytes, flagged }`, where `outputs` is what the call would resolve to,
   * each op is `{ index, name, ms, bytesWritten, stateBytesWritten }` (bytes of its outputs; an
   * update in place counts only the rows it writes), and `flagged` lists the ops that write more
   * than `profileFlagFraction` (a load option, default 0.05) of the state's bytes. Takes call
   * options as call() does. */
  profile(name, ...args) { return this.#invoke(name, args, true); }

  /** Call a method with its inputs by name, as onnxruntime-web's `session.run(feeds)`: `feeds` is
   * `{ [input name]: input }` (names as in `model.methods`), every input and no other; resolves to
   * `{ [output name]: Tensor }`, or null where the version that ran returns None. An input the method
   * changes is written back into what was given, as with call(). `options`: call options. */
  run(method, feeds, options) {
    let args;
    try {
      args = [...this.#feeds(method, feeds), ...this.#runOptions(method, options)];
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#invoke(method, args, false, true);
  }

  /** The inputs of `feeds` in the method's order (run()). */
  #feeds(method, feeds) {
    this.#alive(`run('${method}')`);
    const m = this.#method(method);
    const names = this.#shared.methodSpecs[m].inputs.map((s) => s.name);
    const quoted = (list) => list.map((n) => `'${n}'`).join(', ');
    const expected = () => (names.length ? `${method} takes ${quoted(names)}` : `${method} takes no inputs: give {}`);
    if (feeds === null || typeof feeds !== 'object' || Array.isArray(feeds) || ArrayBuffer.isView(feeds) || isTensorLike(feeds)) {
      throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
        `run('${method}', feeds): feeds is an object of input name to input; ${expected()}`);
    }
    const unknown = Object.keys(feeds).filter((k) => !names.includes(k));
    if (unknown.length) {
      throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `run('${method}', feeds): no input ${quoted(unknown)}; ${expected()}`);
    }
    const missing = names.filter((n) => !Object.hasOwn(feeds, n));
    if (missing.length) {
      throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
        `run('${method}', feeds): missing input ${quoted(missing)}; ${expected()}`);
    }
    return names.map((n) => feeds[n]);
  }

  /** run()'s options as the last argument of a call ([] for none). */
  #runOptions(method, options) {
    if (options === undefined) return [];
    if (!isPlainObject(options) || !Object.keys(options).every((k) => CALL_OPTIONS.has(k))) {
      throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
        `run('${method}', feeds, options): options take only ${[...CALL_OPTIONS].join(', ')}`);
    }
    return [options];
  }

  #invoke(name, args, profile, named = false) {
    let inputs, signal, m, tensors;
    try {
      [inputs, { signal }] = splitOptions(name, args);
      this.#alive(name);
      [m, tensors] = this.#inputs(name, inputs);
    } catch (e) {
      return Promise.reject(e);
    }
    const spec = this.#shared.methodSpecs[m];
    const run = () => this.#backend.run(m, tensors, profile);
    // inputs are read when the call is made: a call that waits keeps a copy
    const keep = () => { tensors = tensors.map(copyOf); };
    return this.#submit(name, signal, run, keep, (r) => {
      const all = profile ? r.outputs : r;
      if (all === null) { // the version that ran returns None (a Python branch the method was exported in versions for)
        return profile ? summarizeProfile(null, r.ops, this.stateBytes, this.#shared.flagFraction) : null;
      }
      // '<input>!': the new value of an input the method changes (x.add_(1)), written into the caller's array
      spec.outputs.forEach((o, i) => {
        if (o.name.endsWith('!')) writeBack(inputs[spec.inputs.findIndex((v) => v.name === o.name.slice(0, -1))], all[i]);
      });
      const results = spec.outputs.map((o, i) => [o.name, all[i]]).filter(([n]) => !n.endsWith('!'));
      if (named) return Object.fromEntries(results);
      const outs = results.map(([, t]) => t);
      const outputs = outs.length === 0 ? undefined : outs.length === 1 ? outs[0] : outs;
      return profile ? summarizeProfile(outputs, r.ops, this.stateBytes, this.#shared.flagFraction) : outputs;
    });
  }

  /** The index of method `name`. */
  #method(name) {
    const m = this.#shared.index.get(name);
    if (m === undefined) throw new TandemError('TDM_ERR_NOT_FOUND',
      `no method '${name}'; the program has ${[...this.#shared.index.keys()].join(', ')}`);
    return m;
  }

  /** [method index, the inputs as checked tensors] of a call. */
  #inputs(name, inputs) {
    const m = this.#method(name);
    const spec = this.#shared.methodSpecs[m];
    if (inputs.length !== spec.inputs.length) {
      throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${name}() takes ${spec.inputs.length} input(s), ${inputs.length} given`);
    }
    // Validate every input before any of them is written.
    return [m, inputs.map((v, i) => {
      const s = spec.inputs[i];
      const where = () => `${name}() input ${i} '${s.name}'`;
      const t = toTensor(v, s, where);
      checkTensor(t, s, where);
      checkBytes(t, s.dynamic ? numelOf(t.shape) * t.data.BYTES_PER_ELEMENT : s.nbytes, where);
      return t;
    })];
  }

  /** A copy of one state tensor; a state that grows at its current length. */
  readState(name) {
    return this.#state('readState', name, (s) => () => {
      const data = this.#backend.readState(s);
      const grow = this.#shared.growing[name];
      if (!grow) return isPromise(data) ? data.then((d) => new Tensor(s.dtype, d, s.shape)) : new Tensor(s.dtype, data, s.shape);
      const length = this.#backend.readState(this.#shared.stateLayout.find((t) => t.name === grow[0]));
      const cut = (d, l) => prefixOf(s, d, Number(l[0]), grow[1]);
      return isPromise(data) || isPromise(length) ? Promise.all([data, length]).then(([d, l]) => cut(d, l)) : cut(data, length);
    });
  }

  /** Overwrite one state tensor (dtype and shape as in `model.state`). */
  writeState(name, value) {
    return this.#state('writeState', name, (s) => {
      const where = () => `writeState('${name}')`;
      const t = toTensor(value, s, where);
      checkTensor(t, s, where);
      checkBytes(t, s.nbytes, where);
      let data = t.data;
      return [() => this.#backend.writeState(s, data), () => { data = data.slice(); }];
    });
  }

  /** The whole state region as bytes, to restore later with loadState (on this program, or one with
   * the same state layout). */
  saveState() {
    return this.#op('saveState', () => {
      const n = this.stateBytes, info = this.#backend.info;
      const framed = (region) => {
        const out = new Uint8Array(STATE_HEADER + n);
        const dv = new DataView(out.buffer);
        dv.setUint32(AT.magic, STATE_MAGIC, true);
        dv.setUint32(AT.format, STATE_VERSION, true);
        dv.setBigUint64(AT.fingerprint, info.fingerprint, true);
        dv.setBigUint64(AT.programId, info.programId, true);
        dv.setBigUint64(AT.nbytes, BigInt(n), true);
        out.set(region.subarray(0, n), STATE_HEADER);
        return out;
      };
      const region = this.#backend.saveState();
      return isPromise(region) ? region.then(framed) : framed(region);
    });
  }

  /** Restore bytes from saveState. Bytes of another state layout, or of the wrong size, are rejected
   * and the state is left as it was. */
  loadState(bytes) {
    let region;
    try {
      this.#alive('loadState');
      const info = this.#backend.info;
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
      if (dv.getBigUint64(AT.fingerprint, true) !== info.fingerprint) {
        throw new TandemError('TDM_ERR_STATE_MISMATCH', 'loadState: the state was saved from a program with another state layout');
      }
      if (dv.getBigUint64(AT.nbytes, true) !== BigInt(info.stateBytes) || b.length !== STATE_HEADER + info.stateBytes) {
        throw new TandemError('TDM_ERR_STATE_MISMATCH',
          `loadState: expected ${info.stateBytes} bytes of state, given ${b.length - STATE_HEADER}`);
      }
      region = b.slice(STATE_HEADER); // read when the call is made
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#submit('loadState', undefined, () => this.#backend.loadState(region));
  }

  /** Restart the program's random generator at seed `n` (an integer Number or a BigInt, 64 bits):
   * writes its `__rng__` state, [seed, calls], as [n, 0] (docs/ops.md, Random sampling). The same
   * seed gives the same numbers here, natively and in Python (model.seed(n)). */
  seed(n) {
    let s;
    try {
      this.#alive('seed');
      const big = typeof n === 'bigint' ? n : Number.isSafeInteger(n) ? BigInt(n) : null;
      if (big === null || big < -(2n ** 63n) || big >= 2n ** 64n) {
        throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
          `seed(${String(n)}): a seed is a 64-bit integer (a Number that is a safe integer, or a BigInt)`);
      }
      s = this.#shared.stateLayout.find((t) => t.name === '__rng__');
      if (!s) {
        throw new TandemError('TDM_ERR_NOT_FOUND', "seed(): this program draws no random numbers (it has no '__rng__' state; " +
          'tandem adds it when a method uses torch.randn, normal_, rand, ...)');
      }
      const data = new BigInt64Array([BigInt.asIntN(64, big), 0n]);
      return this.#submit('seed', undefined, () => this.#backend.writeState(s, data));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Put every state tensor back to its initial value. */
  resetState() { return this.#op('resetState', () => this.#backend.resetState()); }

  /** A new model on the same program: its own state, the same weights. Its state starts at the
   * initial values, or with `{ state: 'copy' }` as a copy of this model's state after every call
   * made before the fork. */
  fork(options) {
    let state;
    try {
      ({ state } = parseForkOptions(options));
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#op('fork', () => {
      const b = this.#backend.fork(state === 'copy');
      const wrap = (backend) => new this.constructor(backend, this.#shared);
      return isPromise(b) ? b.then(wrap) : wrap(b);
    });
  }

  /** A conversation over this language-model program that keeps its KV cache between turns
   * (web/chat.js): `const c = model.chat({ system }); const reply = await c.send('Hi!')`. Options:
   * system, messages, tokenizer (default: the file's), maxNewTokens (128), temperature (0: greedy),
   * topK, topP, seed, stop, snapshots (how many saved states it keeps, 8), and for a program without
   * the recipe's metadata maxCacheLen and positionState. The session drives this model's state: call
   * no other method of it between turns. */
  chat(options) { return new Chat(this, options); }

  /** Free the session (and the program with its last session); calls still waiting reject with
   * TDM_ERR_DISPOSED, as do later ones. */
  dispose() {
    if (this.#disposed) return;
    this.#disposed = true;
    const waiting = this.#queue;
    this.#queue = [];
    for (const e of waiting) e.fail(new TandemError('TDM_ERR_DISPOSED', `${e.what}(): the model was disposed before this call ran`));
    this.#backend.dispose();
  }

  [Symbol.dispose]() { this.dispose(); }

  #alive(what) {
    if (this.#disposed) throw new TandemError('TDM_ERR_DISPOSED', `${what}(): the model was disposed`);
  }

  /** A state operation on state tensor `name`: `make(layout entry)` gives the run function, or
   * [run, keep] (see #submit). */
  #state(what, name, make) {
    try {
      this.#alive('state');
      const s = this.#shared.stateLayout.find((t) => t.name === name);
      if (!s) throw new TandemError('TDM_ERR_NOT_FOUND',
        `no state tensor '${name}'; the program has ${this.#shared.stateLayout.map((t) => t.name).join(', ') || 'none'}`);
      const made = make(s);
      const [run, keep] = Array.isArray(made) ? made : [made];
      return this.#submit(what, undefined, run, keep);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  #op(what, run) {
    try {
      this.#alive(what);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#submit(what, undefined, run);
  }

  /** Runs `run` (the backend's part of an operation) now when nothing runs or waits, else queues
 * it (then `keep()` copies what it reads from the caller); resolves to `after` of its result.
 * `signal` aborts it: removed while it waits; while it runs, its result is dropped. */
  #submit(what, signal, run, keep, after) {
    if (signal?.aborted) return Promise.reject(abortError(what, signal, false));
    if (!signal && !this.#running && this.#queue.length === 0) {
      // the common case, a call on an idle model: no queue entry (a backend that answers at once
      // costs one settled promise)
      let r;
      try {
        r = run();
      } catch (e) {
        return Promise.reject(e);
      }
      if (!isPromise(r)) return Promise.resolve(after ? after(r) : r);
      const p = this.#track({ what }, r);
      return after ? p.then(after) : p;
    }
    if (this.#running || this.#queue.length) keep?.();
    const p = new Promise((resolve, reject) => {
      const e = { what, run, done: false };
      const onAbort = () => {
        const i = this.#queue.indexOf(e);
        if (i >= 0) this.#queue.splice(i, 1);
        e.fail(abortError(what, signal, i < 0));
      };
      const finish = () => {
        e.done = true;
        signal?.removeEventListener('abort', onAbort);
      };
      e.ok = (v) => { if (!e.done) { finish(); resolve(v); } };
      e.fail = (err) => { if (!e.done) { finish(); reject(err); } };
      signal?.addEventListener('abort', onAbort);
      this.#queue.push(e);
      this.#pump();
    });
    return after ? p.then(after) : p;
  }

  /** `r`, the promise of an operation that started: the queue waits for it to settle. */
  #track(e, r) {
    this.#running = e;
    return r.finally(() => {
      this.#running = null;
      this.#pump();
    });
  }

  /** Starts the waiting operations, in order, while none runs: one that returns a value has
   * finished; one that returns a promise runs until it settles. */
  #pump() {
    while (!this.#running && this.#queue.length) {
      const e = this.#queue.shift();
      let r;
      try {
        if (this.#disposed) throw new TandemError('TDM_ERR_DISPOSED', `${e.what}(): the model was disposed`);
        r = e.run();
      } catch (err) {
        e.fail(err);
        continue;
      }
      if (!isPromise(r)) {
        e.ok(r);
        continue;
      }
      this.#track(e, r).then(e.ok, e.fail);
    }
  }
}

/** A model whose runtime runs in a worker (load(source, { worker: true })): a Model with the
 * worker backend (web/worker-backend.js). If the worker dies, pending and later calls reject with
 * TDM_ERR_WORKER_DIED. */
export class WorkerModel extends Model {}
