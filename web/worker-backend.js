// worker-backend.js — the wasm backend run by a worker (load(source, { worker: true })): WorkerBackend
// and its message link on the caller's side, serveWorker on the worker's side (a WasmBackend per
// model), and the browser's workers (the model's, and the pool's threads).
import { TandemError } from './errors.js';
import { Tensor } from './tensor.js';
import { createWasmBackend } from './wasm-backend.js';
import { runtimeFileHint } from './runtime.js';

const reviveError = (e) => new TandemError(e.code, e.message.replace(`${e.code}: `, ''));

/** The buffers of a reply's typed arrays (tensors, outputs, bytes): transferred, not copied. */
function transferables(value, list = []) {
  if (ArrayBuffer.isView(value)) list.push(value.buffer);
  else if (Array.isArray(value)) value.forEach((v) => transferables(v, list));
  else if (value && typeof value === 'object') Object.values(value).forEach((v) => transferables(v, list));
  return list;
}

const tensorOut = (t) => (t instanceof Tensor ? { dtype: t.dtype, shape: t.shape, data: t.data } : t);
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
    if (Array.isArray(v)) return v.map(copy);
    if (v instanceof Tensor || (v && typeof v === 'object' && 'dtype' in v && 'data' in v && 'shape' in v)) {
      return { dtype: v.dtype, shape: structuredClone(v.shape), data: copy(v.data) };
    }
    return structuredClone(v);
  };
  return { args: args.map(copy), transfer };
}

const sendError = (e) => (e instanceof TandemError ? e
  : new TandemError('TDM_ERR_INVALID_ARGUMENT', `cannot send this call's arguments to the worker: ${e.message}`));

/** A session in a worker (web/model.js's backend interface): each operation is a request whose
 * arguments are copied when it is made; outputs are transferred back, not copied. The models of
 * one worker share its link, which sends their requests one at a time. */
export class WorkerBackend {
  #link; #id; #disposed = false;

  constructor(link, id, info) {
    this.#link = link;
    this.#id = id;
    this.info = info;
    link.refs++;
  }

  #request(type, args = []) {
    if (this.#disposed) return Promise.reject(new TandemError('TDM_ERR_DISPOSED', `${type}(): the model was disposed`));
    let copy;
    try {
      copy = snapshot(args);
    } catch (e) {
      return Promise.reject(sendError(e));
    }
    return this.#link.request({ type, model: this.#id, args: copy.args }, { transfer: copy.transfer });
  }

