// options.js — the checks of call options ({ signal }), fork options and load options: every option
// is declared and checked here, for every backend.
import { TandemError } from './errors.js';
import { MAX_THREADS } from './threads.js';
import { simdSupport } from './loader.js';

// ---- call options ---------------------------------------------------------------------------------
// A method call's last argument is its options when it is a plain object ({...}, not a Tensor or any
// class instance) whose own keys are all option names; an input never is one (a Tensor-like plain
// object has data and shape, or dtype, data and shape). So model.forward(x, { signal }) and model.call(name, x, { signal }).
export const CALL_OPTIONS = new Set(['signal']);

export function isPlainObject(v) {
  if (v === null || typeof v !== 'object') return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** [inputs, options] of a call's arguments (see CALL_OPTIONS). */
export function splitOptions(what, args) {
  const last = args[args.length - 1];
  if (!isPlainObject(last) || !Object.keys(last).every((k) => CALL_OPTIONS.has(k))) return [args, {}];
  const { signal } = last;
  if (signal !== undefined && signal !== null && !(typeof signal.aborted === 'boolean' && typeof signal.addEventListener === 'function')) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${what}(): options.signal must be an AbortSignal`);
  }
  return [args.slice(0, -1), { signal: signal ?? undefined }];
}

// ---- fork and load options ------------------------------------------------------------------------
// Every option is declared once, here, with its check; an unknown key is an error naming it and
// listing the valid ones (a misspelt option never goes unnoticed).

const invalid = (msg) => new TandemError('TDM_ERR_INVALID_ARGUMENT', msg);
const shown = (v) => (typeof v === 'string' ? `'${v}'` : typeof v === 'function' ? 'a function' : String(v));
const oneOf = (name, values, fallback) => (v) => {
  if (v === undefined) return fallback;
  const list = values.map((x) => `'${x}'`).join(', ').replace(/, ([^,]*)$/, ' or $1');
  if (!values.includes(v)) throw invalid(`${name} must be ${list}, given ${shown(v)}`);
  return v;
};
const boolean = (name, fallback) => (v) => {
  if (v === undefined) return fallback;
  if (typeof v !== 'boolean') throw invalid(`${name} must be true or false, given ${shown(v)}`);
  return v;
};
const wasmSource = (name) => (v) => {
  if (v === undefined || typeof v === 'string' || v instanceof URL || v instanceof ArrayBuffer || ArrayBuffer.isView(v)) return v;
  // a promise of one (node/index.js reads a path into bytes) is awaited by load
  if (typeof v?.then === 'function') return v;
  throw invalid(`${name} must be a URL, a path or the build's bytes, given ${shown(v)}`);
};

/** options.wasmPaths: the folder (a URL, or a path in Node) that serves the package's web/ files,
 * as a string ending in '/' so each file's name resolves inside it. */
function checkWasmPaths(v) {
  if (v === undefined) return undefined;
  if (!(v instanceof URL) && (typeof v !== 'string' || v === '')) {
    throw invalid(`wasmPaths must be the URL (or, in Node, the path) of a folder holding the package's web/ files, given ${shown(v)}`);
  }
  const s = String(v);
  return s.endsWith('/') ? s : `${s}/`;
}

/** Checks an options bag against `spec` ({ key: check(value) -> parsed }): the parsed values. */
function parseOptions(what, options, spec) {
  if (options === undefined) options = {};
  if (!isPlainObject(options)) throw invalid(`${what}: options must be an object, given ${shown(options)}`);
  const unknown = Object.keys(options).filter((k) => !Object.hasOwn(spec, k));
  if (unknown.length) throw invalid(`${what}: unknown option '${unknown[0]}'; the options are: ${Object.keys(spec).join(', ')}`);
  return Object.fromEntries(Object.entries(spec).map(([k, check]) => [k, check(options[k])]));
}

const FORK_OPTIONS = { state: oneOf('fork(options): state', ['initial', 'copy'], 'initial') };

/** fork(options): { state: 'initial' (the default) or 'copy' }. */
export function parseForkOptions(options) {
  if (options !== undefined && !isPlainObject(options)) throw invalid("fork(options): options must be an object such as { state: 'copy' }");
  return parseOptions('fork(options)', options, FORK_OPTIONS);
}

export const DEFAULT_FLAG_FRACTION = 0.05;

function checkFlagFraction(f) {
  if (f === undefined) return DEFAULT_FLAG_FRACTION;
  if (typeof f !== 'number' || !(f >= 0)) throw invalid(`profileFlagFraction must be a number >= 0, given ${shown(f)}`);
  return f;
}

/** options.threads: undefined (the default, defaultThreads()) or an integer 1 to MAX_THREADS. */
function checkThreads(n) {
  if (n === undefined) return undefined;
  if (!Number.isInteger(n) || n < 1 || n > MAX_THREADS) {
    throw invalid(`threads must be an integer from 1 to ${MAX_THREADS}, given ${shown(n)}`);
  }
  return n;
}

/** options.simd: undefined (relaxed SIMD where the engine has it), 'relaxed' or 'simd128'. */
function simdLevel(simd) {
  if (simd === undefined) return simdSupport().relaxed ? 'relaxed' : 'simd128';
  if (simd !== 'relaxed' && simd !== 'simd128') {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `simd must be 'relaxed' or 'simd128', given ${String(simd)}`);
  }
  if (simd === 'relaxed' && !simdSupport().relaxed) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
      "simd: 'relaxed' asked, but this engine has no relaxed SIMD (Chrome 114+, Firefox 145+, Node 22+, or Node 20 with " +
      '--experimental-wasm-relaxed-simd); leave simd unset to use it where available');
  }
  return simd;
}

