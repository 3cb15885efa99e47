// WebGPU kernels of the int8/int4 weight formats (docs/ops.md, Quantized weights): matmul_q8/_q4 and
// embedding_q8/_q4, the weights dequantized as the kernels read them.
import { numel, header, reader, writer, indexReader, MAIN, special } from './wgsl.js';
import { tiledCode, dispatch } from './gemm.js';

/** Byte and code readers of int8 / int4x2 weights (element e = byte e of the buffer; rq4: code k of
 * column lane of the int4 panel from byte e, in its blocks of 8 k: docs/ops.md, int4 weights). */
export function byteReaders(src) {
  const w = src === 'C' ? 'cw' : 'mw';
  return `fn rbyte(e: u32) -> u32 { return (${w}(e >> 2u) >> ((e & 3u) * 8u)) & 0xffu; }
fn rq8(e: u32) -> i32 { return bitcast<i32>(rbyte(e) << 24u) >> 24u; }
fn rq4(e: u32, k: u32, lane: u32) -> i32 {
  return i32((rbyte(e + (k / 8u) * 32u + lane * 4u + (k % 8u) / 2u) >> ((k & 1u) * 4u)) & 0xfu) - 8;
}
`;
}

/** Where weight (k, column 8p + lane) of an int8 panel lies from the panel's start: lane + 8k in the
 * plain panels, or in the paired layout (iattr[1] = 1: each pair of k rows with each column's two
 * codes adjacent) 16·(k / 2) + 2·lane + k % 2. */
function q8At(k, lane, paired) {
  return paired ? `(${k} / 2u) * 16u + (${lane}) * 2u + (${k} & 1u)` : `(${k}) * 8u + ${lane}`;
}

/** matmul_q8 / matmul_q4 with more than one row on gemm.js's T x T tiles: the b tile is the weights
 * dequantized as they are loaded into workgroup memory (int4: each times its group's scale; int8: the
 * per-column scale applied to the sum, as the one-thread kernel's float path does). Params 0..5 as
 * tiledCode's; 6..10: y, a, q, scales, G. */
function tiledQ(q4, paired, a, q, sc, y, M, N, K, G, T) {
  const col8 = '(col / 8u)', lane = 'col % 8u';
  const q4Weight = `f32(rq4(P[8] + ${col8} * ((K + 7u) / 8u) * 32u, kb, ${lane})) * `
    + `rs(P[9] + ${col8} * ((K + P[10] - 1u) / P[10]) * 8u + (kb / P[10]) * 8u + ${lane})`;
  const code = () => tiledCode(T, {
    readers: reader('ra', 'float32', a.src) + reader('rs', 'float32', sc.src) + byteReaders(q.src),
    pre: '',
    aAt: 'ra(P[7] + row * K + ka)',
    bAt: q4 ? q4Weight : `f32(rq8(P[8] + ${col8} * K * 8u + ${q8At('kb', lane, paired)}))`,
    out: q4 ? 'wr(P[6] + row * N + col, acc);' : 'wr(P[6] + row * N + col, acc * rs(P[9] + col));',
  });
  const params = [M, N, K, 1, Math.ceil(N / T), Math.ceil(M / T), y.base, a.base, q.base, sc.base, G];
  return dispatch(`gemmq${q4 ? 4 : 8}${paired ? 'p' : ''}${T}|${a.src}${q.src}${sc.src}`, T, code, params, 1, M, N);
}

/** WGSL of one output's integer dot products, as the wasm kernels compute them (P[flag] != 0; flag
 * null: always): a row (raw(pa + k) its bits, ra(pa + k) its value, k < K) with a NaN / ±inf goes on to
 * the float code after this; else each block of `width` k is quantized to int8 (d = max |a| / qmax,
 * round half to even, within ±qmax; qmax 32767: conv_q8's int16 rows), summed with the weight codes
 * `code` in int32, and added as (float)sum · d`perBlock`; the output is `out`, written to y[i] (or
 * `finish(out)`, WGSL ending the path). */
export function intDot(flag, blocks, width, code, perBlock, out, { qmax = 127, finish = null } = {}) {
  const q = `${qmax}.0`;
  return `
  if (${flag === null ? 'true' : `P[${flag}] != 0u`}) {
    var finite = true;
    for (var k = 0u; k < K; k++) { if ((raw(pa + k) & 0x7fffffffu) >= 0x7f800000u) { finite = false; } }
    if (finite) {
      var acc = 0.0;
      for (${blocks}) {
        let k1 = min(K, k0 + ${width});
        var m = 0.0;
        for (var k = k0; k < k1; k++) { m = max(m, abs(ra(pa + k))); }
        let d = m / ${q};
        var s = 0;
        for (var k = k0; k < k1; k++) {
          let xq = select(0.0, clamp(round(ra(pa + k) / d), -${q}, ${q}), d > 0.0);
          s += i32(xq) * ${code};
        }
        acc = acc + (f32(s) * d)${perBlock};
      }
      ${finish ? finish(out) : `wr(P[3] + i, ${out});
      return;`}
    }
  }`;
}

