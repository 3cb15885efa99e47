// WGSL kernels of the WebGPU backend (web/webgpu/backend.js runs them; the building blocks are in
// wgsl.js, the kernels along one dim in indexing.js, attention in attention.js, conv and pooling in
// conv.js, int8/int4 in quant.js, the convs with int8, bfloat16 or int16 weights in conv_quant.js). Each op of a verified
// program becomes one or more dispatches: { key, code, params, count }. `code` is a WGSL module
// generated for the op's kind, dtypes and operand buffers (so ops of one kind share a pipeline);
// `params` (u32 words: sizes, strides, element offsets) are per op; `count` is the thread count.
//
// Memory: every operand lives in one of two buffers, M (the session's state region then its
// scratch arena, read-write) or C (the program's data section: constants, read-only), at the
// element offset the plan gives. F[0] is the call's failure flag: check_index sets it (op index
// + 1) and every kernel returns at once while it is set, so no op after a failed check writes
// anything (the verifier puts checks before any state write but updates in place, whose slots
// backend.js keeps a copy of and puts back: docs/format.md, atomic calls).
// Element types in WGSL: float32 f32, int32 i32, bool u32 (0 or 1, one byte in memory: a kernel
// writing bools declares M atomic and sets its bytes with atomicAnd/atomicOr), int64 vec2<u32>
// (low word, high word).
import {
  SIZE, contiguous, numel, broadcastStrides, header, reader, writer, indexReader, MAIN, MATH, MAXR, mapParams, mapCode, zero, f32bits,
  i64lit, special, workgroupSize,
} from './wgsl.js';
import { argExtreme, cumsum, select, gather, scatter } from './indexing.js';
import { attention } from './attention.js';
import { conv, pool, convTranspose } from './conv.js';
import { matmulQ, embeddingQ } from './quant.js';
import { convQ8, convTransposeQ8, convI16, convTransposeI16 } from './conv_quant.js';
import { tiledMatmul, tileSize } from './gemm.js';

export { workgroupSize, tileSize };

// ---- op tables ------------------------------------------------------------------------------------

const F32_UNARY = {
  neg: '-a0', abs: 'abs(a0)', relu: 'select(a0, 0.0, a0 < 0.0)', floor: 'floor(a0)', ceil: 'ceil(a0)',
  exp: 'exp(a0)', log: 'log(a0)', sqrt: 'sqrt(a0)', rsqrt: '1.0 / sqrt(a0)', sin: 'sin(a0)', cos: 'cos(a0)',
  tanh: 'tanh_(a0)', sigmoid: '1.0 / (1.0 + exp(-a0))', gelu: '0.5 * a0 * (1.0 + erf_(a0 * 0.70710678118654752))',
  gelu_tanh: '0.5 * a0 * (1.0 + tanh_(0.79788456080286536 * (a0 + 0.044715 * a0 * a0 * a0)))',
  silu: 'a0 / (1.0 + exp(-a0))', erf: 'erf_(a0)', reciprocal: '1.0 / a0',
  log1p: 'select(log(1.0 + a0), a0 * (1.0 - a0 * (0.5 - a0 / 3.0)), abs(a0) < 1e-4)',
  hardswish: 'a0 * min(max(a0 + 3.0, 0.0), 6.0) / 6.0', hardsigmoid: 'min(max(a0 + 3.0, 0.0), 6.0) / 6.0',
  elu: 'max(a0, exp(min(a0, 0.0)) - 1.0)', // ELU alpha 1, as src/kernels/conv_gemm.c's elu op
};
const I32_UNARY = { neg: '-a0', abs: 'abs(a0)', relu: 'max(a0, 0)', floor: 'a0', ceil: 'a0' };
const I64_UNARY = { neg: 'neg64(a0)', floor: 'a0', ceil: 'a0', relu: 'select(a0, vec2<u32>(0u, 0u), bitcast<i32>(a0.y) < 0)',
  abs: 'select(a0, neg64(a0), bitcast<i32>(a0.y) < 0)' };
const F32_BINARY = {
  add: 'a0 + a1', sub: 'a0 - a1', mul: 'a0 * a1', div: 'a0 / a1', maximum: 'max_(a0, a1)', minimum: 'min_(a0, a1)',
  pow: 'select(pow(a0, a1), 1.0, a1 == 0.0)', remainder: 'a0 - a1 * floor(a0 / a1)',
};
const I32_BINARY = { add: 'a0 + a1', sub: 'a0 - a1', mul: 'a0 * a1', maximum: 'max(a0, a1)', minimum: 'min(a0, a1)',
  trunc_divide: 'div32(a0, a1, 0u)', floor_divide: 'div32(a0, a1, 1u)', remainder: 'div32(a0, a1, 2u)', pow: 'pow32(a0, a1)' };
