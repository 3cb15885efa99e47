// pocket_layout.mjs — issue #23's "the package-layout cache as fast as a hand layout": pocket-tts' flow
// LM `step` in the package's own cache layout (DIR/layout_pkg[_int8].tandem, else bench/models/pocket.py's
// PKG_DIR/pocket[_int8].tandem: the same step) and with hand layouts (DIR/layout_hand[_int8].tandem,
// DIR/layout_handwhole[_int8].tandem from bench/probes/pocket_layout.py: heads-first K and V buffers,
// attention over their prefix / over the whole buffers with a mask), float32 and int8, on one wasm
// thread, the steps of all of them in turn (the order rotating each frame) so a busy machine slows them
// alike: read the ratios. Each step's latent is checked against the package's eager one
// (PKG_DIR/pocket_frames.json, else DIR/layout_frames.json) and against the package-layout export's
// (exit code 1 if they differ); a profiled pass then gives each export's sum of per-op minima (robust to
// a loaded machine), the bytes a step writes (all, and into the state; an op's bytes are its bound, at
// the cache's capacity), the ops writing more than 5% of the state's bytes, and ms by op kind.
//
//   node --experimental-wasm-relaxed-simd bench/probes/pocket_layout.mjs DIR PKG_DIR [rounds = 2] [wasm]
import { existsSync, readFileSync } from 'node:fs';
import { load, Tensor } from '../../node/index.js';

const [DIR, PKG] = process.argv.slice(2, 4);
const ROUNDS = Number(process.argv[4] ?? 2), WASM = process.argv[5];
const framesFile = existsSync(`${PKG}/pocket_frames.json`) ? `${PKG}/pocket_frames.json` : `${DIR}/layout_frames.json`;
const meta = JSON.parse(readFileSync(framesFile, 'utf8')); // the prompt and the package's eager latents
const ldim = meta.latents[0].length;
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const f = (x, d = 2) => x.toFixed(d);
const KiB = (b) => (b / 1024).toFixed(1);

for (const variant of ['', '_int8']) {
  const pkg = existsSync(`${DIR}/layout_pkg${variant}.tandem`) ? `${DIR}/layout_pkg${variant}.tandem` : `${PKG}/pocket${variant}.tandem`;
  const runs = [['package', pkg], ['hand', `${DIR}/layout_hand${variant}.tandem`],
    ['handwhole', `${DIR}/layout_handwhole${variant}.tandem`]].filter(([, file]) => existsSync(file));
  if (runs.length < 2 || runs[0][0] !== 'package') continue;
  const models = [];
  for (const [, file] of runs) models.push(await load(file, { threads: 1, ...(WASM ? { wasm: WASM } : {}) }));
  const ms = runs.map(() => []), err = runs.map(() => 0), vsPkg = runs.map(() => 0);
  for (let r = 0; r < ROUNDS; r++) {
    for (const m of models) {
      await m.resetState();
      await m.prompt(new Tensor('int64', meta.prompt, [1, meta.prompt.length]));
    }
    let x = new Float32Array(ldim).fill(NaN);
    for (let i = 0; i < meta.latents.length; i++) {
      const out = [];
      for (let s = 0; s < runs.length; s++) {
        const k = (s + i) % runs.length; // each export goes first in turn
        const t0 = performance.now();
        const [latent] = await models[k].step(x);
        if (i >= 2) ms[k].push(performance.now() - t0);
        out[k] = latent.data;
        latent.data.forEach((v, j) => { err[k] = Math.max(err[k], Math.abs(v - meta.latents[i][j])); });
      }
      out.forEach((o, k) => o.forEach((v, j) => { vsPkg[k] = Math.max(vsPkg[k], Math.abs(v - out[0][j])); }));
      x = Float32Array.from(meta.latents[i]); // the package's latent feeds the next step, as in pocket.mjs
    }
  }
  // a profiled pass, the exports in turn: per op its minimum over the steps (a preempted op only makes one step slower)
  const best = runs.map(() => null);
  const last = [];
  for (const m of models) {
    await m.resetState();
    await m.prompt(new Tensor('int64', meta.prompt, [1, meta.prompt.length]));
  }
  let x = new Float32Array(ldim).fill(NaN);
  for (let i = 0; i < meta.latents.length; i++) {
    for (let s = 0; s < runs.length; s++) {
      const k = (s + i) % runs.length;
      const p = await models[k].profile('step', x);
      last[k] = p;
      if (i < 2) continue;
      if (!best[k]) best[k] = p.ops.map((o) => o.ms);
      else p.ops.forEach((o, j) => { best[k][j] = Math.min(best[k][j], o.ms); });
    }
    x = Float32Array.from(meta.latents[i]);
  }
  const sum = (a) => a.reduce((u, v) => u + v, 0);
  console.log(`${variant ? 'int8' : 'float32'}: flow LM step on one wasm thread, median over ${ms[0].length} steps each ` +
    `and the sum of per-op minima over ${meta.latents.length - 2}, interleaved`);
  for (const [k, p] of last.entries()) {
    const kinds = {};
    p.ops.forEach((op, j) => { kinds[op.name] = (kinds[op.name] ?? 0) + best[k][j]; });
    const top = Object.entries(kinds).sort((a, b) => b[1] - a[1]).slice(0, 5).map(([n, v]) => `${n} ${f(v, 3)}`).join(', ');
    const flagged = {};
    for (const o of p.flagged) flagged[o.name] = (flagged[o.name] ?? 0) + 1;
    const biggest = Math.max(...p.ops.map((o) => o.bytesWritten));
    console.log(`  ${runs[k][0].padEnd(9)} median ${f(median(ms[k])).padStart(7)} ms (/ package ${f(median(ms[k]) / median(ms[0]), 3)}), ` +
      `op minima ${f(sum(best[k]))} ms (/ package ${f(sum(best[k]) / sum(best[0]), 3)}); ` +
      `latent vs eager max |diff| ${err[k].toExponential(2)}, vs the package-layout export ${vsPkg[k].toExponential(2)}; ` +
      `${p.ops.length} ops writing ${KiB(p.bytesWritten)} KiB (largest op ${KiB(biggest)}), ` +
      `${KiB(p.stateBytesWritten)} KiB of it into the state; ` +
      `ops writing > 5% of the state's bytes: ${JSON.stringify(flagged)}; ms by op kind (minima): ${top}`);
    if (!(vsPkg[k] <= 1e-4)) { // the same weights, quantized alike: the layouts must agree
      console.error(`${runs[k][0]}: latents differ from the package-layout export's by ${vsPkg[k]}`);
      process.exitCode = 1;
    }
  }
}
