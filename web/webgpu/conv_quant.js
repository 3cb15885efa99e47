// WebGPU kernels of the convolutions with int8, bfloat16 or int16 weights (docs/ops.md: conv_q8,
// conv_transpose_q8, conv_bf16, conv_transpose_bf16 (src/kernels/conv_q8.c), conv_i16, conv_transpose_i16
// (conv_i16.c: i16Product below)): one thread per output
// over the activations' rows (conv: each output position's patch, k = (c·KH + kh)·KW + kw; transposed:
// each input position's C values). int8: each row quantized to int16 per block of 32 and summed with
// the codes in int32 as the wasm kernels do (quant.js intDot, qmax 32767), a row with a NaN or ±inf by
// the float path, then the per-column scale; bfloat16: the weights widened to float32 and the row's
// products summed in the wasm kernels' order (4 lane sums over k ≡ 2l, 2l + 1 mod 8, then (s0 + s1) +
// (s2 + s3)). Then the bias and (conv) the activation. The workspace output is not used here.
import { header, reader, writer, MAIN, special } from './wgsl.js';
import { byteReaders, intDot } from './quant.js';
import { ACTIVATIONS, TRANSPOSED_OUTPUT, transposedTaps } from './conv.js';

/** The spatial attributes of an op (r = 1 or 2): [kernel, stride, padding, dilation] each [h, w]. */
function spatial(iattr, from) {
  const r = iattr[0], at = (j) => iattr.slice(from + j * r, from + (j + 1) * r);
  const two = (a, one) => (r === 2 ? a : [one, a[0]]);
  return [two(at(0), 1), two(at(1), 1), two(at(2), 0), two(at(3), 1)];
}

/** The x reader of these kernels: the word of element e of x's buffer. */
const xWord = (x) => `fn xw(e: u32) -> u32 { return ${x.src === 'C' ? 'cw' : 'mw'}(e); }\n`;

/** The weights' readers: int8 codes and their scales, or bfloat16 element e as float32 (its top half). */
function weightReaders(q, sc) {
  if (sc) return reader('rs', 'float32', sc.src) + byteReaders(q.src);
  const w = q.src === 'C' ? 'cw' : 'mw';
  return `fn rbf(e: u32) -> f32 { return bitcast<f32>(((${w}(e >> 1u) >> ((e & 1u) * 16u)) & 0xffffu) << 16u); }\n`;
}

/** WGSL of one column's product with the row ra(k) (k < K; zero past it), ending in `finish(value)`:
 * int8 codes from `col` (the column's lane of its panel: k at col + 8k) times the scale rs(scale), or
 * bfloat16 weights from `wb` (2-row panels: k at wb + (k / 8)·16 + k % 8). */
function dot(bf16, finish) {
  if (bf16) {
    return `
  var s = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
  for (var b = 0u; b < (K + 7u) / 8u; b++) {
    for (var l = 0u; l < 4u; l++) {
      let k = 8u * b + 2u * l;
      let pe = rbf(wb + b * 16u + 2u * l) * ra(k);
      s[l] = s[l] + pe;
      let po = rbf(wb + b * 16u + 2u * l + 1u) * ra(k + 1u);
      s[l] = s[l] + po;
    }
  }
  ${finish('(s[0] + s[1]) + (s[2] + s[3])')}`;
  }
  return `
  let pa = 0u;
${intDot(null, 'var k0 = 0u; k0 < K; k0 += 32u', '32u', 'rq8(col + k * 8u)', '', 'acc * rs(scale)', { qmax: 32767, finish })}
  var acc = 0.0;
  for (var k = 0u; k < K; k++) { acc = fma(ra(k), f32(rq8(col + k * 8u)), acc); }
  ${finish('acc * rs(scale)')}`;
}

/** WGSL placing column `m`'s weights (w at element P[wp], scales at P[sp]) for dot(). */
const column = (bf16, m, wp, sp) => (bf16 ? `let wb = P[${wp}] + (${m} / 2u) * ((K + 7u) / 8u) * 16u + (${m} % 2u) * 8u;`
  : `let col = P[${wp}] + (${m} / 8u) * K * 8u + ${m} % 8u; let scale = P[${sp}] + ${m};`);

