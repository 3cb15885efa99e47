// The WGSL building blocks of the WebGPU kernels (web/webgpu/kernels.js and the modules beside it). Each op of a verified
// program becomes one or more dispatches: { key, code, params, count }. `code` is a WGSL module
// generated for the op's kind, dtypes and operand buffers (so ops of one kind share a pipeline);
// `params` (u32 words: sizes, strides, element offsets) are per op; `count` is the thread count.
//
// Memory: every operand lives in one of two buffers, M (the session's state region then its
// scratch arena, read-write) or C (the program's data section: constants, read-only), at the
// element offset the plan gives. F[0] is the call's failure flag: check_index sets it (op index
// + 1) and every kernel returns at once while it is set, so no op after a failed check writes
// anything (the verifier puts checks before any state write but updates in place, whose slots
// backend.js keeps a copy of and puts back: docs/format.md, atomic calls).
// Element types in WGSL: float32 f32, int32 i32, bool u32 (0 or 1, one byte in memory: a kernel
// writing bools declares M atomic and sets its bytes with atomicAnd/atomicOr), int64 vec2<u32>
// (low word, high word).

/** The workgroup size: 256 threads, or fewer where the adapter's limits say so. */
export const workgroupSize = (limits) => Math.min(256, limits.maxComputeInvocationsPerWorkgroup ?? 256,
  limits.maxComputeWorkgroupSizeX ?? 256);
export const SIZE = { float32: 4, int32: 4, int64: 8, bool: 1, int8: 1, int4x2: 1, bfloat16: 2, int16: 2 };

export const contiguous = (shape) => {
  const s = new Array(shape.length);
  let acc = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    s[d] = acc;
    acc *= shape[d];
  }
  return s;
};
export const numel = (shape) => shape.reduce((a, b) => a * b, 1);

/** Strides of `shape` (contiguous) broadcast to `out` (aligned right; 0 where broadcast). */
export function broadcastStrides(shape, out) {
  const st = contiguous(shape), r = out.length, res = new Array(r).fill(0);
  for (let d = 0; d < shape.length; d++) {
    const o = r - shape.length + d;
    res[o] = shape[d] === 1 && out[o] !== 1 ? 0 : st[d];
  }
  return res;
}

// ---- WGSL building blocks -----------------------------------------------------------------------

export function header(atomicM) {
  return `@group(0) @binding(0) var<storage, read_write> M: array<${atomicM ? 'atomic<u32>' : 'u32'}>;
@group(0) @binding(1) var<storage, read> C: array<u32>;
@group(0) @binding(2) var<storage, read_write> F: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read> P: array<u32>;
@group(0) @binding(4) var<storage, read> H: array<u32>;
fn mw(w: u32) -> u32 { return ${atomicM ? 'atomicLoad(&M[w])' : 'M[w]'}; }
fn cw(w: u32) -> u32 { return C[w]; }
`;
}

/** fn name(e: u32) -> T reading element e of a dtype from buffer src ('M', 'C', or 'H': float16 weights). */
export function reader(name, dtype, src) {
  // float32 weights kept as float16 pairs in H (half.js)
  if (src === 'H') return `fn ${name}(e: u32) -> f32 { let v = unpack2x16float(H[e >> 1u]); return select(v.x, v.y, (e & 1u) == 1u); }\n`;
  const w = src === 'C' ? 'cw' : 'mw';
  switch (dtype) {
    case 'float32': return `fn ${name}(e: u32) -> f32 { return bitcast<f32>(${w}(e)); }\n`;
    case 'int32': return `fn ${name}(e: u32) -> i32 { return bitcast<i32>(${w}(e)); }\n`;
    case 'int64': return `fn ${name}(e: u32) -> vec2<u32> { return vec2<u32>(${w}(2u * e), ${w}(2u * e + 1u)); }\n`;
    case 'bool': return `fn ${name}(e: u32) -> u32 { return (${w}(e >> 2u) >> ((e & 3u) * 8u)) & 0xffu; }\n`;
  }
  throw new Error(dtype);
}