const I64_BINARY = {
  mul: 'mul64(a0, a1)', trunc_divide: 'div64(a0, a1, 0u)', floor_divide: 'div64(a0, a1, 1u)', remainder: 'div64(a0, a1, 2u)',
  pow: 'pow64(a0, a1)',
  add: 'add64(a0, a1)', sub: 'add64(a0, neg64(a1))', maximum: 'select(a0, a1, lt64(a0, a1))', minimum: 'select(a0, a1, lt64(a1, a0))',
};
const CMP = { eq: '==', ne: '!=', lt: '<', le: '<=', gt: '>', ge: '>=' };
const CMP64 = { eq: 'eq64(a0, a1)', ne: '!eq64(a0, a1)', lt: 'lt64(a0, a1)', le: '!lt64(a1, a0)', gt: 'lt64(a1, a0)', ge: '!lt64(a0, a1)' };

function castExpr(from, to) {
  if (from === to) return 'a0';
  const key = `${from}>${to}`;
  switch (key) {
    case 'float32>int32': return 'select(i32(a0), -2147483647 - 1, isnan_(a0) || a0 >= 2147483648.0 || a0 < -2147483648.0)';
    case 'float32>int64': return 'i64off32(a0)';
    case 'float32>bool': return 'select(0u, 1u, a0 != 0.0)';
    case 'int32>float32': return 'f32(a0)';
    case 'int32>int64': return 'i64of(a0)';
    case 'int32>bool': return 'select(0u, 1u, a0 != 0)';
    case 'int64>float32': return 'f32of64(a0)';
    case 'int64>int32': return 'bitcast<i32>(a0.x)';
    case 'int64>bool': return 'select(0u, 1u, a0.x != 0u || a0.y != 0u)';
    case 'bool>float32': return 'f32(a0)';
    case 'bool>int32': return 'i32(a0)';
    case 'bool>int64': return 'vec2<u32>(a0, 0u)';
  }
  return null;
}

const ELEMENTWISE_BINARY = new Set([...Object.keys(F32_BINARY), ...Object.keys(CMP), 'logical_and', 'logical_or', 'floor_divide',
  'trunc_divide']);
// isnan/isinf/isfinite are not run on WebGPU: WGSL lets an implementation assume finite floats, and
// SwiftShader's loads do not keep NaN's bits for the bit test below (programs with them run on wasm)
const ELEMENTWISE_UNARY = new Set([...Object.keys(F32_UNARY), 'logical_not']);

function binaryExpr(name, dt) {
  if (CMP[name]) return dt === 'int64' ? `select(0u, 1u, ${CMP64[name]})` : `select(0u, 1u, a0 ${CMP[name]} a1)`;
  if (name === 'logical_and' || name === 'logical_or') {
    const t = (a) => (dt === 'float32' ? `${a} != 0.0` : dt === 'int64' ? `(${a}.x | ${a}.y) != 0u`
      : dt === 'int32' ? `${a} != 0` : `${a} != 0u`);
    return `select(0u, 1u, (${t('a0')}) ${name === 'logical_and' ? '&&' : '||'} (${t('a1')}))`;
  }
  return { float32: F32_BINARY, int32: I32_BINARY, int64: I64_BINARY }[dt]?.[name] ?? null;
}

function unaryExpr(name, dt) {
  if (name === 'logical_not') {
    const t = dt === 'float32' ? 'a0 == 0.0' : dt === 'int64' ? '(a0.x | a0.y) == 0u' : dt === 'int32' ? 'a0 == 0' : 'a0 == 0u';
    return `select(0u, 1u, ${t})`;
  }
  if (name === 'isnan') return dt === 'float32' ? 'select(0u, 1u, isnan_(a0))' : null;
  if (name === 'isinf') return dt === 'float32' ? 'select(0u, 1u, (bitcast<u32>(a0) & 0x7fffffffu) == 0x7f800000u)' : null;
  if (name === 'isfinite') return dt === 'float32' ? 'select(0u, 1u, (bitcast<u32>(a0) & 0x7fffffffu) < 0x7f800000u)' : null;
  return { float32: F32_UNARY, int32: I32_UNARY, int64: I64_UNARY }[dt]?.[name] ?? null;
}

