// What the WebGPU backend (web/webgpu/backend.js) knows of a program before it runs it: each method's plan
// as the wasm session has it bound (its ops, values and memory offsets, read through the C API, never
// parsed here) and how the program's data section is laid out in GPU buffers (constLayout).

export const ALIGN = 256;
export const up = (n, a) => Math.ceil(n / a) * a;

/** Reads method m's plan as the wasm session has it bound: { name, ops, values, inputs, outputs }. */
export function readPlan(rt, handle, session, m, info) {
  const x = rt.x;
  const values = [];
  const nv = x.tdm_method_value_count(handle, m) >>> 0;
  for (let v = 0; v < nv; v++) {
    rt.check(x.tdm_session_value_info(session, m, v, info));
    const f = new BigInt64Array(x.memory.buffer, info, 13);
    const rank = Number(f[4]);
    values.push({ dtype: rt.dtypeNames[Number(f[0])], region: Number(f[1]), ref: Number(f[2]), offset: Number(f[3]),
      shape: Array.from(f.subarray(5, 5 + rank), Number) });
  }
  const ops = [];
  const nops = x.tdm_method_op_count(handle, m) >>> 0;
  for (let k = 0; k < nops; k++) {
    const operands = (io) => Array.from({ length: x.tdm_method_op_operand_count(handle, m, k, io) >>> 0 },
      (_, j) => x.tdm_method_op_operand(handle, m, k, io, j) >>> 0);
    const name = rt.str(x.tdm_method_op_name(handle, m, k) >>> 0);
    const big = Array.from({ length: x.tdm_method_op_attr_count(handle, m, k, 0) >>> 0 },
      (_, j) => BigInt.asIntN(64, BigInt(x.tdm_session_op_iattr(session, m, k, j))));
    ops.push({
      name, in: operands(0), out: operands(1), iattr: big.map(Number),
      fattr: Array.from({ length: x.tdm_method_op_attr_count(handle, m, k, 1) >>> 0 }, (_, j) => x.tdm_method_op_fattr(handle, m, k, j)),
      // the values a version's `when` / `when_in` ops compare the state with, exact (int64; a Number is not past 2^53)
      ...(name === 'when' || name === 'when_in' ? { bounds: name === 'when' ? [big[0], big[0]] : [big[0], big[1]] } : {}),
    });
  }
  const io = (k) => Array.from({ length: x.tdm_method_io_count(handle, m, k) >>> 0 },
    (_, i) => x.tdm_method_io_value(handle, m, k, i) >>> 0);
  return { m, ops, values, inputs: io(0), outputs: io(1) };
}

export const resolved = (plan, op) => ({ ...op, ins: op.in.map((v) => plan.values[v]), outs: op.out.map((v) => plan.values[v]) });
const BYTES = { float32: 4, int32: 4, int64: 8, bool: 1, int8: 1, int4x2: 1, bfloat16: 2, int16: 2 };
export const nbytesOf = (v) => v.shape.reduce((a, b) => a * b, 1) * BYTES[v.dtype];

// The ops that fail a call (their kernels set the failure flag: kernels.js).
const FAILS = new Set(['check_index', 'guard', 'when', 'when_in']);

/** The state bytes plan's ops write before its last op that can fail: word-aligned spans [lo, hi, at], merged,
 * `at` where a span is kept in a copy of them all, one after another.
 * The verifier allows only updates in place there (index_put, slice_scatter, scatter: src/verify.c), which
 * the wasm runtime journals row by row; this backend keeps a copy of their slots and puts it back when a
 * call fails, so a failed call leaves the state as it was here too. */
