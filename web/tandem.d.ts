// Hand-written typings of the tandem JS API (web/tandem.js, node/index.js). Kept in sync by
// tests/types/example.ts, which uses every public name under `tsc --noEmit --strict`.

export type DType = 'float32' | 'int64' | 'bool' | 'int32';
export type TypedArrayOf<D extends DType> = D extends 'float32' ? Float32Array : D extends 'int64' ? BigInt64Array
  : D extends 'int32' ? Int32Array : Uint8Array;
export type AnyTypedArray = Float32Array | BigInt64Array | Uint8Array | Int32Array;

/** Stable error codes: the runtime's statuses and the JS-side ones. */
export type ErrorCode =
  | 'TDM_ERR_INVALID_ARGUMENT' | 'TDM_ERR_OUT_OF_MEMORY' | 'TDM_ERR_TRUNCATED' | 'TDM_ERR_BAD_MAGIC'
  | 'TDM_ERR_VERSION' | 'TDM_ERR_MALFORMED' | 'TDM_ERR_UNKNOWN_OP' | 'TDM_ERR_OP_RULE' | 'TDM_ERR_NOT_FOUND'
  | 'TDM_ERR_INDEX' | 'TDM_ERR_LIMIT' | 'TDM_ERR_STATE_MISMATCH' | 'TDM_ERR_SHAPE' | 'TDM_ERR_GUARD' | 'TDM_ERR_DISPOSED' | 'TDM_ERR_WORKER'
  | 'TDM_ERR_WORKER_DIED' | 'TDM_ERR_ABORTED' | 'TDM_ERR_DEVICE' | 'TDM_ERR_DEVICE_LIMIT'
  | 'TDM_ERR_DEVICE_LOST' | 'TDM_ERR_INTEGRITY';

export class TandemError extends Error {
  /** 'AbortError' when code is 'TDM_ERR_ABORTED' (a call cancelled by its signal), else 'TandemError'. */
  readonly name: 'TandemError' | 'AbortError';
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string);
}

export class Tensor<D extends DType = DType> {
  readonly dtype: D;
  readonly data: TypedArrayOf<D>;
  readonly shape: number[];
  constructor(dtype: D, data: TypedArrayOf<D> | ArrayLike<number | bigint>, shape?: readonly number[]);
}

/** Specs as model.methods and model.state give them: deep-frozen. */
/** A method's input or output. A dynamic dim appears in `shape` as its expression of the method's
 * dims: the dim's name (`'n'`) or a form such as `'n + 1'`; a call's outputs carry actual sizes. */
export interface TensorSpec {
  readonly name: string; readonly dtype: DType; readonly shape: readonly (number | string)[];
  /** An input the method changes in place: a call writes its new value into the caller's typed array. */
  readonly mutated?: true;
}
/** A dynamic dim's bounds: every call gives it a size in [min, max] (else TDM_ERR_SHAPE). */
export interface DimBounds { readonly min: number; readonly max: number }
export interface MethodSpec {
  readonly name: string; readonly inputs: readonly TensorSpec[]; readonly outputs: readonly TensorSpec[];
  /** The method's dynamic dims by name ({} for a method with static shapes). */
  readonly dims: Readonly<Record<string, DimBounds>>;
}
export interface StateSpec { readonly name: string; readonly dtype: DType; readonly shape: readonly number[] }

/** onnxruntime-web's Tensor or transformers.js' Tensor (or any object with these fields): `type` is
 * onnxruntime's dtype name ('float32', 'int64', 'int32', 'bool', ...), `data` its typed array on the
 * CPU, `dims` its shape. Its type and dims must be the input's; an input the method changes is
 * written back into its data. */
export interface TensorLike { readonly type: string; readonly data: unknown; readonly dims: readonly number[]; readonly location?: string }
/** A typed array with its shape; the dtype is the array's (Uint8Array: bool), or for a plain array
 * the input's. */
export interface ShapedArray<D extends DType = DType> { readonly data: TypedArrayOf<D> | readonly (number | bigint | boolean)[]; readonly shape: readonly number[] }
/** What a method call accepts for an input of dtype D: a Tensor, another library's tensor, a typed
 * array with a shape, or a typed array alone (the method's shape; with one dynamic dim its length
 * gives the size). */
