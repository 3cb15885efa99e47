// The ecosystem's tensors and names: onnxruntime-web's Tensor objects (the real package's class),
// transformers.js' (the same { type, data, dims } fields: its package is not installed here, as its
// onnxruntime-node dependency downloads binaries from outside the npm registry when installed) and
// typed arrays with a shape as inputs; model.run(method, feeds) with inputs
// and outputs by name, as onnxruntime-web's session.run; and the errors of each, naming the input.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as ort from 'onnxruntime-web';
import { load, Tensor, TandemError } from '../../node/index.js';
import { fixture, fromJson, assertClose } from './helpers.js';

/** A transformers.js Tensor's fields (its class keeps them on its own object). */
const hfTensor = (type, data, dims) => ({ type, data, dims, size: data.length });

// Each form an input may take, made from a tandem Tensor.
const FORMS = {
  'onnxruntime-web Tensor': (t) => new ort.Tensor(t.dtype, t.data, t.shape),
  'transformers.js Tensor': (t) => hfTensor(t.dtype, t.data, t.shape),
  '{ data, shape }': (t) => ({ data: t.data, shape: t.shape }),
};

/** Runs a fixture's call sequence with its inputs in `form`, positionally or by name (`named`),
 * checking every output against eager's. */
async function sequence(name, form, { named = false, worker = false } = {}) {
  const { path, spec } = fixture(name);
  const model = await load(path, { worker });
  try {
    for (const [i, call] of spec.calls.entries()) {
      const m = model.methods.find((x) => x.name === call.method);
      const inputs = call.inputs.map((t) => form(fromJson(t)));
      const where = `${name} call ${i} ${call.method}`;
      if (named) {
        const out = await model.run(call.method, Object.fromEntries(inputs.map((v, k) => [m.inputs[k].name, v])));
        if (call.outputs.length === 0 && m.outputs.length > 0) {
          assert.equal(out, null, `${where}: eager returns None here`);
          continue;
        }
        assert.deepEqual(Object.keys(out), m.outputs.map((o) => o.name), `${where}: output names`);
        m.outputs.forEach((o, k) => assertClose(out[o.name], call.outputs[k], `${where} output '${o.name}'`));
      } else {
        const out = await model.call(call.method, ...inputs);
        const outs = out === undefined || out === null ? [] : Array.isArray(out) ? out : [out];
        assert.equal(outs.length, call.outputs.length, `${where}: output count`);
        outs.forEach((o, k) => assertClose(o, call.outputs[k], `${where} output ${k}`));
      }
    }
  } finally {
    model.dispose();
  }
}

// float32 (accumulator), float32 + int64 (branch_guard), int32 (int32_counter), a dynamic dim
// (dynamic_appender: its dims give the size), versions returning None (delayed)
const FIXTURES = ['accumulator', 'branch_guard', 'int32_counter', 'dynamic_appender', 'delayed'];

for (const [form, make] of Object.entries(FORMS)) {
  test(`${form} inputs give eager's outputs over the call sequences, positionally and by name`, async () => {
    for (const name of FIXTURES) {
      await sequence(name, make);
      await sequence(name, make, { named: true });
    }
  });
}

test('named calls in a worker, with onnxruntime-web and transformers.js tensors', async () => {
  await sequence('branch_guard', FORMS['onnxruntime-web Tensor'], { named: true, worker: true });
  await sequence('delayed', FORMS['transformers.js Tensor'], { named: true, worker: true });
});

test("run: outputs by the file's names, null for a version returning None, {} for a method without outputs", async () => {
  const model = await load(fixture('dynamic_appender').path);
  try {
    const x = new ort.Tensor('float32', new Float32Array(8).fill(1), [1, 2, 4]);
    const out = await model.run('forward', { x });
    assert.deepEqual(Object.keys(out), ['output0', 'output1', 'output2', 'output3', 'output4']);
    assert.ok(Object.values(out).every((t) => t instanceof Tensor));
    assert.deepEqual(out.output0.shape, [1, 3, 4], 'a dynamic output has the call\'s size (n = 2, n + 1 rows)');
    assert.equal(out.output4.dtype, 'int64');
    assert.deepEqual(await model.run('reset', {}), {});
  } finally {
    model.dispose();
  }
  const delayed = await load(fixture('delayed').path);
  try {
    const { calls } = fixture('delayed').spec;
    assert.equal(calls[0].outputs.length, 0);
    assert.equal(await delayed.run('forward', { x: hfTensor('float32', new Float32Array(2), [2]) }), null);
  } finally {
    delayed.dispose();
  }
});

test("a changed input is written into the onnxruntime-web or transformers.js tensor's data; run leaves it out of the outputs", async () => {
  const { path, spec } = fixture('input_writes');
  for (const worker of [false, true]) {
    const model = await load(path, { worker });
    try {
      for (const [c, call] of spec.calls.entries()) {
        const x = new ort.Tensor('float32', new Float32Array(call.inputs[0]), [3]);
        const y = hfTensor('float32', new Float32Array(call.inputs[1]), [3]);
        const out = await model.run('forward', { x, y });
        assert.deepEqual(Object.keys(out), ['output'], 'the new values of x and y are no outputs');
        const close = (a, b, what) => assert.ok(a.length === b.length && [...a].every((v, i) => Math.abs(v - b[i]) < 1e-5),
          `${what} (worker ${worker}) call ${c}: [${[...a]}] vs [${b}]`);
        close(out.output.data, call.output, 'output');
        close(x.data, call.after[0], 'x');
        close(y.data, call.after[1], 'y');
      }
    } finally {
      model.dispose();
    }
  }
});