  /** Bytes of the worker's linear memory, as its last reply said. */
  memory() { return this.#link.memory; }

  async run(m, tensors, profile) {
    const r = await this.#request('run', [m, tensors, profile]);
    return profile ? { ...r, outputs: revive(r.outputs) } : revive(r);
  }

  readState(s) { return this.#request('readState', [s.name]); }
  writeState(s, data) { return this.#request('writeState', [s.name, data]); }
  saveState() { return this.#request('saveState'); }
  loadState(bytes) { return this.#request('loadState', [bytes]); }
  resetState() { return this.#request('resetState'); }

  async fork(copy) {
    const { id, info } = await this.#request('fork', [copy]);
    return new WorkerBackend(this.#link, id, info);
  }

  /** Frees the session in the worker; its request in flight rejects with TDM_ERR_DISPOSED. The
   * worker ends with its last model. */
  dispose() {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#link.dispose(this.#id);
  }
}

/** Message plumbing for one worker: a FIFO queue of the requests of its models, of which one at a
 * time is in the worker, replies, termination. */
class WorkerLink {
  constructor(port) {
    this.port = port;
    this.next = 1;
    this.queue = [];      // requests not yet posted, in call order
    this.inflight = null; // the request the worker has, until its reply arrives
    this.refs = 0;
    this.died = null; // the TandemError every call gets once the worker is gone
    this.memory = 0; // bytes of the worker's linear memory, from its last reply
    port.onMessage((msg) => {
      const r = this.inflight;
      if (!r || msg.id !== r.id) return;
      this.inflight = null;
      if (msg.memory !== undefined) this.memory = msg.memory; // every reply says how large the worker's memory is
      r.reply(msg); // dropped if its model was disposed meanwhile
      this.#pump();
    });
    port.onError((what, code) => this.#die(what, code));
  }

  /** The worker failed (an uncaught error, a message that cannot be read, or it exited): it is
   * ended, and every pending and later call rejects with TDM_ERR_WORKER_DIED (with `code`,
   * 'TDM_ERR_NOT_FOUND': its script was not found, so it never started). */
  #die(what, code) {
    if (this.died) return;
    this.died = code ? new TandemError(code, `the model's worker ${what}`)
      : new TandemError('TDM_ERR_WORKER_DIED', `the model's worker ${what}; this model cannot be used any more, load it again`);
    const all = this.inflight ? [this.inflight, ...this.queue] : this.queue;
    this.inflight = null;
    this.queue = [];
    for (const r of all) r.fail(this.died);
    this.port.busy?.(false);
    this.port.terminate();
  }

  /** Queue `msg`; resolves to the worker's result. */
  request(msg, { transfer = [] } = {}) {
    if (this.died) return Promise.reject(this.died);
    return new Promise((resolve, reject) => {
      const id = this.next++;
      const r = { id, msg: { ...msg, id }, transfer, model: msg.model, done: false };
      r.fail = (e) => { if (!r.done) { r.done = true; reject(e); } };
      r.reply = (m) => {
        if (r.done) return;
        r.done = true;
        if (m.error) reject(reviveError(m.error));
        else resolve(m.result);
      };
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

// Each worker is made by one literal `new Worker(new URL('./file.js', import.meta.url), ...)`, the
// form bundlers (Vite, webpack) turn into a worker bundle and rewrite. Where an unbundled page or an
// esbuild or Rollup bundle looks for the file, named when it does not load, is computed in a form
// bundlers do not rewrite (a second `new URL` of this module's URL would make them emit the
// unbundled script too, or, from a variable, every file of the folder).
const here = import.meta.url;
const besideThisModule = (name) => new URL(name, here);

/** Why a Web Worker running `url` failed, from its 'error' event: [text, code]. A script that
 * threw gives an ErrorEvent with its message; a script that did not load gives a bare Event
 * (no status, no URL), so the script is fetched again to say what the server answers. */
async function workerFailure(e, url, base) {
  if (e.message) return [`failed: ${e.message}`];
  // a bundler may have replaced import.meta.url by the module's path on the build machine
  if (!/^https?:$/.test(url.protocol)) return [`could not start ${url.pathname.split('/').pop()}`];
  const missing = (why) => [`could not load ${url} (${why}); ${runtimeFileHint(base)}`, 'TDM_ERR_NOT_FOUND'];
  let res;
  try {
    res = await fetch(url);
  } catch (err) {
    return missing(err.message);
  }
  res.body?.cancel().catch(() => {});
  if (!res.ok) return missing(`HTTP ${res.status}`);
  const type = res.headers.get('content-type') ?? '';
  if (!/javascript|ecmascript/i.test(type)) return missing(`served as ${type || 'no Content-Type'}, not JavaScript`);
  return [`could not start ${url}: the script or a module it imports did not load or run (the Content Security Policy's ` +
    "worker-src, the browser's console)"];
}

/** A port to a new module Worker `w` running `url` (for messages). */
function workerPort(w, url, base) {
  return {
    post: (m, t) => w.postMessage(m, t),
    onMessage: (f) => w.addEventListener('message', (e) => f(e.data)),
    onError: (f) => {
      w.addEventListener('error', (e) => { workerFailure(e, url, base).then(([why, code]) => f(why, code)); });
      w.addEventListener('messageerror', () => f('sent a message that could not be read'));
    },
    terminate: () => w.terminate(),
  };
}

/** A module Worker running `url`, which may be on another origin (a CDN: options.wasmPaths). A
 * page may start a worker from its own origin only, so another origin's script is imported by a
 * one-line worker of this origin (a blob: URL); the script is then fetched with CORS. */
function workerAt(url) {
  if (url.origin === globalThis.location?.origin) return new Worker(url, { type: 'module' });
  const blob = new Blob([`import ${JSON.stringify(url.href)};\n`], { type: 'text/javascript' });
  return new Worker(URL.createObjectURL(blob), { type: 'module' });
}

/** A port to the model's Web Worker (web/worker.js, or `base`'s worker.js: options.wasmPaths). */
export function browserWorker(base) {
  if (base) {
    const url = new URL('worker.js', base);
    return workerPort(workerAt(url), url, base);
  }
  return workerPort(new Worker(new URL('./worker.js', import.meta.url), { type: 'module' }), besideThisModule('worker.js'));
}

/** Loads a program in a new worker: its backend. `program`: the bytes, or { stream, length }
 * (bodyForWorker), transferred to the worker; `spawn()`: a port to a new worker; `pool`: the
 * worker's threads ({ threads, strict }). */
export async function loadInWorker(module, program, spawn, pool) {
  const port = await spawn();
  const link = new WorkerLink(port);
  link.refs++; // held until the first model exists
  try {
    const transfer = [program instanceof Uint8Array ? program.buffer : program.stream];
    const { id, info } = await link.request({ type: 'init', args: [module, program, pool] }, { transfer });
    return new WorkerBackend(link, id, info);
  } catch (e) {
    port.terminate();
    throw e;
  } finally {
    link.refs--;
  }
}

/** A port to a thread-pool Web Worker (web/thread.js, or `base`'s thread.js: options.wasmPaths). */
export function browserThread(base) {
  if (base) {
    const url = new URL('thread.js', base);
    return workerPort(workerAt(url), url, base);
  }
  return workerPort(new Worker(new URL('./thread.js', import.meta.url), { type: 'module' }), besideThisModule('thread.js'));
}

/** The worker side: serves one port (see web/worker.js and node/worker.js), a WasmBackend per model. */
export function serveWorker(port, { spawnThread = browserThread } = {}) {
  const models = new Map();
  let nextId = 1;
  let memory = 0;
  // the tokenizer's JSON goes to the caller's thread (which builds it) with the first model only
  const add = (b, first) => {
    const id = nextId++;
    models.set(id, b);
    return { id, info: first ? b.info : { ...b.info, tokenizerText: null } };
  };
  port.onMessage(async (msg) => {
    if (msg.type === 'dispose') {
      models.get(msg.model)?.dispose();
      models.delete(msg.model);
      return;
    }
    try {
      let result, b;
      if (msg.type === 'init') {
        const [module, program, pool] = msg.args;
        const src = program instanceof Uint8Array ? program
          : new Response(program.stream, { headers: program.length ? { 'content-length': String(program.length) } : {} });
        b = await createWasmBackend(module, src, { ...pool, spawnThread });
        result = add(b, true);
      } else {
        b = models.get(msg.model);
        if (!b) throw new TandemError('TDM_ERR_DISPOSED', `${msg.type}(): the model was disposed`);
        const [x, y, z] = msg.args;
        const stateOf = (name) => b.info.stateLayout.find((t) => t.name === name);
        switch (msg.type) {
          case 'run': {
            const r = b.run(x, revive(y), z);
            // null: the version that ran returns None
            result = z ? { ...r, outputs: r.outputs?.map(tensorOut) ?? null } : r?.map(tensorOut) ?? null;
            break;
          }
          case 'readState': result = b.readState(stateOf(x)); break;
          case 'writeState': result = b.writeState(stateOf(x), y); break;
          case 'saveState': result = b.saveState(); break;
          case 'loadState': result = b.loadState(x); break;
          case 'resetState': result = b.resetState(); break;
          case 'fork': result = add(b.fork(x)); break;
          default: throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `unknown request ${msg.type}`);
        }
      }
      memory = b.memory();
      port.post({ id: msg.id, result, memory }, transferables(result));
    } catch (e) {
      port.post({ id: msg.id, error: { code: e.code ?? 'TDM_ERR_WORKER', message: e.message }, memory: memory || undefined });
    }
  });
}
