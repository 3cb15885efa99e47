// q8_decode.mjs — issue #17 item 2's whole-model check: decode tokens/s of the SmolLM-135M-shaped
// Llama (bench/models/smollm.py, exported by bench/models/llm.py) at float32, int8 and int4 in Node, one thread,
// all in one process and timed in turn by compare(); with a second wasm (argument 2, e.g. a build
// of main's web/tandem.wasm) the int8 file once more on that runtime, for before/after.
//
//   node --expose-gc bench/probes/q8_decode.mjs [build/bench] [other/tandem.wasm]
import { readFileSync } from 'node:fs';
import { load, Tensor } from '../../node/index.js';
import { compare } from '../suite/compare.mjs';

const DIR = process.argv[2] ?? 'build/bench', OTHER = process.argv[3];
const smol = JSON.parse(readFileSync(`${DIR}/smollm.json`, 'utf8'));
const FILL = 32;
const models = {
  float32: await load(`${DIR}/smollm.tandem`, { threads: 1 }),
  int8: await load(`${DIR}/smollm_int8.tandem`, { threads: 1 }),
  int4: await load(`${DIR}/smollm_int4.tandem`, { threads: 1 }),
};
if (OTHER) models['int8 (other wasm)'] = await load(`${DIR}/smollm_int8.tandem`, { threads: 1, wasm: OTHER });
const fns = {};
const first = {};
for (const [name, model] of Object.entries(models)) {
  // every call decodes at position FILL: the cache lengths are written back first
  const lengths = model.state.filter((s) => smol.positions.includes(s.name))
    .map((s) => [s.name, new Tensor(s.dtype, new BigInt64Array(s.shape.reduce((a, b) => a * b, 1)).fill(BigInt(FILL)), s.shape)]);
  await model.resetState();
  const tok = new BigInt64Array([7n]);
  fns[name] = async () => {
    for (const [n, t] of lengths) await model.writeState(n, t);
    return model.decode(tok);
  };
  first[name] = (await fns[name]()).data;
}
const ms = await compare(fns, { rounds: Number(process.env.ROUNDS ?? 9) });
const argmax = (x) => x.reduce((b, v, i) => (v > x[b] ? i : b), 0);
for (const [name, t] of Object.entries(ms))
  console.log(`${name}: ${t.toFixed(2)} ms/token, ${(1000 / t).toFixed(1)} tokens/s, ${(ms.float32 / t).toFixed(2)}x float32; ` +
    `argmax ${argmax(first[name])} (float32 ${argmax(first.float32)})`);
for (const m of Object.values(models)) m.dispose?.();
