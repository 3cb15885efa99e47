// Uses every public name of the package; `tsc --noEmit --strict` over this file is the typings test.
import { load, generate, Tensor, TandemError } from 'tandem-runtime';
import type { ChatMessage, Generation, Tokenizer, CallArgs, CallOptions, DType, ErrorCode, ForkOptions, Input, LoadOptions, MethodSpec, Model, Output, Profile, Source, StateSpec, TensorSpec, WorkerModel } from 'tandem-runtime';

async function main(source: Source): Promise<void> {
  const options: LoadOptions = { onProgress: ({ loaded, total }) => console.log(loaded, total ?? '?'), profileFlagFraction: 0.05 };
  const model: Model = await load(source, { ...options, worker: false });
  const methods: readonly MethodSpec[] = model.methods;
  const first: TensorSpec | undefined = methods[0]?.inputs[0];
  const dtype: DType | undefined = first?.dtype;
  const state: readonly StateSpec[] = model.state;
  const x: Input = new Tensor('float32', new Float32Array(16), [1, 16]);
  const direct: Output = await model.forward(x); // the README's first line
  await model.reset();
  const y: Output = await model.call('forward', x, 1, 2n, new Float32Array(4));
  if (direct instanceof Tensor && y instanceof Tensor) console.log(direct.shape[0] === y.shape[0]);
  if (y instanceof Tensor) console.log(y.dtype, y.shape, y.data);
  const p: Profile = await model.profile('forward', x);
  console.log(p.totalMs, p.ops.map((o) => `${o.index} ${o.name} ${o.ms} ${o.bytesWritten} ${o.stateBytesWritten}`), dtype, state.length, model.memoryBytes);
  console.log(p.bytesWritten, p.stateBytesWritten, p.stateBytes, p.flagged.map((o) => o.name));
  const saved: Uint8Array = await model.saveState();
  await model.loadState(saved);
  await model.writeState('h', new Tensor('int64', new BigInt64Array([1n]), []));
  const h: Tensor = await model.readState('h');
  await model.resetState();
  const tok: Tokenizer | null = model.tokenizer;
  if (tok) {
    const chat: ChatMessage[] = [{ role: 'user', content: 'hi' }];
    const text: string = tok.applyChatTemplate(chat, { addGenerationPrompt: true });
    const ids: number[] = tok.applyChatTemplate(chat, { tokenize: true });
    console.log(text, ids, tok.decode(tok.encode('hello')), tok.eosTokenId);
    const run: Generation = generate(model, chat, { maxTokens: 8 });
    for await (const piece of run.text()) console.log(piece);
    for await (const id of generate(model, 'hello', { temperature: 0 })) console.log(id);
  }
  const fork: Model = await model.fork();
  fork.dispose();
  const forkOptions: ForkOptions = { state: 'copy' };
  const copy: Model = await model.fork(forkOptions);
  const controller = new AbortController();
  const callOptions: CallOptions = { signal: controller.signal };
  const args: CallArgs = [x, callOptions];
  const cancellable: Output = await copy.forward(x, callOptions);
  console.log(cancellable, await copy.call('forward', ...args), await copy.profile('forward', x, { signal: controller.signal }));
  controller.abort();
  copy.dispose();
  const w: WorkerModel = await load(source, { worker: true, wasm: new URL('https://example.com/tandem.wasm') });
  console.log(await w.memoryBytes(), (await w.fork()).stateBytes, (await w.fork({ state: 'copy' })).stateBytes, h.shape, model.scratchBytes);
  const logits: Output = await w.decode(new BigInt64Array([42n]));
  console.log(logits, await w.call('decode', 42n));
  w.dispose();
  model[Symbol.dispose]();
  try {
    await model.call('forward', x);
  } catch (e) {
    if (e instanceof TandemError) {
      const code: ErrorCode = e.code;
      console.log(code === 'TDM_ERR_WORKER_DIED', code === 'TDM_ERR_ABORTED' && e.name === 'AbortError', code, e.message);
    }
  }
}

void main('model.tandem');
