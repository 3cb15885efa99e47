// Speech segments from per-chunk speech probabilities: the rule of silero-vad's
// get_speech_timestamps (its Python package's get_speech_timestamps_from_probs, without a maximum
// segment length), written here for the page. A segment starts at a chunk whose probability is at
// least `threshold`; it ends where the probability first fell below `negThreshold`, once it has
// stayed there for `minSilenceMs`; segments of `minSpeechMs` or less are left out; then each is
// widened by `padMs` on both sides (half the gap when two are closer than two pads). Positions in
// samples.
export function speechSegments(probs, {
  sampleRate = 16000, chunk = 512, threshold = 0.5, negThreshold = Math.max(threshold - 0.15, 0.01),
  minSpeechMs = 250, minSilenceMs = 100, padMs = 30, length = probs.length * chunk,
} = {}) {
  const minSpeech = (sampleRate * minSpeechMs) / 1000;
  const minSilence = (sampleRate * minSilenceMs) / 1000;
  const pad = (sampleRate * padMs) / 1000;
  const found = [];
  let start = null, silenceFrom = null;
  for (let i = 0; i < probs.length; i++) {
    const at = i * chunk, p = probs[i];
    if (p >= threshold) silenceFrom = null;
    if (start === null) {
      if (p >= threshold) start = at;
      continue;
    }
    if (p < negThreshold) {
      silenceFrom ??= at;
      if (at - silenceFrom >= minSilence) {
        if (silenceFrom - start > minSpeech) found.push([start, silenceFrom]);
        start = null;
        silenceFrom = null;
      }
    }
  }
  if (start !== null && length - start > minSpeech) found.push([start, length]);
  for (let i = 0; i < found.length; i++) {
    const s = found[i];
    if (i === 0) s[0] = Math.max(0, Math.trunc(s[0] - pad));
    if (i < found.length - 1) {
      const next = found[i + 1], gap = next[0] - s[1];
      if (gap < 2 * pad) {
        s[1] += Math.floor(gap / 2);
        next[0] = Math.max(0, next[0] - Math.floor(gap / 2));
      } else {
        s[1] = Math.min(length, Math.trunc(s[1] + pad));
        next[0] = Math.max(0, Math.trunc(next[0] - pad));
      }
    } else {
      s[1] = Math.min(length, Math.trunc(s[1] + pad));
    }
  }
  return found;
}