export type InputOf<D extends DType> = Tensor<D> | TypedArrayOf<D> | ShapedArray<D> | TensorLike;
/** What a method call accepts: an InputOf any dtype, or a number/bigint/boolean for a one-element input. */
export type Input = Tensor | AnyTypedArray | ShapedArray | TensorLike | number | bigint | boolean;
/** model.run's inputs: every input of the method by its name (model.methods[i].inputs[j].name). */
export interface Feeds { readonly [input: string]: Input }
/** model.run's result: every output by its name (model.methods[i].outputs[j].name). */
export interface NamedOutputs { readonly [output: string]: Tensor }
/** A call's result: its tensor(s); undefined for a method without outputs; null where a method exported in
 * versions ran a version that returns None (a Python branch, e.g. the first steps of a delayed stream). */
export type Output = Tensor | Tensor[] | null | undefined;
export type MetadataValue = null | boolean | number | string | readonly MetadataValue[] | { readonly [key: string]: MetadataValue };

/** Options of a method call, given as its last argument: a plain object whose keys are all option
 * names (a Tensor-like { dtype, data, shape } or { data, shape } is always an input). */
export interface CallOptions {
  /** Cancels the call: still queued, it is removed; already running, it finishes (its state change
   * is kept) and its result is dropped. Either way it rejects with TandemError 'TDM_ERR_ABORTED'. */
  signal?: AbortSignal;
}
/** A method call's arguments: its inputs, optionally followed by CallOptions. */
export type CallArgs = Input[] | [...inputs: Input[], options: CallOptions];

export interface ForkOptions {
  /** 'initial' (default): the fork starts from the initial values; 'copy': from this model's state now. */
  state?: 'initial' | 'copy';
}

/** One op of a profiled call: its time, and the bytes it writes (its outputs' bytes; an update
 * in place, such as a KV-cache row write, counts only the rows it writes), of which
 * stateBytesWritten land in the state region. */
export interface OpTime { index: number; name: string; ms: number; bytesWritten: number; stateBytesWritten: number }
export interface Profile {
  outputs: Output;
  ops: OpTime[];
  totalMs: number;
  /** Sums over the ops. */
  bytesWritten: number;
  stateBytesWritten: number;
  /** Bytes of the model's state region. */
  stateBytes: number;
  /** The ops writing more than LoadOptions.profileFlagFraction of stateBytes. */
  flagged: OpTime[];
}

/** A file's methods as `python -m tandem inspect --dts` types them: per method, the feeds and the
 * outputs of `model.run` (a type alias of an object type, so that it fits this index signature). */
export interface MethodTypes { readonly [method: string]: { readonly feeds: Feeds; readonly outputs: NamedOutputs | null } }

