// WebGPU kernels of the convolutions with int8 weights (docs/ops.md: conv_q8, conv_transpose_q8;
// src/kernels/conv_q8.c): one thread per output, the activations' rows (conv: each output position's
// patch, k = (c·KH + kh)·KW + kw; transposed: each input position's C values) quantized to int16 per
// block of 32 and summed with the int8 codes in int32 as the wasm kernels do (quant.js intDot, qmax
// 32767), a row with a NaN or ±inf by the float path; then the per-column scale, the bias and (conv)
// the activation. The workspace output is not used here.
import { header, reader, writer, MAIN, special } from './wgsl.js';
import { byteReaders, intDot } from './quant.js';
import { ACTIVATIONS } from './conv.js';

/** The spatial attributes of an op (r = 1 or 2): [kernel, stride, padding, dilation] each [h, w]. */
function spatial(iattr, from) {
  const r = iattr[0], at = (j) => iattr.slice(from + j * r, from + (j + 1) * r);
  const two = (a, one) => (r === 2 ? a : [one, a[0]]);
  return [two(at(0), 1), two(at(1), 1), two(at(2), 0), two(at(3), 1)];
}

/** The x reader of these kernels: the word of element e of x's buffer. */
const xWord = (x) => `fn xw(e: u32) -> u32 { return ${x.src === 'C' ? 'cw' : 'mw'}(e); }\n`;

/** conv_q8: x [N, C, (H,) W], q int8 [ceil(O/8), K, 8], scale [ceil(O/8), 8][, bias [O]] → y [N, O, (OH,) OW];
 * iattr [r, has_bias, 1, kernel(r), stride(r), padding(r), dilation(r)[, activation]]. */
export function convQ8(ins, y, iattr) {
  const [x, q, sc] = ins, r = iattr[0], bias = iattr[1] ? ins[3] : null, act = iattr[3 + 4 * r] ?? 0;
  const [[KH, KW], [sh, sw], [ph, pw], [dh, dw]] = spatial(iattr, 3);
  const [N, C] = x.shape, O = y.shape[1], H = r === 2 ? x.shape[2] : 1, W = x.shape[r + 1];
  const OH = r === 2 ? y.shape[2] : 1, OW = y.shape[r + 1], K = C * KH * KW, total = N * O * OH * OW;
  const code = (wg) => header(false) + reader('rs', 'float32', sc.src) + byteReaders(q.src) + xWord(x)
    + (bias ? reader('rb', 'float32', bias.src) : '') + writer('wr', 'float32') + `var<private> px: u32;
var<private> ih0: i32;
var<private> iw0: i32;
// element k of this thread's patch (zero in the padding), as its bits
fn raw(k: u32) -> u32 {
  let c = k / (P[12] * P[13]); let kh = (k / P[13]) % P[12]; let kw = k % P[13];
  let ih = ih0 + i32(kh * P[16]); let iw = iw0 + i32(kw * P[17]);
  if (ih < 0 || ih >= i32(P[10]) || iw < 0 || iw >= i32(P[11])) { return 0u; }
  return xw(px + (c * P[10] + u32(ih)) * P[11] + u32(iw));
}
fn ra(k: u32) -> f32 { return bitcast<f32>(raw(k)); }
` + MAIN(wg, `
  if (i >= P[2]) { return; }
  let O = P[0]; let K = P[1]; let OW = P[8]; let OH = P[9];
  let ow = i % OW; let oh = (i / OW) % OH; let o = (i / (OW * OH)) % O; let nb = i / (OW * OH * O);
  px = P[4] + nb * P[20] * P[10] * P[11];
  ih0 = i32(oh * P[14]) - i32(P[18]); iw0 = i32(ow * P[15]) - i32(P[19]);
  let pa = 0u; let col = P[5] + (o / 8u) * K * 8u + o % 8u;
  var yv = 0.0; var done = false;
${intDot(null, 'var k0 = 0u; k0 < K; k0 += 32u', '32u', 'rq8(col + k * 8u)', '', 'acc * rs(P[6] + o)',
  { qmax: 32767, finish: (v) => `yv = ${v}; done = true;` })}
  if (!done) {
    var acc = 0.0;
    for (var k = 0u; k < K; k++) { acc = fma(ra(k), f32(rq8(col + k * 8u)), acc); }
    yv = acc * rs(P[6] + o);
  }
  let acc = yv${bias ? ' + rb(P[7] + o)' : ''};
  wr(P[3] + i, ${ACTIVATIONS[act]});`);
  return special(`convq8|${x.src}${q.src}${sc.src}${bias?.src}|${act}`, code,
    [O, K, total, y.base, x.base, q.base, sc.base, bias?.base ?? 0, OW, OH, H, W, KH, KW, sh, sw, dh, dw, ph, pw, C], total);
}

