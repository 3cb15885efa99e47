// i16_gemm.mjs — issue #23: bench/probes/i16_gemm.c's float32 conv GEMM tile against its 16-bit
// integer twin at Mimi's and pocket-tts' conv GEMM shapes, one thread, the relaxed build (fused
// multiply-adds) or the SIMD128 one (clang-19 both), alternating calls; prints ms per call, GFLOP/s
// (2·M·N·K), the ratio and each one's error against float64 sums.
// Run: node --experimental-wasm-relaxed-simd bench/probes/i16_gemm.mjs [rounds = 5] [relaxed | simd128]
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const root = new URL('../..', import.meta.url).pathname;
const rounds = Number(process.argv[2] ?? 5);
const kind = process.argv[3] ?? 'relaxed';
const obj = `${root}build/i16_gemm-${kind}.o`, out = `${root}build/i16_gemm-${kind}.wasm`;
const simd = kind === 'relaxed' ? ['-msimd128', '-mrelaxed-simd'] : ['-msimd128'];
execFileSync('clang-19', ['--target=wasm32', '-O3', ...simd, '-mbulk-memory', '-c', `${root}bench/probes/i16_gemm.c`, '-o', obj]);
execFileSync('wasm-ld-19', ['--no-entry', '--export=setup', '--export=run', '--export=error', obj, '-o', out]);
const x = (await WebAssembly.instantiate(readFileSync(out))).instance.exports;
// [M, N, K]: the conv as a GEMM (O, positions, C·k)
const shapes = [['k12 s6 at 16 (Mimi enc)', 512, 16, 3072], ['k7 512 at 16 (pocket dec)', 512, 16, 3584],
  ['k3 512 at 16', 256, 16, 1536], ['k1 256 at 16', 512, 16, 256], ['k10 s5 at 96', 256, 96, 1280],
  ['k8 s4 at 480', 128, 480, 512], ['k3 64 at 1920', 32, 1920, 192], ['k1 32 at 1920', 64, 1920, 32]];
console.log(`${kind} build`);
console.log('shape | M N K | float32 ms (GFLOP/s) | int16 ms (GFLOP/s) | int16/float32 | rel. error float32, int16');
for (const [name, M, N, K] of shapes) {
  if (!x.setup(M, N, K)) throw new Error(`${name}: does not fit the probe's buffers`);
  const err = [0, 1].map((w) => (x.run(w, 1), x.error()));
  const reps = Math.max(1, Math.round(2e8 / (2 * M * N * K)));
  const ms = [[], []];
  for (let r = 0; r < rounds; r++)
    for (const w of r % 2 ? [1, 0] : [0, 1]) {
      const t0 = performance.now();
      x.run(w, reps);
      ms[w].push((performance.now() - t0) / reps);
    }
  const best = ms.map((v) => Math.min(...v)), gf = best.map((t) => (2 * M * N * K) / t / 1e6);
  console.log(`${name} | ${M} ${N} ${K} | ${best[0].toFixed(3)} (${gf[0].toFixed(1)}) | ${best[1].toFixed(3)} (${gf[1].toFixed(1)}) | ` +
    `${(best[1] / best[0]).toFixed(2)} | ${err[0].toExponential(1)}, ${err[1].toExponential(1)}`);
}