interface ModelApi<T extends MethodTypes> {
  /** Deep-frozen: calls are validated against the runtime's own copy. */
  readonly methods: readonly MethodSpec[];
  readonly state: readonly StateSpec[];
  /** Named values stored with the program (e.g. { max_cache_len: 512 }), deep-frozen. */
  readonly metadata: { readonly [name: string]: MetadataValue };
  /** The tokenizer the file carries (python -m tandem export stores it), or null. */
  readonly tokenizer: Tokenizer | null;
  readonly stateBytes: number;
  readonly scratchBytes: number;
  /** Bytes of the wasm instance's linear memory, shared by the model and its forks (with
   * worker: true, as of the worker's last reply). */
  readonly memoryBytes: number;
  /** Threads the methods run on (1 where shared memory is unavailable, and on WebGPU). */
  readonly threads: number;
  /** The SIMD level of the runtime build running the model: 'relaxed' (fused multiply-add) or 'simd128'. */
  readonly simd: 'relaxed' | 'simd128';
  /** 'webgpu' for a model loaded with device 'webgpu' (or 'auto' where it could), else 'wasm'. */
  readonly device: 'wasm' | 'webgpu';
  /** Why a model loaded with device 'auto' runs on wasm; null otherwise. */
  readonly deviceReason: string | null;
  /** Call a method by name (also available as model.<name>(...inputs)); reaches every method,
   * also one named like the model's own API. */
  call(name: string, ...args: CallArgs): Promise<Output>;
  profile(name: string, ...args: CallArgs): Promise<Profile>;
  /** Call a method with its inputs by name, as onnxruntime-web's session.run(feeds): its outputs by
   * name, or null where a method exported in versions ran one that returns None. */
  run<M extends keyof T & string>(method: M, feeds: T[M]['feeds'], options?: CallOptions): Promise<T[M]['outputs']>;
  /** A copy of one state tensor; a state that grows (torch.cat onto it) at its current length. */
  readState(name: string): Promise<Tensor>;
  writeState(name: string, value: Input): Promise<void>;
  saveState(): Promise<Uint8Array>;
  loadState(bytes: Uint8Array | ArrayBuffer): Promise<void>;
  resetState(): Promise<void>;
  /** Restart the random generator (the `__rng__` state) at a 64-bit seed; TDM_ERR_NOT_FOUND if the program draws none. */
  seed(n: number | bigint): Promise<void>;
  /** A new model of the same class on the same program, with its own state. */
  fork(options?: ForkOptions): Promise<this>;
  /** A conversation over this language-model program that keeps its KV cache between turns. */
  chat(options?: ChatOptions): Chat;
  dispose(): void;
  [Symbol.dispose](): void;
}

/** A program method as the untyped model has it. Declared as a method (the `call` member), so that
 * an interface extending Model may declare a method with its own parameter types (a generated .d.ts). */
type MethodCall = { call(...args: CallArgs): Promise<Output> }['call'];
/** Each program method, e.g. model.forward(x), model.reset(): a property of that name. */
interface Methods {
  readonly [method: string]: MethodCall;
}

// A class's own index signature would have to cover its members; its base's instance type, an
// intersection, need not.
declare const ModelBase: abstract new <T extends MethodTypes>() => ModelApi<T> & Methods;

/** A session on a loaded program: what load() returns, on every backend (wasm on this thread, wasm
 * in a worker, WebGPU). Not constructed directly. `T` types `run` for one file (see
 * `python -m tandem inspect --dts`); by default any method name and feeds. */
export class Model<T extends MethodTypes = MethodTypes> extends ModelBase<T> {
  protected constructor();
}

/** A model whose runtime runs in a worker (load(source, { worker: true })). */
export class WorkerModel<T extends MethodTypes = MethodTypes> extends Model<T> {}

export interface LoadOptions {
  /** Threads a method's parallel parts run on (1 to 64; default: the cores, at most 4). Needs a
   * cross-origin isolated page; otherwise the model runs on one thread (model.threads says so). */
  threads?: number;
  /** The build's SIMD level; default 'relaxed' where the engine has relaxed SIMD, else 'simd128'. */
  simd?: 'relaxed' | 'simd128';
  /** Where the methods run (default 'wasm'); 'auto' falls back to wasm, see model.deviceReason. */
  device?: 'wasm' | 'webgpu' | 'auto';
  /** On WebGPU: 'float16' keeps the float32 weight matrices as float16 in GPU memory, computing in float32 (default 'float32'). */
  gpuWeights?: 'float32' | 'float16';
  /** A runtime build to use instead of the package's (tandem.wasm or tandem-relaxed.wasm): a URL,
   * a path (Node) or its bytes. */
  wasm?: string | URL | Uint8Array | ArrayBuffer;
  /** The same for the threaded build used when threads > 1 (tandem-mt.wasm or tandem-mt-relaxed.wasm). */
  wasmThreads?: string | URL | Uint8Array | ArrayBuffer;
  /** The URL (or, in Node, the path) of a folder serving the package's web/ files (a copy beside a
   * bundle, a CDN): the builds, worker.js and thread.js load from there instead of beside the package's module. */
  wasmPaths?: string | URL;
  /** Run the runtime in a Web Worker / worker_threads worker. */
  worker?: boolean;
  /** Download progress of a URL source (also while a cached copy is read). */
  onProgress?: (progress: { loaded: number; total: number | undefined }) => void;
  /** Where a URL's program is kept between loads, revalidated on each (ETag / Last-Modified).
   * Default true: the Cache API cache 'tandem-models' (Node: the cache folder); a string names
   * another cache (Node: a folder); false neither reads nor writes the cache. */
  cache?: boolean | string;
  /** Aborts the load (TDM_ERR_ABORTED); a download it stops is not cached. */
  signal?: AbortSignal;
  /** The program's SHA-256 (64 hex digits), checked before it loads (TDM_ERR_INTEGRITY). */
  sha256?: string;
  /** model.profile() flags ops writing more than this fraction of the state's bytes (default 0.05). */
  profileFlagFraction?: number;
  /** false: do not build the tokenizer the file carries (model.tokenizer is then null). */
  tokenizer?: boolean;
}

