// Launching Debian's Chromium for the browser tests (playwright-core drives it; nothing is
// downloaded). The flags keep it from reaching for the network this machine does not have.
import { chromium } from 'playwright-core';

export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];

/** `extraArgs`: more Chromium flags (tests/browser/audio.test.js adds a fake microphone). */
export function launch(extraArgs = []) {
  return chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: [...CHROMIUM_ARGS, ...extraArgs] });
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