// ---- the compiler: op -> dispatches ----------------------------------------------------------------

/** An operand as the kernels address it: its buffer and element offset. `v` is a plan value
 * { dtype, region, offset, shape }; region 1 (constant) is in C, else M at `mBase[region]`. */
export function operand(v, mBase) {
  const src = v.region === 1 ? 'C' : 'M';
  const byte = (v.region === 1 ? 0 : mBase[v.region]) + v.offset;
  return { src, base: byte / SIZE[v.dtype], dtype: v.dtype, shape: v.shape };
}

/** A copy of x (strides over dims) into y (strides over dims), any dtype: one map dispatch. */
function copyDispatch(y, ys, x, xs, dims) {
  const types = [y.dtype, x.dtype], srcs = ['M', x.src];
  return mapDispatch(types, srcs, 'a0', null, dims, [], [{ base: y.base, strides: ys }, { base: x.base, strides: xs }]);
}

function mapDispatch(types, srcs, expr, reduce, dims, rdims, operands, extra = '') {
  const key = `map|${types}|${srcs}|${expr}|${reduce ? JSON.stringify(reduce) : ''}|${extra}`;
  return { key, code: (wg) => mapCode(wg, types, srcs, expr, reduce, extra), params: mapParams(dims, rdims, operands), count: numel(dims) };
}

/** Why an op cannot run on WebGPU here (a short phrase), or null. `op` = { name, ins, outs, iattr,
 * fattr } with values resolved ({ dtype, shape, region }). */
export function unsupported(op) {
  const { name, ins, outs } = op;
  const d0 = ins[0]?.dtype, y = outs[0];
  const rank = Math.max(...ins.map((v) => v.shape.length), ...outs.map((v) => v.shape.length), 0);
  if (rank > MAXR) return `${name} (rank above 8)`;
  if (ELEMENTWISE_BINARY.has(name)) return binaryExpr(name, d0) ? null : `${name} (${d0})`;
  if (ELEMENTWISE_UNARY.has(name)) return unaryExpr(name, d0) ? null : `${name} (${d0})`;
  switch (name) {
    case 'where': case 'copy': case 'expand': case 'permute': case 'slice': case 'cat': case 'fill':
    case 'check_index': case 'index_select': case 'slice_scatter': case 'embedding_packed':
    case 'rms_norm': case 'layer_norm': case 'softmax': case 'log_softmax': case 'matmul': case 'matmul_packed':
    case 'matmul_grouped':
      return null;
    case 'cast': return castExpr(d0, y.dtype) ? null : `cast (${d0} to ${y.dtype})`;
    case 'index_put': {
      if (op.iattr[1] && !['float32', 'int32', 'int64'].includes(ins[2].dtype)) return `index_put (accumulate, ${ins[2].dtype})`;
      const vals = ins[2], base = ins[0], dim = op.iattr[0];
      const want = base.shape.map((s, d) => (d === dim ? ins[1].shape[0] : s));
      return vals.shape.length === want.length && vals.shape.every((s, d) => s === want[d]) ? null : 'index_put (broadcast values)';
    }
    case 'sum': case 'mean': case 'amax': case 'amin':
      return d0 === 'float32' || (d0 === 'int64' && name !== 'mean') ? null : `${name} (${d0})`;
    case 'any': case 'all': return d0 === 'bool' ? null : `${name} (${d0})`;
    case 'argmax': case 'argmin': case 'topk': case 'sort': case 'cumsum':
      return ['float32', 'int64', 'int32'].includes(d0) ? null : `${name} (${d0})`;
    case 'gather': case 'scatter': case 'guard': case 'when': case 'when_in': case 'max_pool': case 'avg_pool':
    case 'matmul_q8': case 'matmul_q4':
    case 'embedding_q8': case 'embedding_q4': case 'conv_q8': case 'conv_transpose_q8': case 'conv_bf16':
    case 'conv_transpose_bf16': case 'conv_i16': case 'conv_transpose_i16':
      return null;
    case 'conv_transpose': return op.iattr[0] === 1 || op.iattr[0] === 2 ? null : 'conv_transpose (rank)';
    case 'attention': { // head sizes through the perms (attention.js attnView): the last dim stays last
      const dv = ins[2].shape[ins[2].shape.length - 1], d = ins[0].shape[ins[0].shape.length - 1];
      return dv <= 256 && d <= 256 ? null : 'attention (head size above 256)';
    }
    case 'conv': return op.iattr[0] === 1 || op.iattr[0] === 2 ? null : 'conv (rank)';
  }
  return name;
}