/** A chat message for applyChatTemplate and generate. */
export interface ChatMessage { role: string; content: string; [key: string]: unknown }
export interface ChatTemplateOptions {
  addGenerationPrompt?: boolean; tokenize?: boolean; chatTemplate?: string; tools?: unknown[]; documents?: unknown[];
  variables?: Record<string, unknown>;
}
export interface StreamDecoder { push(id: number | bigint): string; flush(): string }
/** The tokenizer a file carries (web/tokenizer.js, on @huggingface/tokenizers and @huggingface/jinja). */
export interface Tokenizer {
  readonly specialTokens: { readonly [role: string]: string | null };
  readonly bosTokenId: number | null;
  readonly eosTokenId: number | null;
  readonly chatTemplate: string | { readonly [name: string]: string } | null;
  encode(text: string, options?: { addSpecialTokens?: boolean }): number[];
  decode(ids: Tokens | readonly number[], options?: { skipSpecialTokens?: boolean }): string;
  applyChatTemplate(messages: readonly ChatMessage[], options?: ChatTemplateOptions & { tokenize?: false }): string;
  applyChatTemplate(messages: readonly ChatMessage[], options: ChatTemplateOptions & { tokenize: true }): number[];
  streamDecoder(options?: { skipSpecialTokens?: boolean }): StreamDecoder;
}

export type Source = string | URL | Uint8Array | ArrayBuffer | ArrayBufferView | Response;

export function load(source: Source, options?: LoadOptions & { worker?: false }): Promise<Model>;
export function load(source: Source, options: LoadOptions & { worker: true }): Promise<WorkerModel>;
export function load(source: Source, options?: LoadOptions): Promise<Model | WorkerModel>;
/** Empties tandem's cache of programs: the Cache API cache (default 'tandem-models'), in Node the
 * cache folder (or the one given). */
export function clearCache(name?: string): Promise<void>;

/** What capabilities() resolves to. */
export interface Capabilities {
  /** The SIMD level load() picks by default; null where the engine has no SIMD128 (tandem cannot run). */
  simd: 'relaxed' | 'simd128' | null;
  relaxedSimd: boolean;
  threads: { available: boolean; reason: string | null; cores: number };
  webgpu: {
    available: boolean;
    reason: string | null;
    adapter: { vendor: string; architecture: string; device: string; description: string } | null;
    limits: {
      maxBufferSize: number; maxStorageBufferBindingSize: number; maxComputeWorkgroupStorageSize: number;
      maxComputeInvocationsPerWorkgroup: number; maxComputeWorkgroupSizeX: number; maxStorageBuffersPerShaderStage: number;
    } | null;
    f16: boolean;
  };
  /** The most linear memory a model's runtime may grow to (4 GiB, wasm32's limit). */
  memoryLimitBytes: number;
}
/** What this engine and context offer tandem (SIMD, threads, WebGPU, memory). */
export function capabilities(): Promise<Capabilities>;

