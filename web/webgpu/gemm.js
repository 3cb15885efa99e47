// The tiled products of the WebGPU backend: `matmul` and `matmul_packed` with more than one row
// (prefill, batched products; one row stays on the GEMV kernels) and `conv` as an implicit GEMM
// (web/webgpu/kernels.js and conv.js pick them). A workgroup of T x T threads computes a T x T
// tile of y = a @ b: it walks K in steps of T, each step loading a T x T tile of a and of b into
// workgroup memory (one element per thread, zero past the edges, so M, N and K need not be
// multiples of T), then every thread adds its row of the a tile times its column of the b tile.
// T comes from the adapter's limits (tileSize). The sum runs over k in order with fma, as the
// one-thread-per-output kernels' do.
import { header, reader, writer, MATH, MAXR, pad, special } from './wgsl.js';

/** The tile side: 16, 8 or 4, the largest whose T*T threads and two T*T float32 tiles fit the
 * adapter's maxComputeInvocationsPerWorkgroup, maxComputeWorkgroupSizeX and
 * maxComputeWorkgroupStorageSize; 0 when even 4 does not fit (the map kernel then runs instead). */
export function tileSize(limits) {
  const threads = Math.min(limits.maxComputeInvocationsPerWorkgroup ?? 256, limits.maxComputeWorkgroupSizeX ?? 256);
  const storage = limits.maxComputeWorkgroupStorageSize ?? 16384;
  for (const t of [16, 8, 4]) if (t * t <= threads && 2 * t * t * 4 <= storage) return t;
  return 0;
}

/** The WGSL of a T x T tiled product over batches: `readers` (the WGSL functions it uses), `pre`
 * (statements per thread after bi, row, col and live are known), `aAt` / `bAt` (expressions loading
 * a[row, ka] and b[kb, col], run only inside the matrix), `init` (acc's start), `out` (the
 * statement writing acc, run only inside y). Params 0..5: M, N, K, nbatch, tilesN, tilesM. */
export function tiledCode(T, { readers, pre, aAt, bAt, init = '0.0', out }) {
  return `${header(false)}${MATH}${readers}${writer('wr', 'float32')}
var<workgroup> ta: array<f32, ${T * T}>;
var<workgroup> tb: array<f32, ${T * T}>;
@compute @workgroup_size(${T * T})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let M = P[0]; let N = P[1]; let K = P[2]; let nb = P[3]; let tilesN = P[4]; let tilesM = P[5];
  let g = wid.x + wid.y * nw.x;
  let bi = g / (tilesN * tilesM); let t = g % (tilesN * tilesM);
  let lr = li / ${T}u; let lc = li % ${T}u;
  let row = (t / tilesN) * ${T}u + lr; let col = (t % tilesN) * ${T}u + lc;
  let live = bi < nb;
${pre}
  var acc = 0.0;
  if (live && row < M && col < N) { acc = ${init}; }
  for (var k0 = 0u; k0 < K; k0 += ${T}u) {
    let ka = k0 + lc; let kb = k0 + lr;
    var va = 0.0; var vb = 0.0;
    if (live && row < M && ka < K) { va = ${aAt}; }
    if (live && kb < K && col < N) { vb = ${bAt}; }
    ta[li] = va; tb[li] = vb;
    workgroupBarrier();
    let kn = min(${T}u, K - k0);
    for (var kk = 0u; kk < kn; kk++) { acc = fma(ta[lr * ${T}u + kk], tb[kk * ${T}u + lc], acc); }
    workgroupBarrier();
  }
  // the call's failure flag: no write once an earlier check failed (the barriers above stay in
  // uniform control flow, so the flag is read only here)
  if (live && row < M && col < N && atomicLoad(&F[0]) == 0u) { ${out} }
}
`;
}

/** A tiled kernel's dispatch: nb x tilesN x tilesM workgroups of T x T threads. */
export function dispatch(key, T, code, params, nb, M, N) {
  const groups = nb * Math.ceil(N / T) * Math.ceil(M / T);
  return { ...special(key, code, params, groups * T * T), groups, wg: T * T };
}

/** A dispatch of y[b, M, N] = a[b, M, K] @ B[b, K, N] with T x T tiles. `batch` = { dims, sa, sb }:
 * y's batch dims (row-major, y contiguous) and a's and b's element strides over them (0 where
 * broadcast); `packed`: b is matmul_packed's layout (column n's k-th weight at
 * (n / 8) * K * 8 + k * 8 + n % 8, one matrix). Params: M, N, K, nbatch, tilesN, tilesM, y, a, b,
 * batch rank, dims[8], sa[8], sb[8]. */