/** matmul_q8 / matmul_q4 (docs/ops.md, Quantized weights): one thread per output, the weights
 * dequantized as they are read; more than one row with a tile side `tile` (gemm.js tileSize) on the
 * tiled kernel (tiledQ), except where the wasm kernels quantize the activations: matmul_q8 with any
 * number of rows whose K rounded up to even is at most 8192 (wasm runs them in blocks of up to 8
 * rows, each row as it would be alone) quantizes each finite row to int8 per block of 32 and sums in
 * int32 per block, and matmul_q4 with K at most 8192 and a group G of at least 16, a multiple of 8,
 * per group, as the wasm kernels do (the same values up to float32 rounding). */
export function matmulQ(q4, ins, y, iattr, tile = 0) {
  const [a, q, sc] = ins, K = a.shape[a.shape.length - 1], N = iattr[0], G = q4 ? iattr[1] : 0, rows = numel(a.shape) / (K || 1);
  const total = rows * N, paired = !q4 && iattr[1] === 1;
  const dot = (q4 ? K <= 8192 && G >= 16 && G % 8 === 0 : K + (K % 2) <= 8192) ? 1 : 0;
  if (tile && rows > 1 && K > 0 && !dot) return tiledQ(q4, paired, a, q, sc, y, rows, N, K, G, tile);
  const body = q4 ? `
  let G = P[7]; let NG = (K + G - 1u) / G;
  let col = P[5] + (j / 8u) * ((K + 7u) / 8u) * 32u; let scb = P[6] + (j / 8u) * NG * 8u + j % 8u;
${intDot(8, 'var k0 = 0u; k0 < K; k0 += G', 'G', 'rq4(col, k, j % 8u)', ' * rs(scb + (k0 / G) * 8u)', 'acc')}
  var acc = 0.0;
  for (var g = 0u; g < NG; g++) {
    var s = 0.0;
    for (var k = g * G; k < min(K, g * G + G); k++) { s = fma(ra(pa + k), f32(rq4(col, k, j % 8u)), s); }
    acc += s * rs(scb + g * 8u);
  }
  wr(P[3] + i, acc);` : `
  let col = P[5] + (j / 8u) * K * 8u;
${intDot(7, 'var k0 = 0u; k0 < K; k0 += 32u', '32u', `rq8(col + ${q8At('k', 'j % 8u', paired)})`, '', 'acc * rs(P[6] + j)')}
  var acc = 0.0;
  for (var k = 0u; k < K; k++) { acc = fma(ra(pa + k), f32(rq8(col + ${q8At('k', 'j % 8u', paired)})), acc); }
  wr(P[3] + i, acc * rs(P[6] + j));`;
  const code = (wg) => header(false) + reader('ra', 'float32', a.src) + reader('rs', 'float32', sc.src) + byteReaders(q.src)
    + `fn raw(e: u32) -> u32 { return ${a.src === 'C' ? 'cw' : 'mw'}(e); }\n` + writer('wr', 'float32') + MAIN(wg, `
  if (i >= P[2]) { return; }
  let N = P[0]; let K = P[1];
  let r = i / N; let j = i % N; let pa = P[4] + r * K;${body}`);
  return special(`mmq${q4 ? 4 : 8}${paired ? 'p' : ''}|${a.src}${q.src}${sc.src}`, code,
    [N, K, total, y.base, a.base, q.base, sc.base, q4 ? G : dot, dot], total);
}

/** embedding_q8 / embedding_q4: rows of the table the quantized weights hold, dequantized. */
export function embeddingQ(q4, ins, y, iattr) {
  const [q, sc, idx] = ins, N = iattr[0], G = q4 ? iattr[1] : 1, K = y.shape[y.shape.length - 1], total = numel(y.shape);
  const paired = !q4 && iattr[1] === 1;
  const code = (wg) => header(false) + reader('rs', 'float32', sc.src) + byteReaders(q.src) + indexReader('ri', idx.dtype, idx.src)
    + writer('wr', 'float32') + MAIN(wg, `
  if (i >= P[2]) { return; }
  let N = P[0]; let K = P[1]; let G = P[7];
  let row = i / K; let k = i % K;
  var t = ri(P[6] + row);
  if (t < 0 && t != -2147483647 - 1) { t += i32(N); }
  if (t < 0 || t >= i32(N)) { wr(P[3] + i, 0.0); return; }
  let n = u32(t);
  ${q4 ? `let NG = (K + G - 1u) / G;
  let w = f32(rq4(P[4] + (n / 8u) * ((K + 7u) / 8u) * 32u, k, n % 8u));
  wr(P[3] + i, w * rs(P[5] + (n / 8u) * NG * 8u + (k / G) * 8u + n % 8u));`
  : `wr(P[3] + i, f32(rq8(P[4] + (n / 8u) * K * 8u + ${q8At('k', 'n % 8u', paired)})) * rs(P[5] + n));`}`);
  return special(`embq${q4 ? 4 : 8}${paired ? 'p' : ''}|${q.src}${sc.src}|${idx.dtype}${idx.src}`, code,
    [N, K, total, y.base, q.base, sc.base, idx.base, G], total);
}