// Language models: programs from tandem.transformers.export_causal_lm, and hand-written ones with
// prefill/decode methods (web/lm.js).
export type Tokens = Tensor<'int64'> | BigInt64Array | readonly (number | bigint)[];
/** For a program without the recipe's metadata: what its max_cache_len and position_state would say. */
export interface LMOptions { maxCacheLen?: number | null; positionState?: string }
export interface SampleOptions { temperature?: number; topK?: number; topP?: number }
export interface GenerateOptions extends SampleOptions, LMOptions {
  maxTokens?: number; seed?: number; stop?: readonly number[]; signal?: AbortSignal; onToken?: (id: number) => void;
}
export interface Generation extends AsyncIterable<number> {
  /** Why it ended, once it has: 'eos', 'length', 'capacity' or 'aborted'. */
  readonly reason: 'eos' | 'length' | 'capacity' | 'aborted' | undefined;
  /** The prompt's token ids (a text or chat prompt after the tokenizer). */
  readonly promptIds: number[];
  /** The run as text pieces, each a whole number of characters (needs model.tokenizer). */
  text(options?: { skipSpecialTokens?: boolean }): AsyncIterable<string>;
}
/** What generate takes: token ids, or with a tokenizer in the file a text or chat messages. */
export type Prompt = Tokens | string | readonly ChatMessage[];
export function prefill(model: Model | WorkerModel, tokens: Tokens, options?: LMOptions): Promise<Tensor<'float32'>>;
export function generate(model: Model | WorkerModel, prompt: Prompt, options?: GenerateOptions): Generation;
export function sample(logits: Tensor<'float32'>, options?: SampleOptions, random?: () => number): number;
export function splitPrompt(n: number, chunks: readonly number[]): number[];
export function position(model: Model | WorkerModel, options?: Pick<LMOptions, 'positionState'>): Promise<number>;

// Chat sessions (web/chat.js): model.chat(options).
/** What a chat session needs of a tokenizer: the file's (model.tokenizer) has it. */
export interface ChatTokenizer {
  applyChatTemplate(messages: readonly ChatMessage[], options: { addGenerationPrompt: true; tokenize: true }): readonly number[];
  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string;
}
export interface ChatTurnOptions extends SampleOptions {
  /** The reply's most tokens (the session's, 128 by default). */
  maxNewTokens?: number;
  /** Token ids that end the reply besides the model's eos_token_id. */
  stop?: readonly number[];
  /** Ends the reply where it is (reason 'aborted'). */
  signal?: AbortSignal;
  onToken?: (id: number) => void;
  /** Text pieces of the reply as they are made, each a whole number of characters. */
  onText?: (piece: string) => void;
}
export interface ChatOptions extends LMOptions, Omit<ChatTurnOptions, 'signal' | 'onToken' | 'onText'> {
  /** The system prompt: the first message, never dropped. */
  system?: string;
  /** A conversation to continue ([{ role, content }] after the system prompt). */
  messages?: readonly ChatMessage[];
  /** Instead of the file's tokenizer. */
  tokenizer?: ChatTokenizer;
  /** The sampling generator's seed (default 0). */
  seed?: number;
  /** How many saved states the session keeps to go back to (default 8; 0: none, every
   * regenerate() or undo() then prefills from the start). */
  snapshots?: number;
}
/** One turn's figures (chat.stats). */
export interface ChatStats {
  /** Tokens of the rendered conversation before the reply. */
  readonly promptTokens: number;
  /** Of them, the ones the cache (or a snapshot) already held, and the ones prefilled. */
  readonly cachedTokens: number;
  readonly prefillTokens: number;
  /** Where the turn started: the cache as it was, a saved state, or the initial state. */
  readonly restored: 'cache' | 'snapshot' | 'reset';
  /** Messages dropped from the start of the conversation so that it fits the cache. */
  readonly droppedMessages: number;
  readonly newTokens: number;
  readonly reason: 'eos' | 'length' | 'capacity' | 'aborted';
  /** Milliseconds from the call to the first sampled token (null when none was). */
  readonly ttftMs: number | null;
  readonly prefillMs: number;
  readonly totalMs: number;
  readonly prefillTokensPerSecond: number | null;
  /** Tokens generated after the first, per second after the first (null for fewer than 2). */
  readonly tokensPerSecond: number | null;
}
/** A conversation that keeps the model's KV cache between turns: each turn prefills only what it adds. */
export class Chat {
  protected constructor();
  /** The conversation in the context (copies). */
  readonly messages: ChatMessage[];
  /** The last turn's figures; null before the first. */
  readonly stats: ChatStats | null;
  /** The model it runs on (a fork's own model). */
  readonly model: Model | WorkerModel;
  /** Adds the user's message, generates the reply, resolves to its text. */
  send(text: string, options?: ChatTurnOptions): Promise<string>;
  /** The last reply again, from the state saved before it. */
  regenerate(options?: ChatTurnOptions): Promise<string>;
  /** Drops the last user message and the reply after it. */
  undo(): Promise<void>;
  /** An independent session continuing this conversation, on a fork of the model. */
  fork(): Promise<Chat>;
  /** Frees its saved states, and a fork's model. */
  dispose(): void;
  [Symbol.dispose](): void;
}

