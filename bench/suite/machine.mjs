// The two limits of this minute's machine that the streaming rows (Mimi, pocket-tts) run into, measured just
// before each row: the core's rate of 4-lane fused multiply-adds (bench/suite/peak_fma.c; the convs' GEMMs
// run at it) and the DRAM read rate (bench/suite/peak.c's read of 256 MB, more than an L3, the best of 4,
// 8 and 16 streams; the steps read their weights from DRAM every frame). On a shared VM both move: a
// neighbour on the same physical core halves the first, one streaming memory cuts the second
// (docs/benchmarks.md). `const minute = await machine(DIR); minute()` gives the row's text.
import { existsSync, readFileSync } from 'node:fs';
import { instantiateRuntime } from '../../web/loader.js';

const READ_BYTES = 256 << 20, FMA_ITERS = 4_000_000;
const f = (x) => x.toFixed(1);

export async function machine(dir) {
  const compile = async (name) => (existsSync(`${dir}/${name}`) ? WebAssembly.compile(readFileSync(`${dir}/${name}`)) : null);
  const peakModule = await compile('peak.wasm'), fmaModule = await compile('peak-fma.wasm');
  const peak = peakModule ? await instantiateRuntime(peakModule) : null;
  const fma = fmaModule ? (await WebAssembly.instantiate(fmaModule)).exports : null;
  const src = peak ? peak.tdm_bench_alloc(READ_BYTES) : 0;
  if (peak) new Uint8Array(peak.memory.buffer, src >>> 0, READ_BYTES).fill(1);
  const best = (n, once) => Math.max(...Array.from({ length: n }, once));
  const timed = (run, work) => () => {
    const t0 = performance.now();
    run();
    return work / (performance.now() - t0) / 1e6;
  };
  return () => {
    // the first calls of the FMA loop run V8's baseline code until the optimized one is ready: best of 8
    const gflops = fma ? `FMA ${f(best(8, timed(() => fma.tdm_bench_fma(FMA_ITERS), FMA_ITERS * 96)))} GFLOP/s` : 'FMA not measured';
    const readGBs = () => Math.max(...[4, 8, 16].map((s) => timed(() => peak.tdm_bench_read(src, READ_BYTES, 1, s), READ_BYTES)()));
    const dram = peak ? `DRAM read ${f(readGBs())} GB/s` : 'DRAM read not measured';
    return `${gflops}, ${dram}`;
  };
}
