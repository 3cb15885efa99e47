// WebGPU kernels along one dim: argmax/argmin, cumsum, topk/sort, gather and scatter (web/webgpu/kernels.js
// dispatches them; the semantics are src/kernels/select.c's, scatter.c's and reduce.c's).
import { contiguous, numel, header, reader, writer, indexReader, MAIN, MATH, pad, zero, special, around } from './wgsl.js';

/** WGSL of an ordered element type: ld(e) -> T (float32 as its bits, so NaN is tested on the bits:
 * SwiftShader does not keep a NaN's bits through f32 loads), st(e, v), isn(v), gt(a, b), eqv(a, b). */
function ordered(dtype, src) {
  const w = src === 'C' ? 'cw' : 'mw';
  if (dtype === 'float32') return `fn ld(e: u32) -> u32 { return ${w}(e); }
fn st(e: u32, v: u32) { M[e] = v; }
fn isn(a: u32) -> bool { return (a & 0x7fffffffu) > 0x7f800000u; }
fn gt(a: u32, b: u32) -> bool { return bitcast<f32>(a) > bitcast<f32>(b); }
fn eqv(a: u32, b: u32) -> bool { return bitcast<f32>(a) == bitcast<f32>(b); }
`;
  if (dtype === 'int32') return `${reader('ld', 'int32', src)}${writer('st', 'int32')}fn isn(a: i32) -> bool { return false; }
fn gt(a: i32, b: i32) -> bool { return a > b; }
fn eqv(a: i32, b: i32) -> bool { return a == b; }
`;
  return `${reader('ld', 'int64', src)}${writer('st', 'int64')}fn isn(a: vec2<u32>) -> bool { return false; }
fn gt(a: vec2<u32>, b: vec2<u32>) -> bool { return lt64(b, a); }
fn eqv(a: vec2<u32>, b: vec2<u32>) -> bool { return eq64(a, b); }
`;
}

/** argmax/argmin along dim (src/kernels/reduce.c): the first index of the extreme; a NaN wins at once. */
export function argExtreme(isMax, x, y, dim) {
  const { n, inner } = around(x.shape, dim), rows = numel(x.shape) / (n || 1);
  const code = (wg) => header(false) + MATH + ordered(x.dtype, x.src) + writer('wi', 'int64') + MAIN(wg, `
  if (i >= P[0]) { return; }
  let n = P[1]; let inner = P[2];
  let b = P[4] + (i / inner) * n * inner + i % inner;
  var bv = ld(b); var best = 0u;
  for (var t = 1u; t < n && !isn(bv); t++) {
    let v = ld(b + t * inner);
    if (isn(v) || ${isMax ? 'gt(v, bv)' : 'gt(bv, v)'}) { bv = v; best = t; }
  }
  wi(P[3] + i, vec2<u32>(best, 0u));`);
  return special(`arg${isMax}|${x.dtype}${x.src}`, code, [rows, n, inner, y.base, x.base], rows);
}

/** cumsum along dim: float32 with a compensated sum (the wasm kernel sums in double), integers wrapping. */
export function cumsum(x, y, dim) {
  const { n, inner } = around(x.shape, dim), rows = numel(x.shape) / (n || 1);
  const step = {
    float32: 'let v = rx(b + t * inner) - c; let s2 = acc + v; c = (s2 - acc) - v; acc = s2;',
    int32: 'acc = acc + rx(b + t * inner);', int64: 'acc = add64(acc, rx(b + t * inner));',
  }[x.dtype];
  const code = (wg) => header(false) + MATH + reader('rx', x.dtype, x.src) + writer('wr', y.dtype) + MAIN(wg, `
  if (i >= P[0]) { return; }
  let n = P[1]; let inner = P[2];
  let off = (i / inner) * n * inner + i % inner; let b = P[4] + off;
  var acc = ${zero(x.dtype)}; var c = 0.0;
  for (var t = 0u; t < n; t++) { ${step} wr(P[3] + off + t * inner, acc); }`);
  return special(`cumsum|${x.dtype}${x.src}`, code, [rows, n, inner, y.base, x.base], rows);
}

/** topk / sort along dim: per row, k passes, each the best element after the previous one in the
 * total order of src/kernels/select.c (value, then the lower index; NaN above every number). */
