// thread.js — a worker_threads worker of a model's thread pool (web/threads.js).
import { parentPort } from 'node:worker_threads';
import { serveThread } from '../web/threads.js';

parentPort.once('message', (msg) => serveThread(msg, (m) => parentPort.postMessage(m)));
