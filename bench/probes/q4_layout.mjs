// q4_layout.mjs — the int4 one-row GEMV on layouts a load-time repack could produce (bench/probes/q4_layout.c:
// "pairs", "quads", "quads + dot_add", "quads, 2 panels / 1 panel a step", "streamed": codes and scales of 1 or 2
// panels a group in one sequential chunk) against the current kernel
// (tdm_q4_gemv_dot__relaxed on the file's layout), built with clang-19 for wasm32-wasi as tandem-relaxed.wasm
// is, all in interleaved rounds in one process: ns per weight (CPU time, the 3rd fastest of ROUNDS, 15),
// with the weights from cache (one copy) and from DRAM (copies spanning MB, 256, cycled through). Every
// kernel is checked against the current kernel's bits first (a kernel that differs is reported, not timed).
// 'plain read' reads the file layout's codes and scales once (no GEMV, the same bytes): what memory gives now.
// quads+dot_add only with DOTADD=1 (Node 20's V8 rejects the opcode at compile time).
//
//   node --experimental-wasm-relaxed-simd bench/probes/q4_layout.mjs   (SHAPES=KxN,... ROUNDS=15 MB=256 MODES=cache,dram,decode)
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { cpuMs } from '../suite/compare.mjs';

const root = new URL('../..', import.meta.url).pathname;
const out = `${root}build/q4_layout.wasm`;
const src = ['kernels/quant.c', 'kernels/quant_simd128.c', 'kernels/quant_relaxed.c', 'ops.c', 'util.c', 'threads.c'];
mkdirSync(`${root}build`, { recursive: true });
execFileSync('clang-19', ['--target=wasm32-wasi', '-O3', '-msimd128', '-mrelaxed-simd', '-DTDM_RELAXED_SIMD=1',
  `-I${root}include`, `-I${root}src`, '-mexec-model=reactor', '-Wl,--export=setup', '-Wl,--export=run',
  '-Wl,--export=check', '-Wl,--export=has_dotadd', ...(process.env.DOTADD ? ['-DQ4_DOTADD'] : []),
  '-Wl,-z,stack-size=262144', '-Wl,--max-memory=4294967296', `${root}bench/probes/q4_layout.c`,
  ...src.map((s) => `${root}src/${s}`), '-o', out]);
const module = await WebAssembly.compile(readFileSync(out));
const wasi = new Proxy({}, { get: () => () => 0 });
const ROUNDS = Number(process.env.ROUNDS ?? 15), MB = Number(process.env.MB ?? 256);
const names = ['current', 'pairs', 'quads', 'quads+dot_add', 'quads 2 panels', 'quads 1 panel', 'streamed 1 panel',
  'streamed 2 panels', 'plain read', 'quads 1 panel 16k', 'quads 2 far panels',
  'file 2 streams', 'file 4 streams', 'quads 2 streams', 'quads 4 streams', 'plain read 4 streams'];
const shapes = (process.env.SHAPES ?? '576x1536,1536x576,576x576,576x192,576x49152').split(',').map((s) => s.split('x').map(Number));
const modes = (process.env.MODES ?? 'cache,dram,decode').split(',');
for (const [k, n] of shapes)
  for (const mode of modes.filter((m) => m !== 'decode')) {
    const { exports: x } = await WebAssembly.instantiate(module, { wasi_snapshot_preview1: wasi, env: wasi });
    x._initialize?.();
    const copies = x.setup(n, k, mode === 'dram' ? MB : 0);
    if (!copies) throw new Error('out of memory or a shape not a multiple of 32');
    const bad = x.check();
    if (bad & 1) throw new Error('the current kernel differs from its scalar reference');
    const absent = x.has_dotadd() ? 0 : 1 << 3;
    const W = names.map((_, w) => w).filter((w) => !((bad | absent) & (1 << w)));
    const reps = Math.max(4, Math.round(1.5e7 / (n * k)));
    const t = names.map(() => []);
    let start = 0;
    for (let r = 0; r < ROUNDS; r++)
      for (const w of W) {
        const c0 = cpuMs();
        x.run(w, reps, start);
        t[w].push(((cpuMs() - c0) * 1e6) / reps / (n * k));
        start += reps;
      }
    const q = (v) => v.sort((p, r) => p - r)[2];
    const base = q(t[0]);
    const cols = names.map((nm, w) => (absent & (1 << w) ? `${nm} not built (DOTADD=1)` : bad & (1 << w) ? `${nm} DIFFERS (not timed)` :
      `${nm} ${q(t[w]).toFixed(4)}${w ? ` (${(q(t[w]) / base).toFixed(2)}x)` : ''}`));
    console.log(`K=${k} N=${n} ${mode} (${copies} cop${copies > 1 ? 'ies' : 'y'}): ${cols.join(', ')} ns/weight`);
  }

// 'decode' in MODES: one token's GEMVs of the 30-layer SmolLM-135M in the decode's order (per layer q, k, v,
// o, gate, up, down, each its own weights; then the head: 80 MiB of int4), all tokens on the same weights,
// kernels interleaved token by token: ms per token's GEMVs (CPU time, 3rd fastest of ROUNDS).
if (modes.includes('decode')) {
  const per = { '576x576': 60, '576x192': 60, '576x1536': 60, '1536x576': 30, '576x49152': 1 };
  const inst = {};
  for (const [key, c] of Object.entries(per)) {
    const [k, n] = key.split('x').map(Number);
    const { exports: x } = await WebAssembly.instantiate(module, { wasi_snapshot_preview1: wasi, env: wasi });
    x._initialize?.();
    if (x.setup(n, k, -c) !== c) throw new Error('out of memory');
    if (x.check() & ~(1 << 3)) throw new Error(`a kernel differs at ${key} (check ${x.check()})`);
    inst[key] = x;
  }
  const token = (w) => {
    for (let l = 0; l < 30; l++) {
      inst['576x576'].run(w, 1, 2 * l), inst['576x192'].run(w, 2, 2 * l), inst['576x576'].run(w, 1, 2 * l + 1);
      inst['576x1536'].run(w, 2, 2 * l), inst['1536x576'].run(w, 1, l);
    }
    inst['576x49152'].run(w, 1, 0);
  };
  const D = [0, 4, 5, 11, 12, 14, 8, 15];
  const t = D.map(() => []);
  for (let r = 0; r < ROUNDS; r++)
    for (const [i, w] of D.entries()) {
      const c0 = cpuMs();
      token(w);
      t[i].push(cpuMs() - c0);
    }
  const q = (v) => v.sort((p, r) => p - r)[2];
  console.log('decode, one token\'s GEMVs: ' + D.map((w, i) => `${names[w]} ${q(t[i]).toFixed(2)} ms` +
    (i ? ` (${(q(t[i]) / q(t[0])).toFixed(2)}x)` : '')).join(', '));
}
