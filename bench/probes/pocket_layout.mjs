// pocket_layout.mjs — issue #23's "the package-layout cache as fast as a hand layout": pocket-tts' flow LM
// `step` in the package's own cache layout (PKG_DIR/pocket[_int8].tandem from bench/models/pocket.py) and
// with hand layouts (DIR/layout_hand[_int8].tandem, DIR/layout_handwhole[_int8].tandem from
// bench/probes/pocket_layout.py: heads-first K and V buffers, attention over their prefix / over the whole
// buffers with a mask), float32 and int8, on one wasm thread, the steps of all of them in turn (the order
// rotating each frame) so a busy machine slows them alike: read the ratios. Each step's latent is checked
// against the package's eager one (PKG_DIR/pocket_frames.json) and against the package-layout export's;
// one profiled step per export gives the bytes it writes (all, and into the state), the ops writing
// more than 5% of the state's bytes, and its ms by op kind.
//
//   node --experimental-wasm-relaxed-simd bench/probes/pocket_layout.mjs DIR PKG_DIR [rounds = 2] [wasm]
import { existsSync, readFileSync } from 'node:fs';
import { load, Tensor } from '../../node/index.js';

const [DIR, PKG] = process.argv.slice(2, 4);
const ROUNDS = Number(process.argv[4] ?? 2), WASM = process.argv[5];
const meta = JSON.parse(readFileSync(`${PKG}/pocket_frames.json`, 'utf8')); // the prompt and the package's latents
const ldim = meta.latents[0].length;
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const f = (x, d = 2) => x.toFixed(d);
const KiB = (b) => (b / 1024).toFixed(1);

for (const variant of ['', '_int8']) {
  const runs = [['package', `${PKG}/pocket${variant}.tandem`], ['hand', `${DIR}/layout_hand${variant}.tandem`],
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
  console.log(`${variant ? 'int8' : 'float32'}: flow LM step on one wasm thread, median over ${ms[0].length} steps each, interleaved`);
  for (const [k, m] of models.entries()) {
    const p = await m.profile('step', Float32Array.from(meta.latents[3]));
    const kinds = {};
    for (const op of p.ops) kinds[op.name] = (kinds[op.name] ?? 0) + op.ms;
    const top = Object.entries(kinds).sort((a, b) => b[1] - a[1]).slice(0, 5).map(([n, v]) => `${n} ${f(v)}`).join(', ');
    const flagged = {};
    for (const o of p.flagged) flagged[o.name] = (flagged[o.name] ?? 0) + 1;
    console.log(`  ${runs[k][0].padEnd(9)} ${f(median(ms[k])).padStart(7)} ms (/ package ${f(median(ms[k]) / median(ms[0]), 3)}); ` +
      `latent vs eager max |diff| ${err[k].toExponential(2)}, vs the package-layout export ${vsPkg[k].toExponential(2)}; ` +
      `${p.ops.length} ops writing ${KiB(p.bytesWritten)} KiB, ${KiB(p.stateBytesWritten)} KiB of it into the state; ` +
      `ops writing > 5% of the state's bytes: ${JSON.stringify(flagged)}; ms by op kind: ${top}`);
  }
}
