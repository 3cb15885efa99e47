// parallel_region.mjs — what one parallel region costs in wasm when its work is almost nothing:
// a chain of 100 Linear(64, 64) on x [2, 64] (each a packed GEMM of 2 rows, 64 columns: 2 column
// blocks of 32, so it goes parallel; about 2 us of arithmetic), forward timed on 1 thread
// (WEB/tandem.wasm) and 2 (WEB/tandem-mt.wasm), calls alternating. The per-call difference over
// 100 is the cost of handing out a region and waiting for it on this machine.
// Make the program: python -c "import torch, tandem; m = torch.nn.Sequential(*[torch.nn.Linear(64, 64,
// bias=False) for _ in range(100)]).eval(); tandem.export(m, {'forward': (torch.randn(2, 64),)}).save('small.tandem')"
// Usage: node bench/probes/parallel_region.mjs small.tandem WEB [calls = 400]
import { load } from '../../node/index.js';

const [file, web] = process.argv.slice(2, 4);
const calls = Number(process.argv[4] ?? 400);
const models = [
  await load(file, { wasm: `${web}/tandem.wasm`, threads: 1 }),
  await load(file, { wasmThreads: `${web}/tandem-mt.wasm`, threads: 2 }),
];
const x = Float32Array.from({ length: 128 }, (_, i) => Math.sin(i));
const times = [[], []];
for (let i = 0; i < calls; i++)
  for (let b = 0; b < 2; b++) {
    const t0 = performance.now();
    await models[b].forward(x);
    if (i >= 20) times[b].push(performance.now() - t0);
  }
models.forEach((m) => m.dispose());
const median = (v) => [...v].sort((p, q) => p - q)[v.length >> 1];
const [a, b] = times.map(median);
console.log(`${web}: forward (100 regions) median ${a.toFixed(3)} ms on 1 thread, ${b.toFixed(3)} ms on 2: ` +
  `${((b - a) * 10).toFixed(1)} us more per region`);
