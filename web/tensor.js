// tensor.js — Tensor, the typed array of each dtype, and the checks of a call's inputs against
// their specs.
import { TandemError } from './errors.js';
import { CALL_OPTIONS, isPlainObject } from './options.js';

export const ARRAY_OF = { float32: Float32Array, int64: BigInt64Array, bool: Uint8Array, int32: Int32Array };

/** A tensor: `dtype` ('float32' | 'int64' | 'bool' | 'int32'), `shape` (array of numbers), `data`
 * (an owned typed array: Float32Array, BigInt64Array, Uint8Array or Int32Array). */
export class Tensor {
  constructor(dtype, data, shape) {
    const Arr = ARRAY_OF[dtype];
    if (!Arr) throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `unknown dtype '${dtype}'; use float32, int64, bool or int32`);
    if (Array.isArray(data)) data = dtype === 'int64' ? Arr.from(data, BigInt) : Arr.from(data, (x) => Number(x));
    if (!(data instanceof Arr)) throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${dtype} data must be a ${Arr.name} or an array`);
    shape = shape === undefined ? [data.length] : Array.from(shape, Number);
    const numel = shape.reduce((a, b) => a * b, 1);
    if (numel !== data.length) {
      throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `shape [${shape}] holds ${numel} elements but data has ${data.length}`);
    }
    this.dtype = dtype;
    this.data = data;
    this.shape = shape;
  }
}

export const numelOf = (shape) => shape.reduce((a, b) => a * b, 1);

const ARRAY_TYPES = Object.entries(ARRAY_OF);

// The dtype a typed array of `{ data, shape }` stands for: tandem's, or onnxruntime's name for one
// tandem has not (so a mismatch reads 'expected float32[3], given float64[3]').
const DTYPE_OF_ARRAY = new Map([[Float32Array, 'float32'], [BigInt64Array, 'int64'], [Int32Array, 'int32'], [Uint8Array, 'bool'],
  [Float64Array, 'float64'], [Int8Array, 'int8'], [Int16Array, 'int16'], [Uint16Array, 'uint16'], [Uint32Array, 'uint32'],
  [BigUint64Array, 'uint64'], [Uint8ClampedArray, 'uint8']]);

/** A value as a message names it: 'a Float64Array', 'string', 'undefined'. */
const describe = (v) => (v === null ? 'null' : typeof v === 'object' ? `a ${v.constructor?.name ?? 'object'}` : typeof v);

/** { dtype, data, shape } of another library's tensor, its dtype and shape as given: checkTensor
 * compares them with the spec. A plain array becomes the dtype's typed array. */
function foreign(dtype, data, shape, where) {
  if (!Array.isArray(shape) && !ArrayBuffer.isView(shape)) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${where()}: the shape must be an array of numbers, given ${describe(shape)}`);
  }
  const Arr = ARRAY_OF[dtype];
  if (Arr && Array.isArray(data)) data = dtype === 'int64' ? Arr.from(data, BigInt) : Arr.from(data, (x) => Number(x));
  return { dtype, data, shape: Array.from(shape, Number) };
}

/** onnxruntime-web's Tensor, or transformers.js' (whose fields are getters over onnxruntime's):
 * `type` (onnxruntime's dtype names), `data`, `dims`. */
const isOrtLike = (v) => typeof v.type === 'string' && 'data' in v && 'dims' in v;

/** An input as { dtype, data, shape }: a Tensor (or a plain { dtype, data, shape }), an onnxruntime-web
 * or transformers.js Tensor ({ type, data, dims }), a typed array with its shape ({ data, shape }: the
 * array's dtype, Uint8Array for bool; a plain array takes spec's dtype), or a typed array / number
 * taking spec's shape.
 * `where()` names the input in messages; it is only called on errors (calls stay cheap). */
