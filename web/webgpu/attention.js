// WebGPU kernel of attention over the KV state (web/webgpu/kernels.js dispatches it; the semantics are
// src/kernels/attention.c's).
import { numel, contiguous, broadcastStrides, header, reader, writer, MAIN, MATH, f32bits, special } from './wgsl.js';

// Operand x of an attention as the op reads it (src/kernels/attention.c): x.permute(perm), by strides
// over x's contiguous shape; the perms follow [has_mask, is_causal] in iattr, one each for q, k, v
// and optionally y (y is written so that y.permute(perm y) is [..., H, Tq, Dv]).
function attnView(shape, iattr, r, i) {
  const n = iattr.length, has = n === 2 + 4 * r || (n === 2 + 3 * r && i < 3);
  const perm = has ? Array.from({ length: r }, (_, d) => Number(iattr[2 + i * r + d])) : [...Array(r).keys()];
  const st = contiguous(shape);
  return { dims: perm.map((p) => shape[p]), st: perm.map((p) => st[p]) };
}

export function attention(op, ins, y, iattr, fattr) {
  const [q, k, v] = ins, mask = iattr[0] ? ins[3] : null, r = q.shape.length;
  const [Q, K, V, Y] = [q, k, v, y].map((x, i) => attnView(x.shape, iattr, r, i));
  const Tq = Q.dims[r - 2], D = Q.dims[r - 1], Tk = K.dims[r - 2], Dv = V.dims[r - 1];
  const H = r >= 3 ? Q.dims[r - 3] : 1, Hkv = r >= 3 ? K.dims[r - 3] : 1, G = Math.max(1, H / Hkv);
  const heads = numel(Q.dims.slice(0, r - 2));
  let mst = [];
  if (mask) mst = broadcastStrides(mask.shape, [...Q.dims.slice(0, r - 1), Tk]);
  // head index b unravelled over q's batch dims (rank r - 2) gives the offsets of q, y and the mask;
  // KV head b / G unravelled over k's gives k's and v's
  const bdims = Q.dims.slice(0, r - 2), kdims = K.dims.slice(0, r - 2);
  const code = (wg) => header(false) + MATH + reader('rq', 'float32', q.src) + reader('rk', 'float32', k.src)
    + reader('rv', 'float32', v.src)
    + (mask ? reader('rm', mask.dtype, mask.src) : '') + writer('wr', 'float32') + MAIN(wg, `
  if (i >= P[0]) { return; }
  let Tq = P[1]; let D = P[2]; let Tk = P[3]; let Dv = P[4]; let G = P[5]; let causal = P[6]; let scale = bitcast<f32>(P[7]);
  let b = i / Tq; let qi = i % Tq; let kvh = b / G;
  var qo = P[9] + qi * P[61]; var yo = P[8] + qi * P[62]; var ko = P[10]; var vo = P[11];
  var mo = P[12] + qi * P[29];
  var rest = b;
  for (var dd = 0u; dd < P[14]; dd++) {
    let d = P[14] - 1u - dd; let c = rest % P[15u + d];
    mo += c * P[21u + d]; qo += c * P[31u + d]; yo += c * P[37u + d]; rest = rest / P[15u + d];
  }
  var krest = kvh;
  for (var dd = 0u; dd < P[14]; dd++) {
    let d = P[14] - 1u - dd; let c = krest % P[43u + d];
    ko += c * P[49u + d]; vo += c * P[55u + d]; krest = krest / P[43u + d];
  }
  let ks = P[63]; let vs = P[64];
  var jend = Tk;
  if (causal != 0u && qi + 1u < Tk) { jend = qi + 1u; }
  var acc: array<f32, 256>;
  for (var e = 0u; e < Dv; e++) { acc[e] = 0.0; }
  var m = ninf_(); var s = 0.0;
  for (var j = 0u; j < jend; j++) {
    var sc = 0.0;
    for (var e = 0u; e < D; e++) { sc = fma(rq(qo + e), rk(ko + j * ks + e), sc); }
    sc = sc * scale;
    ${mask ? (mask.dtype === 'bool' ? 'if (rm(mo + j * P[30]) == 0u) { continue; }' : 'sc = sc + rm(mo + j * P[30]);') : ''}
    if (sc == ninf_()) { continue; }
    let mn = max(m, sc);
    let c = exp(m - mn); let p = exp(sc - mn);
    s = s * c + p;
    for (var e = 0u; e < Dv; e++) { acc[e] = acc[e] * c + p * rv(vo + j * vs + e); }
    m = mn;
  }
  let inv = select(0.0, 1.0 / s, s > 0.0);
  for (var e = 0u; e < Dv; e++) { wr(yo + e, acc[e] * inv); }`);
  // params: 0 count, 1 Tq, 2 D, 3 Tk, 4 Dv, 5 G, 6 causal, 7 scale, 8 y, 9 q, 10 k, 11 v, 12 mask
  // base, 14 batch rank (at most 6), 15..20 batch dims, 21..26 the mask's strides over them, 29 its
  // query-row stride, 30 its key stride; 31..36 and 37..42 q's and y's strides over the batch dims,
  // 43..48 k's batch dims, 49..54 and 55..60 k's and v's strides over them; 61..64 the row (time)
  // strides of q, y, k, v.
  const p = new Array(65).fill(0);
  p[0] = heads * Tq; p[1] = Tq; p[2] = D; p[3] = Tk; p[4] = Dv; p[5] = G; p[6] = iattr[1] ? 1 : 0; p[7] = f32bits(fattr[0]);
  p[8] = y.base; p[9] = q.base; p[10] = k.base; p[11] = v.base; p[12] = mask ? mask.base : 0;
  p[14] = bdims.length;
  bdims.forEach((d, j) => { p[15 + j] = d; p[31 + j] = Q.st[j]; p[37 + j] = Y.st[j]; });
  kdims.forEach((d, j) => { p[43 + j] = d; p[49 + j] = K.st[j]; p[55 + j] = V.st[j]; });
  p[61] = Q.st[r - 2]; p[62] = Y.st[r - 2]; p[63] = K.st[r - 2]; p[64] = V.st[r - 2];
  if (mask) {
    bdims.forEach((_, j) => { p[21 + j] = mst[j]; });
    p[29] = mst[r - 2]; p[30] = mst[r - 1];
  }
  if (bdims.length > 6) throw new Error('attention: rank above 8');
  return [special(`attn|${q.src}${k.src}${v.src}|${mask ? mask.dtype + mask.src : ''}`, code, p, heads * Tq)];
}