export function tiledMatmul(y, a, b, M, N, K, batch, T, packed) {
  const nb = batch.dims.reduce((x, d) => x * d, 1);
  const code = () => tiledCode(T, {
    readers: reader('ra', 'float32', a.src) + reader('rb', 'float32', b.src),
    pre: `  var oa = P[7]; var ob = P[8];
  var rem = bi;
  for (var dd = 0u; dd < P[9]; dd++) {
    let d = P[9] - 1u - dd; let c = rem % P[10u + d]; rem = rem / P[10u + d];
    oa += c * P[${10 + MAXR}u + d]; ob += c * P[${10 + 2 * MAXR}u + d];
  }`,
    aAt: 'ra(oa + row * K + ka)',
    bAt: packed ? 'rb(ob + (col / 8u) * K * 8u + kb * 8u + col % 8u)' : 'rb(ob + kb * N + col)',
    out: 'wr(P[6] + bi * M * N + row * N + col, acc);',
  });
  const params = [M, N, K, nb, Math.ceil(N / T), Math.ceil(M / T), y.base, a.base, b.base, batch.dims.length, ...pad(batch.dims, 1),
    ...pad(batch.sa, 0), ...pad(batch.sb, 0)];
  return dispatch(`gemm${T}|${packed ? 'p' : ''}|${a.src}${b.src}`, T, code, params, nb, M, N);
}

/** conv (1-d and 2-d, groups) as an implicit GEMM with T x T tiles: per batch element and group,
 * y[o, p] = bias[o] + sum over k = (c, kh, kw) of w[o, k] * x at (c, p's window tap k) (zero in
 * the padding), then the fused activation `act` (a WGSL expression over acc). `g` = the geometry
 * { N, Cin, O, groups, Cg, Og, H, W, OH, OW, KH, KW, sh, sw, dh, dw, ph, pw }. */
export function tiledConv(x, w, bias, y, g, act, T) {
  const M = g.Og, N = g.OH * g.OW, K = g.Cg * g.KH * g.KW, nb = g.N * g.groups;
  const code = () => tiledCode(T, {
    readers: reader('rx', 'float32', x.src) + reader('rw', 'float32', w.src) + (bias ? reader('rbias', 'float32', bias.src) : ''),
    pre: `  let groups = P[6]; let Cg = P[7]; let H = P[8]; let W = P[9]; let KH = P[10]; let KW = P[11]; let OW = P[16];
  let n = bi / groups; let grp = bi % groups; let o = grp * M + row;
  let oh = col / OW; let ow = col % OW;`,
    aAt: 'rw(P[22] + o * K + ka)',
    bAt: `tap(kb, oh, ow, n * P[19] + grp * Cg, H, W, KH, KW)`,
    init: bias ? 'rbias(P[23] + o)' : '0.0',
    out: `wr(P[21] + (n * P[20] + o) * N + col, ${act});`,
  }).replace('var<workgroup> ta', `// x at input channel ch0 + c of tap kb = (c * KH + kh) * KW + kw for output (oh, ow); 0 in the padding
fn tap(kb: u32, oh: u32, ow: u32, ch0: u32, H: u32, W: u32, KH: u32, KW: u32) -> f32 {
  let c = kb / (KH * KW); let r = kb % (KH * KW); let kh = r / KW; let kw = r % KW;
  let ih = i32(oh * P[12] + kh * P[14]) - i32(P[17]); let iw = i32(ow * P[13] + kw * P[15]) - i32(P[18]);
  if (ih < 0 || ih >= i32(H) || iw < 0 || iw >= i32(W)) { return 0.0; }
  return rx(P[24] + ((ch0 + c) * H + u32(ih)) * W + u32(iw));
}
var<workgroup> ta`);
  const params = [M, N, K, nb, Math.ceil(N / T), Math.ceil(M / T), g.groups, g.Cg, g.H, g.W, g.KH, g.KW, g.sh, g.sw, g.dh, g.dw,
    g.OW, g.ph, g.pw, g.Cin, g.O, y.base, w.base, bias?.base ?? 0, x.base];
  return dispatch(`gemmconv${T}|${x.src}${w.src}${bias ? bias.src : ''}|${act}`, T, code, params, nb, M, N);
}