export function select(x, outs, dim, k, largest) {
  const [vals, ids] = outs, { n, inner } = around(x.shape, dim), rows = numel(x.shape) / (n || 1);
  const code = (wg) => header(false) + MATH + ordered(x.dtype, x.src) + writer('wi', 'int64') + `
fn better(a: ${x.dtype === 'float32' ? 'u32' : x.dtype === 'int32' ? 'i32' : 'vec2<u32>'}, ia: u32, b: ${x.dtype === 'float32'
    ? 'u32' : x.dtype === 'int32' ? 'i32' : 'vec2<u32>'}, ib: u32, largest: bool) -> bool {
  let an = isn(a); let bn = isn(b);
  if (an || bn) { if (an && bn) { return ia < ib; } return select(bn, an, largest); }
  if (!eqv(a, b)) { return select(gt(b, a), gt(a, b), largest); }
  return ia < ib;
}
` + MAIN(wg, `
  if (i >= P[0]) { return; }
  let n = P[1]; let inner = P[2]; let k = P[3]; let largest = P[7] != 0u;
  let o = i / inner; let j = i % inner;
  let xb = P[6] + o * n * inner + j; let yo = o * k * inner + j;
  var pv = ld(xb); var pi = 0u;
  for (var p = 0u; p < k; p++) {
    var bv = ld(xb); var bi = 0xffffffffu;
    for (var t = 0u; t < n; t++) {
      let v = ld(xb + t * inner);
      if (p > 0u && !better(pv, pi, v, t, largest)) { continue; }
      if (bi == 0xffffffffu || better(v, t, bv, bi, largest)) { bv = v; bi = t; }
    }
    st(P[4] + yo + p * inner, bv); wi(P[5] + yo + p * inner, vec2<u32>(bi, 0u));
    pv = bv; pi = bi;
  }`);
  return special(`select|${x.dtype}${x.src}`, code, [rows, n, inner, k, vals.base, ids.base, x.base, largest ? 1 : 0], k > 0 ? rows : 0);
}

/** Params shared by gather and scatter: count, rank, dim, n, then index's dims [8] and x's (or y's) strides [8]. */
function gatherParams(idx, x, dim, bases) {
  return [numel(idx.shape), idx.shape.length, dim, x.shape[dim], ...bases, ...pad(idx.shape, 1), ...pad(contiguous(x.shape), 0)];
}
const UNRAVEL = `
  var rem = i; var off = 0u; var cd = 0u;
  for (var dd = 0u; dd < P[1]; dd++) {
    let d = P[1] - 1u - dd; let c = rem % P[8u + d]; rem = rem / P[8u + d];
    if (d == P[2]) { cd = c; } else { off += c * P[16u + d]; }
  }`;

/** gather: y (index's shape) = x[.., index[..], ..] along dim. */
export function gather(x, idx, y, dim) {
  const code = (wg) => header(y.dtype === 'bool') + reader('rx', x.dtype, x.src) + indexReader('ri', idx.dtype, idx.src)
    + writer('wr', y.dtype) + MAIN(wg, `
  if (i >= P[0]) { return; }${UNRAVEL}
  var t = ri(P[6] + i);
  if (t < 0 && t != -2147483647 - 1) { t += i32(P[3]); }
  if (t < 0 || t >= i32(P[3])) { wr(P[4] + i, ${zero(y.dtype)}); return; }
  wr(P[4] + i, rx(P[5] + off + u32(t) * P[16u + P[2]]));`);
  return special(`gather|${x.dtype}${x.src}|${idx.dtype}${idx.src}`, code, gatherParams(idx, x, dim, [y.base, x.base, idx.base, 0]),
    numel(idx.shape));
}

/** scatter into y (already base's copy): y[.., index[..], ..] = src[..]; where indices repeat
 * along dim the last one wins (each thread yields to a later equal index). */
export function scatter(idx, src, y, dim) {
  const code = (wg) => header(y.dtype === 'bool') + reader('rs', src.dtype, src.src) + indexReader('ri', idx.dtype, idx.src)
    + writer('wr', y.dtype) + MAIN(wg, `
  if (i >= P[0]) { return; }${UNRAVEL}
  let n = i32(P[3]);
  var t = ri(P[6] + i);
  if (t < 0 && t != -2147483647 - 1) { t += n; }
  if (t < 0 || t >= n) { return; }
  var istride = 1u;
  for (var d = P[2] + 1u; d < P[1]; d++) { istride *= P[8u + d]; }
  for (var c2 = cd + 1u; c2 < P[8u + P[2]]; c2++) {
    var t2 = ri(P[6] + i + (c2 - cd) * istride);
    if (t2 < 0 && t2 != -2147483647 - 1) { t2 += n; }
    if (t2 == t) { return; }
  }
  wr(P[4] + off + u32(t) * P[16u + P[2]], rs(P[5] + i));`);
  return special(`scatter|${src.dtype}${src.src}|${idx.dtype}${idx.src}`, code, gatherParams(idx, y, dim, [y.base, src.base, idx.base, 0]),
    numel(idx.shape));
}
