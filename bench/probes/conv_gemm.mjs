// conv_gemm.mjs — issue #23: the conv GEMM (tdm_f32_conv_gemm_4x8__simd128), im2col and col2im at
// Mimi's conv shapes against gemm.c's packed GEMM at the same M, N, K, one thread, in V8 (CPU time
// of this process: the machine is shared). Builds bench/probes/conv_gemm.c twice: emcc -O3 -msimd128 (as tandem.wasm) and
// clang-19 -O3 -mrelaxed-simd + wasm-opt -O3 (as tandem-relaxed.wasm), into build/conv_gemm*.wasm.
// Run: node --experimental-wasm-relaxed-simd --expose-gc bench/probes/conv_gemm.mjs [simd128|relaxed]
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { compare, cpuMs } from '../suite/compare.mjs';

const root = new URL('../..', import.meta.url).pathname;
const buildOnly = process.argv.includes('--build'); // only write the .wasm files
const kinds = process.argv[2] && process.argv[2] !== '--build' ? [process.argv[2]] : ['simd128', 'relaxed'];
// extra -D flags for both builds (e.g. PROBE_DEFS='-DCONV_PKC=128'), and a name for the files
const defs = (process.env.PROBE_DEFS ?? '').split(' ').filter(Boolean), tag = defs.join('').replace(/[^A-Za-z0-9]/g, '');
const kernels = readdirSync(`${root}src/kernels`).filter((f) => f.endsWith('.c')).map((f) => `${root}src/kernels/${f}`);
const srcs = [`${root}bench/probes/conv_gemm.c`, ...kernels, `${root}src/ops.c`, `${root}src/util.c`, `${root}src/threads.c`];
const exps = ['setup', 'run_gemm', 'setup_im2col', 'run_im2col', 'setup_col2im', 'run_col2im', 'setup_plane', 'run_plane',
  'setup_dot', 'run_dot', 'run_col2im_phases'];

function build(kind) {
  const out = `${root}build/conv_gemm-${kind}${tag}.wasm`;
  if (kind === 'simd128')
    execFileSync('emcc', ['-O3', '-msimd128', ...defs, '-sSTANDALONE_WASM', '--no-entry', '-sALLOW_MEMORY_GROWTH=1', '-sTOTAL_STACK=262144',
      `-I${root}include`, `-I${root}src`, `-sEXPORTED_FUNCTIONS=${exps.map((e) => `_${e}`).join(',')}`, ...srcs, '-o', out]);
  else {
    // compiled and linked apart: -O on clang's link line runs the wasm-opt on PATH (cmake/wasi-clang.cmake)
    const flags = ['--target=wasm32-wasi', '-msimd128', '-mrelaxed-simd'];
    const objs = srcs.map((s, i) => {
      const o = `${root}build/conv_gemm-obj${tag}-${i}.o`;
      execFileSync('clang-19', [...flags, '-O3', ...defs, '-DTDM_RELAXED_SIMD=1', `-I${root}include`, `-I${root}src`, '-c', s, '-o', o]);
      return o;
    });
    execFileSync('clang-19', [...flags, '-mexec-model=reactor', '-Wl,-z,stack-size=262144', ...exps.map((e) => `-Wl,--export=${e}`),
      ...objs, '-o', out]);
    execFileSync(`${root}node_modules/.bin/wasm-opt`, ['-O3', '--enable-simd', '--enable-relaxed-simd', '--enable-bulk-memory',
      '--enable-sign-ext', '--enable-nontrapping-float-to-int', '--enable-mutable-globals', out, '-o', out]);
  }
  return out;
}

const wasi = new Proxy({}, { get: () => () => 0 });
async function instance(file) {
  const { instance } = await WebAssembly.instantiate(readFileSync(file), { wasi_snapshot_preview1: wasi,
    env: new Proxy({}, { get: () => () => 0 }) });
  instance.exports._initialize?.();
  return instance.exports;
}

// [name, M, N, K, conv: [C, k, s, out] for im2col | transposed: [Og, k, s, in] for col2im]
const shapes = [
  ['conv 64->128 k8 s4 @480', 128, 480, 512, { im2col: [64, 8, 4, 480] }],
  ['conv 128->256 k10 s5 @96', 256, 96, 1280, { im2col: [128, 10, 5, 96] }],
  ['conv 256->512 k12 s6 @16', 512, 16, 3072, { im2col: [256, 12, 6, 16] }],
  ['conv 64->32 k3 @1920', 32, 1920, 192, { im2col: [64, 3, 1, 1920] }],
  ['conv 128->64 k3 @480', 64, 480, 384, { im2col: [128, 3, 1, 480] }],
  ['conv 256->128 k3 @96', 128, 96, 768, { im2col: [256, 3, 1, 96] }],
  ['conv 512->256 k3 @16', 256, 16, 1536, { im2col: [512, 3, 1, 16] }],
  ['convT 512->256 k12 s6 @16', 3072, 16, 512, { col2im: [256, 12, 6, 16] }],
  ['convT 256->128 k10 s5 @96', 1280, 96, 256, { col2im: [128, 10, 5, 96] }],
  ['convT 128->64 k8 s4 @480', 512, 480, 128, { col2im: [64, 8, 4, 480] }],
];

for (const kind of kinds) {
  const file = build(kind);
  if (buildOnly) continue;
  console.log(`\n${kind} (${file.replace(root, '')}), GFLOP/s (im2col/col2im: ms per call)`);
  console.log('shape | M N K | conv GEMM | packed GEMM | conv GEMM ms | im2col or (bias fill + col2im) ms | col2im by phase ms');
  for (const [name, M, N, K, extra] of shapes) {
    const x = await instance(file);
    if (!x.setup(M, N, K)) throw new Error('out of memory');
    if (extra.im2col && !x.setup_im2col(...extra.im2col)) throw new Error('out of memory');
    if (extra.col2im && !x.setup_col2im(...extra.col2im)) throw new Error('out of memory');
    const fns = { conv: async () => x.run_gemm(0, 1), packed: async () => x.run_gemm(2, 1) };
    if (extra.im2col) fns.aux = async () => x.run_im2col(1);
    if (extra.col2im) fns.aux = async () => x.run_col2im(1);
    if (extra.col2im) fns.phases = async () => x.run_col2im_phases(1);
    const t = await compare(fns, { rounds: 7, minMs: 120, clock: cpuMs });
    const gf = (ms) => ((2 * M * N * K) / ms / 1e6).toFixed(1);
    console.log(`${name} | ${M} ${N} ${K} | ${gf(t.conv)} | ${gf(t.packed)} | ${t.conv.toFixed(3)} | ${t.aux.toFixed(3)} | ` +
      `${t.phases?.toFixed(3) ?? '-'}`);
  }
}
