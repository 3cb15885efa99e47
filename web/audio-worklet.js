// audio-worklet.js — the AudioWorklet processor of streamAudio's MediaStream source (web/audio.js):
// mixes its input to mono and posts it to the main thread in blocks of processorOptions.blockSize
// frames (transferred, not copied), where it is resampled, cut into chunks and given to the model.
// It writes no output. The message 'stop' ends it.
class TandemCapture extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.blockSize = options?.processorOptions?.blockSize ?? 4096;
    this.block = new Float32Array(this.blockSize);
    this.fill = 0;
    this.stopped = false;
    this.port.onmessage = (e) => { if (e.data === 'stop') this.stopped = true; };
  }

  process(inputs) {
    if (this.stopped) return false;
    const channels = inputs[0];
    if (!channels || channels.length === 0) return true; // no source connected yet
    const frames = channels[0].length;
    for (let i = 0; i < frames; i++) {
      let sum = 0;
      for (let c = 0; c < channels.length; c++) sum += channels[c][i];
      this.block[this.fill++] = sum / channels.length;
      if (this.fill === this.blockSize) {
        this.port.postMessage(this.block, [this.block.buffer]);
        this.block = new Float32Array(this.blockSize);
        this.fill = 0;
      }
    }
    return true;
  }
}

registerProcessor('tandem-capture', TandemCapture);
