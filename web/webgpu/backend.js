// The WebGPU backend (web/model.js's backend interface): a session whose state region and scratch
// arena live in one GPU buffer per session and whose constants (the program's data section) are
// uploaded once into a buffer every fork shares. The wasm runtime stays the loader and verifier:
// the program's ops, values and memory plan are read from it (plan.js: tdm_method_op_*,
// tdm_session_value_info, tdm_session_bind), never parsed here. A call (its inputs checked by the
// model) encodes every op of the method into one command submission and reads back only its
// outputs (and a 16-byte failure flag).
import { unsupported, compile, operand, workgroupSize, tileSize } from './kernels.js';
import { scoped, allocError, allocate, overLimit } from './memory.js';
import { halfWeights } from './half.js';
import { ALIGN, up, readPlan, resolved, nbytesOf, constSpan, constLayout, markHalf, journalSpans } from './plan.js';
import { TandemError } from '../errors.js';
import { ARRAY_OF, Tensor } from '../tensor.js';

/** load()'s step for device 'webgpu' or 'auto': `wasm` (a WasmBackend, web/wasm-backend.js, which
 * loaded and verified the program) moved to WebGPU, { backend }; or with 'auto' kept on wasm,
 * { backend: wasm, reason }; or with 'webgpu' a TandemError: TDM_ERR_DEVICE (no adapter, ops
 * without a kernel), TDM_ERR_DEVICE_LIMIT (a buffer above the adapter's limits, named),
 * TDM_ERR_OUT_OF_MEMORY. */
export async function onWebGpu(wasm, device, gpuWeights = 'float32') {
  const fail = (reason, code = 'TDM_ERR_DEVICE') => {
    if (device === 'webgpu') {
      wasm.dispose();
      throw new TandemError(code, `device 'webgpu': ${reason}; load with device: 'wasm' (or 'auto', which falls back to wasm)`);
    }
    return { backend: wasm, reason };
  };
  const gpu = globalThis.navigator?.gpu;
  if (!gpu) return fail('this engine has no WebGPU (navigator.gpu is missing)');
  let adapter;
  try {
    adapter = await gpu.requestAdapter();
  } catch (e) {
    return fail(`requestAdapter failed: ${e.message}`);
  }
  if (!adapter) return fail('no WebGPU adapter');
  const { program, session } = wasm;
  const rt = program.rt, handle = program.handle;
  const info = rt.malloc(13 * 8);
  const plans = [], bad = new Set();
  try {
    for (let m = 0; m < program.methodSpecs.length; m++) {
      const plan = readPlan(rt, handle, session, m, info);
      plans.push(plan);
      for (const op of plan.ops) {
        const why = unsupported(resolved(plan, op));
        if (why) bad.add(why);
      }
    }
  } finally {
    rt.x.tdm_free(info);
  }
  if (bad.size) return fail(`ops without a WebGPU kernel: ${[...bad].join(', ')}`);
  const writes = program.methodSpecs.find((m) => m.outputs.some((o) => o.name.endsWith('!')));
  if (writes) return fail(`method '${writes.name}' changes its inputs, which the WebGPU backend does not write back yet`);
  const scratchBase = up(program.stateBytes, ALIGN), sessionBytes = up(scratchBase + program.scratchBytes, 4) || 4;
  const dataSize = rt.x.tdm_program_data_size(handle) >>> 0;
  const lim = adapter.limits;
  const over = overLimit(lim, [{ what: `the state and scratch buffer (state ${program.stateBytes} bytes, scratch ` +
    `${program.scratchBytes} bytes, one storage binding)`, bytes: sessionBytes, binding: true }]);
  if (over) return fail(over.message, 'TDM_ERR_DEVICE_LIMIT');
  // gpuWeights 'float16': the weight matrices into H as float16 (the rest of the constants stay in C)
  const half = gpuWeights === 'float16' ? halfWeights(plans, nbytesOf, rt.bytes(rt.x.tdm_program_data(handle) >>> 0, dataSize)) : null;
  for (const plan of plans) markHalf(plan, half);
  const hOver = half && overLimit(lim, [{ what: 'the float16 weights\' buffer', bytes: half.image.byteLength, binding: true }]);
  if (hOver) return fail(hOver.message, 'TDM_ERR_DEVICE_LIMIT');
  const layout = constLayout(plans, dataSize, lim.maxBufferSize, lim.maxStorageBufferBindingSize, !!half);
  if (layout.error) return fail(layout.error, 'TDM_ERR_DEVICE_LIMIT');
  let dev;
  // the limits the program needs (never below WebGPU's defaults, which every device has): the
  // adapter's largest buffers, so a model loaded later on the same device class fits as well
  const requiredLimits = {
    maxStorageBufferBindingSize: Math.max(lim.maxStorageBufferBindingSize, 1 << 27), maxBufferSize: Math.max(lim.maxBufferSize, 1 << 28),
  };
  try {
    dev = await adapter.requestDevice({ requiredLimits });
  } catch (e) {
    return fail(`requestDevice with requiredLimits ${JSON.stringify(requiredLimits)} failed: ${e.message}`, 'TDM_ERR_DEVICE_LIMIT');
  }
  // a device whose limits are below what was asked (or below what the state needs) is refused
  const short = overLimit(dev.limits, [{ what: 'the state and scratch buffer', bytes: sessionBytes, binding: true }]);
  if (short) {
    dev.destroy();
    return fail(`the device's limits are below the adapter's: ${short.message}`, 'TDM_ERR_DEVICE_LIMIT');
  }
  // every buffer of the load under the out-of-memory and validation scopes: a failure destroys the
  // device (nothing of it is kept)
  const res = await scoped(dev, () => {
    const gp = new GpuProgram(dev, wasm, plans, scratchBase, sessionBytes, layout, lim.maxStorageBufferBindingSize, tileSize(lim), half);
    return new GpuBackend(gp, wasm);
  });
  const err = allocError(res, `device 'webgpu': the constants (${dataSize} bytes) and the state and scratch ` +
    `(${sessionBytes} bytes)`, dataSize + sessionBytes, "load with device: 'wasm' (or 'auto', which falls back to wasm)");
  if (err) {
    dev.destroy();
    if (device === 'webgpu') {
      wasm.dispose();
      throw err;
    }
    return { backend: wasm, reason: res.oom ? `out of GPU memory for the constants and state (${res.oom.message})`
      : `the GPU refused the constants' or state's buffers (${res.invalid.message})` };
  }
  return { backend: res.value };
}

