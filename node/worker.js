// worker.js — the worker_threads worker that runs a model for load(source, { worker: true }) in Node.
import { parentPort } from 'node:worker_threads';
import { serveWorker } from '../web/tandem.js';
import { nodeThread } from './spawn.js';

serveWorker({
  post: (msg, transfer) => parentPort.postMessage(msg, transfer),
  onMessage: (fn) => parentPort.on('message', fn),
}, { spawnThread: nodeThread });