/** The dispatches of one op. `A(v)` resolves a plan value to an operand; `opts.tile`: the tiled
 * matmul's tile side (gemm.js tileSize; 0 or absent: no tiled kernel). */
export function compile(op, A, opIndex, opts = {}) {
  const { name, iattr, fattr } = op;
  const ins = op.ins.map(A), outs = op.outs.map(A);
  const y = outs[0], yst = y ? contiguous(y.shape) : [];
  if (ELEMENTWISE_BINARY.has(name) || name === 'where') {
    const args = ins.map((x) => ({ base: x.base, strides: broadcastStrides(x.shape, y.shape) }));
    const expr = name === 'where' ? 'select(a2, a1, a0 != 0u)' : binaryExpr(name, ins[0].dtype);
    return [mapDispatch([y.dtype, ...ins.map((x) => x.dtype)], ['M', ...ins.map((x) => x.src)], expr, null, y.shape, [],
      [{ base: y.base, strides: yst }, ...args])];
  }
  if (ELEMENTWISE_UNARY.has(name) || name === 'cast') {
    const x = ins[0];
    const expr = name === 'cast' ? castExpr(x.dtype, y.dtype) : unaryExpr(name, x.dtype);
    return [mapDispatch([y.dtype, x.dtype], ['M', x.src], expr, null, [numel(y.shape)], [],
      [{ base: y.base, strides: [1] }, { base: x.base, strides: [1] }])];
  }
  switch (name) {
    case 'copy': return [copyDispatch(y, [1], ins[0], [1], [numel(y.shape)])];
    case 'expand': return [copyDispatch(y, yst, ins[0], broadcastStrides(ins[0].shape, y.shape), y.shape)];
    case 'permute': {
      const xs = contiguous(ins[0].shape);
      return [copyDispatch(y, yst, ins[0], iattr.map((p) => xs[p]), y.shape)];
    }
    case 'slice': {
      const [dim, start, step] = iattr, x = ins[0], xs = contiguous(x.shape);
      const sx = { ...x, base: x.base + start * xs[dim] };
      return [copyDispatch(y, yst, sx, xs.map((s, d) => (d === dim ? s * step : s)), y.shape)];
    }
    case 'cat': {
      const dim = iattr[0];
      let at = 0;
      const list = [];
      for (const x of ins) {
        if (numel(x.shape) > 0) list.push(copyDispatch({ ...y, base: y.base + at * yst[dim] }, yst, x, contiguous(x.shape), x.shape));
        at += x.shape[dim];
      }
      return list;
    }
    case 'fill': {
      const lit = y.dtype === 'float32' ? `bitcast<f32>(${f32bits(fattr[0])}u)` : y.dtype === 'int32' ? `${iattr[0] | 0}`
        : y.dtype === 'bool' ? `${iattr[0] ? 1 : 0}u` : i64lit(BigInt(iattr[0] ?? 0));
      return [mapDispatch([y.dtype], ['M'], lit, null, [numel(y.shape)], [], [{ base: y.base, strides: [1] }])];
    }
    case 'sum': case 'mean': case 'amax': case 'amin': case 'any': case 'all': {
      const x = ins[0], xs = contiguous(x.shape), red = new Set(iattr);
      const keep = x.shape.map((_, d) => d).filter((d) => !red.has(d));
      const dims = keep.map((d) => x.shape[d]), rdims = iattr.map((d) => x.shape[d]);
      const reduce = x.dtype === 'int64' ? {
        sum: { init: 'vec2<u32>(0u, 0u)', step: 'acc = add64(acc, a0);', fin: 'acc' },
        amax: { init: 'vec2<u32>(0u, 0x80000000u)', step: 'acc = select(acc, a0, lt64(acc, a0));', fin: 'acc' },
        amin: { init: 'vec2<u32>(0xffffffffu, 0x7fffffffu)', step: 'acc = select(acc, a0, lt64(a0, acc));', fin: 'acc' },
      }[name] : x.dtype === 'bool' ? {
        any: { init: '0u', step: 'acc = acc | a0;', fin: 'acc' }, all: { init: '1u', step: 'acc = acc & a0;', fin: 'acc' },
      }[name] : {
        sum: { init: '0.0', step: 'acc += a0;', fin: 'acc' }, mean: { init: '0.0', step: 'acc += a0;', fin: 'acc / f32(n)' },
        amax: { init: 'ninf_()', step: 'acc = max_(acc, a0);', fin: 'acc' },
        amin: { init: 'pinf_()', step: 'acc = min_(acc, a0);', fin: 'acc' },
      }[name];
      return [mapDispatch([x.dtype, x.dtype], ['M', x.src], '', reduce, dims, rdims,
        [{ base: y.base, strides: contiguous(dims) },
          { base: x.base, strides: keep.map((d) => xs[d]), rstrides: iattr.map((d) => xs[d]) }])];
    }
    case 'matmul': {
      const [a, b] = ins, r = y.shape.length, K = a.shape[a.shape.length - 1], N = y.shape[r - 1];
      const batch = y.shape.slice(0, r - 2);
      const bs = (x) => { // x's own strides over its batch dims, broadcast to y's (0 where x has 1 or lacks the dim)
        const xs = contiguous(x.shape), xr = x.shape.length - 2;
        return batch.map((n, d) => { const e = d - (batch.length - xr); return e < 0 || (x.shape[e] === 1 && n !== 1) ? 0 : xs[e]; });
      };
      const sa = [...bs(a), K, 0], sb = [...bs(b), 0, 1];
      const M = r >= 2 ? y.shape[r - 2] : 1;
      if (opts.tile && M > 1 && a.shape.length >= 2 && b.shape.length >= 2 && a.shape.at(-2) === M && b.shape.at(-2) === K) {
        return [tiledMatmul(y, a, b, M, N, K, { dims: batch, sa: bs(a), sb: bs(b) }, opts.tile, false)];
      }
      return [mapDispatch(['float32', 'float32', 'float32'], ['M', a.src, b.src], '',
        { init: '0.0', step: 'acc = fma(a0, a1, acc);', fin: 'acc' },
        y.shape, [K], [{ base: y.base, strides: yst }, { base: a.base, strides: sa, rstrides: [1] },
          { base: b.base, strides: sb, rstrides: [N] }])];
    }
    case 'matmul_packed': {
      const [a, bp] = ins, K = a.shape[a.shape.length - 1], N = iattr[0], rows = numel(y.shape) / (N || 1);
      if (opts.tile && rows > 1) return [tiledMatmul(y, a, bp, rows, N, K, { dims: [], sa: [], sb: [] }, opts.tile, true)];
      const code = (wg) => header(false) + reader('ra', 'float32', a.src) + reader('rb', 'float32', bp.src) + writer('wr', 'float32')
        + MAIN(wg, `
  let N = P[0]; let K = P[1];
  if (i >= P[2]) { return; }
  let r = i / N; let n = i % N;
  let pb = P[5] + (n / 8u) * K * 8u + (n % 8u); let pa = P[4] + r * K;
  var acc = 0.0;
  for (var k = 0u; k < K; k++) { acc = fma(ra(pa + k), rb(pb + k * 8u), acc); }
  wr(P[3] + i, acc);`);
      return [special(`mmp|${a.src}${bp.src}`, code, [N, K, rows * N, y.base, a.base, bp.base], rows * N)];
    }
    case 'matmul_grouped': {
      // one thread per output: row r's expert is the first whose offset (clamped between the previous one
      // and S) passes r; rows past the last offset are zeros, as on wasm
      const [a, bp, offs] = ins, N = iattr[0], E = bp.shape[0], K = bp.shape[2], S = a.shape[0];
      const code = (wg) => header(false) + reader('ra', 'float32', a.src) + reader('rb', 'float32', bp.src)
        + indexReader('ro', offs.dtype, offs.src) + writer('wr', 'float32') + MAIN(wg, `
  let N = P[0]; let K = P[1]; let S = P[6]; let E = P[7];
  if (i >= P[2]) { return; }
  let r = i / N; let n = i % N;
  var lo = 0u; var e = E;
  for (var j = 0u; j < E; j++) {
    let o = ro(P[8] + j);
    let hi = select(select(u32(o), S, u32(o) > S), lo, o < 0 || u32(o) < lo);
    if (r < hi) { e = j; break; }
    lo = hi;
  }
  if (e == E) { wr(P[3] + i, 0.0); return; }
  let pb = P[5] + e * ((N + 7u) / 8u) * K * 8u + (n / 8u) * K * 8u + (n % 8u); let pa = P[4] + r * K;
  var acc = 0.0;
  for (var k = 0u; k < K; k++) { acc = fma(ra(pa + k), rb(pb + k * 8u), acc); }
  wr(P[3] + i, acc);`);
      const params = [N, K, S * N, y.base, a.base, bp.base, S, E, offs.base];
      return [special(`mmg|${a.src}${bp.src}${offs.src}${offs.dtype}`, code, params, S * N)];
    }
    case 'embedding_packed': {
      const [bp, idx] = ins, N = iattr[0], K = y.shape[y.shape.length - 1], cnt = numel(idx.shape);
      const code = (wg) => header(false) + reader('rb', 'float32', bp.src) + indexReader('ri', idx.dtype, idx.src) + writer('wr', 'float32')
        + MAIN(wg, `
  let N = P[0]; let K = P[1];
  if (i >= P[2]) { return; }
  let j = i / K; let k = i % K;
  var t = ri(P[5] + j);
  if (t < 0 && t != -2147483647 - 1) { t += i32(N); }
  if (t < 0 || t >= i32(N)) { wr(P[3] + i, 0.0); return; }
  let n = u32(t);
  wr(P[3] + i, rb(P[4] + (n / 8u) * K * 8u + k * 8u + (n % 8u)));`);
      return [special(`emb|${bp.src}${idx.src}${idx.dtype}`, code, [N, K, cnt * K, y.base, bp.base, idx.base], cnt * K)];
    }
    case 'index_select': {
      const [x, idx] = ins, dim = iattr[0], total = numel(y.shape);
      return [rowsByIndex(false, x, idx, y, x.shape[dim], numel(x.shape.slice(dim + 1)), numel(idx.shape), total)];
    }
    case 'index_put': {
      const [base, idx, vals] = ins, dim = iattr[0], n = base.shape[dim];
      const list = [];
      if (base.base !== y.base || base.src !== 'M') list.push(copyDispatch(y, [1], base, [1], [numel(y.shape)]));
      const inner = numel(base.shape.slice(dim + 1)), cnt = numel(idx.shape), total = numel(vals.shape);
      if (iattr[1]) { // accumulate: one thread per element of y, adding the values of every index equal to its row, in order
        const add = { float32: 'acc = acc + rv(vb);', int32: 'acc = acc + rv(vb);', int64: 'acc = add64(acc, rv(vb));' }[y.dtype];
        const ytotal = numel(y.shape);
        const acode = (wg) => header(false) + MATH + reader('ry', y.dtype, 'M') + reader('rv', vals.dtype, vals.src)
          + indexReader('ri', idx.dtype, idx.src) + writer('wr', y.dtype) + MAIN(wg, `
  if (i >= P[0]) { return; }
  let n = P[1]; let inner = P[2]; let cnt = P[3];
  let o = i / (n * inner); let row = (i / inner) % n; let e = i % inner;
  var acc = ry(P[4] + i);
  for (var j = 0u; j < cnt; j++) {
    var t = ri(P[6] + j);
    if (t < 0 && t != -2147483647 - 1) { t += i32(n); }
    if (t != i32(row)) { continue; }
    let vb = P[5] + (o * cnt + j) * inner + e;
    ${add}
  }
  wr(P[4] + i, acc);`);
        if (cnt > 0) list.push(special(`iputacc|${vals.dtype}${vals.src}|${idx.dtype}${idx.src}`, acode,
          [ytotal, n, inner, cnt, y.base, vals.base, idx.base], ytotal));
        return list;
      }
      if (total > 0) list.push(rowsByIndex(true, vals, idx, y, n, inner, cnt, total));
      return list;
    }
    case 'slice_scatter': {
      const [base, src] = ins, [dim, start, step] = iattr, list = [];
      if (base.base !== y.base || base.src !== 'M') list.push(copyDispatch(y, [1], base, [1], [numel(y.shape)]));
      if (numel(src.shape) > 0) list.push(copyDispatch({ ...y, base: y.base + start * yst[dim] },
        yst.map((s, d) => (d === dim ? s * step : s)), src, contiguous(src.shape), src.shape));
      return list;
    }
    case 'check_index': {
      const [idx] = ins, n = iattr[0], cnt = numel(idx.shape);
      const code = (wg) => header(false) + indexReader('ri', idx.dtype, idx.src) + MAIN(wg, `
  if (i >= P[0]) { return; }
  let t = ri(P[2] + i);
  if (t == -2147483647 - 1 || t < -i32(P[1]) || t >= i32(P[1])) { atomicMax(&F[0], P[3]); atomicMin(&F[1], i); }`);
      return cnt ? [special(`chk|${idx.dtype}${idx.src}`, code, [cnt, n, idx.base, opIndex + 1], cnt)] : [];
    }
    case 'softmax': case 'log_softmax': {
      const x = ins[0], dim = iattr[0] < 0 ? iattr[0] + x.shape.length : iattr[0];
      const L = x.shape[dim], inner = numel(x.shape.slice(dim + 1)), rows = numel(x.shape) / (L || 1);
      const log = name === 'log_softmax';
      const code = (wg) => header(false) + MATH + reader('rx', 'float32', x.src) + writer('wr', 'float32') + MAIN(wg, `
  if (i >= P[0]) { return; }
  let L = P[1]; let inner = P[2];
  let b = (i / inner) * L * inner + i % inner;
  var m = ninf_();
  for (var t = 0u; t < L; t++) { m = max_(m, rx(P[4] + b + t * inner)); }
  var s = 0.0;
  for (var t = 0u; t < L; t++) { s += exp(rx(P[4] + b + t * inner) - m); }
  for (var t = 0u; t < L; t++) { let v = rx(P[4] + b + t * inner) - m; wr(P[3] + b + t * inner, ${log ? 'v - log(s)' : 'exp(v) / s'}); }`);
      return [special(`${name}|${x.src}`, code, [rows, L, inner, y.base, x.base], rows)];
    }
    case 'rms_norm': case 'layer_norm': {
      const x = ins[0], r = x.shape.length;
      let ndim = 1, axis = r - 1, hasW = iattr[0], hasB = 0;
      if (name === 'layer_norm') {
        ndim = iattr[0]; hasW = iattr[1]; hasB = iattr[2];
        axis = iattr.length > 3 ? iattr[3] : r - ndim;
      }
      const S = numel(x.shape.slice(axis, axis + ndim)), inner = numel(x.shape.slice(axis + ndim)), rows = numel(x.shape) / (S || 1);
      const w = hasW ? ins[1] : null, bb = hasB ? ins[hasW ? 2 : 1] : null;
      const rms = name === 'rms_norm';
      const code = (wg) => header(false) + reader('rx', 'float32', x.src) + (w ? reader('rw', 'float32', w.src) : '')
        + (bb ? reader('rb', 'float32', bb.src) : '') + writer('wr', 'float32') + MAIN(wg, `
  if (i >= P[0]) { return; }
  let S = P[1]; let inner = P[2];
  let b = (i / inner) * S * inner + i % inner;
  var mean = 0.0;
  ${rms ? '' : 'for (var t = 0u; t < S; t++) { mean += rx(P[4] + b + t * inner); } mean = mean / f32(S);'}
  var v = 0.0;
  for (var t = 0u; t < S; t++) { let d = rx(P[4] + b + t * inner) - mean; v += d * d; }
  let inv = 1.0 / sqrt(v / f32(S) + bitcast<f32>(P[7]));
  for (var t = 0u; t < S; t++) {
    var o = (rx(P[4] + b + t * inner) - mean) * inv;
    ${w ? 'o = o * rw(P[5] + t);' : ''}
    ${bb ? 'o = o + rb(P[6] + t);' : ''}
    wr(P[3] + b + t * inner, o);
  }`);
      return [special(`${name}|${x.src}${w?.src}${bb?.src}`, code,
        [rows, S, inner, y.base, x.base, w?.base ?? 0, bb?.base ?? 0, f32bits(fattr[0])], rows)];
    }
    case 'argmax': case 'argmin': return [argExtreme(name === 'argmax', ins[0], y, iattr[0])];
    case 'cumsum': return [cumsum(ins[0], y, iattr[0])];
    case 'topk': return [select(ins[0], outs, iattr[0], iattr[1], iattr[2])];
    case 'sort': return [select(ins[0], outs, iattr[0], ins[0].shape[iattr[0]], iattr[1])];
    case 'gather': return [gather(ins[0], ins[1], y, iattr[0])];
    case 'scatter': {
      const list = [];
      if (ins[0].base !== y.base || ins[0].src !== 'M') list.push(copyDispatch(y, [1], ins[0], [1], [numel(y.shape)]));
      if (numel(ins[1].shape) > 0) list.push(scatter(ins[1], ins[2], y, iattr[0]));
      return list;
    }
    case 'guard': {
      const c = ins[0];
      const code = (wg) => header(false) + reader('rc', 'bool', c.src) + MAIN(wg, `
  if (i >= 1u) { return; }
  if (rc(P[1]) == 0u) { atomicMax(&F[0], P[0]); }`);
      return [special(`guard|${c.src}`, code, [opIndex + 1, c.base], 1)];
    }
    case 'when': case 'when_in': { // the state's int64 outside [lo, hi] fails the call (backend.js: TDM_ERR_GUARD)
      const c = ins[0], [lo, hi] = op.bounds.map((b) => BigInt.asUintN(64, b));
      const w = (b) => [Number(b & 0xffffffffn), Number(b >> 32n)];
      const code = (wg) => header(false) + MATH + reader('rc', 'int64', c.src) + MAIN(wg, `
  if (i >= 1u) { return; }
  let v = rc(P[1]);
  if (lt64(v, vec2<u32>(P[2], P[3])) || lt64(vec2<u32>(P[4], P[5]), v)) { atomicMax(&F[0], P[0]); }`);
      return [special(`when|${c.src}`, code, [opIndex + 1, c.base, ...w(lo), ...w(hi)], 1)];
    }
    case 'max_pool': case 'avg_pool': return [pool(name === 'max_pool', ins[0], y, iattr)];
    case 'conv_transpose': return [convTranspose(ins, y, iattr)];
    case 'matmul_q8': case 'matmul_q4': return [matmulQ(name === 'matmul_q4', ins, y, iattr, opts.tile)];
    case 'embedding_q8': case 'embedding_q4': return [embeddingQ(name === 'embedding_q4', ins, y, iattr)];
    case 'attention': return attention(op, ins, y, iattr, fattr);
    case 'conv': return conv(ins, y, iattr, opts.tile);
    case 'conv_q8': case 'conv_bf16': return [convQ8(ins, y, iattr, name === 'conv_bf16')];
    case 'conv_transpose_q8': case 'conv_transpose_bf16': return [convTransposeQ8(ins, y, iattr, name === 'conv_transpose_bf16')];
    case 'conv_i16': return [convI16(ins, y, iattr)];
    case 'conv_transpose_i16': return [convTransposeI16(ins, y, iattr)];
  }
  throw new Error(`no WebGPU kernel for ${name}`);
}