/** fn name(e: u32, v: T) writing element e into M. */
export function writer(name, dtype) {
  switch (dtype) {
    case 'float32': return `fn ${name}(e: u32, v: f32) { M[e] = bitcast<u32>(v); }\n`;
    case 'int32': return `fn ${name}(e: u32, v: i32) { M[e] = bitcast<u32>(v); }\n`;
    case 'int64': return `fn ${name}(e: u32, v: vec2<u32>) { M[2u * e] = v.x; M[2u * e + 1u] = v.y; }\n`;
    case 'bool': return `fn ${name}(e: u32, v: u32) { let sh = (e & 3u) * 8u; atomicAnd(&M[e >> 2u], ~(0xffu << sh)); ` +
      'atomicOr(&M[e >> 2u], (v & 0xffu) << sh); }\n';
  }
  throw new Error(dtype);
}

/** An index element (int64 or int32) as i32; an int64 outside the i32 range gives i32 min (out of range). */
export function indexReader(name, dtype, src) {
  const w = src === 'C' ? 'cw' : 'mw';
  if (dtype === 'int32') return `fn ${name}(e: u32) -> i32 { return bitcast<i32>(${w}(e)); }\n`;
  return `fn ${name}(e: u32) -> i32 {
  let lo = ${w}(2u * e); let hi = ${w}(2u * e + 1u);
  let ok = (hi == 0u && lo < 0x80000000u) || (hi == 0xffffffffu && lo >= 0x80000000u);
  return select(-2147483647 - 1, bitcast<i32>(lo), ok);
}\n`;
}

export const MAIN = (wg, body) => `@compute @workgroup_size(${wg})
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = g.x + g.y * nw.x * ${wg}u;
  if (atomicLoad(&F[0]) != 0u) { return; }
${body}
}
`;