export function journalSpans(plan) {
  const last = plan.ops.findLastIndex((op) => FAILS.has(op.name));
  const spans = [];
  for (const op of plan.ops.slice(0, Math.max(last, 0))) {
    for (const v of op.out.map((j) => plan.values[j])) if (v.region === 2) spans.push([v.offset & ~3, up(v.offset + nbytesOf(v), 4)]);
  }
  spans.sort((a, b) => a[0] - b[0]);
  const merged = [];
  for (const [lo, hi] of spans) {
    if (merged.length && lo <= merged.at(-1)[1]) merged.at(-1)[1] = Math.max(merged.at(-1)[1], hi);
    else merged.push([lo, hi]);
  }
  let at = 0;
  return merged.map(([lo, hi]) => [lo, hi, (at += hi - lo) - (hi - lo)]);
}

/** The byte span [lo, hi) of op's constant operands (the data section), or null. */
export function constSpan(plan, op) {
  let lo = Infinity, hi = -Infinity;
  for (const v of [...op.in, ...op.out].map((j) => plan.values[j])) {
    if (v.region !== 1) continue;
    lo = Math.min(lo, v.offset);
    hi = Math.max(hi, v.offset + nbytesOf(v));
  }
  return lo < hi ? [lo, hi] : null;
}

/** How the data section goes into GPU buffers: one buffer when it fits a binding (and nothing of
 * it is kept elsewhere: `split` false), else only the byte spans the ops' constants take (merged
 * where they overlap, so each op's constants lie in one span), packed one after another into
 * buffers of at most maxBufferSize, each at its own offset modulo 256 (so every element keeps its
 * alignment); each dispatch binds a window of at most maxStorageBufferBindingSize over its span.
 * Returns { chunks: [{ start, end, at, buf }] (data bytes [start, end) at byte `at` of buffer
 * `buf`), sizes: [buffer bytes] } or { error, limit }. */
export function constLayout(plans, dataSize, maxBuffer, maxBinding, split = false) {
  const whole = { chunks: [{ start: 0, end: dataSize, at: 0, buf: 0 }], sizes: [dataSize] };
  if (!split && dataSize <= Math.min(maxBuffer, maxBinding)) return whole;
  const spans = [];
  for (const plan of plans) {
    for (const op of plan.ops) {
      const s = constSpan(plan, op);
      if (s) spans.push([...s, `${op.name} (method ${plan.m} op ${plan.ops.indexOf(op)})`]);
    }
    for (const v of plan.outputs.map((j) => plan.values[j])) {
      if (v.region === 1) spans.push([v.offset, v.offset + nbytesOf(v), `a constant output of method ${plan.m}`]);
    }
  }
  spans.sort((a, b) => a[0] - b[0]);
  const merged = [];
  for (const [lo, hi, who] of spans) {
    const last = merged[merged.length - 1];
    if (last && lo < last[1]) last[1] = Math.max(last[1], hi);
    else merged.push([lo & ~3, hi, who]);
  }
  const chunks = [], sizes = [0];
  for (const [lo, hi, who] of merged) {
    if (hi - lo + ALIGN > Math.min(maxBuffer, maxBinding)) {
      const [name, limit] = maxBinding <= maxBuffer ? ['maxStorageBufferBindingSize', maxBinding] : ['maxBufferSize', maxBuffer];
      return { error: `the constants of ${who} (with the ops sharing them) take ${hi - lo} bytes in one binding, above this ` +
        `adapter's ${name} (${limit} bytes)`, limit: name };
    }
    let buf = sizes.length - 1, at = up(sizes[buf], ALIGN) + (lo % ALIGN);
    if (at + hi - lo > maxBuffer) {
      sizes.push(0);
      buf++;
      at = lo % ALIGN;
    }
    chunks.push({ start: lo, end: hi, at, buf });
    sizes[buf] = at + up(hi - lo, 4);
  }
  if (!chunks.length) chunks.push({ start: 0, end: 0, at: 0, buf: 0 });
  return { chunks, sizes };
}

/** Marks plan's values that live in H (float16 weights, half.js): region 3, `half` their element. */
export const markHalf = (plan, half) => {
  for (const v of plan.values) {
    if (half?.at.has(v.offset) && v.region === 1 && v.dtype === 'float32') Object.assign(v, { region: 3, half: half.at.get(v.offset) });
  }
  return plan;
};
