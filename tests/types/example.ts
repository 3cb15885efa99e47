// Uses every public name of the package; `tsc --noEmit --strict` over this file is the typings test.
import { load, generate, Tensor, TandemError, streamAudio, Resampler, clearCache, capabilities } from 'tandem-runtime';
import { Model, WorkerModel, Chat } from 'tandem-runtime';
import { Tensor as OrtTensor } from 'onnxruntime-web';
import type { ChatMessage, Generation, Tokenizer, CallArgs, CallOptions, DType, ErrorCode, ForkOptions, Input, LoadOptions, MethodSpec, Output, Profile, Source, StateSpec, TensorSpec,
  Feeds, NamedOutputs, TensorLike, ShapedArray, InputOf, MethodTypes,
  AudioChunk, AudioDrop, AudioResult, AudioSource, AudioSummary, StreamAudioOptions, Capabilities,
  ChatOptions, ChatTurnOptions, ChatStats, ChatTokenizer } from 'tandem-runtime';

async function main(source: Source): Promise<void> {
  const options: LoadOptions = { onProgress: ({ loaded, total }) => console.log(loaded, total ?? '?'), profileFlagFraction: 0.05 };
  const model: Model = await load(source, { ...options, worker: false });
  const methods: readonly MethodSpec[] = model.methods;
  const first: TensorSpec | undefined = methods[0]?.inputs[0];
  const dtype: DType | undefined = first?.dtype;
  const state: readonly StateSpec[] = model.state;
  const x: Input = new Tensor('float32', new Float32Array(16), [1, 16]);
  const direct: Output = await model.forward(x); // a program method, as the README calls one
  await model.reset();
  const y: Output = await model.call('forward', x, 1, 2n, new Float32Array(4));
  if (direct instanceof Tensor && y instanceof Tensor) console.log(direct.shape[0] === y.shape[0]);
  if (y instanceof Tensor) console.log(y.dtype, y.shape, y.data);
  // the ecosystem's tensors ({ type, data, dims }), typed arrays with a shape, and calls by name
  const ortLike: TensorLike = { type: 'float32', data: new Float32Array(16), dims: [1, 16] };
  const shaped: ShapedArray<'float32'> = { data: new Float32Array(16), shape: [1, 16] };
  const typed: InputOf<'int64'> = new BigInt64Array([1n]);
  const ort: Input = new OrtTensor('float32', new Float32Array(16), [1, 16]); // onnxruntime-web's own Tensor type
  const feeds: Feeds = { x: ortLike, y: shaped, ids: typed, n: 3, z: ort };
  const named: NamedOutputs | null = await model.run('forward', feeds, { signal: new AbortController().signal });
  if (named) console.log(named.output?.shape, Object.keys(named));
  type Step = { step: { feeds: { x: InputOf<'float32'> }; outputs: { y: Tensor<'float32'> } } };
  const typedRun: Step extends MethodTypes ? Model<Step> : never = model as unknown as Model<Step>; // run typed for one file
  console.log((await typedRun.run('step', { x: new Float32Array(16) })).y.data);
  const p: Profile = await model.profile('forward', x);
  console.log(p.totalMs, p.ops.map((o) => `${o.index} ${o.name} ${o.ms} ${o.bytesWritten} ${o.stateBytesWritten}`), dtype, state.length, model.memoryBytes);
  console.log(p.bytesWritten, p.stateBytesWritten, p.stateBytes, p.flagged.map((o) => o.name));
  const saved: Uint8Array = await model.saveState();
  await model.loadState(saved);
  await model.writeState('h', new Tensor('int64', new BigInt64Array([1n]), []));
  const h: Tensor = await model.readState('h');
  await model.resetState();
  await model.seed(42);
  await model.seed(42n);
  const tok: Tokenizer | null = model.tokenizer;
  if (tok) {
    const chat: ChatMessage[] = [{ role: 'user', content: 'hi' }];
    const text: string = tok.applyChatTemplate(chat, { addGenerationPrompt: true });
    const ids: number[] = tok.applyChatTemplate(chat, { tokenize: true });
    console.log(text, ids, tok.decode(tok.encode('hello')), tok.eosTokenId);
    const run: Generation = generate(model, chat, { maxTokens: 8 });
    for await (const piece of run.text()) console.log(piece);
    for await (const id of generate(model, 'hello', { temperature: 0 })) console.log(id);
    const chatOptions: ChatOptions = { system: 'be brief', maxNewTokens: 16, temperature: 0.7, seed: 1, snapshots: 4 };
    const session: Chat = model.chat(chatOptions);
    const turn: ChatTurnOptions = { onText: (piece: string) => console.log(piece), onToken: (id: number) => console.log(id) };
    const reply: string = await session.send('hi', turn);
    const stats: ChatStats | null = session.stats;
    console.log(reply, stats?.ttftMs, stats?.tokensPerSecond, stats?.restored, session.messages.length);
    await session.regenerate();
    await session.undo();
    const branch: Chat = await session.fork();
    branch.dispose();
    const given: ChatTokenizer = { applyChatTemplate: () => [1, 2], decode: (ids) => ids.join(' ') };
    model.chat({ tokenizer: given, maxCacheLen: 64, positionState: 'pos' }).dispose();
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
  const fromCdn: Model = await load(source, { wasmPaths: 'https://cdn.example.com/tandem-runtime/web/' });
  (await load(source, { wasmPaths: new URL('https://cdn.example.com/web/') })).dispose();
  fromCdn.dispose();
  const wf: WorkerModel = await w.fork();
  console.log(w.memoryBytes, w instanceof Model, wf.stateBytes, (await w.fork({ state: 'copy' })).stateBytes, h.shape, model.scratchBytes);
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

async function audio(model: Model, worker: WorkerModel, mic: MediaStream, file: AudioBuffer): Promise<void> {
  const controller = new AbortController();
  const options: StreamAudioOptions = {
    sampleRate: 16000, chunk: 512, context: 64, backpressure: 'drop', maxQueue: 2, tail: 'pad', signal: controller.signal,
    onResult: (r: AudioResult) => console.log(r.index, r.start, r.end, r.input.length, r.output, r.ms, r.queued),
    onDrop: (d: AudioDrop) => console.log(d.index, d.start, d.end, d.dropped),
    args: (samples: Float32Array, index: number) => [new Tensor('float32', samples, [1, samples.length]), BigInt(index)],
  };
  const summary: AudioSummary = await streamAudio(worker, 'forward', mic, options);
  console.log(summary.chunks, summary.results, summary.dropped, summary.seconds, summary.reason === 'aborted');
  const chunk: AudioChunk = { index: 0, start: 0, end: 0.032, input: new Float32Array(576) };
  const sources: AudioSource[] = [file, new Float32Array(16000), new ReadableStream<Float32Array>()];
  await streamAudio(model, 'forward', sources[0]!, { inputRate: 48000, audioContext: new AudioContext(), blockSize: 2048 });
  const r = new Resampler(48000, 16000);
  const y: Float32Array = r.push(new Float32Array(4800));
  console.log(chunk, y.length + r.flush().length, r.up, r.down, r.fromRate, r.toRate, r.inputLength);
}
void audio;

async function caching(): Promise<void> {
  const ctrl = new AbortController();
  const options: LoadOptions = { cache: 'my-models', signal: ctrl.signal, sha256: '0'.repeat(64) };
  const model: Model = await load('https://example.com/model.tandem', { ...options, cache: false });
  model.dispose();
  await clearCache();
  await clearCache('my-models');
  const caps: Capabilities = await capabilities();
  const simd: 'relaxed' | 'simd128' | null = caps.simd;
  const reason: string | null = caps.threads.reason;
  console.log(simd, caps.relaxedSimd, caps.threads.available, caps.threads.cores, reason, caps.memoryLimitBytes);
  console.log(caps.webgpu.available, caps.webgpu.f16, caps.webgpu.adapter?.vendor, caps.webgpu.limits?.maxBufferSize);
  const code: ErrorCode = 'TDM_ERR_INTEGRITY';
  console.log(code);
}
void caching;
