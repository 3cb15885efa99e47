// audio.js — streamAudio(model, method, source, options): feeds a microphone (MediaStream, through
// an AudioWorklet), a file (AudioBuffer or Float32Array, an offline loop) or a ReadableStream of
// Float32Array samples to a streaming method. The audio is mixed to mono, resampled to the model's
// rate (Resampler: the polyphase Kaiser-windowed sinc filter of scipy.signal.resample_poly), cut
// into exact chunks (optionally with context samples carried over from the audio before each chunk)
// and given to the method one chunk at a time, in order; each result comes back with its chunk's
// timestamps. A model in a worker (load(src, { worker: true })) is called the same way.
import { TandemError } from './errors.js';
import { Tensor } from './tensor.js';
import { WASM_PATHS } from './options.js';

const now = () => (globalThis.performance ?? Date).now();

function invalid(message) {
  return new TandemError('TDM_ERR_INVALID_ARGUMENT', `streamAudio: ${message}`);
}

function positiveInteger(value, what) {
  if (!Number.isInteger(value) || value <= 0) throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
    `${what} must be a positive integer, given ${String(value)}`);
  return value;
}

function gcd(a, b) {
  while (b) [a, b] = [b, a % b];
  return a;
}

/** The modified Bessel function of the first kind, order 0 (its power series; x <= 20 here). */
function besselI0(x) {
  let sum = 1, term = 1;
  const q = (x * x) / 4;
  for (let k = 1; term > sum * 1e-17; k++) {
    term *= q / (k * k);
    sum += term;
  }
  return sum;
}

/** A linear-phase low-pass FIR filter of `taps` taps (odd), cut off at `cutoff` (a fraction of the
 * Nyquist frequency), Kaiser window of parameter `beta`, scaled to unit gain at DC: the filter
 * scipy.signal.firwin(taps, cutoff, window=('kaiser', beta)) designs. */
export function kaiserLowpass(taps, cutoff, beta) {
  const h = new Float64Array(taps);
  const mid = (taps - 1) / 2;
  const i0beta = besselI0(beta);
  let sum = 0;
  for (let n = 0; n < taps; n++) {
    const m = n - mid;
    const x = Math.PI * cutoff * m;
    const sinc = m === 0 ? 1 : Math.sin(x) / x;
    const r = m / mid;
    const window = besselI0(beta * Math.sqrt(Math.max(0, 1 - r * r))) / i0beta;
    h[n] = cutoff * sinc * window;
    sum += h[n];
  }
  for (let n = 0; n < taps; n++) h[n] /= sum;
  return h;
}

/**
 * Streaming rational resampler from `fromRate` to `toRate` (integers, in Hz): upsample by
 * L = toRate/g, low-pass, downsample by M = fromRate/g (g their gcd), with the filter of
 * scipy.signal.resample_poly (Kaiser window, beta 5, 20·max(L, M) + 1 taps, cut off at the lower
 * Nyquist frequency) evaluated polyphase. Fed a signal in any pieces and flushed, its output is
 * resample_poly(signal, L, M) of the whole signal: ceil(n·L/M) samples, zero phase (output k is
 * at input time k·M/L). Each output waits for 10·max(L, M)/L input samples past its time.
 */
export class Resampler {
  constructor(fromRate, toRate) {
    positiveInteger(fromRate, 'Resampler: fromRate');
    positiveInteger(toRate, 'Resampler: toRate');
    const g = gcd(fromRate, toRate);
    this.fromRate = fromRate;
    this.toRate = toRate;
    this.up = toRate / g;
    this.down = fromRate / g;
    const max = Math.max(this.up, this.down);
    this.half = max === 1 ? 0 : 10 * max;
    const taps = 2 * this.half + 1;
    if (taps > 1 << 24) throw new TandemError('TDM_ERR_LIMIT',
      `Resampler: ${fromRate} Hz to ${toRate} Hz needs a ${taps}-tap filter; resample between rates with a larger common divisor`);
    const h = max === 1 ? Float64Array.of(1) : kaiserLowpass(taps, 1 / max, 5);
    // phases[p][j] = up·h[p + j·up]: the taps that meet input samples for outputs of phase p.
    this.phases = [];
    for (let p = 0; p < this.up; p++) {
      const n = Math.max(0, Math.ceil((taps - p) / this.up));
      const c = new Float64Array(n);
      for (let j = 0; j < n; j++) c[j] = this.up * h[p + j * this.up];
      this.phases.push(c);
    }
    this.buf = new Float32Array(1024); // input samples [base, base + len)
    this.base = 0;
    this.len = 0;
    this.out = 0; // outputs given so far
  }

