// worker.js — the Web Worker that runs a model for load(source, { worker: true }).
import { serveWorker } from './tandem.js';

serveWorker({
  post: (msg, transfer) => self.postMessage(msg, transfer),
  onMessage: (fn) => self.addEventListener('message', (e) => fn(e.data)),
});