export const MATH = `fn nan_() -> f32 { var u = 0x7fc00000u; return bitcast<f32>(u); }
fn ninf_() -> f32 { var u = 0xff800000u; return bitcast<f32>(u); }
fn pinf_() -> f32 { var u = 0x7f800000u; return bitcast<f32>(u); }
fn erf_(x: f32) -> f32 {
  // Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7)
  let a = abs(x); let t = 1.0 / (1.0 + 0.3275911 * a);
  let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-a * a);
  return select(-y, y, x >= 0.0);
}
fn tanh_(x: f32) -> f32 { return tanh(clamp(x, -15.0, 15.0)); }
fn isnan_(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn max_(a: f32, b: f32) -> f32 { if (isnan_(a) || isnan_(b)) { return nan_(); } return select(b, a, a > b); }
fn min_(a: f32, b: f32) -> f32 { if (isnan_(a) || isnan_(b)) { return nan_(); } return select(b, a, a < b); }
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { let lo = a.x + b.x; return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x)); }
fn neg64(a: vec2<u32>) -> vec2<u32> { return add64(~a, vec2<u32>(1u, 0u)); }
fn lt64(a: vec2<u32>, b: vec2<u32>) -> bool { if (a.y != b.y) { return bitcast<i32>(a.y) < bitcast<i32>(b.y); } return a.x < b.x; }
fn eq64(a: vec2<u32>, b: vec2<u32>) -> bool { return a.x == b.x && a.y == b.y; }
fn i64of(x: i32) -> vec2<u32> { return vec2<u32>(bitcast<u32>(x), select(0u, 0xffffffffu, x < 0)); }
fn f32ofu64(a: vec2<u32>) -> f32 { return f32(a.y) * 4294967296.0 + f32(a.x); }
fn f32of64(a: vec2<u32>) -> f32 { if (bitcast<i32>(a.y) < 0) { return -f32ofu64(neg64(a)); } return f32ofu64(a); }
fn mulhi32(a: u32, b: u32) -> u32 {
  let a0 = a & 0xffffu; let a1 = a >> 16u; let b0 = b & 0xffffu; let b1 = b >> 16u;
  let p01 = a0 * b1; let p10 = a1 * b0;
  let mid = ((a0 * b0) >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u);
}
fn mul64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return vec2<u32>(a.x * b.x, mulhi32(a.x, b.x) + a.x * b.y + a.y * b.x); }
fn neg64s(a: vec2<u32>) -> bool { return bitcast<i32>(a.y) < 0; }
fn abs64(a: vec2<u32>) -> vec2<u32> { return select(a, neg64(a), neg64s(a)); }
fn ltu64(a: vec2<u32>, b: vec2<u32>) -> bool { if (a.y != b.y) { return a.y < b.y; } return a.x < b.x; }
// unsigned n / d by shift and subtract: (quotient, remainder) in a vec4 (d != 0)
fn udivmod64(n: vec2<u32>, d: vec2<u32>) -> vec4<u32> {
  var q = vec2<u32>(0u, 0u); var r = vec2<u32>(0u, 0u);
  for (var b = 63; b >= 0; b--) {
    let bit = select((n.x >> u32(b)) & 1u, (n.y >> u32(b - 32)) & 1u, b >= 32);
    r = vec2<u32>((r.x << 1u) | bit, (r.y << 1u) | (r.x >> 31u));
    if (!ltu64(r, d)) {
      r = add64(r, neg64(d));
      if (b >= 32) { q.y = q.y | (1u << u32(b - 32)); } else { q.x = q.x | (1u << u32(b)); }
    }
  }
  return vec4<u32>(q, r);
}
// signed division of int64 (src/kernels/elementwise.c): x / 0 = 0, x % 0 = 0, INT64_MIN / -1 wraps;
// mode 0 trunc_divide, 1 floor_divide, 2 remainder (the divisor's sign)
fn div64(a: vec2<u32>, b: vec2<u32>, mode: u32) -> vec2<u32> {
  if (b.x == 0u && b.y == 0u) { return vec2<u32>(0u, 0u); }
  let qr = udivmod64(abs64(a), abs64(b));
  var q = qr.xy; var r = qr.zw;
  if (neg64s(a) != neg64s(b)) { q = neg64(q); }
  if (neg64s(a)) { r = neg64(r); }
  let adjust = (r.x != 0u || r.y != 0u) && (neg64s(r) != neg64s(b));
  if (mode == 0u) { return q; }
  if (mode == 1u) { return select(q, add64(q, vec2<u32>(0xffffffffu, 0xffffffffu)), adjust); }
  return select(r, add64(r, b), adjust);
}
fn div32(a: i32, b: i32, mode: u32) -> i32 {
  if (b == 0) { return 0; }
  if (b == -1) { return select(0 - a, 0, mode == 2u); }
  let q = a / b; let r = a - q * b;
  let adjust = r != 0 && ((r < 0) != (b < 0));
  if (mode == 0u) { return q; }
  if (mode == 1u) { return select(q, q - 1, adjust); }
  return select(r, r + b, adjust);
}
// a ** b by squaring, wrapping; a negative exponent: 1 for a = 1, +-1 for a = -1, else 0
fn pow64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  if (neg64s(b)) {
    if (a.x == 1u && a.y == 0u) { return a; }
    if (a.x == 0xffffffffu && a.y == 0xffffffffu) { return select(vec2<u32>(1u, 0u), a, (b.x & 1u) == 1u); }
    return vec2<u32>(0u, 0u);
  }
  var r = vec2<u32>(1u, 0u); var x = a; var e = b;
  while (e.x != 0u || e.y != 0u) {
    if ((e.x & 1u) == 1u) { r = mul64(r, x); }
    x = mul64(x, x);
    e = vec2<u32>((e.x >> 1u) | (e.y << 31u), e.y >> 1u);
  }
  return r;
}
fn pow32(a: i32, b: i32) -> i32 {
  if (b < 0) { if (a == 1) { return 1; } if (a == -1) { return select(1, -1, (b & 1) == 1); } return 0; }
  var r = 1; var x = a; var e = u32(b);
  while (e != 0u) { if ((e & 1u) == 1u) { r = r * x; } x = x * x; e = e >> 1u; }
  return r;
}
fn i64off32(x: f32) -> vec2<u32> {
  if (isnan_(x) || abs(x) >= 9.2233715e18) { return vec2<u32>(0u, 0x80000000u); }
  let t = trunc(x); let a = abs(t); let hi = floor(a / 4294967296.0); let lo = a - hi * 4294967296.0;
  let v = vec2<u32>(u32(lo), u32(hi));
  return select(v, neg64(v), t < 0.0);
}
`;

// ---- the strided map kernel ---------------------------------------------------------------------
// y[off_y(i)] = f(x0[off_0(i)], x1[off_1(i)], ...), or with a reduction, y = fold over the reduced
// index space of g(x...). i runs over an iteration shape D (rank <= 8); each operand has a base
// element offset and strides over D (and over the reduced shape RD). Params: n, R, D[8], RN, RR,
// RD[8], then per operand (output first) base, S[8], RS[8].

