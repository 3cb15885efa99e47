// conv_ops.mjs — issue #23 item 6 (branch convrate): each Mimi SEANet conv as a whole op (the
// .tandem files of bench/probes/conv_ops.py: Conv1d without padding, ELU fused into the k3 ones),
// run through the runtime with two builds side by side, one thread, CPU time of this process
// (bench/suite/compare.mjs: interleaved rounds, so a busy spell of the shared machine hits both),
// with each build's output checked against PyTorch's. Prints ms per call A, B, B/A and B's GFLOP/s.
// Usage: [CONV_OPS=regex] node --experimental-wasm-relaxed-simd bench/probes/conv_ops.mjs DIR WASM_A WASM_B [rounds = 7]
import { readFileSync } from 'node:fs';
import { load } from '../../node/index.js';
import { compare, cpuMs } from '../suite/compare.mjs';

const [dir, wasmA, wasmB] = process.argv.slice(2, 5);
const rounds = Number(process.argv[5] ?? 7);
const only = new RegExp(process.env.CONV_OPS ?? '.'); // e.g. CONV_OPS=s4 times only the names that match
const shapes = JSON.parse(readFileSync(`${dir}/shapes.json`, 'utf8')).filter((s) => only.test(s.name));
let sumA = 0, sumB = 0;
console.log('conv | ops | ms A | ms B | B/A | GFLOP/s B | max |err| A, B');
for (const s of shapes) {
  const x = Float32Array.from(s.input);
  const ms = [wasmA, wasmB].map((wasm) => load(`${dir}/${s.name}.tandem`, { wasm, threads: 1 }));
  const [a, b] = await Promise.all(ms);
  const err = [];
  for (const m of [a, b]) {
    const y = (await m.forward(x)).data;
    let e = 0;
    for (let i = 0; i < y.length; i++) e = Math.max(e, Math.abs(y[i] - s.expect[i]));
    err.push(e.toExponential(1));
  }
  const ops = (await b.profile('forward', x)).ops.map((o) => o.name).join('+');
  const r = await compare({ A: () => a.forward(x), B: () => b.forward(x) }, { rounds, clock: cpuMs });
  sumA += r.A, sumB += r.B;
  const gf = (s.flop / r.B / 1e6).toFixed(1);
  console.log(`${s.name} | ${ops} | ${r.A.toFixed(3)} | ${r.B.toFixed(3)} | ${(r.B / r.A).toFixed(2)} | ${gf} | ${err}`);
  a.dispose(), b.dispose();
}
console.log(`sum: A ${sumA.toFixed(2)} ms, B ${sumB.toFixed(2)} ms (${(sumB / sumA).toFixed(2)}x)`);
