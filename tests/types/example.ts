// Uses every public name of the package; `tsc --noEmit --strict` over this file is the typings test.
import { load, Tensor, TandemError } from 'tandem-runtime';
import type { DType, ErrorCode, Input, LoadOptions, MethodSpec, Model, Output, Profile, Source, StateSpec, TensorSpec, WorkerModel } from 'tandem-runtime';

async function main(source: Source): Promise<void> {
  const options: LoadOptions = { onProgress: ({ loaded, total }) => console.log(loaded, total ?? '?') };
  const model: Model = await load(source, { ...options, worker: false });
  const methods: MethodSpec[] = model.methods;
  const first: TensorSpec | undefined = methods[0]?.inputs[0];
  const dtype: DType | undefined = first?.dtype;
  const state: StateSpec[] = model.state;
  const x: Input = new Tensor('float32', new Float32Array(16), [1, 16]);
  const y: Output = await model.call('forward', x, 1, 2n, new Float32Array(4));
  if (y instanceof Tensor) console.log(y.dtype, y.shape, y.data);
  const p: Profile = await model.profile('forward', x);
  console.log(p.totalMs, p.ops.map((o) => `${o.index} ${o.name} ${o.ms}`), dtype, state.length, model.memoryBytes);
  const saved: Uint8Array = await model.saveState();
  await model.loadState(saved);
  await model.writeState('h', new Tensor('int64', new BigInt64Array([1n]), []));
  const h: Tensor = await model.readState('h');
  await model.resetState();
  const fork: Model = await model.fork();
  fork.dispose();
  const w: WorkerModel = await load(source, { worker: true, wasm: new URL('https://example.com/tandem.wasm') });
  console.log(await w.memoryBytes(), (await w.fork()).stateBytes, h.shape, model.scratchBytes);
  w.dispose();
  model[Symbol.dispose]();
  try {
    await model.call('forward', x);
  } catch (e) {
    if (e instanceof TandemError) {
      const code: ErrorCode = e.code;
      console.log(code, e.message);
    }
  }
}

void main('model.tandem');
