// spawn.js — worker_threads workers behind the ports web/tandem.js talks to (a model's worker for
// { worker: true }, and its thread pool's workers).
import { Worker } from 'node:worker_threads';

/** A port ({ post, onMessage, onError, busy, terminate }) to a new worker running `url`. The
 * worker does not keep the process alive while idle (a pending call does: busy(true)). */
export function nodePort(url, onWorker) {
  const w = new Worker(url);
  let busy = false;
  const idle = () => busy || w.unref(); // a new 'message' listener refs the worker again
  idle();
  onWorker?.(w);
  return {
    post: (m, t) => w.postMessage(m, t),
    onMessage: (f) => {
      w.on('message', f);
      idle();
    },
    onError: (f) => {
      w.on('error', (e) => f(`failed: ${e?.message ?? e}`));
      w.on('messageerror', () => f('sent a message that could not be read'));
      w.on('exit', (code) => f(`exited (code ${code})`));
    },
    busy: (b) => {
      busy = b;
      if (b) w.ref();
      else w.unref();
    },
    terminate: () => w.terminate(),
  };
}

/** A port to a new thread-pool worker. */
export const nodeThread = () => nodePort(new URL('./thread.js', import.meta.url));