// The load options (docs/api.md, `load`; web/tandem.d.ts, LoadOptions).
const LOAD_OPTIONS = {
  threads: checkThreads,
  simd: simdLevel, // undefined: relaxed SIMD where the engine has it
  device: oneOf('device', ['wasm', 'webgpu', 'auto'], 'wasm'),
  gpuWeights: oneOf('gpuWeights', ['float32', 'float16'], 'float32'),
  wasm: wasmSource('wasm'),
  wasmThreads: wasmSource('wasmThreads'),
  wasmPaths: checkWasmPaths,
  worker: boolean('worker', false),
  onProgress: (v) => {
    if (v !== undefined && typeof v !== 'function') throw invalid(`onProgress must be a function, given ${shown(v)}`);
    return v;
  },
  profileFlagFraction: checkFlagFraction,
  tokenizer: boolean('tokenizer', true),
  cache: (v) => {
    if (v === undefined) return true;
    if (typeof v !== 'boolean' && !(typeof v === 'string' && v !== '')) {
      throw invalid(`cache must be true, false or a cache name (Node: a folder), given ${shown(v)}`);
    }
    return v;
  },
  signal: (v) => {
    if (v === undefined || v === null) return undefined;
    if (!(typeof v.aborted === 'boolean' && typeof v.addEventListener === 'function')) {
      throw invalid(`signal must be an AbortSignal, given ${shown(v)}`);
    }
    return v;
  },
  sha256: (v) => {
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || !/^[0-9a-f]{64}$/i.test(v)) {
      throw invalid(`sha256 must be 64 hex digits (the file's SHA-256), given ${shown(v)}`);
    }
    return v.toLowerCase();
  },
};

/** A model's options.wasmPaths (the folder of the package's web/ files it was loaded from, if
 * given), where streamAudio loads web/audio-worklet.js from. */
export const WASM_PATHS = Symbol('tandem.wasmPaths');

/** The internal channel of load(): the platform's hooks (node/index.js: wasm files, workers,
 * cores) and the tests' (a thread spawner that fails, the worker's handle). Symbol-keyed, so no
 * options bag written by a user holds it, and not part of the package's documented API. */
export const HOOKS = Symbol('tandem.hooks');

/** load()'s options, each checked, with their defaults; `hooks` from options[HOOKS]. Throws
 * TDM_ERR_INVALID_ARGUMENT naming an unknown or bad option. */
export function parseLoadOptions(options) {
  const parsed = parseOptions('load(source, options)', options, LOAD_OPTIONS);
  if (parsed.device === 'webgpu' && parsed.worker) {
    throw invalid("device: 'webgpu' runs on the calling thread; leave worker unset " +
      "(or use device: 'auto', which runs a worker model on wasm)");
  }
  // A wasm given without wasmThreads: where the threaded build is, is unknown; one thread.
  parsed.threadedBuild = parsed.wasm === undefined || parsed.wasmThreads !== undefined;
  if (parsed.threads > 1 && !parsed.threadedBuild) {
    throw invalid(`threads: ${parsed.threads} needs options.wasmThreads (where tandem-mt.wasm is) when options.wasm is given`);
  }
  parsed.hooks = options?.[HOOKS] ?? {};
  return parsed;
}
