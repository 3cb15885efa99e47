// Uses the declarations `python -m tandem inspect --dts` writes for test fixtures (tests/fixtures/make.py
// typings(), copied to build/types/ by tests/js/typed-files.test.js); `tsc --noEmit --strict` over this
// file is the test. Each `@ts-expect-error` is a call the types must refuse (tsc fails if one is accepted).
import { load, Tensor } from 'tandem-runtime';
import type { CallOptions, Model } from 'tandem-runtime';
import * as ort from 'onnxruntime-web';
import type { InputWritesModel } from '../../build/types/input_writes.js';
import type { DelayedModel } from '../../build/types/delayed.js';
import type { DynamicAppenderModel, DynamicAppenderMethods } from '../../build/types/dynamic_appender.js';
import type { BranchGuardModel } from '../../build/types/branch_guard.js';

async function main(): Promise<void> {
  const options: CallOptions = { signal: new AbortController().signal };

  // inputs changed in place: typed arrays and tensors by position or by name, one output
  const writes = (await load('input_writes.tandem')) as InputWritesModel;
  const x = new Float32Array(3), y = new ort.Tensor('float32', new Float32Array(3), [3]);
  const out: Tensor<'float32'> = await writes.forward(x, y);
  const same: Tensor<'float32'> = await writes.forward(x, { data: new Float32Array(3), shape: [3] }, options);
  const named: Tensor<'float32'> = (await writes.run('forward', { x, y })).output;
  // @ts-expect-error an input of another dtype
  await writes.forward(new Int32Array(3), y);
  // @ts-expect-error a missing input
  await writes.forward(x);
  // @ts-expect-error a missing feed
  await writes.run('forward', { x });
  // @ts-expect-error an unknown feed
  await writes.run('forward', { x, y, z: x });
  // @ts-expect-error a method the file does not have
  await writes.run('decode', {});
  // @ts-expect-error no output of that name
  console.log((await writes.run('forward', { x, y })).logits);

  // a version returning None: null from the method and from run
  const delayed = (await load('delayed.tandem')) as DelayedModel;
  const maybe: Tensor<'float32'> | null = await delayed.forward(new Float32Array(2));
  const byName = await delayed.run('forward', { x: new Float32Array(2) });
  // @ts-expect-error run's outputs may be null
  console.log(byName.output);
  const reset: undefined = await delayed.reset();
  const none: Record<string, never> = await delayed.run('reset', {});

  // a dynamic dim and several outputs: a tuple by position, names by run
  const dynamic = (await load('dynamic_appender.tandem')) as DynamicAppenderModel;
  const [rows, flat, , , count]: [Tensor<'float32'>, Tensor<'float32'>, Tensor<'float32'>, Tensor<'float32'>, Tensor<'int64'>] =
    await dynamic.forward(new Tensor('float32', new Float32Array(8), [1, 2, 4]));
  const outputs: DynamicAppenderMethods['forward']['outputs'] = await dynamic.run('forward', { x: new Float32Array(8) });
  const n: Tensor<'int64'> = outputs.output4;
  const fork: DynamicAppenderModel = await dynamic.fork();

  // two inputs of two dtypes; a typed model is a Model
  const guard: Model = (await load('branch_guard.tandem')) as BranchGuardModel;
  const typed = guard as BranchGuardModel;
  await typed.forward(new Float32Array(3), new BigInt64Array(2));
  await typed.run('forward', { x: new Float32Array(3), pad: new ort.Tensor('int64', new BigInt64Array(2), [2]) });
  // @ts-expect-error int64 input given float32
  await typed.forward(new Float32Array(3), new Float32Array(2));
  console.log(out, same, named, maybe, reset, none, rows, flat, count, n, fork.stateBytes);
}

void main();
