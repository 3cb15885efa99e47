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
  | 'TDM_ERR_INDEX' | 'TDM_ERR_LIMIT' | 'TDM_ERR_STATE_MISMATCH' | 'TDM_ERR_DISPOSED' | 'TDM_ERR_WORKER'
  | 'TDM_ERR_WORKER_DIED';

export class TandemError extends Error {
  readonly name: 'TandemError';
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
export interface TensorSpec { readonly name: string; readonly dtype: DType; readonly shape: readonly number[] }
export interface MethodSpec { readonly name: string; readonly inputs: readonly TensorSpec[]; readonly outputs: readonly TensorSpec[] }
export interface StateSpec { readonly name: string; readonly dtype: DType; readonly shape: readonly number[] }

/** What a method call accepts: a Tensor, a typed array (the method's shape), or a number/bigint
 * for a one-element input. */
export type Input = Tensor | AnyTypedArray | number | bigint | boolean;
/** What a method call resolves to: one Tensor, several, or undefined for none. */
export type Output = Tensor | Tensor[] | undefined;

export interface OpTime { index: number; name: string; ms: number }
export interface Profile { outputs: Output; ops: OpTime[]; totalMs: number }

interface ModelApi {
  /** Deep-frozen: calls are validated against the runtime's own copy. */
  readonly methods: readonly MethodSpec[];
  readonly state: readonly StateSpec[];
  readonly stateBytes: number;
  readonly scratchBytes: number;
  /** Call a method by name (also available as model.<name>(...inputs)); reaches every method,
   * also one named like the model's own API. */
  call(name: string, ...inputs: Input[]): Promise<Output>;
  profile(name: string, ...inputs: Input[]): Promise<Profile>;
  readState(name: string): Promise<Tensor>;
  writeState(name: string, value: Input): Promise<void>;
  saveState(): Promise<Uint8Array>;
  loadState(bytes: Uint8Array | ArrayBuffer): Promise<void>;
  resetState(): Promise<void>;
  dispose(): void;
  [Symbol.dispose](): void;
}

/** Each program method, e.g. model.forward(x), model.reset(): a property of that name. */
interface Methods {
  readonly [method: string]: (...inputs: Input[]) => Promise<Output>;
}

/** A model run on the calling thread. */
export type Model = ModelApi & Methods & {
  readonly memoryBytes: number;
  fork(): Promise<Model>;
};

/** A model run in a worker (load(source, { worker: true })). */
export type WorkerModel = ModelApi & Methods & {
  memoryBytes(): Promise<number>;
  fork(): Promise<WorkerModel>;
};

export interface LoadOptions {
  /** Where tandem.wasm is: a URL, a path (Node) or its bytes. Defaults to the file beside the package. */
  wasm?: string | URL | Uint8Array | ArrayBuffer;
  /** Run the runtime in a Web Worker / worker_threads worker. */
  worker?: boolean;
  /** Download progress of a URL source. */
  onProgress?: (progress: { loaded: number; total: number | undefined }) => void;
}

export type Source = string | URL | Uint8Array | ArrayBuffer | ArrayBufferView | Response;

export function load(source: Source, options?: LoadOptions & { worker?: false }): Promise<Model>;
export function load(source: Source, options: LoadOptions & { worker: true }): Promise<WorkerModel>;
export function load(source: Source, options?: LoadOptions): Promise<Model | WorkerModel>;
