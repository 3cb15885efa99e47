// wasm-backend.js — the wasm backend run on this thread: Program (a loaded program, shared by the
// sessions made from it), WasmBackend (one session: web/model.js's backend interface) and
// createWasmBackend (a runtime instance with one program in it). Also what web/webgpu/ loads and
// verifies a program with, and what a worker serves (web/worker-backend.js).
import { instantiateRuntime, importsMemory, sharedMemory } from './loader.js';
import { startPool, canBlock } from './threads.js';
import { TandemError } from './errors.js';
import { ARRAY_OF, numelOf, Tensor } from './tensor.js';
import { Runtime } from './runtime.js';
import { streamInto } from './source.js';

/** A loaded program in one wasm instance, shared by the sessions (backends) made from it. */
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
    this.methods = (this.methodSpecs.filter((m) => !m.version).map((m) => ({ name: m.name, inputs: m.inputs.map(input(m)),
      outputs: m.outputs.filter((o) => !o.name.endsWith('!')).map(io), dims: m.dims })));
    this.state = (this.stateLayout.map(strip));
    this.stateBytes = x.tdm_program_state_size(handle);
    this.scratchBytes = x.tdm_program_scratch_size(handle);
    this.fingerprint = BigInt.asUintN(64, BigInt(x.tdm_program_fingerprint(handle)));
    this.programId = BigInt.asUintN(64, BigInt(x.tdm_program_id(handle)));
    const metadata = {};
    this.tokenizerText = null; // the 'tokenizer' entry's JSON, parsed by web/tokenizer.js (web/model.js)
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
    this.metadata = metadata;
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

/** One session on a program, run on this thread (web/model.js's backend interface): every
 * operation runs when called and returns its result. */
export class WasmBackend {
  constructor(program) {
    this.program = program;
    this.session = program.newSession();
    const p = program, rt = p.rt;
    this.info = {
      methods: p.methods, state: p.state, metadata: p.metadata, methodSpecs: p.methodSpecs, stateLayout: p.stateLayout,
      stateBytes: p.stateBytes, scratchBytes: p.scratchBytes, fingerprint: p.fingerprint, programId: p.programId,
      threads: rt.threads, simd: rt.simd, device: 'wasm', tokenizerText: p.tokenizerText,
    };
  }

  /** Byte address of this session's state region. */
  stateBase() { return this.program.rt.x.tdm_session_state(this.session); }

  memory() { return this.program.rt.x.memory.buffer.byteLength; }

  readState(s) { return this.program.rt.read(this.stateBase() + s.offset, ARRAY_OF[s.dtype], numelOf(s.shape)); }
  writeState(s, data) { this.program.rt.write(this.stateBase() + s.offset, data); }
  saveState() { return this.program.rt.bytes(this.stateBase(), this.program.stateBytes).slice(); }
  loadState(bytes) { this.program.rt.bytes(this.stateBase(), this.program.stateBytes).set(bytes); }
  resetState() { this.program.rt.x.tdm_session_reset_state(this.session); }

  fork(copy) {
    const f = new WasmBackend(this.program);
    if (copy) {
      const src = this.stateBase();
      this.program.rt.heap(Uint8Array).copyWithin(f.stateBase(), src, src + this.program.stateBytes);
    }
    return f;
  }

  dispose() {
    this.program.rt.x.tdm_session_free(this.session);
    this.program.release();
  }

  /** Method m on checked inputs: every output (an input's new value too), or with `profile`
   * { outputs, ops } with each op's time and bytes written. */
  run(m, tensors, profile) {
    const rt = this.program.rt, x = rt.x, program = this.program.handle, session = this.session;
    const spec = this.program.methodSpecs[m];
    if (spec.inputs.some((s) => s.dynamic)) { // each dynamic input's actual shape, before any byte is written
      const dims = rt.malloc(8 * 8);
      try {
        tensors.forEach((t, i) => {
          if (!spec.inputs[i].dynamic) return;
          new BigInt64Array(x.memory.buffer, dims, 8).set(t.shape.map((d) => BigInt(d)));
          rt.check(x.tdm_session_set_input_shape(session, m, i, dims, t.shape.length));
        });
      } finally {
        x.tdm_free(dims);
      }
    }
    let buf = 0, n = 0;
    const ops = profile ? [] : null;
    if (profile) {
      n = x.tdm_method_op_count(program, m);
      buf = rt.malloc(8 * n + 8);
    }
    try {
      tensors.forEach((t, i) => rt.write(x.tdm_session_input(session, m, i), t.data));
      rt.check(profile ? x.tdm_session_run_profiled(session, m, buf) : x.tdm_session_run(session, m));
      if (profile) {
        const ms = new Float64Array(x.memory.buffer, buf, n);
        for (let k = 0; k < n; k++) {
          ops.push({
            index: k, name: rt.str(x.tdm_method_op_name(program, m, k)), ms: ms[k],
            bytesWritten: x.tdm_method_op_bytes_written(program, m, k),
            stateBytesWritten: x.tdm_method_op_state_bytes_written(program, m, k),
          });
        }
      }
    } finally {
      if (buf) x.tdm_free(buf);
    }
    // a version without outputs (a branch returning None) gives no output pointers: null, not tensors
    const outputs = spec.outputs.length && !x.tdm_session_output(session, m, 0) ? null : spec.outputs.map((s, i) => {
      // a dynamic output has the call's actual shape
      const shape = s.dynamic ? s.shape.map((_, d) => Number(x.tdm_session_io_dim(session, m, 1, i, d))) : s.shape;
      const data = rt.read(x.tdm_session_output(session, m, i), ARRAY_OF[s.dtype], numelOf(shape));
      return new Tensor(s.dtype, data, shape);
    });
    return profile ? { outputs, ops } : outputs;
  }
}

/** Instantiate the runtime from a compiled module and load a program into it: `bytes` (a
 * Uint8Array) or a Response streamed into the runtime's memory. `threads` > 1
 * needs the threaded build (tandem-mt.wasm) and `spawnThread(base)`, a port to a new pool worker
 * (`base`: options.wasmPaths, the folder of its script, if given); when `strict` is false, a pool
 * that cannot start leaves the model on one thread, unless its script was not found (a deployment
 * to fix, TDM_ERR_NOT_FOUND, never a quiet fall back). */
export async function createWasmBackend(module, bytes, { threads = 1, spawnThread, strict = true, base, onProgress } = {}) {
  const threaded = importsMemory(module);
  const rt = new Runtime(await instantiateRuntime(module, threaded ? { memory: sharedMemory(), canBlock: canBlock() } : {}));
  if (threaded && threads > 1) {
    try {
      rt.pool = await startPool(rt.x, module, threads, () => spawnThread(base), (st) => rt.check(st));
    } catch (e) {
      if (strict || e.code === 'TDM_ERR_NOT_FOUND') {
        throw e instanceof TandemError ? e : new TandemError(e.code ?? 'TDM_ERR_WORKER',
          `threads: ${threads}${strict ? '' : ' (the default)'} requested, the pool did not start: ${e.message}`);
      }
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
    return new WasmBackend(program);
  } catch (e) {
    if (st === 0 && (!program || program.refs === 0)) rt.x.tdm_program_free(handle);
    rt.pool?.stop();
    throw e;
  }
}