/** index_select (put = false: y's rows are src's rows the index picks; out of range gives zeros) and
 * index_put (put: src's rows go to y's rows the index names; out of range is skipped; where the
 * index repeats a row, the last one wins, as on wasm: each thread yields to a later equal index).
 * One thread per element of the index's rows: [outer, cnt, inner] over rows of n. */
function rowsByIndex(put, src, idx, y, n, inner, cnt, total) {
  const code = (wg) => header(y.dtype === 'bool') + reader('rs', src.dtype, src.src) + indexReader('ri', idx.dtype, idx.src)
    + writer('wr', y.dtype) + `fn row(j: u32, n: u32) -> i32 {
  var t = ri(P[6] + j);
  if (t < 0 && t != -2147483647 - 1) { t += i32(n); }
  return t;
}
` + MAIN(wg, `
  if (i >= P[0]) { return; }
  let n = P[1]; let inner = P[2]; let cnt = P[3];
  let o = i / (cnt * inner); let j = (i / inner) % cnt; let e = i % inner;
  let t = row(j, n);
  ${put ? `if (t < 0 || t >= i32(n)) { return; }
  for (var j2 = j + 1u; j2 < cnt; j2++) { if (row(j2, n) == t) { return; } }
  wr(P[4] + (o * n + u32(t)) * inner + e, rs(P[5] + i));` : `if (t < 0 || t >= i32(n)) { wr(P[4] + i, ${zero(y.dtype)}); return; }
  wr(P[4] + i, rs(P[5] + (o * n + u32(t)) * inner + e));`}`);
  return special(`rows${put}|${src.dtype}${src.src}|${idx.dtype}${idx.src}`, code,
    [total, n, inner, cnt, y.base, src.base, idx.base], total);
}
