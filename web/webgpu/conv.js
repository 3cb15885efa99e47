// WebGPU kernels over spatial windows: conv, conv_transpose and pooling (web/webgpu/kernels.js
// dispatches them; the semantics are src/kernels/conv.c's and pool.c's).
import { numel, header, reader, writer, MAIN, MATH, special } from './wgsl.js';
import { tiledConv } from './gemm.js';

/** The conv activations of src/kernels/conv.c over `acc`: none, relu, hardswish, elu (alpha 1: max(y, exp(min(y, 0)) - 1)). */
export const ACTIVATIONS = ['acc', 'max(acc, 0.0)', 'acc * min(max(acc + 3.0, 0.0), 6.0) / 6.0', 'max(acc, exp(min(acc, 0.0)) - 1.0)'];

/** conv: the tiled implicit GEMM (gemm.js) where a group has more than one output channel and
 * position and `tile` is set, else one thread per output. */
export function conv(ins, y, iattr, tile = 0) {
  const [x, w] = ins, r = iattr[0], hasBias = iattr[1], groups = iattr[2];
  const stride = iattr.slice(3, 3 + r), padding = iattr.slice(3 + r, 3 + 2 * r), dilation = iattr.slice(3 + 2 * r, 3 + 3 * r);
  const act = iattr.length > 3 + 3 * r ? iattr[3 + 3 * r] : 0;
  const bias = hasBias ? ins[2] : null;
  const [N, Cin] = x.shape, O = y.shape[1];
  const H = r === 2 ? x.shape[2] : 1, W = x.shape[r + 1], OH = r === 2 ? y.shape[2] : 1, OW = y.shape[r + 1];
  const KH = r === 2 ? w.shape[2] : 1, KW = w.shape[r + 1], Cg = Cin / groups, Og = O / groups;
  const [sh, sw] = r === 2 ? stride : [1, stride[0]], [ph, pw] = r === 2 ? padding : [0, padding[0]];
  const [dh, dw] = r === 2 ? dilation : [1, dilation[0]];
  const actExpr = ACTIVATIONS[act];
  if (actExpr === undefined) throw new Error(`conv: activation ${act} has no WebGPU kernel`);
  if (tile && Og > 1 && OH * OW > 1) {
    return [tiledConv(x, w, bias, y, { N, Cin, O, groups, Cg, Og, H, W, OH, OW, KH, KW, sh, sw, dh, dw, ph, pw }, actExpr, tile)];
  }
  const total = N * O * OH * OW;
  const code = (wg) => header(false) + reader('rx', 'float32', x.src) + reader('rw', 'float32', w.src)
    + (bias ? reader('rb', 'float32', bias.src) : '') + writer('wr', 'float32') + MAIN(wg, `
  if (i >= P[0]) { return; }
  let OW = P[1]; let OH = P[2]; let O = P[3]; let Cg = P[4]; let Og = P[5]; let H = P[6]; let W = P[7]; let KH = P[8]; let KW = P[9];
  let ow = i % OW; let oh = (i / OW) % OH; let o = (i / (OW * OH)) % O; let nb = i / (OW * OH * O);
  let grp = o / Og;
  var acc = ${bias ? 'rb(P[19] + o)' : '0.0'};
  for (var c = 0u; c < Cg; c++) {
    let ci = grp * Cg + c;
    for (var kh = 0u; kh < KH; kh++) {
      let ih = i32(oh * P[10] + kh * P[12]) - i32(P[14]);
      if (ih < 0 || ih >= i32(H)) { continue; }
      for (var kw = 0u; kw < KW; kw++) {
        let iw = i32(ow * P[11] + kw * P[13]) - i32(P[15]);
        if (iw < 0 || iw >= i32(W)) { continue; }
        acc = fma(rx(P[17] + ((nb * P[20] + ci) * H + u32(ih)) * W + u32(iw)), rw(P[18] + ((o * Cg + c) * KH + kh) * KW + kw), acc);
      }
    }
  }
  wr(P[16] + i, ${actExpr});`);
  return [special(`conv|${x.src}${w.src}${bias?.src}|${act}`, code,
    [total, OW, OH, O, Cg, Og, H, W, KH, KW, sh, sw, dh, dw, ph, pw, y.base, x.base, w.base, bias?.base ?? 0, Cin], total)];
}

/** max_pool / avg_pool (floor mode): one thread per output; the max lets a NaN through, the mean
 * divides by the taps inside (or, with count_include_pad, the window clipped to the padded input). */
