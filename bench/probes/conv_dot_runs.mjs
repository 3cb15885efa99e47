// conv_dot_runs.mjs — issue #23: Mimi's memory-bound 2-position float32 dot convs, the runtime's
// kernels (tdm_f32_conv_dot__simd128 / _2s__simd128) against the same per-row sums walking the rows
// in R runs M/R apart and other walks (bench/probes/conv_dot_runs.c), the weights cycled through
// CYCLE_MB (512) MB of copies so they come from DRAM. Builds the probe with emcc -O3 -msimd128 (as
// tandem.wasm) and clang-19 -O3 -mrelaxed-simd + wasm-opt (as tandem-relaxed.wasm) into
// build/conv_dot_runs-*.wasm; check() first asks every walk for its runtime kernel's bits; then
// ROUNDS (9) interleaved rounds, CPU time of this process, medians: ms per call and GB/s.
//
//   node --experimental-wasm-relaxed-simd --expose-gc bench/probes/conv_dot_runs.mjs [simd128|relaxed]
//   (SHAPES=KxM,... default 8192x1024,3584x1024,3072x512,1024x8192; CYCLE_MB, ROUNDS; MISALIGN=n: the weights n floats off
//   a 16-byte boundary)
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { cpuMs } from '../suite/compare.mjs';

const root = new URL('../..', import.meta.url).pathname;
const kinds = process.argv[2] ? [process.argv[2]] : ['simd128', 'relaxed'];
const kernels = readdirSync(`${root}src/kernels`).filter((f) => f.endsWith('.c')).map((f) => `${root}src/kernels/${f}`);
const srcs = [`${root}bench/probes/conv_dot_runs.c`, ...kernels, `${root}src/ops.c`, `${root}src/util.c`, `${root}src/threads.c`];
const exps = ['setup', 'run', 'check'];

function build(kind) {
  const out = `${root}build/conv_dot_runs-${kind}.wasm`;
  if (kind === 'simd128')
    execFileSync('emcc', ['-O3', '-msimd128', '-sSTANDALONE_WASM', '--no-entry', '-sALLOW_MEMORY_GROWTH=1', '-sMAXIMUM_MEMORY=4GB',
      '-sTOTAL_STACK=262144', `-I${root}include`, `-I${root}src`, `-sEXPORTED_FUNCTIONS=${exps.map((e) => `_${e}`).join(',')}`,
      ...srcs, '-o', out]);
  else {
    const flags = ['--target=wasm32-wasi', '-msimd128', '-mrelaxed-simd'];
    const objs = srcs.map((s, i) => {
      const o = `${root}build/conv_dot_runs-obj-${i}.o`;
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
const ROUNDS = Number(process.env.ROUNDS ?? 9), MB = Number(process.env.CYCLE_MB ?? 512);
const shapes = (process.env.SHAPES ?? '8192x1024,3584x1024,3072x512,1024x8192').split(',').map((s) => s.split('x').map(Number));
const names = ["main's dot (4 adjacent rows)", "main's dot_2s (4 adjacent rows x 2 halves)", 'runs 4 (dot bits)', 'runs 8 (dot bits)',
  'runs 4 x 2 adjacent (dot bits)', 'runs 4, loads ahead (dot bits)', 'runs 4 x 2 halves (dot_2s bits)', 'runs 2 x 2 halves (dot_2s bits)',
  'plain read, 4 runs', 'runs 8 x 2 halves (dot_2s bits)', 'plain read, 8 runs', 'runtime dot (this branch)',
  'runtime dot_2s (this branch)'];
for (const kind of kinds) {
  const mod = await WebAssembly.compile(readFileSync(build(kind)));
  for (const [k, m] of shapes) {
    globalThis.gc?.();
    const { exports: x } = await WebAssembly.instantiate(mod, { wasi_snapshot_preview1: stub, env: stub });
    x._initialize?.();
    if (!x.setup(m, k, MB, Number(process.env.MISALIGN ?? 0))) throw new Error('out of memory');
    const c = x.check();
    if (c !== 0) throw new Error(`${kind} K=${k}: ${names[c - 1]} differs from its runtime kernel's bits`);
    const reps = Math.max(2, Math.round(1.6e8 / (m * k)));
    const t = names.map(() => []);
    for (let r = -1; r < ROUNDS; r++)
      for (const w of names.keys()) {
        const c0 = cpuMs();
        x.run(w, reps);
        if (r >= 0) t[w].push((cpuMs() - c0) / reps);
      }
    const med = (v) => [...v].sort((p, q) => p - q)[v.length >> 1];
    const base = med(t[k >= 2048 ? 1 : 0]); // main's pick (config.c: the _2s kernel from K = 2048 on)
    console.log(`\n${kind}, K=${k} x M=${m}, 2 positions (${((m * k * 4) / 2 ** 20).toFixed(1)} MB, cycled over ${MB} MB), ` +
      `${ROUNDS} rounds x ${reps} calls`);
    console.log("| kernel | ms per call | GB/s | vs main's pick |\n|---|---|---|---|");
    for (const [w, name] of names.entries()) {
      const ms = med(t[w]);
      console.log(`| ${name} | ${ms.toFixed(3)} | ${((4 * m * k) / ms / 1e6).toFixed(1)} | ${(ms / base).toFixed(2)} |`);
    }
  }
}