/** The versions of each method exported in versions (a Python bool or int it branches on: 'name',
 * 'name#1', ...): method -> { chain: [{ v (its index), conds: [{ at (the state's byte), lo, hi }] }],
 * lo, hi (the state's bytes the conditions read) }, from each version's leading `when` / `when_in` ops,
 * which a call's version must hold (src/session.c version_now: the first that fits, else the method
 * itself, whose `when` fails the call). */
function versionsOf(specs, plans) {
  const res = new Map();
  specs.forEach((s, m) => {
    if (s.version) return;
    const ks = specs.map((t, v) => [t.name.startsWith(`${s.name}#`) ? Number(t.name.slice(s.name.length + 1)) : NaN, v])
      .filter(([k]) => Number.isInteger(k)).sort((a, b) => a[0] - b[0]).map(([, v]) => v);
    if (!ks.length) return;
    const chain = [m, ...ks].map((v) => {
      const conds = [];
      for (const op of plans[v].ops) {
        if (!op.bounds) break;
        const at = plans[v].values[op.in[0]].offset;
        conds.push({ at, lo: op.bounds[0], hi: op.bounds[1] });
      }
      return { v, conds };
    });
    const ats = chain.flatMap((c) => c.conds.map((d) => d.at));
    res.set(m, { chain, lo: Math.min(...ats) & ~3, hi: Math.max(...ats) + 8 });
  });
  return res;
}

/** What every session of a program shares: the device, the constants' buffer, the pipelines and
 * each plan's compiled dispatches. */
