// float32 weights stored as float16 on the GPU (load(..., { gpuWeights: 'float16' }), web/webgpu/backend.js):
// the weight matrices of matmul_packed and the tables of embedding_packed (the bulk of an LM's
// constants) go into one buffer H of float16 pairs, two to a u32 word, rounded to nearest even
// once at load; the kernels read them with WGSL's unpack2x16float (core WGSL: no shader-f16
// feature needed) and compute in float32 as before. Other constants stay float32 in C.

const f32 = new Float32Array(1), u32 = new Uint32Array(f32.buffer);

/** The float16 bits of x, rounded to nearest even (overflow to infinity, NaN kept a NaN, float16
 * subnormals kept). */
export function f16bits(x) {
  f32[0] = x;
  const b = u32[0], sign = (b >>> 16) & 0x8000, exp = (b >>> 23) & 0xff, man = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (man ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) { // a float16 subnormal (or zero): the 24-bit significand shifted right by 14 - e
    if (e < -10) return sign;
    const m = man | 0x800000, shift = 14 - e, half = m >>> shift, rest = m & ((1 << shift) - 1), mid = 1 << (shift - 1);
    return sign | (half + (rest > mid || (rest === mid && (half & 1)) ? 1 : 0));
  }
  const half = (e << 10) | (man >>> 13), rest = man & 0x1fff;
  return sign | (half + (rest > 0x1000 || (rest === 0x1000 && (half & 1)) ? 1 : 0)); // a carry rounds up into the exponent
}

/** The float32 value of float16 bits h (for the tests' references). */
export function f16value(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >>> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 0x1f) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/** Which constants go to H: the float32 constant weights of matmul_packed (input 1) and
 * embedding_packed (input 0) that no other op or output reads. Returns { at: Map(byte offset ->
 * element index in H), image: Uint32Array (H's words), bytes (their float32 size) } or null. */
export function halfWeights(plans, nbytesOf, data) {
  const want = new Map(), other = [];
  for (const plan of plans) {
    for (const op of plan.ops) {
      const w = op.name === 'matmul_packed' ? op.in[1] : op.name === 'embedding_packed' ? op.in[0] : -1;
      for (const j of [...op.in, ...op.out]) {
        const v = plan.values[j];
        if (v.region !== 1) continue;
        if (j === w && v.dtype === 'float32') want.set(v.offset, Math.max(want.get(v.offset) ?? 0, nbytesOf(v)));
        else other.push([v.offset, v.offset + nbytesOf(v)]);
      }
    }
    for (const j of plan.outputs) {
      const v = plan.values[j];
      if (v.region === 1) other.push([v.offset, v.offset + nbytesOf(v)]);
    }
  }
  const spans = [...want].filter(([o, n]) => !other.some(([lo, hi]) => lo < o + n && o < hi)).sort((a, b) => a[0] - b[0]);
  // overlapping weight spans (one table read at two sizes) stay float32
  const keep = spans.filter(([o, n], i) => !spans.some(([o2, n2], k) => k !== i && o2 < o + n && o < o2 + n2));
  if (!keep.length) return null;
  const at = new Map();
  let halves = 0;
  for (const [o, n] of keep) {
    at.set(o, halves);
    halves += n / 4 + ((n / 4) & 1); // each tensor from an even half, so a word holds one tensor's pair
  }
  const image = new Uint32Array(Math.max(1, halves / 2));
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  for (const [o, n] of keep) {
    const h = at.get(o);
    for (let k = 0; k < n / 4; k++) {
      const bits = f16bits(view.getFloat32(o + 4 * k, true)), e = h + k;
      image[e >> 1] |= bits << ((e & 1) * 16);
    }
  }
  return { at, image, bytes: keep.reduce((a, [, n]) => a + n, 0) };
}