/** conv_q8: x [N, C, (H,) W], q int8 [ceil(O/8), K, 8], scale [ceil(O/8), 8][, bias [O]] → y [N, O, (OH,) OW];
 * with bf16, conv_bf16: x, w bfloat16 [ceil(O/2), ceil(K/8), 2, 8][, bias [O]] → y. iattr [r, has_bias, 1,
 * kernel(r), stride(r), padding(r), dilation(r)[, activation]]. */
export function convQ8(ins, y, iattr, bf16 = false) {
  const [x, q] = ins, sc = bf16 ? null : ins[2], r = iattr[0], act = iattr[3 + 4 * r] ?? 0;
  const bias = iattr[1] ? ins[bf16 ? 2 : 3] : null;
  const [[KH, KW], [sh, sw], [ph, pw], [dh, dw]] = spatial(iattr, 3);
  const [N, C] = x.shape, O = y.shape[1], H = r === 2 ? x.shape[2] : 1, W = x.shape[r + 1];
  const OH = r === 2 ? y.shape[2] : 1, OW = y.shape[r + 1], K = C * KH * KW, total = N * O * OH * OW;
  const code = (wg) => header(false) + weightReaders(q, sc) + xWord(x) + (bias ? reader('rb', 'float32', bias.src) : '')
    + writer('wr', 'float32') + `var<private> px: u32;
var<private> ih0: i32;
var<private> iw0: i32;
// element k of this thread's patch (zero in the padding and past K), as its bits
fn raw(k: u32) -> u32 {
  if (k >= P[1]) { return 0u; }
  let c = k / (P[12] * P[13]); let kh = (k / P[13]) % P[12]; let kw = k % P[13];
  let ih = ih0 + i32(kh * P[16]); let iw = iw0 + i32(kw * P[17]);
  if (ih < 0 || ih >= i32(P[10]) || iw < 0 || iw >= i32(P[11])) { return 0u; }
  return xw(px + (c * P[10] + u32(ih)) * P[11] + u32(iw));
}
fn ra(k: u32) -> f32 { return bitcast<f32>(raw(k)); }
// the output channel o's product with this thread's patch
fn product(o: u32) -> f32 {
  let K = P[1];
  ${column(bf16, 'o', 5, 6)}${dot(bf16, (v) => `return ${v};`)}
}
` + MAIN(wg, `
  if (i >= P[2]) { return; }
  let O = P[0]; let OW = P[8]; let OH = P[9];
  let ow = i % OW; let oh = (i / OW) % OH; let o = (i / (OW * OH)) % O; let nb = i / (OW * OH * O);
  px = P[4] + nb * P[20] * P[10] * P[11];
  ih0 = i32(oh * P[14]) - i32(P[18]); iw0 = i32(ow * P[15]) - i32(P[19]);
  let acc = product(o)${bias ? ' + rb(P[7] + o)' : ''};
  wr(P[3] + i, ${ACTIVATIONS[act]});`);
  return special(`conv${bf16 ? 'bf16' : 'q8'}|${x.src}${q.src}${sc?.src}${bias?.src}|${act}`, code,
    [O, K, total, y.base, x.base, q.base, sc?.base ?? 0, bias?.base ?? 0, OW, OH, H, W, KH, KW, sh, sw, dh, dw, ph, pw, C], total);
}

/** conv_transpose_q8: x [N, C, (H,) W], q int8 [ceil(M/8), C, 8], scale [ceil(M/8), 8] (M = O·KH·KW, column
 * m = (o·KH + kh)·KW + kw)[, bias [O]] → y [N, O, (OH,) OW] (with bf16, conv_transpose_bf16: x, w bfloat16
 * [ceil(M/2), ceil(C/8), 2, 8][, bias]): each output the bias plus, for every tap landing on it, z[m, p] =
 * (input position p's C values) · column m; iattr as conv_transpose's (groups 1). */
