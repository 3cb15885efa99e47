// options.js — the checks of call options ({ signal }), fork options and load options shared by
// Model and WorkerModel (and load()).
import { TandemError } from './errors.js';
import { MAX_THREADS } from './threads.js';

// ---- call options ---------------------------------------------------------------------------------
// A method call's last argument is its options when it is a plain object ({...}, not a Tensor or any
// class instance) whose own keys are all option names; an input never is one (a Tensor-like plain
// object has dtype, data and shape). So model.forward(x, { signal }) and model.call(name, x, { signal }).
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

const FORK_STATES = ['initial', 'copy'];

/** fork(options)'s state: 'initial' (the default) or 'copy'. */
export function forkState(options) {
  if (options === undefined) return 'initial';
  if (!isPlainObject(options)) throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
    "fork(options): options must be an object such as { state: 'copy' }");
  const unknown = Object.keys(options).filter((k) => k !== 'state');
  if (unknown.length) throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
    `fork(options): unknown option '${unknown[0]}'; the options are: state`);
  const state = options.state ?? 'initial';
  if (!FORK_STATES.includes(state)) throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
    `fork(options): state must be 'initial' or 'copy', given ${JSON.stringify(state) ?? String(state)}`);
  return state;
}

export const DEFAULT_FLAG_FRACTION = 0.05;

export function checkFlagFraction(f) {
  if (f === undefined) return DEFAULT_FLAG_FRACTION;
  if (typeof f !== 'number' || !(f >= 0)) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `profileFlagFraction must be a number >= 0, given ${f}`);
  }
  return f;
}

/** options.threads: undefined (the default, defaultThreads()) or an integer 1 to MAX_THREADS. */
export function checkThreads(n) {
  if (n === undefined) return undefined;
  if (!Number.isInteger(n) || n < 1 || n > MAX_THREADS) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `threads must be an integer from 1 to ${MAX_THREADS}, given ${String(n)}`);
  }
  return n;
}
