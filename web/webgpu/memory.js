// GPU memory and limits for the WebGPU backend (web/webgpu/backend.js): every buffer is created under
// the 'out-of-memory' and 'validation' error scopes, and a failure becomes a TandemError before
// anything that uses the buffer is submitted (so a failed load leaves no device behind and a failed
// call or fork changes no state). A buffer above the adapter's limits is refused before it is
// created, naming the limit and the buffer.

import { TandemError } from '../errors.js';

/** Runs fn() (which creates GPU objects) under both error scopes. Returns { value, oom, invalid }:
 * oom and invalid are the scopes' errors (GPUError with .message) or null. */
export async function scoped(dev, fn) {
  dev.pushErrorScope('out-of-memory');
  dev.pushErrorScope('validation');
  let value, thrown = null;
  try {
    value = fn();
  } catch (e) {
    thrown = e;
  }
  const invalid = await dev.popErrorScope();
  const oom = await dev.popErrorScope();
  if (thrown && !oom && !invalid) throw thrown;
  return { value, oom, invalid: invalid ?? (thrown && !oom ? thrown : null) };
}

/** The TandemError of a scoped() result that failed, or null. `what` names the buffers (and the
 * call), `after` says what is left as it was. */
export function allocError(res, what, bytes, after) {
  if (res.oom) {
    return new TandemError('TDM_ERR_OUT_OF_MEMORY', `${what}: the GPU has no memory for ${bytes} bytes ` +
      `(${res.oom.message}); ${after}`);
  }
  if (res.invalid) {
    return new TandemError('TDM_ERR_DEVICE', `${what}: the GPU refused the ${bytes}-byte buffer ` +
      `(${res.invalid.message}); ${after}`);
  }
  return null;
}

/** Creates buffers [{ size, usage }] under both scopes: the buffers, or throws allocError's
 * TandemError having destroyed those it made. */
export async function allocate(dev, specs, what, after) {
  const res = await scoped(dev, () => specs.map((s) => dev.createBuffer(s)));
  const bytes = specs.reduce((a, s) => a + s.size, 0);
  const err = allocError(res, what, bytes, after);
  if (err) {
    for (const b of res.value ?? []) b.destroy();
    throw err;
  }
  return res.value;
}

/** The first of `buffers` ([{ what, bytes, binding }]: binding true for one bound whole as a storage
 * buffer) that an adapter's `limits` cannot hold: { message } naming the limit and the buffer, or null. */
export function overLimit(limits, buffers) {
  for (const b of buffers) {
    const checks = [['maxBufferSize', limits.maxBufferSize]];
    if (b.binding) checks.push(['maxStorageBufferBindingSize', limits.maxStorageBufferBindingSize]);
    for (const [name, limit] of checks) {
      if (b.bytes > limit) {
        return { limit: name, message: `${b.what} takes ${b.bytes} bytes, above this adapter's ${name} (${limit} bytes)` };
      }
    }
  }
  return null;
}
