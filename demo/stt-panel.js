// The audio page's speech-to-text panel (demo/audio.html): Kyutai's streaming STT, one `step` call per
// 80 ms frame of 24 kHz audio (Mimi's streaming encode, then moshi's LMGen.step on its codes: one
// greedy text token), fed by streamAudio from the recording or the microphone. The small program is
// build/demo/stt.tandem (demo/build_audio.py); the `real size` switch loads the kyutai/stt-1b-en_fr-shaped
// int4 program that `TANDEM_BENCH=stt npm run bench` writes (build/bench/stt_int4.tandem), when it is there.
// Both have seeded random weights: the tokens show the mechanism and its speed, not a transcript.
import { load, streamAudio } from '/web/tandem.js';

const REAL_SIZE = '/build/bench/stt_int4.tandem';
const RATE = 24000, FRAME = 1920; // Mimi's: 80 ms frames at 24 kHz
const $ = (id) => document.getElementById(id);
const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(bytes < 2 ** 24 ? 1 : 0)} MiB`;

/** Wires the panel; `recording` is the page's recording at `inputRate`. Returns the test hook. */
export async function sttPanel(recording, inputRate) {
  const small = { url: '/build/demo/stt.tandem', model: await load('/build/demo/stt.tandem', { worker: true }) };
  small.bytes = Number((await fetch(small.url, { method: 'HEAD' })).headers.get('content-length'));
  let current = small, big = null, controller = null, run = null;

  function show() {
    const m = current.model, n = run?.tokens.length ?? 0, ms = run?.ms ?? [];
    const mean = ms.reduce((a, b) => a + b, 0) / Math.max(1, ms.length);
    $('stt-info').textContent = `${current === small ? 'small' : 'real size, int4'}: ${mib(current.bytes)} file, `
      + `${mib(m.memoryBytes)} of wasm memory, ${m.simd}, ${m.threads} thread${m.threads > 1 ? 's' : ''}`;
    $('stt-seconds').textContent = `${((n * FRAME) / RATE).toFixed(1)} s`;
    $('stt-ms').textContent = n ? `${mean.toFixed(1)} ms (max ${Math.max(...ms).toFixed(1)})` : '–';
    $('stt-realtime').textContent = n ? `${((1000 * FRAME) / RATE / mean).toFixed(2)}× real time` : '–';
    $('stt-tokens').textContent = n ? run.tokens.slice(-200).join(' ') : '–';
  }

  async function transcribe(source, options) {
    const m = current.model;
    run = { tokens: [], ms: [], inputs: [] };
    show();
    await m.reset();
    let pending = false;
    const summary = await streamAudio(m, 'step', source, {
      sampleRate: RATE, chunk: FRAME, inputRate, ...options,
      onResult: (r) => {
        run.tokens.push(Number(r.output.data[0]));
        run.ms.push(r.ms);
        if (options.keepInputs) run.inputs.push(Array.from(r.input));
        if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; show(); }); }
      },
    });
    show();
    return { summary, tokens: run.tokens, inputs: run.inputs, ms: run.ms };
  }

  function busy(on) {
    for (const id of ['stt-recording', 'stt-mic', 'stt-real']) $(id).disabled = on;
    $('stt-stop').disabled = !on;
  }
  $('stt-recording').onclick = async () => {
    busy(true);
    $('stt-message').textContent = '';
    try { await transcribe(recording, { backpressure: 'queue' }); } finally { busy(false); }
  };
  $('stt-mic').onclick = async () => {
    busy(true);
    controller = new AbortController();
    try {
      const mic = await navigator.mediaDevices.getUserMedia({ audio: true });
      const streaming = transcribe(mic, { backpressure: 'drop', maxQueue: 2, signal: controller.signal });
      $('stt-message').textContent = 'listening…';
      await streaming;
      mic.getTracks().forEach((t) => t.stop());
      $('stt-message').textContent = '';
    } catch (e) {
      $('stt-message').textContent = `microphone: ${e.message}`;
    } finally {
      busy(false);
    }
  };
  $('stt-stop').onclick = () => controller?.abort();
  $('stt-real').onchange = async () => {
    if (!$('stt-real').checked) { current = small; run = null; show(); return; }
    busy(true);
    try {
      if (!big) {
        const head = await fetch(REAL_SIZE, { method: 'HEAD' });
        if (!head.ok) throw new Error(`${REAL_SIZE} is not there: TANDEM_BENCH=stt npm run bench builds it`);
        $('stt-message').textContent = 'loading the real-size program…';
        const bytes = Number(head.headers.get('content-length'));
        big = { url: REAL_SIZE, bytes, model: await load(REAL_SIZE, { worker: true, threads: 2 }) };
      }
      current = big;
      run = null;
      $('stt-message').textContent = '';
    } catch (e) {
      $('stt-real').checked = false;
      $('stt-message').textContent = e.message;
    } finally {
      busy(false);
      show();
    }
  };
  show();
  return {
    runStt: async () => {
      busy(true);
      try { return await transcribe(recording, { backpressure: 'queue', keepInputs: true }); } finally { busy(false); }
    },
  };
}
