// Call the exported methods from Node: the state (_v, initially 1) lives in wasm memory between
// calls and both methods see it.
import { load } from '../node/index.js';

const model = await load(process.argv[2] ?? 'shared.tandem');
console.log('methods:', model.methods.map((m) => m.name).join(', '));
for (const [method, x] of [['forward1', 1], ['forward1', 2], ['forward2', 0], ['forward1', 5]]) {
  const y = await model[method](new Float32Array([x]));
  console.log(`await model.${method}(${x}) -> [${[...y.data]}]`);
}
model.dispose();