export function pool(isMax, x, y, iattr) {
  const r = iattr[0], k = iattr.slice(1, 1 + r), st = iattr.slice(1 + r, 1 + 2 * r), pd = iattr.slice(1 + 2 * r, 1 + 3 * r);
  const dl = iattr.slice(1 + 3 * r, 1 + 4 * r), incl = iattr[1 + 4 * r] ? 1 : 0;
  const two = (a, one) => (r === 2 ? a : [one, a[0]]);
  const [KH, KW] = two(k, 1), [sh, sw] = two(st, 1), [ph, pw] = two(pd, 0), [dh, dw] = two(dl, 1);
  const H = r === 2 ? x.shape[2] : 1, W = x.shape[r + 1], OH = r === 2 ? y.shape[2] : 1, OW = y.shape[r + 1];
  const total = numel(y.shape);
  const code = (wg) => header(false) + MATH + `fn rx(e: u32) -> u32 { return ${x.src === 'C' ? 'cw' : 'mw'}(e); }\n`
    + writer('wr', 'float32')
    + MAIN(wg, `
  if (i >= P[0]) { return; }
  let OW = P[1]; let OH = P[2]; let H = P[3]; let W = P[4];
  let ow = i % OW; let oh = (i / OW) % OH; let nc = i / (OW * OH);
  let xb = P[15] + nc * H * W;
  var acc = ${isMax ? 'ninf_()' : '0.0'}; var accb = 0u; var nan = false; var count = 0;
  let h0 = i32(oh * P[7]) - i32(P[9]); let w0 = i32(ow * P[8]) - i32(P[10]);
  for (var kh = 0u; kh < P[5]; kh++) {
    let ih = h0 + i32(kh * P[11]);
    if (ih < 0 || ih >= i32(H)) { continue; }
    for (var kw = 0u; kw < P[6]; kw++) {
      let iw = w0 + i32(kw * P[12]);
      if (iw < 0 || iw >= i32(W)) { continue; }
      let b = rx(xb + u32(ih) * W + u32(iw)); let v = bitcast<f32>(b);
      ${isMax ? 'let bn = (b & 0x7fffffffu) > 0x7f800000u; if (!nan && (bn || v > acc)) { acc = v; accb = b; nan = bn; }' : 'acc += v;'}
      count++;
    }
  }
  ${isMax ? 'if (nan) { M[P[14] + i] = accb; return; }' : `
  var div = count;
  if (P[13] != 0u) {
    let h1 = min(h0 + i32(P[5]), i32(H + P[9])); let w1 = min(w0 + i32(P[6]), i32(W + P[10]));
    div = (h1 - h0) * (w1 - w0);
  }
  acc = select(0.0, acc / f32(div), div != 0);`}
  wr(P[14] + i, acc);`);
  return special(`pool${isMax}|${x.src}`, code, [total, OW, OH, H, W, KH, KW, sh, sw, ph, pw, dh, dw, incl, y.base, x.base], total);
}

/** WGSL opening a transposed convolution's thread: output i of y [N, O, OH, OW] as nb, o, oh, ow, with
 * P[0..15] = [total, OW, OH, O, _, _, H, W, KH, KW, sh, sw, dh, dw, ph, pw] (shared by every conv_transpose
 * kernel). */
export const TRANSPOSED_OUTPUT = `
  if (i >= P[0]) { return; }
  let OW = P[1]; let OH = P[2]; let O = P[3]; let H = P[6]; let W = P[7]; let KH = P[8]; let KW = P[9];
  let ow = i % OW; let oh = (i / OW) % OH; let o = (i / (OW * OH)) % O; let nb = i / (OW * OH * O);`;

/** WGSL of the loop over the taps (kh, kw) of a transposed convolution that land on output (oh, ow): for each,
 * `body` runs with ih, iw, the input position the tap reads (stride, padding and dilation as TRANSPOSED_OUTPUT's P). */
export function transposedTaps(body) {
  return `  for (var kh = 0u; kh < KH; kh++) {
    let th = i32(oh + P[14]) - i32(kh * P[12]);
    if (th < 0 || th % i32(P[10]) != 0 || th / i32(P[10]) >= i32(H)) { continue; }
    let ih = u32(th) / P[10];
    for (var kw = 0u; kw < KW; kw++) {
      let tw = i32(ow + P[15]) - i32(kw * P[13]);
      if (tw < 0 || tw % i32(P[11]) != 0 || tw / i32(P[11]) >= i32(W)) { continue; }
      let iw = u32(tw) / P[11];
      ${body}
    }
  }`;
}

/** conv_transpose: one thread per output, summing the input positions and taps that land on it;
 * wt is [groups, Og·KH·KW, Cg] (src/kernels/conv.c). */
export function convTranspose(ins, y, iattr) {
  const [x, wt] = ins, r = iattr[0], hasBias = iattr[1], groups = iattr[2];
  const at = (j) => iattr.slice(3 + j * r, 3 + (j + 1) * r);
  const two = (a, one) => (r === 2 ? a : [one, a[0]]);
  const [KH, KW] = two(at(0), 1), [sh, sw] = two(at(1), 1), [ph, pw] = two(at(2), 0), [dh, dw] = two(at(3), 1);
  const bias = hasBias ? ins[2] : null, [, C] = x.shape, O = y.shape[1];
  const H = r === 2 ? x.shape[2] : 1, W = x.shape[r + 1], OH = r === 2 ? y.shape[2] : 1, OW = y.shape[r + 1];
  const Cg = C / groups, Og = O / groups, total = numel(y.shape);
  const code = (wg) => header(false) + reader('rx', 'float32', x.src) + reader('rw', 'float32', wt.src)
    + (bias ? reader('rb', 'float32', bias.src) : '') + writer('wr', 'float32') + MAIN(wg, `
${TRANSPOSED_OUTPUT}
  let Cg = P[4]; let Og = P[5]; let gi = o / Og; let ol = o % Og;
  var acc = ${bias ? 'rb(P[19] + o)' : '0.0'};
${transposedTaps(`let wb = P[18] + ((gi * Og + ol) * KH * KW + kh * KW + kw) * Cg;
      let xb = P[17] + ((nb * P[20] + gi * Cg) * H + ih) * W + iw;
      for (var c = 0u; c < Cg; c++) { acc = fma(rx(xb + c * H * W), rw(wb + c), acc); }`)}
  wr(P[16] + i, acc);`);
  return special(`convt|${x.src}${wt.src}${bias?.src}`, code,
    [total, OW, OH, O, Cg, Og, H, W, KH, KW, sh, sw, dh, dw, ph, pw, y.base, x.base, wt.base, bias?.base ?? 0, C], total);
}
