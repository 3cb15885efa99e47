// Where a GEMM call's time goes (issue #24, the GEMM target; docs/benchmarks.md): per runtime and
// size, model.forward(A) as a user calls it, the session run alone (the kernel on inputs already in
// linear memory), and the two copies forward adds: A into linear memory, and the output out into a
// new Float32Array (a fresh allocation per call, as forward returns). CPU time, interleaved rounds.
//   TANDEM_BENCH=gemm python bench/models/make_models.py build/bench
//   node --expose-gc --experimental-wasm-relaxed-simd bench/probes/gemm_call.mjs build/bench web/tandem-relaxed.wasm [more.wasm ...]
import { load } from '../../node/index.js';
import { BACKEND } from '../../web/model.js';
import { compare, cpuMs } from '../suite/compare.mjs';

const [dir = 'build/bench', ...wasms] = process.argv.slice(2);
const sizes = (process.env.SIZES ?? '256,512,1024').split(',').map(Number);
for (const n of sizes) {
  const A = Float32Array.from({ length: n * n }, () => Math.random() - 0.5);
  const fns = {};
  for (const wasm of wasms) {
    const m = await load(`${dir}/mm_${n}x${n}.tandem`, { threads: 1, wasm, simd: wasm.includes('relaxed') ? 'relaxed' : 'simd128' });
    const { program, session } = m[BACKEND]; // the wasm backend's program and session
    const x = program.rt.x, inp = x.tdm_session_input(session, 0, 0), out = x.tdm_session_output(session, 0, 0);
    fns[`${wasm} forward`] = () => m.forward(A);
    fns[`${wasm} run`] = () => x.tdm_session_run(session, 0);
    fns[`${wasm} copy in`] = () => new Float32Array(x.memory.buffer, inp, n * n).set(A);
    fns[`${wasm} copy out`] = () => new Float32Array(x.memory.buffer, out, n * n).slice();
  }
  const ms = await compare(fns, { rounds: Number(process.env.ROUNDS ?? 11), clock: cpuMs });
  for (const wasm of wasms) {
    const t = (k) => ms[`${wasm} ${k}`], us = (k) => (1e3 * t(k)).toFixed(0), gf = (k) => ((2 * n ** 3) / t(k) / 1e6).toFixed(1);
    console.log(`${n}³ ${wasm}: forward ${us('forward')} µs (${gf('forward')} GFLOP/s), run ${us('run')} µs (${gf('run')}), ` +
      `copy in ${us('copy in')} µs, copy out ${us('copy out')} µs; forward - run = ${(1e3 * (t('forward') - t('run'))).toFixed(0)} µs`);
  }
}