export const MAXR = 8;
export function mapParams(dims, rdims, operands) {
  const p = [numel(dims), dims.length, ...pad(dims, 1), numel(rdims), rdims.length, ...pad(rdims, 1)];
  for (const o of operands) p.push(o.base, ...pad(o.strides, 0), ...pad(o.rstrides ?? [], 0));
  return p;
}
export const pad = (a, fill) => {
  if (a.length > MAXR) throw new Error('rank above 8');
  return [...a, ...new Array(MAXR - a.length).fill(fill)];
};
export const OPW = 1 + 2 * MAXR; // words per operand
export const OPB = 2 + MAXR + 2 + MAXR; // first operand word

/** WGSL of a map kernel: `types` [out, in0, ...] dtypes, `srcs` buffers ('M'/'C'), `expr` over
 * a0.. (one element each) giving the output; with `reduce` = { init, step, fin }: acc starts at
 * init, step is an assignment over acc and a0.., fin the output expression over acc and n. */
export function mapCode(wg, types, srcs, expr, reduce, extra = '') {
  const atomicM = types[0] === 'bool';
  let code = header(atomicM) + MATH + extra + writer('wr', types[0]);
  const k = types.length - 1;
  for (let j = 1; j <= k; j++) code += reader(`r${j - 1}`, types[j], srcs[j]);
  const offs = Array.from({ length: k + 1 }, (_, j) => `var o${j} = P[${OPB + j * OPW}u];`).join(' ');
  const steps = Array.from({ length: k + 1 }, (_, j) => `o${j} += c * P[${OPB + j * OPW + 1}u + d];`).join(' ');
  const reads = Array.from({ length: k }, (_, j) => `let a${j} = r${j}(o${j + 1} + q${j + 1});`).join(' ');
  let body = `  if (i >= P[0]) { return; }
  ${offs}
  var rem = i;
  for (var dd = 0u; dd < P[1]; dd++) { let d = P[1] - 1u - dd; let c = rem % P[2u + d]; rem = rem / P[2u + d]; ${steps} }
`;
  if (!reduce) {
    const zeros = Array.from({ length: k }, (_, j) => `let q${j + 1} = 0u;`).join(' ');
    body += `  ${zeros} ${reads}\n  wr(o0, ${expr});`;
  } else {
    const rzero = Array.from({ length: k }, (_, j) => `var q${j + 1} = 0u;`).join(' ');
    const rsteps = Array.from({ length: k }, (_, j) => `q${j + 1} += c * P[${OPB + (j + 1) * OPW + 1 + MAXR}u + d];`).join(' ');
    body += `  var acc = ${reduce.init};
  let n = P[${2 + MAXR}u];
  for (var t = 0u; t < n; t++) {
    ${rzero}
    var rr = t;
    for (var dd = 0u; dd < P[${3 + MAXR}u]; dd++) {
      let d = P[${3 + MAXR}u] - 1u - dd; let c = rr % P[${4 + MAXR}u + d]; rr = rr / P[${4 + MAXR}u + d]; ${rsteps}
    }
    ${reads}
    ${reduce.step}
  }
  wr(o0, ${reduce.fin});`;
  }
  return code + MAIN(wg, body);
}

export const zero = (dt) => ({ float32: '0.0', int32: '0', bool: '0u', int64: 'vec2<u32>(0u, 0u)' }[dt]);
const f32buf = new Float32Array(1), u32buf = new Uint32Array(f32buf.buffer);
export function f32bits(x) {
  f32buf[0] = x;
  return u32buf[0];
}
export function i64lit(v) {
  const u = BigInt.asUintN(64, v);
  return `vec2<u32>(${Number(u & 0xffffffffn)}u, ${Number(u >> 32n)}u)`;
}

/** A dispatch of a kernel of its own: { key (its pipeline's), code(wg) (WGSL), params, count (threads) }. */
export function special(key, code, params, count) { return { key, code, params, count }; }

/** x viewed as [outer, n, inner] around dim d. */
export function around(shape, d) {
  return { outer: numel(shape.slice(0, d)), n: shape[d], inner: numel(shape.slice(d + 1)) };
}