/** The TandemError a call rejects with. */
async function rejection(p, code = 'TDM_ERR_INVALID_ARGUMENT') {
  const e = await p.then(() => assert.fail('resolved, expected a rejection'), (err) => err);
  assert.ok(e instanceof TandemError, `${e}`);
  assert.equal(e.code, code, e.message);
  return e.message;
}

test('a tensor of another dtype or shape is a TandemError naming the input and both dtypes and shapes', async () => {
  const model = await load(fixture('branch_guard').path);
  try {
    const pad = new BigInt64Array([1n, 2n]);
    const x = new Float32Array([1, 2, 3]);
    const ortOf = (dtype, Arr, n, dims = [n]) => new ort.Tensor(dtype, new Arr(n), dims);
    const cases = [
      [() => model.forward(ortOf('int32', Int32Array, 3), pad), "forward() input 0 'x': expected float32[3], given int32[3]"],
      [() => model.forward(ortOf('float32', Float32Array, 3, [1, 3]), pad), "input 0 'x': expected float32[3], given float32[1,3]"],
      [() => model.forward(x, hfTensor('int32', new Int32Array(2), [2])), "input 1 'pad': expected int64[2], given int32[2]"],
      [() => model.forward(hfTensor('bool', new Uint8Array(3), [3]), pad), "input 0 'x': expected float32[3], given bool[3]"],
      [() => model.forward(ortOf('uint8', Uint8Array, 3), pad), "input 0 'x': expected float32[3], given uint8[3]"],
      [() => model.forward(ortOf('float16', Uint16Array, 3), pad), "input 0 'x': expected float32[3], given float16[3]"],
      [() => model.run('forward', { x, pad: ortOf('int64', BigInt64Array, 3) }), "input 1 'pad': expected int64[2], given int64[3]"],
      [() => model.forward({ data: new Float64Array(3), shape: [3] }, pad), "input 0 'x': expected float32[3], given float64[3]"],
      [() => model.forward({ data: x, shape: [3, 1] }, pad), "input 0 'x': expected float32[3], given float32[3,1]"],
      [() => model.forward({ data: 'abc', shape: [3] }, pad),
        "input 0 'x': { data, shape } takes a typed array or an array as data, given string"],
      [() => model.forward({ type: 'float32', data: [1, 2, 3], dims: [3], location: 'gpu-buffer' }, pad),
        "input 0 'x': an onnxruntime tensor on 'gpu-buffer'"],
      [() => model.forward({ type: 'float32', data: new Float32Array(3), dims: undefined }, pad),
        "input 0 'x': the shape must be an array of numbers, given undefined"],
      [() => model.forward({ data: x, shape: 3 }, pad), "input 0 'x': the shape must be an array of numbers, given number"],
      [() => model.forward({ type: 'float32', data: new Int32Array(3), dims: [3] }, pad),
        "input 0 'x': float32 data must be a Float32Array, given a Int32Array"],
    ];
    for (const [call, message] of cases) assert.ok((await rejection(call())).includes(message), message);
    // a plain array takes the input's dtype, as a plain array in a Tensor does; the rejected calls changed nothing
    const out = await model.forward({ data: [1, 2, 3], shape: [3] }, { data: [0, 0], shape: [2] });
    const fresh = await load(fixture('branch_guard').path);
    assert.deepEqual(out, await fresh.forward(new Float32Array([1, 2, 3]), new BigInt64Array(2)));
    fresh.dispose();
  } finally {
    model.dispose();
  }
});

test('run: a missing or unknown input name, or feeds not an object of names, is a TandemError listing the expected names', async () => {
  const model = await load(fixture('branch_guard').path);
  try {
    const x = new Float32Array(3), pad = new BigInt64Array(2);
    assert.equal(await rejection(model.run('forward', { x })),
      "TDM_ERR_INVALID_ARGUMENT: run('forward', feeds): missing input 'pad'; forward takes 'x', 'pad'");
    assert.equal(await rejection(model.run('forward', { x, pad, y: x, z: 1 })),
      "TDM_ERR_INVALID_ARGUMENT: run('forward', feeds): no input 'y', 'z'; forward takes 'x', 'pad'");
    const acc = await load(fixture('accumulator').path);
    assert.equal(await rejection(acc.run('reset', { x })),
      "TDM_ERR_INVALID_ARGUMENT: run('reset', feeds): no input 'x'; reset takes no inputs: give {}");
    acc.dispose();
    for (const feeds of [undefined, null, [x, pad], x, new Tensor('float32', x, [3]), new ort.Tensor('float32', x, [3])]) {
      assert.match(await rejection(model.run('forward', feeds)), /feeds is an object of input name to input; forward takes 'x', 'pad'$/);
    }
    assert.match(await rejection(model.run('nope', {}), 'TDM_ERR_NOT_FOUND'), /no method 'nope'; the program has forward/);
    assert.match(await rejection(model.run('forward', { x, pad }, { sinal: null })), /options take only signal/);
    const controller = new AbortController();
    controller.abort();
    const aborted = await rejection(model.run('forward', { x, pad }, { signal: controller.signal }), 'TDM_ERR_ABORTED');
    assert.ok(aborted.includes('forward'), aborted);
    // the positional API is unchanged beside it, and a failed named call changed nothing
    const byName = await model.run('forward', { pad, x: new Float32Array([1, 1, 1]) });
    const fresh = await load(fixture('branch_guard').path);
    const byPosition = await fresh.forward(new Float32Array([1, 1, 1]), pad);
    fresh.dispose();
    assert.deepEqual(byName.output, byPosition);
  } finally {
    model.dispose();
  }
});