class GpuProgram {
  constructor(dev, wasm, plans, scratchBase, sessionBytes, { chunks, sizes }, maxBinding, tile, half) {
    const program = wasm.program;
    Object.assign(this, { dev, program, plans, scratchBase, sessionBytes, tile, half });
    this.rt = program.rt;
    this.layout = dev.createBindGroupLayout({
      entries: [
        { binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'storage' } },
        { binding: 1, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'read-only-storage' } },
        { binding: 2, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'storage' } },
        { binding: 3, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'read-only-storage' } },
        { binding: 4, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'read-only-storage' } }, // H: float16 weights
      ],
    });
    this.pipeLayout = dev.createPipelineLayout({ bindGroupLayouts: [this.layout] });
    this.pipelines = new Map();
    this.users = 0; // models (the loaded one and its forks) on this program: the last one disposed destroys the device
    this.lost = null; // set when the device is lost: every later call and state operation rejects
    dev.lost.then((info) => { this.lost = info; });
    this.wg = workgroupSize(dev.limits);
    this.maxGroups = dev.limits.maxComputeWorkgroupsPerDimension;
    // the data section in one buffer or more (constLayout); COPY_SRC: an output may be a constant
    // itself (a method whose result folded at export), read back from here
    const data = this.rt.x.tdm_program_data(program.handle) >>> 0;
    this.maxBinding = maxBinding; // the adapter's (the device asked for it)
    this.constBuffers = sizes.map((n) => dev.createBuffer({
      size: up(Math.max(n, 4), 4), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC,
    }));
    this.consts = chunks.map(({ start, end, at: place, buf }) => {
      const buffer = this.constBuffers[buf];
      for (let at = start; at < end; at += 1 << 24) { // a copy out of (possibly shared) wasm memory, 16 MiB at a time
        const n = Math.min(1 << 24, end - at);
        const chunk = new Uint8Array(up(n, 4));
        chunk.set(this.rt.bytes(data + at, n));
        dev.queue.writeBuffer(buffer, place + at - start, chunk);
      }
      return { start, end, at: place, buffer, size: buffer.size };
    });
    // H: the float16 weights (half.js), or a placeholder word
    const himg = half?.image ?? new Uint32Array(1);
    this.halfBuffer = dev.createBuffer({ size: himg.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
    dev.queue.writeBuffer(this.halfBuffer, 0, himg);
    // the initial state region, from the wasm session (fresh: its state is the initial values)
    const { session } = wasm;
    this.initial = new Uint8Array(up(program.stateBytes, 4));
    this.initial.set(this.rt.bytes(this.rt.x.tdm_session_state(session) >>> 0, program.stateBytes));
    this.dynamic = new Map(); // method -> Map(dims key -> plan)
    this.versions = versionsOf(program.methodSpecs, plans);
  }

  /** The plan's dispatches with their pipelines and parameter buffer (built on first use). */
  async compiled(plan) {
    if (plan.compiled) return plan.compiled;
    const mBase = [this.scratchBase, 0, 0];
    const list = [];
    plan.ops.forEach((op, k) => {
      // the window of the constants' buffer this op binds: its constants' span, from a 256-byte boundary
      const span = constSpan(plan, op);
      const c = span ? this.consts.find((b) => span[0] >= b.start && span[1] <= b.end) : this.consts[0];
      const off = span ? Math.floor((span[0] - c.start + c.at) / ALIGN) * ALIGN : 0;
      const size = Math.min(c.size - off, Math.floor(this.maxBinding / 4) * 4);
      const cwin = { buffer: c.buffer, offset: off, size };
      const A = (v) => {
        const val = plan.values[v];
        if (val.region === 3) return { src: 'H', base: val.half, dtype: val.dtype, shape: val.shape };
        return operand(val.region === 1 ? { ...val, offset: val.offset - c.start + c.at - off } : val, mBase);
      };
      for (const d of compile({ ...op, ins: op.in, outs: op.out }, A, k, { tile: this.tile })) {
        if (d.count > 0) list.push(Object.assign(d, { cwin }));
      }
    });
    let words = 0;
    for (const d of list) {
      d.at = words * 4;
      words += up(d.params.length * 4, ALIGN) / 4;
    }
    const params = new Uint32Array(Math.max(words, 4));
    for (const d of list) params.set(d.params.map((p) => p >>> 0), d.at / 4);
    const [buf] = await allocate(this.dev, [{ size: params.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST }],
      `method ${plan.m}: the kernels' parameters`, 'nothing ran, the state is unchanged');
    this.dev.queue.writeBuffer(buf, 0, params);
    for (const d of list) d.pipeline = await this.pipeline(d);
    plan.compiled = { list, params: buf };
    return plan.compiled;
  }

  async pipeline(d) {
    const key = `${d.key}|${this.wg}`;
    let p = this.pipelines.get(key);
    if (!p) {
      const module = this.dev.createShaderModule({ code: d.code(this.wg) });
      p = this.dev.createComputePipelineAsync({ layout: this.pipeLayout, compute: { module, entryPoint: 'main' } }).catch(async (e) => {
        const info = await module.getCompilationInfo();
        throw new Error(`${e.message} ${info.messages.map((m) => `line ${m.lineNum}: ${m.message}`).join('; ')}`);
      });
      this.pipelines.set(key, p);
    }
    try {
      return await p;
    } catch (e) {
      this.pipelines.delete(key);
      throw new TandemError('TDM_ERR_DEVICE', `a WebGPU kernel failed to compile (${d.key}): ${e.message}`);
    }
  }
}