  /** The input samples received so far. */
  get inputLength() { return this.base + this.len; }

  /** Resamples the next piece of the signal; returns the outputs it completes (maybe none). */
  push(samples) {
    if (!(samples instanceof Float32Array)) throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
      'Resampler.push: samples must be a Float32Array');
    if (this.len + samples.length > this.buf.length) {
      const grown = new Float32Array(Math.max(2 * this.buf.length, this.len + samples.length));
      grown.set(this.buf.subarray(0, this.len));
      this.buf = grown;
    }
    this.buf.set(samples, this.len);
    this.len += samples.length;
    return this.#produce(false);
  }

  /** Ends the signal (zeros after it, as resample_poly pads): returns the remaining outputs. */
  flush() {
    return this.#produce(true);
  }

  #produce(final) {
    const { up, down, half } = this;
    const have = this.base + this.len;
    // output k needs inputs up to floor((k·down + half)/up); at the end, every k < ceil(have·up/down)
    const last = final ? Math.ceil((have * up) / down) : Math.floor((have * up - half - 1) / down) + 1;
    const count = Math.max(0, last - this.out);
    const y = new Float32Array(count);
    for (let i = 0; i < count; i++) {
      const t = (this.out + i) * down + half;
      const p = t % up;
      const c = this.phases[p];
      let n = (t - p) / up - this.base; // the newest input sample it meets, in buf
      let j = 0, acc = 0;
      if (n >= this.len) { j = n - this.len + 1; n = this.len - 1; } // past the end (flush): zeros
      for (; j < c.length && n >= 0; j++, n--) acc += c[j] * this.buf[n];
      y[i] = acc;
    }
    this.out += count;
    // keep the inputs the next output still meets: from ceil((out·down - half)/up)
    const keep = Math.max(this.base, Math.ceil((this.out * down - half) / up));
    const drop = Math.min(keep - this.base, this.len);
    if (drop > 0) {
      this.buf.copyWithin(0, drop, this.len);
      this.len -= drop;
      this.base += drop;
    }
    return y;
  }
}

/** Cuts a signal into chunks of `chunk` samples, each preceded by the `context` samples before it
 * (zeros before the signal's start). */
class Chunker {
  constructor(chunk, context) {
    this.chunk = chunk;
    this.context = context;
    this.cur = new Float32Array(context + chunk); // the chunk being filled, after its context
    this.fill = context;
  }

  /** Appends samples; calls emit(chunkWithContext) for every chunk they complete. */
  push(samples, emit) {
    let at = 0;
    while (at < samples.length) {
      const n = Math.min(samples.length - at, this.cur.length - this.fill);
      this.cur.set(samples.subarray(at, at + n), this.fill);
      this.fill += n;
      at += n;
      if (this.fill === this.cur.length) {
        const full = this.cur;
        this.cur = new Float32Array(this.context + this.chunk);
        this.cur.set(full.subarray(full.length - this.context), 0);
        this.fill = this.context;
        emit(full);
      }
    }
  }

  /** The samples of a last, partial chunk (0 if none). */
  get pending() { return this.fill - this.context; }

  /** Emits the last partial chunk padded with zeros, if there is one. */
  pad(emit) {
    if (this.pending > 0) {
      const last = this.cur;
      this.cur = new Float32Array(this.context + this.chunk);
      this.fill = this.context;
      emit(last);
    }
  }
}