export function convTransposeQ8(ins, y, iattr, bf16 = false) {
  const [x, q] = ins, sc = bf16 ? null : ins[2], r = iattr[0], bias = iattr[1] ? ins[bf16 ? 2 : 3] : null;
  const [[KH, KW], [sh, sw], [ph, pw], [dh, dw]] = spatial(iattr, 3);
  const [N, C] = x.shape, O = y.shape[1], H = r === 2 ? x.shape[2] : 1, W = x.shape[r + 1];
  const OH = r === 2 ? y.shape[2] : 1, OW = y.shape[r + 1], total = N * O * OH * OW;
  const code = (wg) => header(false) + weightReaders(q, sc) + xWord(x) + (bias ? reader('rb', 'float32', bias.src) : '')
    + writer('wr', 'float32') + `var<private> xb: u32;
var<private> pp: u32;
// channel k of the input position pp (zero past C), as its bits
fn raw(k: u32) -> u32 { if (k >= P[20]) { return 0u; } return xw(xb + k * P[6] * P[7] + pp); }
fn ra(k: u32) -> f32 { return bitcast<f32>(raw(k)); }
// z of column m at the input position pp
fn tap(m: u32) -> f32 {
  let K = P[20];
  ${column(bf16, 'm', 18, 21)}${dot(bf16, (v) => `return ${v};`)}
}
` + MAIN(wg, `
${TRANSPOSED_OUTPUT}
  xb = P[17] + nb * P[20] * H * W;
  var acc = ${bias ? 'rb(P[19] + o)' : '0.0'};
${transposedTaps('pp = ih * W + iw; acc += tap((o * KH + kh) * KW + kw);')}
  wr(P[16] + i, acc);`);
  return special(`convt${bf16 ? 'bf16' : 'q8'}|${x.src}${q.src}${sc?.src}${bias?.src}`, code,
    [total, OW, OH, O, 0, 0, H, W, KH, KW, sh, sw, dh, dw, ph, pw, y.base, x.base, q.base, bias?.base ?? 0, C, sc?.base ?? 0], total);
}

/** WGSL of conv_i16's product of weight row `o` (int16 codes at P[wp] + o·K32, its scale rs(P[sp] + o)) with
 * the row of position `pos` (rowBits(pos, k), k < K; zero past it) out of `npos`, before the bias, as the
 * wasm kernels compute it: the positions in panels of 8; a panel holding a NaN or ±inf in float32 (Σ_k (w ·
 * scale) · x in k order); else per block of 32 k, s = max |x| / 4095, codes round-half-even(x / s) within
 * ±4095 summed with the weight codes in int32, t = t + isum · s block by block, then t · scale. WGSL's
 * division is within 2.5 ulp, so a code at a near tie can round to its neighbour (a change of s in a product). */
function i16Product(wp, sp, K, npos) {
  return `fn ri16(e: u32) -> i32 { return bitcast<i32>((${'W16'}(e >> 1u) >> ((e & 1u) * 16u)) << 16u) >> 16u; }
fn i16product(o: u32, pos: u32) -> f32 {
  let K = ${K}; let K32 = (K + 31u) / 32u * 32u; let wrow = P[${wp}] + o * K32; let sa = rs(P[${sp}] + o);
  let p0 = pos / 8u * 8u;
  var finite = true;
  for (var q = p0; q < min(p0 + 8u, ${npos}); q++) {
    for (var k = 0u; k < K; k++) { if ((rowBits(q, k) & 0x7fffffffu) >= 0x7f800000u) { finite = false; } }
  }
  if (!finite) {
    var t = 0.0;
    for (var k = 0u; k < K; k++) { t = t + (f32(ri16(wrow + k)) * sa) * bitcast<f32>(rowBits(pos, k)); }
    return t;
  }
  var t = 0.0;
  for (var b = 0u; b < K32 / 32u; b++) {
    var mx = 0.0;
    for (var k = 32u * b; k < min(32u * b + 32u, K); k++) { mx = max(mx, abs(bitcast<f32>(rowBits(pos, k)))); }
    let sc = mx / 4095.0;
    var s = 0;
    for (var k = 32u * b; k < min(32u * b + 32u, K); k++) {
      let v = select(0.0, clamp(round(bitcast<f32>(rowBits(pos, k)) / sc), -4095.0, 4095.0), sc > 0.0);
      s += ri16(wrow + k) * i32(v);
    }
    let m = f32(s) * sc;
    t = t + m;
  }
  return t * sa;
}
`;
}