export function toTensor(value, spec, where) {
  const numel = numelOf(spec.shape);
  if (value instanceof Tensor) return value;
  if (value && typeof value === 'object' && 'dtype' in value && 'data' in value && 'shape' in value) {
    return new Tensor(value.dtype, value.data, value.shape); // a Tensor that crossed a worker boundary
  }
  if (value && typeof value === 'object' && isOrtLike(value)) {
    const at = value.location;
    if (at !== undefined && at !== 'cpu' && at !== 'cpu-pinned') {
      throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
        `${where()}: an onnxruntime tensor on '${at}'; give its data on the CPU (await tensor.getData(), or a tensor made from it)`);
    }
    return foreign(value.type, value.data, value.dims, where);
  }
  if (isPlainObject(value) && 'data' in value && 'shape' in value) { // a typed array with its shape: the array's dtype
    const dtype = Array.isArray(value.data) ? spec.dtype : DTYPE_OF_ARRAY.get(value.data?.constructor);
    if (!dtype) {
      throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
        `${where()}: { data, shape } takes a typed array or an array as data, given ${describe(value.data)}`);
    }
    return foreign(dtype, value.data, value.shape, where);
  }
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') {
    if (numel !== 1) throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
      `${where()}: a single number was given, expected ${spec.dtype}[${spec.shape}]`);
    const v = spec.dtype === 'int64' ? BigInt(value) : Number(value);
    return new Tensor(spec.dtype, ARRAY_OF[spec.dtype].of(v), spec.shape);
  }
  for (const [dtype, Arr] of ARRAY_TYPES) {
    if (value instanceof Arr && spec.dynamic && spec.exprs.filter((e) => e).length === 1) {
      // one dynamic dim: its size follows from the length (checked against its bounds by the runtime)
      const k = spec.exprs.findIndex((e) => e), rest = numelOf(spec.shape.filter((_, j) => j !== k));
      if (rest === 0 || value.length % rest !== 0) {
        throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
          `${where()}: expected ${spec.dtype}[${spec.shape.map((d, j) => spec.exprs[j] || d)}], given a ${Arr.name} of ${value.length}, ` +
          `not a multiple of ${rest}`);
      }
      return { dtype, data: value, shape: spec.shape.map((d, j) => (j === k ? value.length / rest : d)) };
    }
    if (value instanceof Arr) {
      if (value.length !== numel) {
        throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
          `${where()}: expected ${spec.dtype}[${spec.shape}] (${numel} elements), given a ${Arr.name} of ${value.length}`);
      }
      return { dtype, data: value, shape: spec.shape };
    }
  }
  const hint = isPlainObject(value)
    ? ` with keys ${Object.keys(value).join(', ') || 'none'} (call options are the last argument and take only: ` +
      `${[...CALL_OPTIONS].join(', ')})` : '';
  throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
    `${where()}: expected a Tensor, a typed array or a number, given ${value === null ? 'null' : typeof value}${hint}`);
}

export function checkTensor(t, spec, where) {
  // a dynamic dim takes any size here: tdm_session_set_input_shape checks it (TDM_ERR_SHAPE)
  const fixed = (k) => !(spec.dynamic && spec.exprs[k]);
  if (t.dtype !== spec.dtype || t.shape.length !== spec.shape.length || t.shape.some((d, k) => fixed(k) && d !== spec.shape[k]) ||
      t.shape.some((d) => !Number.isSafeInteger(d) || d < 0)) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
      `${where()}: expected ${spec.dtype}[${spec.shape.map((d, k) => (fixed(k) ? d : spec.exprs[k]))}], given ${t.dtype}[${t.shape}]`);
  }
  if (!(t.data instanceof ARRAY_OF[t.dtype])) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
      `${where()}: ${t.dtype} data must be a ${ARRAY_OF[t.dtype].name}, given ${describe(t.data)}`);
  }
  if (t.data.length !== numelOf(t.shape)) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
      `${where()}: data has ${t.data.length} elements (a detached buffer?), shape needs ${numelOf(t.shape)}`);
  }
}

/** The byte length the C side reports for this input or state tensor (tdm_method_io_nbytes,
 * tdm_state_nbytes): what is written into linear memory. */
export function checkBytes(t, nbytes, where) {
  if (t.data.byteLength !== nbytes) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${where()}: data has ${t.data.byteLength} bytes, the runtime expects ${nbytes}`);
  }
}

export function byteView(a) { return new Uint8Array(a.buffer, a.byteOffset, a.byteLength); }