const isAudioBuffer = (s) => s !== null && typeof s === 'object' && typeof s.getChannelData === 'function'
  && typeof s.numberOfChannels === 'number';
const isMediaStream = (s) => s !== null && typeof s === 'object' && typeof s.getAudioTracks === 'function';
const isReadableStream = (s) => s !== null && typeof s === 'object' && typeof s.getReader === 'function';

/** Mono samples of an AudioBuffer: the mean of its channels. */
function mono(buffer) {
  const channels = buffer.numberOfChannels;
  if (channels === 1) return buffer.getChannelData(0);
  const out = new Float32Array(buffer.length);
  for (let c = 0; c < channels; c++) {
    const d = buffer.getChannelData(c);
    for (let i = 0; i < out.length; i++) out[i] += d[i];
  }
  for (let i = 0; i < out.length; i++) out[i] /= channels;
  return out;
}

/** How a chunk becomes the method's inputs by default: one float32 tensor of the method's first
 * input's shape, its dynamic dim (if it has one) sized to the chunk. */
function defaultArgs(spec, length, methodName) {
  const input = spec.inputs[0];
  if (!input || input.dtype !== 'float32') {
    throw invalid(`method '${methodName}' does not take float32 samples as its first input: give options.args(samples, index) to build ` +
      `its inputs`);
  }
  const fixed = input.shape.filter((d) => typeof d === 'number').reduce((a, b) => a * b, 1);
  const dynamic = input.shape.filter((d) => typeof d !== 'number').length;
  if ((dynamic === 0 && fixed !== length) || dynamic > 1 || length % fixed !== 0) {
    throw invalid(`a chunk of ${length} samples (chunk + context) does not fit method '${methodName}''s input of shape ` +
      `[${input.shape.join(', ')}]: set chunk and context to match, or give options.args`);
  }
  const shape = input.shape.map((d) => (typeof d === 'number' ? d : length / fixed));
  const extra = spec.inputs.length - 1;
  if (extra > 0) throw invalid(`method '${methodName}' takes ${spec.inputs.length} inputs: give options.args(samples, index) returning ` +
    `all of them`);
  return (samples) => [new Tensor('float32', samples, shape)];
}

/**
 * Streams audio through a model's method, chunk by chunk, in order. Resolves, when the source ends
 * or `signal` aborts, to { chunks, results, dropped, seconds, reason: 'end' | 'aborted' }; rejects
 * if a call fails or onResult throws. See docs/api.md for every option.
 */