/** conv_i16: x [N, C, (H,) W], w int16 [O, K32], scale [O][, bias [O]] → y [N, O, (OH,) OW]; iattr as conv_q8's. */
export function convI16(ins, y, iattr) {
  const [x, w, sc] = ins, r = iattr[0], act = iattr[3 + 4 * r] ?? 0, bias = iattr[1] ? ins[3] : null;
  const [[KH, KW], [sh, sw], [ph, pw], [dh, dw]] = spatial(iattr, 3);
  const [N, C] = x.shape, O = y.shape[1], H = r === 2 ? x.shape[2] : 1, W = x.shape[r + 1];
  const OH = r === 2 ? y.shape[2] : 1, OW = y.shape[r + 1], K = C * KH * KW, total = N * O * OH * OW;
  const code = (wg) => header(false) + reader('rs', 'float32', sc.src) + xWord(x) + (bias ? reader('rb', 'float32', bias.src) : '')
    + writer('wr', 'float32') + `var<private> px: u32;
// element k of output position pos's patch (zero in the padding and past K), as its bits
fn rowBits(pos: u32, k: u32) -> u32 {
  if (k >= P[1]) { return 0u; }
  let oh = pos / P[8]; let ow = pos % P[8];
  let c = k / (P[12] * P[13]); let kh = (k / P[13]) % P[12]; let kw = k % P[13];
  let ih = i32(oh * P[14] + kh * P[16]) - i32(P[18]); let iw = i32(ow * P[15] + kw * P[17]) - i32(P[19]);
  if (ih < 0 || ih >= i32(P[10]) || iw < 0 || iw >= i32(P[11])) { return 0u; }
  return xw(px + (c * P[10] + u32(ih)) * P[11] + u32(iw));
}
` + i16Product(5, 6, 'P[1]', 'P[8] * P[9]').replace('W16', w.src === 'C' ? 'cw' : 'mw') + MAIN(wg, `
  if (i >= P[2]) { return; }
  let O = P[0]; let OW = P[8]; let OH = P[9];
  let pos = i % (OW * OH); let o = (i / (OW * OH)) % O; let nb = i / (OW * OH * O);
  px = P[4] + nb * P[20] * P[10] * P[11];
  let acc = i16product(o, pos)${bias ? ' + rb(P[7] + o)' : ''};
  wr(P[3] + i, ${ACTIVATIONS[act]});`);
  return special(`convi16|${x.src}${w.src}${sc.src}${bias?.src}|${act}`, code,
    [O, K, total, y.base, x.base, w.base, sc.base, bias?.base ?? 0, OW, OH, H, W, KH, KW, sh, sw, dh, dw, ph, pw, C], total);
}

/** conv_transpose_i16: x [N, C, (H,) W], w int16 [M, C32] (M = O·KH·KW), scale [M][, bias [O]] → y [N, O, (OH,) OW]:
 * the bias plus, for every tap landing on an output, conv_i16's product of the tap's row with the input position's
 * C values; iattr as conv_transpose's (groups 1). */
export function convTransposeI16(ins, y, iattr) {
  const [x, w, sc] = ins, r = iattr[0], bias = iattr[1] ? ins[3] : null;
  const [[KH, KW], [sh, sw], [ph, pw], [dh, dw]] = spatial(iattr, 3);
  const [N, C] = x.shape, O = y.shape[1], H = r === 2 ? x.shape[2] : 1, W = x.shape[r + 1];
  const OH = r === 2 ? y.shape[2] : 1, OW = y.shape[r + 1], total = N * O * OH * OW;
  const code = (wg) => header(false) + reader('rs', 'float32', sc.src) + xWord(x) + (bias ? reader('rb', 'float32', bias.src) : '')
    + writer('wr', 'float32') + `var<private> xb: u32;
// channel k of input position pos (zero past C), as its bits
fn rowBits(pos: u32, k: u32) -> u32 { if (k >= P[20]) { return 0u; } return xw(xb + k * P[6] * P[7] + pos); }
` + i16Product(18, 21, 'P[20]', 'P[6] * P[7]').replace('W16', w.src === 'C' ? 'cw' : 'mw') + MAIN(wg, `
${TRANSPOSED_OUTPUT}
  xb = P[17] + nb * P[20] * H * W;
  var acc = ${bias ? 'rb(P[19] + o)' : '0.0'};
${transposedTaps('acc += i16product((o * KH + kh) * KW + kw, ih * W + iw);')}
  wr(P[16] + i, acc);`);
  return special(`convti16|${x.src}${w.src}${sc.src}${bias?.src}`, code,
    [total, OW, OH, O, 0, 0, H, W, KH, KW, sh, sw, dh, dw, ph, pw, y.base, x.base, w.base, bias?.base ?? 0, C, sc.base], total);
}
