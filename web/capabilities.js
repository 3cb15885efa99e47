// capabilities.js — what this engine and context offer tandem, from the same probes load() uses:
// the SIMD level (web/loader.js), threads (web/threads.js), WebGPU's adapter, the memory limit.
import { simdSupport, MAX_MEMORY_BYTES } from './loader.js';
import { threadSupport } from './threads.js';

// The adapter limits a program's buffers and kernels meet (web/webgpu/backend.js checks them).
const GPU_LIMITS = ['maxBufferSize', 'maxStorageBufferBindingSize', 'maxComputeWorkgroupStorageSize',
  'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX', 'maxStorageBuffersPerShaderStage'];

async function webgpu() {
  const none = (reason) => ({ available: false, reason, adapter: null, limits: null, f16: false });
  const gpu = globalThis.navigator?.gpu;
  if (!gpu) return none('this engine has no WebGPU (navigator.gpu is missing)');
  let adapter;
  try {
    adapter = await gpu.requestAdapter();
  } catch (e) {
    return none(`requestAdapter failed: ${e.message}`);
  }
  if (!adapter) return none('no WebGPU adapter');
  const info = adapter.info ?? (await adapter.requestAdapterInfo?.()) ?? {};
  return {
    available: true,
    reason: null,
    adapter: Object.fromEntries(['vendor', 'architecture', 'device', 'description'].map((k) => [k, info[k] ?? ''])),
    limits: Object.fromEntries(GPU_LIMITS.map((k) => [k, adapter.limits[k]])),
    f16: adapter.features.has('shader-f16'),
  };
}

/** capabilities() with the platform's core count (node/index.js gives Node's). */
export async function probeCapabilities({ cores } = {}) {
  const { simd128, relaxed } = simdSupport();
  const threads = threadSupport();
  return {
    simd: relaxed ? 'relaxed' : simd128 ? 'simd128' : null,
    relaxedSimd: relaxed,
    threads: { ...threads, cores: cores ?? globalThis.navigator?.hardwareConcurrency ?? 1 },
    webgpu: await webgpu(),
    memoryLimitBytes: MAX_MEMORY_BYTES,
  };
}

/** What this engine offers: { simd: 'relaxed' | 'simd128' | null (no SIMD128: tandem cannot run),
 * relaxedSimd, threads: { available, reason, cores }, webgpu: { available, reason, adapter, limits,
 * f16 }, memoryLimitBytes }. */
export const capabilities = () => probeCapabilities();