export async function streamAudio(model, method, source, options = {}) {
  const {
    sampleRate = model?.metadata?.sample_rate, context = 0, inputRate, backpressure = 'queue', maxQueue = 4,
    tail = 'pad', onResult, onDrop, signal, audioContext, blockSize = 4096,
  } = options;
  if (!model || !Array.isArray(model.methods) || typeof model.call !== 'function') {
    throw invalid('model must be a loaded model (load(...))');
  }
  const spec = model.methods.find((m) => m.name === method);
  if (!spec) throw new TandemError('TDM_ERR_NOT_FOUND',
    `streamAudio: the model has no method '${method}' (it has ${model.methods.map((m) => m.name).join(', ')})`);
  positiveInteger(sampleRate, 'streamAudio: sampleRate (the model\'s rate; or the program\'s sample_rate metadata)');
  if (!Number.isInteger(context) || context < 0) throw invalid(`context must be a whole number of samples, given ${String(context)}`);
  let { chunk } = options;
  if (chunk === undefined) {
    const shape = spec.inputs[0]?.shape ?? [];
    if (!shape.every((d) => typeof d === 'number')) throw invalid(`method '${method}' takes a dynamic shape: give options.chunk`);
    chunk = shape.reduce((a, b) => a * b, 1) - context;
  }
  positiveInteger(chunk, 'streamAudio: chunk');
  if (backpressure !== 'queue' && backpressure !== 'drop') {
    throw invalid(`backpressure must be 'queue' or 'drop', given ${String(backpressure)}`);
  }
  positiveInteger(maxQueue, 'streamAudio: maxQueue');
  positiveInteger(blockSize, 'streamAudio: blockSize');
  if (tail !== 'pad' && tail !== 'drop') throw invalid(`tail must be 'pad' or 'drop', given ${String(tail)}`);
  if (onResult !== undefined && typeof onResult !== 'function') throw invalid('onResult must be a function');
  if (onDrop !== undefined && typeof onDrop !== 'function') throw invalid('onDrop must be a function');
  if (signal !== undefined && !(typeof signal?.aborted === 'boolean' && typeof signal.addEventListener === 'function')) {
    throw invalid('signal must be an AbortSignal');
  }
  const args = options.args ?? defaultArgs(spec, chunk + context, method);
  if (typeof args !== 'function') throw invalid('args must be a function (samples, index) => inputs');

  let kind;
  if (source instanceof Float32Array) kind = 'array';
  else if (isAudioBuffer(source)) kind = 'buffer';
  else if (isMediaStream(source)) kind = 'media';
  else if (isReadableStream(source)) kind = 'stream';
  else throw invalid('source must be a MediaStream, an AudioBuffer, a Float32Array or a ReadableStream of Float32Array');
  const rate = kind === 'buffer' ? source.sampleRate : kind === 'media' ? undefined : inputRate ?? sampleRate;
  if (rate !== undefined) positiveInteger(rate, 'streamAudio: inputRate');

  // The pipeline: source blocks -> resampler -> chunker -> queue -> the method, one call at a time.
  const queue = [];
  let index = 0, results = 0, dropped = 0, ended = false, failed = null, aborted = signal?.aborted ?? false;
  let wakeRunner = null, wakeReader = null;
  const wake = (which) => { const w = which === 'runner' ? wakeRunner : wakeReader; if (w) w(); };
  let resampler;
  const chunker = new Chunker(chunk, context);
  const cut = (samples) => {
    const start = index * chunk;
    const item = { index: index++, start: start / sampleRate, end: (start + chunk) / sampleRate, input: samples };
    if (backpressure === 'drop' && queue.length >= maxQueue) {
      dropped++;
      onDrop?.({ index: item.index, start: item.start, end: item.end, dropped });
      return;
    }
    queue.push(item);
    wake('runner');
  };
  const feed = (block) => chunker.push(resampler.push(block), cut);
  const finish = () => {
    if (!resampler) return;
    chunker.push(resampler.flush(), cut);
    if (tail === 'pad') chunker.pad(cut);
  };
  const stopped = () => aborted || failed !== null;

  // Resolves when the stream must stop: the signal aborted, or a call, onResult or onDrop failed.
  let stopNow;
  const stopPromise = new Promise((resolve) => { stopNow = resolve; });
  const fail = (e) => { failed ??= e; wake('runner'); wake('reader'); stopNow(); };
  const onAbort = () => { aborted = true; wake('runner'); wake('reader'); stopNow(); };
  signal?.addEventListener('abort', onAbort, { once: true });
  let cleanup = () => {};

  const runner = (async () => {
    for (;;) {
      while (!queue.length && !stopped()) {
        if (ended) return;
        await new Promise((r) => { wakeRunner = r; });
        wakeRunner = null;
      }
      if (stopped()) return;
      const item = queue.shift();
      wake('reader');
      const t0 = now();
      let output;
      try {
        output = await model.call(method, ...args(item.input, item.index), { signal });
      } catch (e) {
        if (!aborted) fail(e);
        return;
      }
      if (stopped()) return;
      results++;
      try {
        onResult?.({ ...item, output, ms: now() - t0, queued: queue.length });
      } catch (e) {
        fail(e);
        return;
      }
    }
  })();

  /** In 'queue' mode a pull source waits while maxQueue chunks are waiting for the model. */
  const room = async () => {
    while (backpressure === 'queue' && queue.length >= maxQueue && !stopped()) {
      await new Promise((r) => { wakeReader = r; });
      wakeReader = null;
    }
  };

  try {
    if (!aborted) {
      if (kind === 'array' || kind === 'buffer') {
        const samples = kind === 'array' ? source : mono(source);
        resampler = new Resampler(rate, sampleRate);
        for (let at = 0; at < samples.length && !stopped(); at += blockSize) {
          feed(samples.subarray(at, at + blockSize));
          await room();
          if (backpressure === 'drop') await new Promise((r) => setTimeout(r, 0)); // let calls run
        }
        if (!stopped()) finish();
      } else if (kind === 'stream') {
        resampler = new Resampler(rate, sampleRate);
        const reader = source.getReader();
        cleanup = () => { reader.cancel().catch(() => {}); }; // stopped early: the stream is cancelled
        for (;;) {
          const next = await Promise.race([reader.read(), stopPromise.then(() => ({ done: true }))]);
          if (stopped()) break;
          if (next.done) {
            cleanup = () => reader.releaseLock();
            finish();
            break;
          }
          if (!(next.value instanceof Float32Array)) throw invalid(`the ReadableStream gave ` +
            `${Object.prototype.toString.call(next.value)}: it must give Float32Array blocks of samples`);
          feed(next.value);
          await room();
        }
      } else {
        const live = (block) => { if (!stopped()) try { feed(block); } catch (e) { fail(e); } };
        cleanup = await captureMedia(source, audioContext, blockSize,
          (rateOfContext) => { resampler = new Resampler(rateOfContext, sampleRate); }, live, model[WASM_PATHS]);
        await stopPromise; // a live source ends when the signal aborts (or a call fails)
      }
    }
  } catch (e) {
    fail(e);
  } finally {
    ended = true;
    wake('runner');
  }
  await runner;
  cleanup();
  signal?.removeEventListener('abort', onAbort);
  if (failed !== null) throw failed;
  return { chunks: index, results, dropped, seconds: (index * chunk) / sampleRate, reason: aborted ? 'aborted' : 'end' };
}