/** A session on WebGPU (web/model.js's backend interface): its state region and scratch arena in
 * one GPU buffer, the program's constants and pipelines shared with its forks (GpuProgram). Every
 * operation reading the GPU returns a promise; the model's queue hands it one at a time. */
class GpuBackend {
  #gp; #wasm; #buf; #flag; #backup = null; #groups = new WeakMap(); #busy = null;

  constructor(gp, wasm) {
    this.#gp = gp;
    this.#wasm = wasm;
    const dev = gp.dev;
    gp.users++;
    this.#buf = dev.createBuffer({ size: gp.sessionBytes,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
    this.#flag = dev.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
    dev.queue.writeBuffer(this.#buf, 0, gp.initial);
    this.info = { ...wasm.info, device: 'webgpu', threads: 1 };
  }

  /** Bytes of the wasm instance's linear memory (the loader's, which keeps the program). */
  memory() { return this.#wasm.memory(); }

  #lostError(what) {
    const why = this.#gp.lost?.message || this.#gp.lost?.reason || 'destroyed';
    return new TandemError('TDM_ERR_DEVICE_LOST', `${what}(): the GPU device was lost (${why}); this model's state on the GPU is gone: ` +
      'load the model again and loadState() a state saved before the loss');
  }

  #present(what) { if (this.#gp.lost) throw this.#lostError(what); }

  /** `p` (the GPU part of an operation), its WebGPU failures as TandemErrors: a rejected mapAsync or
   * a lost device is TDM_ERR_DEVICE_LOST. dispose() waits for it before destroying the buffers. */
  #track(what, p) {
    const mapped = p.catch((e) => {
      if (e instanceof TandemError) throw e;
      if (this.#gp.lost || e?.name === 'AbortError' || e?.name === 'OperationError') throw this.#lostError(what);
      throw e;
    });
    this.#busy = mapped.catch(() => {});
    return mapped;
  }

  run(m, tensors, profile) {
    const name = this.#gp.program.methodSpecs[m].name;
    if (profile) {
      throw new TandemError('TDM_ERR_DEVICE', `profile('${name}'): per-op timing is not available on WebGPU yet; ` +
        "load with device: 'wasm' to profile");
    }
    this.#present(name);
    const returns = this.#gp.program.methodSpecs[m].outputs.length > 0; // a version without outputs returns None: null
    const versions = this.#gp.versions.get(m);
    if (!versions) return this.#track(name, this.#execute(name, this.#prepare(m, tensors), returns));
    // a method exported in versions: the one the state fits, read from the GPU before the call
    const data = tensors.map((t) => new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength).slice());
    return this.#track(name, this.#version(versions).then((v) => this.#execute(name, { ...this.#prepare(v, tensors), data }, returns)));
  }