// Streaming audio (web/audio.js).
/** A chunk given to the method: `input` is its samples at the model's rate (`context` samples
 * before it, then `chunk` new ones); `start` and `end` (seconds) are the new samples' span. */
export interface AudioChunk { readonly index: number; readonly start: number; readonly end: number; readonly input: Float32Array }
/** A chunk's result: the method's output, the call's wall time, and the chunks still waiting. */
export interface AudioResult extends AudioChunk { readonly output: Output; readonly ms: number; readonly queued: number }
/** A chunk dropped by backpressure 'drop' (the model was busy); `dropped` counts them so far. */
export interface AudioDrop { readonly index: number; readonly start: number; readonly end: number; readonly dropped: number }
/** What streamAudio resolves to once the source ends ('end') or the signal aborts ('aborted'). */
export interface AudioSummary { chunks: number; results: number; dropped: number; seconds: number; reason: 'end' | 'aborted' }
/** A shape AudioBuffer has (Web Audio's, or any object with these members). */
export interface AudioBufferLike { readonly sampleRate: number; readonly numberOfChannels: number; readonly length: number; getChannelData(channel: number): Float32Array }
export type AudioSource = MediaStream | AudioBufferLike | Float32Array | ReadableStream<Float32Array>;
export interface StreamAudioOptions {
  /** The model's sample rate (Hz); default: the program's `sample_rate` metadata. */
  sampleRate?: number;
  /** New samples per call; default: the method's first input's size minus `context`. */
  chunk?: number;
  /** Samples of the audio before each chunk given with it (zeros before the start); default 0. */
  context?: number;
  /** The rate of a Float32Array or ReadableStream source; default sampleRate (no resampling). */
  inputRate?: number;
  /** When chunks come faster than the model: 'queue' (default: every chunk runs; a pull source is
   * read no further ahead than maxQueue chunks) or 'drop' (a chunk arriving while maxQueue wait is dropped). */
  backpressure?: 'queue' | 'drop';
  /** Chunks that may wait for the model (default 4). */
  maxQueue?: number;
  /** The last partial chunk: 'pad' (default: zeros after it) or 'drop'. */
  tail?: 'pad' | 'drop';
  /** The method's inputs for a chunk; default: one float32 tensor of its first input's shape. */
  args?: (samples: Float32Array, index: number) => Input[];
  onResult?: (result: AudioResult) => void;
  onDrop?: (drop: AudioDrop) => void;
  /** Stops the stream (a MediaStream runs until it aborts); streamAudio then resolves with reason 'aborted'. */
  signal?: AbortSignal;
  /** For a MediaStream: the AudioContext to capture in (default: a new one, closed at the end). */
  audioContext?: AudioContext;
  /** Frames per block read from a buffer or posted by the AudioWorklet (default 4096). */
  blockSize?: number;
}
export function streamAudio(model: Model | WorkerModel, method: string, source: AudioSource, options?: StreamAudioOptions): Promise<AudioSummary>;
/** The band-limited resampler streamAudio uses: scipy.signal.resample_poly's Kaiser-windowed sinc
 * filter (beta 5), polyphase, streaming. Push pieces, then flush. */
export class Resampler {
  constructor(fromRate: number, toRate: number);
  readonly fromRate: number;
  readonly toRate: number;
  /** toRate / gcd and fromRate / gcd. */
  readonly up: number;
  readonly down: number;
  readonly inputLength: number;
  push(samples: Float32Array): Float32Array;
  flush(): Float32Array;
}
