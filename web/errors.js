// errors.js — TandemError and the error codes: the runtime's statuses (tdm_status_string) and the
// ones raised on the JS side, declared once in JS_ERROR_CODES (docs/api.md, "Error codes").

/** The codes raised by the JS side itself, beyond the runtime's statuses (include/tandem.h):
 * code -> what it means. Every code the JS throws is one of the two (tests/js/errors.test.js). */
export const JS_ERROR_CODES = Object.freeze({
  TDM_ERR_DISPOSED: 'the model was disposed',
  TDM_ERR_WORKER: 'an unexpected error inside the worker, or a thread pool that did not start',
  TDM_ERR_WORKER_DIED: 'the model\'s worker died (an uncaught error, an unreadable message, or it exited)',
  TDM_ERR_ABORTED: 'the AbortSignal of a call or of load() aborted it; such an error\'s name is \'AbortError\'',
  TDM_ERR_DEVICE: "load(..., { device: 'webgpu' }) cannot run the program on WebGPU (web/webgpu/), or a WebGPU kernel failed",
  TDM_ERR_DEVICE_LIMIT: "device: 'webgpu' needs a buffer above the adapter's limits (the message names the limit and the buffer)",
  TDM_ERR_INTEGRITY: "load(source, { sha256 }): the program's bytes have another SHA-256 than the one given; nothing was loaded or cached",
  TDM_ERR_DEVICE_LOST: 'the GPU device of a WebGPU model was lost; its state on the GPU is gone (load again, loadState a saved state)',
});

/** An error from tandem; `code` is stable (the runtime's status name, e.g. 'TDM_ERR_TRUNCATED',
 * or a JS-side one: 'TDM_ERR_DISPOSED', 'TDM_ERR_WORKER_DIED', 'TDM_ERR_ABORTED', 'TDM_ERR_DEVICE':
 * load(..., { device: 'webgpu' }) cannot run the program on WebGPU, web/webgpu/). A call cancelled
 * by its AbortSignal rejects with one whose `name` is 'AbortError' (as fetch's does). */
export class TandemError extends Error {
  constructor(code, message) {
    super(`${code}: ${message}`);
    this.name = code === 'TDM_ERR_ABORTED' ? 'AbortError' : 'TandemError';
    this.code = code;
  }
}

/** The rejection of a call whose signal aborted; `ran` says whether the call had started (its
 * state change, if any, is kept) or was removed before it ran. */
export function abortError(what, signal, ran) {
  const e = new TandemError('TDM_ERR_ABORTED', ran
    ? `${what}(): aborted while it ran; it finished, its state change is kept, its result was discarded`
    : `${what}(): aborted before it ran; the state is as if it was never called`);
  if (signal.reason !== undefined) e.cause = signal.reason;
  return e;
}
