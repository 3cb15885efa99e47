// Peak JS memory while loading a large program from a Response: the body is
// streamed into linear memory (inline) or transferred to the worker as a stream (worker: true), so
// JS should hold about a chunk, not the program. Prints one JSON line per mode.
//   python bench/models/big_program.py build/bench/big1g.tandem && node --expose-gc bench/suite/big_load.mjs build/bench/big1g.tandem
import { createReadStream, statSync } from 'node:fs';
import { Readable } from 'node:stream';
import { load } from '../../node/index.js';

const path = process.argv[2];
const size = statSync(path).size;
for (const worker of [false, true]) {
  globalThis.gc?.();
  const base = process.memoryUsage();
  let arrayBuffers = 0, heap = 0;
  const sample = () => {
    const m = process.memoryUsage();
    arrayBuffers = Math.max(arrayBuffers, m.arrayBuffers - base.arrayBuffers);
    heap = Math.max(heap, m.heapUsed - base.heapUsed);
  };
  const res = new Response(Readable.toWeb(createReadStream(path, { highWaterMark: 1 << 20 })),
    { headers: { 'content-length': String(size) } });
  const t = performance.now();
  const model = await load(res, { threads: 1, worker, onProgress: sample });
  sample();
  const ms = performance.now() - t;
  await model.forward(new Float32Array(model.methods[0].inputs[0].shape.reduce((a, b) => a * b, 1)));
  console.log(JSON.stringify({ worker, programMB: +(size / 1e6).toFixed(0), loadMs: Math.round(ms),
    jsArrayBuffersPeakMB: +(arrayBuffers / 1e6).toFixed(1), jsHeapPeakMB: +(heap / 1e6).toFixed(1) }));
  model.dispose();
}