/** Starts capturing a MediaStream through an AudioWorklet (web/audio-worklet.js), mono blocks of
 * `blockSize` frames at the AudioContext's rate, each given to feed(); returns the function that
 * stops it (it disconnects the nodes and closes the AudioContext if it made it; the stream's
 * tracks stay the caller's). */
async function captureMedia(stream, given, blockSize, onRate, feed, base) {
  const AudioContextClass = globalThis.AudioContext ?? globalThis.webkitAudioContext;
  if (stream.getAudioTracks().length === 0) throw invalid('the MediaStream has no audio track (getUserMedia({ audio: true }) gives one)');
  if (!given && !AudioContextClass) throw invalid('a MediaStream source needs Web Audio (AudioContext), which this environment lacks: ' +
    'give an AudioBuffer, a Float32Array or a ReadableStream');
  const ctx = given ?? new AudioContextClass();
  let input, node;
  try {
    // beside this module (a literal new URL, which bundlers rewrite), or under the model's options.wasmPaths
    await ctx.audioWorklet.addModule(base ? new URL('audio-worklet.js', base) : new URL('./audio-worklet.js', import.meta.url));
    input = ctx.createMediaStreamSource(stream);
    node = new AudioWorkletNode(ctx, 'tandem-capture',
      { numberOfInputs: 1, numberOfOutputs: 1, outputChannelCount: [1], processorOptions: { blockSize } });
  } catch (e) {
    if (!given) ctx.close().catch(() => {});
    throw e;
  }
  onRate(ctx.sampleRate);
  node.port.onmessage = (e) => feed(e.data);
  input.connect(node);
  node.connect(ctx.destination); // silent: the processor writes no output; connected so it is pulled
  if (ctx.state === 'suspended') await ctx.resume();
  return () => {
    node.port.postMessage('stop');
    node.port.onmessage = null;
    input.disconnect();
    node.disconnect();
    if (!given) ctx.close().catch(() => {});
  };
}
