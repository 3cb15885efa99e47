// thread.js — a Web Worker of a model's thread pool (web/threads.js).
import { serveThread } from './threads.js';

self.addEventListener('message', (e) => serveThread(e.data, (m) => self.postMessage(m)), { once: true });
