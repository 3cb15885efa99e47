// The random stateful programs of tests/programs.py (recorded by tests/python/test_random_programs.py when
// TANDEM_PROGRAM_FIXTURES is set, as npm test does), replayed in wasm against PyTorch eager: every
// call's outputs and the final state, on 1 and 2 threads and in a worker. The Node pass with
// --experimental-wasm-relaxed-simd runs the same on the relaxed-SIMD builds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { load } from '../../node/index.js';
import { FIXTURES, fromJson, assertClose } from './helpers.js';

const DIR = process.env.TANDEM_PROGRAM_FIXTURES ?? `${FIXTURES}/programs`;
const TOL = { rtol: 1e-4, atol: 1e-5 }; // tests/programs.py's check_plan

function programs() {
  assert.ok(existsSync(DIR), `missing ${DIR}: run pytest tests/python/test_random_programs.py with TANDEM_PROGRAM_FIXTURES=${DIR}`);
  return readdirSync(DIR).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5)).sort();
}

async function replay(name, options) {
  const spec = JSON.parse(readFileSync(`${DIR}/${name}.json`, 'utf8'));
  const model = await load(`${DIR}/${name}.tandem`, options);
  try {
    for (const [i, call] of spec.calls.entries()) {
      const out = await model[call.method](...call.inputs.map(fromJson));
      const outs = out === undefined ? [] : Array.isArray(out) ? out : [out];
      const where = `${name} (plan seed ${spec.plan.seed}) call ${i} ${call.method}`;
      assert.equal(outs.length, call.outputs.length, `${where}: output count`);
      outs.forEach((o, k) => assertClose(o, call.outputs[k], `${where} output ${k}`, TOL));
    }
    const states = new Set(model.state.map((s) => s.name));
    for (const [sname, want] of Object.entries(spec.state)) {
      if (states.has(sname)) assertClose(await model.readState(sname), want, `${name} final state ${sname}`, TOL);
    }
  } finally {
    model.dispose();
  }
}

const CONFIGS = [['inline, 1 thread', { threads: 1 }], ['inline, 2 threads', { threads: 2 }], ['worker', { worker: true, threads: 1 }]];

for (const [label, options] of CONFIGS) {
  test(`random stateful programs equal eager in wasm (${label})`, async () => {
    const names = programs();
    const min = Math.min(100, Number(process.env.TANDEM_PROGRAMS ?? 100)); // tests/python/test_random_programs.py's COUNT
    assert.ok(names.length >= min, `only ${names.length} programs recorded`);
    for (const name of names) await replay(name, options);
  });
}
