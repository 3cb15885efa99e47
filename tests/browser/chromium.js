// Launching Debian's Chromium for the browser tests (playwright-core drives it; nothing is
// downloaded). The flags keep it from reaching for the network this machine does not have.
import { chromium } from 'playwright-core';

export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];

/** `extraArgs`: more Chromium flags (tests/browser/audio.test.js adds a fake microphone); `gpu`: the GPU
 * process left on (no --disable-gpu), for WEBGPU_GPU_ARGS. */
export function launch(extraArgs = [], { gpu = false } = {}) {
  const base = gpu ? CHROMIUM_ARGS.filter((a) => a !== '--disable-gpu') : CHROMIUM_ARGS;
  return chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: [...base, ...extraArgs] });
}

/** Chromium over a user-data dir (a fresh temporary folder gives fresh storage: the Cache API's
 * caches live there): a persistent BrowserContext. */
export function launchPersistent(userDataDir, extraArgs = []) {
  return chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: [...CHROMIUM_ARGS, ...extraArgs],
  });
}

/** Chromium with WebGPU on SwiftShader (its CPU Vulkan): correctness only, never timings. */
export const WEBGPU_ARGS = ['--enable-unsafe-webgpu', '--enable-features=Vulkan', '--use-angle=swiftshader',
  '--use-webgpu-adapter=swiftshader'];

/** Chromium with WebGPU on the machine's own GPU through Vulkan, headless (no display, no surface): the
 * WebGPU benchmark on a machine with a GPU (bench/suite/webgpu.mjs, TANDEM_WEBGPU_ADAPTER=gpu); launch it with
 * { gpu: true }. */
export const WEBGPU_GPU_ARGS = ['--enable-unsafe-webgpu', '--enable-features=Vulkan', '--use-angle=vulkan', '--use-vulkan=native',
  '--disable-vulkan-surface', '--ignore-gpu-blocklist'];