/** conv_transpose_q8: x [N, C, (H,) W], q int8 [ceil(M/8), C, 8], scale [ceil(M/8), 8] (M = O·KH·KW, column
 * m = (o·KH + kh)·KW + kw)[, bias [O]] → y [N, O, (OH,) OW]: each output the bias plus, for every tap landing
 * on it, z[m, p] = (input position p's C values) · column m; iattr as conv_transpose's (groups 1). */
export function convTransposeQ8(ins, y, iattr) {
  const [x, q, sc] = ins, r = iattr[0], bias = iattr[1] ? ins[3] : null;
  const [[KH, KW], [sh, sw], [ph, pw], [dh, dw]] = spatial(iattr, 3);
  const [N, C] = x.shape, O = y.shape[1], H = r === 2 ? x.shape[2] : 1, W = x.shape[r + 1];
  const OH = r === 2 ? y.shape[2] : 1, OW = y.shape[r + 1], total = N * O * OH * OW;
  const code = (wg) => header(false) + reader('rs', 'float32', sc.src) + byteReaders(q.src) + xWord(x)
    + (bias ? reader('rb', 'float32', bias.src) : '') + writer('wr', 'float32') + `var<private> xb: u32;
var<private> pp: u32;
// channel k of the input position pp, as its bits
fn raw(k: u32) -> u32 { return xw(xb + k * P[6] * P[7] + pp); }
fn ra(k: u32) -> f32 { return bitcast<f32>(raw(k)); }
// z of column m at the input position pp
fn tap(m: u32) -> f32 {
  let K = P[20]; let pa = 0u; let col = P[18] + (m / 8u) * K * 8u + m % 8u;
${intDot(null, 'var k0 = 0u; k0 < K; k0 += 32u', '32u', 'rq8(col + k * 8u)', '', 'acc * rs(P[21] + m)',
  { qmax: 32767, finish: (v) => `return ${v};` })}
  var acc = 0.0;
  for (var k = 0u; k < K; k++) { acc = fma(ra(k), f32(rq8(col + k * 8u)), acc); }
  return acc * rs(P[21] + m);
}
` + MAIN(wg, `
  if (i >= P[0]) { return; }
  let OW = P[1]; let OH = P[2]; let O = P[3]; let H = P[6]; let W = P[7]; let KH = P[8]; let KW = P[9];
  let ow = i % OW; let oh = (i / OW) % OH; let o = (i / (OW * OH)) % O; let nb = i / (OW * OH * O);
  xb = P[17] + nb * P[20] * H * W;
  var acc = ${bias ? 'rb(P[19] + o)' : '0.0'};
  for (var kh = 0u; kh < KH; kh++) {
    let th = i32(oh + P[14]) - i32(kh * P[12]);
    if (th < 0 || th % i32(P[10]) != 0 || th / i32(P[10]) >= i32(H)) { continue; }
    let ih = u32(th) / P[10];
    for (var kw = 0u; kw < KW; kw++) {
      let tw = i32(ow + P[15]) - i32(kw * P[13]);
      if (tw < 0 || tw % i32(P[11]) != 0 || tw / i32(P[11]) >= i32(W)) { continue; }
      pp = ih * W + u32(tw) / P[11];
      acc += tap((o * KH + kh) * KW + kw);
    }
  }
  wr(P[16] + i, acc);`);
  return special(`convtq8|${x.src}${q.src}${sc.src}${bias?.src}`, code,
    [total, OW, OH, O, 0, 0, H, W, KH, KW, sh, sw, dh, dw, ph, pw, y.base, x.base, q.base, bias?.base ?? 0, C, sc.base], total);
}