  /** The version of a method the state now fits (`versions`: versionsOf's), else the method itself. */
  async #version({ chain, lo, hi }) {
    const dv = new DataView((await this.#download(lo, hi - lo)).buffer);
    const fits = ({ conds }) => conds.every(({ at, lo: a, hi: b }) => {
      const x = dv.getBigInt64(at - lo, true);
      return x >= a && x <= b;
    });
    return (chain.find(fits) ?? chain[0]).v;
  }

  /** Binds the method's dims (a plan per set of input shapes, cached) and copies the inputs' bytes. */
  #prepare(m, tensors) {
    const gp = this.#gp, program = gp.program, rt = gp.rt, x = rt.x;
    const spec = program.methodSpecs[m];
    let plan = gp.plans[m];
    if (spec.inputs.some((s) => s.dynamic)) {
      const { session } = this.#wasm;
      const key = tensors.map((t) => t.shape.join(',')).join(';');
      let cache = gp.dynamic.get(m);
      if (!cache) gp.dynamic.set(m, (cache = new Map()));
      plan = cache.get(key);
      if (!plan) {
        const dims = rt.malloc(8 * 8 + 13 * 8);
        try {
          tensors.forEach((t, i) => {
            if (!spec.inputs[i].dynamic) return;
            new BigInt64Array(x.memory.buffer, dims, 8).set(t.shape.map((d) => BigInt(d)));
            rt.check(x.tdm_session_set_input_shape(session, m, i, dims, t.shape.length));
          });
          rt.check(x.tdm_session_bind(session, m));
          plan = markHalf(readPlan(rt, program.handle, session, m, dims + 64), gp.half);
        } finally {
          x.tdm_free(dims);
        }
        cache.set(key, plan);
      }
    }
    return { plan, data: tensors.map((t) => new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength).slice()) };
  }
  async #execute(name, { plan, data }, returns = false) {
    const gp = this.#gp, dev = gp.dev;
    const { list, params } = await gp.compiled(plan);
    const base = (v) => (v.region === 2 ? 0 : gp.scratchBase) + v.offset;
    // inputs (all in scratch, not overlapping): one image over their span, word aligned; the other
    // scratch bytes in it are dead at a call's start (each is written before it is read)
    if (data.length) {
      const spans = plan.inputs.map((v, i) => [base(plan.values[v]), data[i]]);
      const lo = Math.min(...spans.map(([o]) => o)) & ~3, hi = up(Math.max(...spans.map(([o, d]) => o + d.length)), 4);
      if (hi > lo) {
        const img = new Uint8Array(hi - lo);
        for (const [o, d] of spans) img.set(d, o - lo);
        dev.queue.writeBuffer(this.#buf, lo, img);
      }
    }
    dev.queue.writeBuffer(this.#flag, 0, Uint32Array.of(0, 0xffffffff, 0, 0)); // [failed op + 1, first bad index position]
    let groups = this.#groups.get(plan);
    if (!groups) {
      groups = list.map((d) => dev.createBindGroup({
        layout: gp.layout,
        entries: [
          { binding: 0, resource: { buffer: this.#buf } }, { binding: 1, resource: d.cwin },
          { binding: 2, resource: { buffer: this.#flag } },
          { binding: 3, resource: { buffer: params, offset: d.at, size: up(d.params.length * 4, 16) } },
          { binding: 4, resource: { buffer: gp.halfBuffer } },
        ],
      }));
      this.#groups.set(plan, groups);
    }
    const enc = dev.createCommandEncoder();
    // the slots of the state updated before the method's last op that can fail, kept until the call is known to succeed
    const journal = (plan.journal ??= journalSpans(plan));
    const kept = journal.length ? journal.at(-1)[2] + journal.at(-1)[1] - journal.at(-1)[0] : 0;
    if (kept > (this.#backup?.size ?? 0)) {
      this.#backup?.destroy();
      this.#backup = dev.createBuffer({ size: kept, usage: GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
    }
    for (const [lo, hi, at] of journal) enc.copyBufferToBuffer(this.#buf, lo, this.#backup, at, hi - lo);
    const pass = enc.beginComputePass();
    list.forEach((d, k) => {
      pass.setPipeline(d.pipeline);
      pass.setBindGroup(0, groups[k]);
      const wgs = d.groups ?? Math.ceil(d.count / gp.wg); // a kernel with its own workgroup size (gemm.js) gives its groups
      pass.dispatchWorkgroups(Math.min(wgs, gp.maxGroups), Math.ceil(wgs / gp.maxGroups));
    });
    pass.end();
    // read back the outputs (each its word-aligned span) and the flag
    let at = 16;
    const outs = plan.outputs.map((v) => {
      const val = plan.values[v], nbytes = nbytesOf(val);
      const c = val.region === 1 ? gp.consts.find((b) => val.offset >= b.start && val.offset + nbytes <= b.end) ?? gp.consts[0] : null;
      const src = c ? c.buffer : this.#buf, o = c ? val.offset - c.start + c.at : base(val);
      const lo = o & ~3, size = up(o + nbytes, 4) - lo;
      const r = { val, nbytes, skip: o - lo, at, src, lo, size };
      at += up(size, 4);
      return r;
    });
    // out of memory for the read-back buffer: refused before anything is submitted (state unchanged)
    const [staging] = await allocate(dev, [{ size: at, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }],
      `method '${name}': the read-back buffer of the outputs`, 'nothing ran, the state is unchanged');
    enc.copyBufferToBuffer(this.#flag, 0, staging, 0, 16);
    for (const r of outs) if (r.size > 0) enc.copyBufferToBuffer(r.src, r.lo, staging, r.at, r.size);
    // a command the device refuses is reported, never a silently unrun call (it read back zeros);
    // a refused submission runs nothing, so the state is unchanged
    dev.pushErrorScope('validation');
    dev.queue.submit([enc.finish()]);
    const refused = await dev.popErrorScope();
    if (refused) {
      staging.destroy();
      throw new TandemError('TDM_ERR_DEVICE', `method '${name}': the GPU refused the call's commands (nothing ran, the state is ` +
        `unchanged): ${refused.message}`);
    }
    try {
      await staging.mapAsync(GPUMapMode.READ);
      const bytes = new Uint8Array(staging.getMappedRange()).slice();
      staging.unmap();
      const flag = new Uint32Array(bytes.buffer, 0, 1)[0];
      if (flag && journal.length) { // the state as it was before the call
        const undo = dev.createCommandEncoder();
        for (const [lo, hi, at] of journal) undo.copyBufferToBuffer(this.#backup, at, this.#buf, lo, hi - lo);
        dev.queue.submit([undo.finish()]);
      }
      if (flag) {
        const op = plan.ops[flag - 1];
        if (op?.bounds) { // when / when_in: the state's value, unchanged (nothing after the op ran)
          const at = base(plan.values[op.in[0]]), dv = new DataView((await this.#read(at & ~3, 12)).buffer);
          throw new TandemError('TDM_ERR_GUARD', `method '${name}' op ${flag - 1} (${op.name}): the method was exported in ` +
            `versions for the values of a Python ${op.name === 'when' ? 'value' : 'int'} it branches on (the method's line ` +
            `${op.iattr.at(-1)}) that its calls reach, and this call finds ${dv.getBigInt64(at & 3, true)}, which no version was ` +
            'traced for (state written by hand?); export again with state that reaches that value, or write the branch with ' +
            'torch.where (the state is unchanged)');
        }
        if (op?.name === 'guard') {
          throw new TandemError('TDM_ERR_GUARD', `method '${name}' op ${flag - 1} (guard): a branch on a tensor value (the method's line ` +
            `${op.iattr[0]}) goes the other way than when it was exported; export again with inputs and state that take this ` +
            'branch, or write it with torch.where (the state is unchanged)');
        }
        // nothing after the failed check ran, so its index is still where it was: read the first bad one
        const pos = new Uint32Array(bytes.buffer, 4, 1)[0], idx = plan.values[op.in[0]];
        const w = idx.dtype === 'int64' ? 8 : 4, at = base(idx) + pos * w;
        let value = '(a constant)';
        if (idx.region !== 1) {
          const dv = new DataView((await this.#read(at, w)).buffer);
          value = idx.dtype === 'int64' ? dv.getBigInt64(0, true) : dv.getInt32(0, true);
        }
        throw new TandemError('TDM_ERR_INDEX', `method '${name}' op ${flag - 1}: index ${value} is out of range for a dimension ` +
          `of size ${op.iattr[0]} (the state is unchanged)`);
      }
      if (returns && !plan.outputs.length) return null;
      const tensors = outs.map((r) => {
        const Arr = ARRAY_OF[r.val.dtype];
        const a = new Arr(r.nbytes / Arr.BYTES_PER_ELEMENT);
        new Uint8Array(a.buffer).set(bytes.subarray(r.at + r.skip, r.at + r.skip + r.nbytes));
        return new Tensor(r.val.dtype, a, r.val.shape);
      });
      return tensors;
    } finally {
      staging.destroy();
    }
  }

  /** n bytes of this session's buffer from byte at (a multiple of 4), clipped to the buffer. */
  async #read(at, n) {
    return this.#download(at, Math.min(n, this.#gp.sessionBytes - at));
  }

  /** `n` bytes of this session's buffer from byte `at` (a multiple of 4). */
  async #download(at, n) {
    const dev = this.#gp.dev, size = up(n, 4) || 4;
    const [staging] = await allocate(dev, [{ size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }],
      'the read-back buffer of the state', 'the state is unchanged');
    const enc = dev.createCommandEncoder();
    enc.copyBufferToBuffer(this.#buf, at, staging, 0, size);
    dev.queue.submit([enc.finish()]);
    try {
      await staging.mapAsync(GPUMapMode.READ);
      return new Uint8Array(staging.getMappedRange()).slice(0, n);
    } finally {
      staging.destroy();
    }
  }

  readState(s) {
    this.#present('readState');
    return this.#track('readState', this.#download(s.offset, s.nbytes).then((b) => {
      const Arr = ARRAY_OF[s.dtype];
      return new Arr(b.buffer, 0, s.nbytes / Arr.BYTES_PER_ELEMENT);
    }));
  }

  writeState(s, data) {
    this.#present('writeState');
    const bytes = new Uint8Array(up(s.nbytes, 4)); // past a state's bytes, up to the next 64, is padding
    bytes.set(new Uint8Array(data.buffer, data.byteOffset, s.nbytes));
    this.#gp.dev.queue.writeBuffer(this.#buf, s.offset, bytes);
  }

  saveState() {
    this.#present('saveState');
    return this.#track('saveState', this.#download(0, this.#gp.program.stateBytes));
  }

  loadState(bytes) {
    this.#present('loadState');
    const snap = new Uint8Array(up(this.#gp.program.stateBytes, 4));
    snap.set(bytes);
    this.#gp.dev.queue.writeBuffer(this.#buf, 0, snap);
  }

  resetState() {
    this.#present('resetState');
    this.#gp.dev.queue.writeBuffer(this.#buf, 0, this.#gp.initial);
  }

  /** A new session on the same program and constants' buffer: its own state (initial, or with
   * `copy` a copy of this one's), copied on the GPU. */
  fork(copy) {
    this.#present('fork');
    return this.#track('fork', (async () => {
      const w = this.#wasm.fork(false);
      // the fork's buffers under the out-of-memory and validation scopes: on failure it is gone
      // whole (this model untouched)
      let res;
      try {
        res = await scoped(this.#gp.dev, () => new GpuBackend(this.#gp, w));
      } catch (e) {
        w.dispose();
        throw e;
      }
      const f = res.value;
      const err = allocError(res, 'fork(): the new model\'s state and scratch', this.#gp.sessionBytes + 16,
        'no model was made, this one is unchanged');
      if (err) {
        if (f) f.dispose();
        else w.dispose();
        throw err;
      }
      if (copy && this.#gp.program.stateBytes > 0) {
        const enc = this.#gp.dev.createCommandEncoder();
        enc.copyBufferToBuffer(this.#buf, 0, f.#buf, 0, up(this.#gp.program.stateBytes, 4));
        this.#gp.dev.queue.submit([enc.finish()]);
      }
      return f;
    })());
  }

  /** Frees the wasm session now and this session's buffers once its operation in flight is done;
   * the last session of the program destroys the device. */
  dispose() {
    this.#wasm.dispose();
    Promise.resolve(this.#busy).then(() => {
      this.#buf.destroy();
      this.#flag.destroy();
      this.#backup?.destroy();
      if (--this.#gp.users === 0) {
        for (const b of this.#gp.constBuffers) b.destroy();
        this.#gp.halfBuffer.destroy();
        this.#gp.dev.destroy();
      }
    });
  }
}
