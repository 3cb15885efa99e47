// The tiled matmul of the WebGPU backend (web/webgpu/kernels.js picks it for `matmul` and
// `matmul_packed` with more than one row: prefill, batched products; one row stays on the GEMV
// kernels). A workgroup of T x T threads computes a T x T tile of y = a @ b: it walks K in steps
// of T, each step loading a T x T tile of a and of b into workgroup memory (one element per
// thread, zero past the edges, so M, N and K need not be multiples of T), then every thread adds
// its row of the a tile times its column of the b tile. T comes from the adapter's limits
// (tileSize). The sum runs over k in order with fma, as the GEMV kernel's does.
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

/** A dispatch of y[b, M, N] = a[b, M, K] @ B[b, K, N] with T x T tiles. `batch` = { dims, sa, sb }:
 * y's batch dims (row-major, y contiguous) and a's and b's element strides over them (0 where
 * broadcast); `packed`: b is matmul_packed's layout (column n's k-th weight at
 * (n / 8) * K * 8 + k * 8 + n % 8, one matrix). Params: M, N, K, nbatch, tilesN, tilesM, y, a, b,
 * batch rank, dims[8], sa[8], sb[8]. */
export function tiledMatmul(y, a, b, M, N, K, batch, T, packed) {
  const nb = batch.dims.reduce((x, d) => x * d, 1), tilesN = Math.ceil(N / T), tilesM = Math.ceil(M / T);
  const bAt = packed ? 'ob + (col / 8u) * K * 8u + kb * 8u + col % 8u' : 'ob + kb * N + col';
  const code = () => `${header(false)}${MATH}${reader('ra', 'float32', a.src)}${reader('rb', 'float32', b.src)}${writer('wr', 'float32')}
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
  var oa = P[7]; var ob = P[8];
  var rem = bi;
  for (var dd = 0u; dd < P[9]; dd++) {
    let d = P[9] - 1u - dd; let c = rem % P[10u + d]; rem = rem / P[10u + d];
    oa += c * P[${10 + MAXR}u + d]; ob += c * P[${10 + 2 * MAXR}u + d];
  }
  var acc = 0.0;
  for (var k0 = 0u; k0 < K; k0 += ${T}u) {
    let ka = k0 + lc; let kb = k0 + lr;
    var va = 0.0; var vb = 0.0;
    if (live && row < M && ka < K) { va = ra(oa + row * K + ka); }
    if (live && kb < K && col < N) { vb = rb(${bAt}); }
    ta[li] = va; tb[li] = vb;
    workgroupBarrier();
    let kn = min(${T}u, K - k0);
    for (var kk = 0u; kk < kn; kk++) { acc = fma(ta[lr * ${T}u + kk], tb[kk * ${T}u + lc], acc); }
    workgroupBarrier();
  }
  // the call's failure flag: no write once an earlier check failed (the barriers above stay in
  // uniform control flow, so the flag is read only here)
  if (live && row < M && col < N && atomicLoad(&F[0]) == 0u) { wr(P[6] + bi * M * N + row * N + col, acc); }
}
`;
  const params = [M, N, K, nb, tilesN, tilesM, y.base, a.base, b.base, batch.dims.length, ...pad(batch.dims, 1), ...pad(batch.sa, 0),
    ...pad(batch.sb, 0)];
  const groups = nb * tilesN * tilesM;
  return { ...special(`gemm${T}|${packed ? 'p' : ''}|${a.src}${b.src}`, code, params, groups * T * T), groups, wg: T * T };
}
