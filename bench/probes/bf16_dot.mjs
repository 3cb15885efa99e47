// bf16_dot.mjs — issue #23: Mimi's memory-bound 2-position dot convs on float32 weights (the runtime's
// tdm_f32_conv_dot__simd128 / _2s__simd128) against the same dots on bfloat16 weights
// (bench/probes/bf16_dot.c), the weights cycled through CYCLE_MB (512) MB per format so they come from
// DRAM (this VM reports a 260 MB L3). Builds the probe with emcc -O3 -msimd128 (as tandem.wasm) and clang-19 -O3 -mrelaxed-simd + wasm-opt
// (as tandem-relaxed.wasm) into build/bf16_dot-*.wasm; every kernel checked against a scalar float64
// reference first; then ROUNDS (9) interleaved rounds, CPU time of this process, the median: ms per
// call, ns per weight and GB/s of weight bytes read.
//
//   node --experimental-wasm-relaxed-simd --expose-gc bench/probes/bf16_dot.mjs [simd128|relaxed]
//   (SHAPES=KxM,... default 8192x1024,3584x1024,1024x8192; CYCLE_MB, ROUNDS)
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { cpuMs } from '../suite/compare.mjs';

const root = new URL('../..', import.meta.url).pathname;
const kinds = process.argv[2] ? [process.argv[2]] : ['simd128', 'relaxed'];
const kernels = readdirSync(`${root}src/kernels`).filter((f) => f.endsWith('.c')).map((f) => `${root}src/kernels/${f}`);
const srcs = [`${root}bench/probes/bf16_dot.c`, ...kernels, `${root}src/ops.c`, `${root}src/util.c`, `${root}src/threads.c`];
const exps = ['setup', 'run', 'check', 'bf16_error'];

function build(kind) {
  const out = `${root}build/bf16_dot-${kind}.wasm`;
  if (kind === 'simd128')
    execFileSync('emcc', ['-O3', '-msimd128', '-sSTANDALONE_WASM', '--no-entry', '-sALLOW_MEMORY_GROWTH=1', '-sMAXIMUM_MEMORY=4GB',
      '-sTOTAL_STACK=262144', `-I${root}include`, `-I${root}src`, `-sEXPORTED_FUNCTIONS=${exps.map((e) => `_${e}`).join(',')}`,
      ...srcs, '-o', out]);
  else {
    const flags = ['--target=wasm32-wasi', '-msimd128', '-mrelaxed-simd'];
    const objs = srcs.map((s, i) => {
      const o = `${root}build/bf16_dot-obj-${i}.o`;
      execFileSync('clang-19', [...flags, '-O3', '-DTDM_RELAXED_SIMD=1', `-I${root}include`, `-I${root}src`, '-c', s, '-o', o]);
      return o;
    });
    execFileSync('clang-19', [...flags, '-mexec-model=reactor', '-Wl,-z,stack-size=262144', '-Wl,--max-memory=4294967296',
      ...exps.map((e) => `-Wl,--export=${e}`), ...objs, '-o', out]);
    execFileSync(`${root}node_modules/.bin/wasm-opt`, ['-O3', '--enable-simd', '--enable-relaxed-simd', '--enable-bulk-memory',
      '--enable-sign-ext', '--enable-nontrapping-float-to-int', '--enable-mutable-globals', out, '-o', out]);
  }
  return out;
}

const stub = new Proxy({}, { get: () => () => 0 });
const ROUNDS = Number(process.env.ROUNDS ?? 9), MB = Number(process.env.CYCLE_MB ?? 512); // MB of copies per format (0: one)
const shapes = (process.env.SHAPES ?? '8192x1024,3584x1024,1024x8192').split(',').map((s) => s.split('x').map(Number)); // K x M
const names = ['f32 dot (1 stream/row)', 'f32 dot_2s (runtime, K>=2048)', 'bf16 4 rows x 1', 'bf16 2 rows x 2 halves',
  'bf16 4 rows x 2 halves', 'bf16 8 rows x 1', 'plain read of the f32 bytes', 'fp16 4 rows x 1',
  'bf16 4-row panels (1 stream)', 'bf16 2-row panels x 2 streams', 'f32 2-row panels x 2 streams'];
for (const kind of kinds) {
  const mod = await WebAssembly.compile(readFileSync(build(kind)));
  for (const [k, m] of shapes) {
    globalThis.gc?.(); // the last shape's instance (3 GB of copies at CYCLE_MB=512) let go of first
    const { exports: x } = await WebAssembly.instantiate(mod, { wasi_snapshot_preview1: stub, env: stub });
    x._initialize?.();
    if (!x.setup(m, k, MB)) throw new Error('out of memory (or K not a multiple of 8, M of 4)');
    const c = x.check();
    const what = c >= 100 ? `a 16-bit conversion (case ${c})` : names[c - 1];
    if (c !== 0) throw new Error(`${kind} K=${k}: ${what} differs from its scalar reference`);
    const relErr = x.bf16_error();
    const reps = Math.max(2, Math.round(1.6e8 / (m * k)));
    const t = names.map(() => []);
    for (let r = -1; r < ROUNDS; r++) // round -1 warms up (V8's tier-up), untimed
      for (const w of names.keys()) {
        const c0 = cpuMs();
        x.run(w, reps);
        if (r >= 0) t[w].push((cpuMs() - c0) / reps);
      }
    const med = (v) => v.sort((p, q) => p - q)[v.length >> 1];
    const mb = ((m * k * 4) / 2 ** 20).toFixed(0);
    console.log(`\n${kind}, K=${k} x M=${m} outputs, 2 positions (${mb} MB f32, cycled over ${MB} MB), ${ROUNDS} rounds x ${reps}` +
      ` calls, bf16 weights' largest error over sum|w·x| ${relErr.toExponential(1)}`);
    console.log('| kernel | ms per call | ns per weight | GB/s of weights | vs the runtime\'s f32 pick |');
    console.log('|---|---|---|---|---|');
    const base = med([...t[k >= 2048 ? 1 : 0]]); // config.c: the _2s kernel from K = 2048 on
    for (const [w, name] of names.entries()) {
      const ms = med(t[w]), bytes = (w === 6 || w === 10 || w < 2 ? 4 : 2) * m * k;
      console.log(`| ${name} | ${ms.toFixed(3)} | ${((ms * 1e6) / (m * k)).toFixed(4)} | ${(bytes / ms / 1e6).toFixed(1)} | ` +
        `${(ms / base).toFixed(2)} |`);
    }
  }
}
