// remote.js — a model run by a worker: WorkerModel and its message link on the caller's side,
// serveWorker on the worker's side, and the browser's workers (the model's, and the pool's threads).
import { TandemError, abortError } from './errors.js';
import { Tensor } from './tensor.js';
import { DEFAULT_FLAG_FRACTION, splitOptions, forkState } from './options.js';
import { RUN, TOKENIZER_TEXT, DEVICE_REASON, loadTokenizer, frozenCopy, defineMethods, summarizeProfile, createModel,
  WRITTEN, writeBack } from './model.js';

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

  call(name, ...args) {
    return this.#invoke('call', name, args).then(({ out, written }) => {
      for (const [k, v] of written) writeBack(args[k], { data: ArrayBuffer.isView(v) ? v : v.data });
      return revive(out);
    });
  }
  async profile(name, ...args) {
    const r = await this.#invoke('profile', name, args);
    return summarizeProfile(revive(r.outputs), r.ops, r.stateBytes, this.#flagFraction);
  }
  readState(name) { return this.#request('readState', [name]).then(revive); }
  writeState(name, value) { return this.#request('writeState', [name, tensorOut(value)]); }
  saveState() { return this.#request('saveState'); }
  loadState(bytes) { return this.#request('loadState', [bytes]); }
  resetState() { return this.#request('resetState'); }
  seed(n) { return this.#request('seed', [n]); }
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

export function browserWorker() {
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
export async function loadInWorker(module, program, spawn, flagFraction, pool, withTokenizer) {
  const port = await spawn();
  const link = new WorkerLink(port);
  link.refs++; // held until the first model exists
  try {
    const transfer = [program instanceof Uint8Array ? program.buffer : program.stream];
    const { id, info: { tokenizerText, ...info } } = await link.request({ type: 'init', args: [module, program, pool] },
      { transfer, what: 'load' });
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

export function browserThread() {
  const w = new Worker(new URL('./thread.js', import.meta.url), { type: 'module' });
  return {
    post: (m, t) => w.postMessage(m, t),
    onMessage: (f) => w.addEventListener('message', (e) => f(e.data)),
    onError: (f) => w.addEventListener('error', (e) => f(`failed: ${e.message ?? e}`)),
    terminate: () => w.terminate(),
  };
}

/** The worker side: serves one port (see web/worker.js and node/worker.js). */
export function serveWorker(port, { spawnThread = browserThread } = {}) {
  const models = new Map();
  let nextId = 1;
  const infoOf = (m) => ({ methods: m.methods, state: m.state, metadata: m.metadata, stateBytes: m.stateBytes, scratchBytes: m.scratchBytes,
    threads: m.threads, simd: m.simd });
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
          case 'call': { // the inputs the method changed go back too, for the caller's arrays
            const out = tensorOutAll(m[RUN](a[0], a.slice(1), false));
            result = { out, written: m[WRITTEN](a[0]).map((k) => [k, a[1 + k]]) };
            break;
          }
          case 'profile': { const r = m[RUN](a[0], a.slice(1), true); result = { ...r, outputs: tensorOutAll(r.outputs) }; break; }
          case 'readState': result = tensorOut(await m.readState(a[0])); break;
          case 'writeState': result = await m.writeState(a[0], revive(a[1])); break;
          case 'saveState': result = await m.saveState(); break;
          case 'loadState': result = await m.loadState(a[0]); break;
          case 'resetState': result = await m.resetState(); break;
          case 'seed': result = await m.seed(a[0]); break;
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
