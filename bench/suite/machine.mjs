// The two limits of this minute's machine that the streaming rows (Mimi, pocket-tts) run into, measured just
// before each row: the core's rate of 4-lane fused multiply-adds (bench/suite/peak_fma.c; the convs' GEMMs
// run at it) and the DRAM read rate (bench/suite/peak.c's read of 256 MB, more than an L3, the best of 1,
// 2, 4, 8 and 16 streams; the steps read their weights from DRAM every frame). On a shared VM both move: a
// neighbour on the same physical core halves the first, one streaming memory cuts the second
// (docs/performance.md). For a row on n threads the FMA loop also runs on n - 1 workers at the same time, each
// core's rate printed: a neighbour holding one of the cores shows there (a two-thread row no faster than one
// thread shows why). `const minute = await machine(DIR); await minute(threads)` gives the row's text.
import { existsSync, readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
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
  // The FMA loop's best of 8 (the first calls run V8's baseline code until the optimized one is ready).
  const fmaRate = () => best(8, timed(() => fma.tdm_bench_fma(FMA_ITERS), FMA_ITERS * 96));
  // n - 1 workers, each with its own instance of the loop, started together with this thread's run.
  const fmaRates = async (n) => {
    const go = new Int32Array(new SharedArrayBuffer(4));
    const workerData = { module: fmaModule, go, iters: FMA_ITERS };
    const workers = Array.from({ length: n - 1 }, () => new Worker(WORKER, { eval: true, workerData }));
    const results = workers.map((w) => new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject); }));
    const ready = workers.map((w) => new Promise((resolve) => w.once('online', resolve)));
    await Promise.all(ready);
    await new Promise((resolve) => setTimeout(resolve, 50)); // each worker compiles and waits on go
    Atomics.store(go, 0, 1);
    Atomics.notify(go, 0);
    const mine = fmaRate();
    const rates = [mine, ...(await Promise.all(results))];
    await Promise.all(workers.map((w) => w.terminate()));
    return rates;
  };
  return async (threads = 1) => {
    const gflops = !fma ? 'FMA not measured'
      : threads > 1 ? `FMA ${(await fmaRates(threads)).map(f).join(' + ')} GFLOP/s on ${threads} threads at once`
      : `FMA ${f(fmaRate())} GFLOP/s`;
    const readGBs = () => Math.max(...[1, 2, 4, 8, 16].map((s) => timed(() => peak.tdm_bench_read(src, READ_BYTES, 1, s), READ_BYTES)()));
    const dram = peak ? `DRAM read ${f(readGBs())} GB/s` : 'DRAM read not measured';
    return `${gflops}, ${dram}`;
  };
}

// A worker's FMA loop: instantiated from the compiled module, run when the main thread sets go.
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { module, go, iters } = workerData;
const fma = new WebAssembly.Instance(module).exports;
fma.tdm_bench_fma(1000);
Atomics.wait(go, 0, 0);
let best = 0;
for (let i = 0; i < 8; i++) {
  const t0 = performance.now();
  fma.tdm_bench_fma(iters);
  best = Math.max(best, (iters * 96) / (performance.now() - t0) / 1e6);
}
parentPort.postMessage(best);
`;
