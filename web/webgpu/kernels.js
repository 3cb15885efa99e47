// WGSL kernels of the WebGPU backend (web/webgpu/model.js runs them). Each op of a verified
// program becomes one or more dispatches: { key, code, params, count }. `code` is a WGSL module
// generated for the op's kind, dtypes and operand buffers (so ops of one kind share a pipeline);
// `params` (u32 words: sizes, strides, element offsets) are per op; `count` is the thread count.
//
// Memory: every operand lives in one of two buffers, M (the session's state region then its
// scratch arena, read-write) or C (the program's data section: constants, read-only), at the
// element offset the plan gives. F[0] is the call's failure flag: check_index sets it (op index
// + 1) and every kernel returns at once while it is set, so no op after a failed check writes
// anything (the verifier puts checks before any state write: docs/format.md, atomic calls).
// Element types in WGSL: float32 f32, int32 i32, bool u32 (0 or 1, one byte in memory: a kernel
// writing bools declares M atomic and sets its bytes with atomicAnd/atomicOr), int64 vec2<u32>
// (low word, high word).

export const WG = 64;
const SIZE = { float32: 4, int32: 4, int64: 8, bool: 1, int8: 1, int4x2: 1 };

const contiguous = (shape) => {
  const s = new Array(shape.length);
  let acc = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    s[d] = acc;
    acc *= shape[d];
  }
  return s;
};
const numel = (shape) => shape.reduce((a, b) => a * b, 1);

/** Strides of `shape` (contiguous) broadcast to `out` (aligned right; 0 where broadcast). */
function broadcastStrides(shape, out) {
  const st = contiguous(shape), r = out.length, res = new Array(r).fill(0);
  for (let d = 0; d < shape.length; d++) {
    const o = r - shape.length + d;
    res[o] = shape[d] === 1 && out[o] !== 1 ? 0 : st[d];
  }
  return res;
}

// ---- WGSL building blocks -----------------------------------------------------------------------

function header(atomicM) {
  return `@group(0) @binding(0) var<storage, read_write> M: array<${atomicM ? 'atomic<u32>' : 'u32'}>;
@group(0) @binding(1) var<storage, read> C: array<u32>;
@group(0) @binding(2) var<storage, read_write> F: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read> P: array<u32>;
fn mw(w: u32) -> u32 { return ${atomicM ? 'atomicLoad(&M[w])' : 'M[w]'}; }
fn cw(w: u32) -> u32 { return C[w]; }
`;
}

/** fn name(e: u32) -> T reading element e of a dtype from buffer src ('M' or 'C'). */
function reader(name, dtype, src) {
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
function writer(name, dtype) {
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
function indexReader(name, dtype, src) {
  const w = src === 'C' ? 'cw' : 'mw';
  if (dtype === 'int32') return `fn ${name}(e: u32) -> i32 { return bitcast<i32>(${w}(e)); }\n`;
  return `fn ${name}(e: u32) -> i32 {
  let lo = ${w}(2u * e); let hi = ${w}(2u * e + 1u);
  let ok = (hi == 0u && lo < 0x80000000u) || (hi == 0xffffffffu && lo >= 0x80000000u);
  return select(-2147483647 - 1, bitcast<i32>(lo), ok);
}\n`;
}

const MAIN = (body) => `@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = g.x + g.y * nw.x * ${WG}u;
  if (atomicLoad(&F[0]) != 0u) { return; }
${body}
}
`;

const MATH = `fn nan_() -> f32 { var u = 0x7fc00000u; return bitcast<f32>(u); }
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

const MAXR = 8;
function mapParams(dims, rdims, operands) {
  const p = [numel(dims), dims.length, ...pad(dims, 1), numel(rdims), rdims.length, ...pad(rdims, 1)];
  for (const o of operands) p.push(o.base, ...pad(o.strides, 0), ...pad(o.rstrides ?? [], 0));
  return p;
}
const pad = (a, fill) => {
  if (a.length > MAXR) throw new Error('rank above 8');
  return [...a, ...new Array(MAXR - a.length).fill(fill)];
};
const OPW = 1 + 2 * MAXR; // words per operand
const OPB = 2 + MAXR + 2 + MAXR; // first operand word

/** WGSL of a map kernel: `types` [out, in0, ...] dtypes, `srcs` buffers ('M'/'C'), `expr` over
 * a0.. (one element each) giving the output; with `reduce` = { init, step, fin }: acc starts at
 * init, step is an assignment over acc and a0.., fin the output expression over acc and n. */
function mapCode(types, srcs, expr, reduce, extra = '') {
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
  return code + MAIN(body);
}

// ---- op tables ------------------------------------------------------------------------------------

const F32_UNARY = {
  neg: '-a0', abs: 'abs(a0)', relu: 'select(a0, 0.0, a0 < 0.0)', floor: 'floor(a0)', ceil: 'ceil(a0)',
  exp: 'exp(a0)', log: 'log(a0)', sqrt: 'sqrt(a0)', rsqrt: '1.0 / sqrt(a0)', sin: 'sin(a0)', cos: 'cos(a0)',
  tanh: 'tanh_(a0)', sigmoid: '1.0 / (1.0 + exp(-a0))', gelu: '0.5 * a0 * (1.0 + erf_(a0 * 0.70710678118654752))',
  gelu_tanh: '0.5 * a0 * (1.0 + tanh_(0.79788456080286536 * (a0 + 0.044715 * a0 * a0 * a0)))',
  silu: 'a0 / (1.0 + exp(-a0))', erf: 'erf_(a0)', reciprocal: '1.0 / a0',
  log1p: 'select(log(1.0 + a0), a0 * (1.0 - a0 * (0.5 - a0 / 3.0)), abs(a0) < 1e-4)',
  hardswish: 'a0 * min(max(a0 + 3.0, 0.0), 6.0) / 6.0', hardsigmoid: 'min(max(a0 + 3.0, 0.0), 6.0) / 6.0',
};
const I32_UNARY = { neg: '-a0', abs: 'abs(a0)', relu: 'max(a0, 0)', floor: 'a0', ceil: 'a0' };
const I64_UNARY = { neg: 'neg64(a0)', floor: 'a0', ceil: 'a0', relu: 'select(a0, vec2<u32>(0u, 0u), bitcast<i32>(a0.y) < 0)',
  abs: 'select(a0, neg64(a0), bitcast<i32>(a0.y) < 0)' };
const F32_BINARY = {
  add: 'a0 + a1', sub: 'a0 - a1', mul: 'a0 * a1', div: 'a0 / a1', maximum: 'max_(a0, a1)', minimum: 'min_(a0, a1)',
  pow: 'select(pow(a0, a1), 1.0, a1 == 0.0)', remainder: 'a0 - a1 * floor(a0 / a1)',
};
const I32_BINARY = { add: 'a0 + a1', sub: 'a0 - a1', mul: 'a0 * a1', maximum: 'max(a0, a1)', minimum: 'min(a0, a1)',
  trunc_divide: 'div32(a0, a1, 0u)', floor_divide: 'div32(a0, a1, 1u)', remainder: 'div32(a0, a1, 2u)', pow: 'pow32(a0, a1)' };
const I64_BINARY = {
  mul: 'mul64(a0, a1)', trunc_divide: 'div64(a0, a1, 0u)', floor_divide: 'div64(a0, a1, 1u)', remainder: 'div64(a0, a1, 2u)',
  pow: 'pow64(a0, a1)',
  add: 'add64(a0, a1)', sub: 'add64(a0, neg64(a1))', maximum: 'select(a0, a1, lt64(a0, a1))', minimum: 'select(a0, a1, lt64(a1, a0))',
};
const CMP = { eq: '==', ne: '!=', lt: '<', le: '<=', gt: '>', ge: '>=' };
const CMP64 = { eq: 'eq64(a0, a1)', ne: '!eq64(a0, a1)', lt: 'lt64(a0, a1)', le: '!lt64(a1, a0)', gt: 'lt64(a1, a0)', ge: '!lt64(a0, a1)' };

function castExpr(from, to) {
  if (from === to) return 'a0';
  const key = `${from}>${to}`;
  switch (key) {
    case 'float32>int32': return 'select(i32(a0), -2147483647 - 1, isnan_(a0) || a0 >= 2147483648.0 || a0 < -2147483648.0)';
    case 'float32>int64': return 'i64off32(a0)';
    case 'float32>bool': return 'select(0u, 1u, a0 != 0.0)';
    case 'int32>float32': return 'f32(a0)';
    case 'int32>int64': return 'i64of(a0)';
    case 'int32>bool': return 'select(0u, 1u, a0 != 0)';
    case 'int64>float32': return 'f32of64(a0)';
    case 'int64>int32': return 'bitcast<i32>(a0.x)';
    case 'int64>bool': return 'select(0u, 1u, a0.x != 0u || a0.y != 0u)';
    case 'bool>float32': return 'f32(a0)';
    case 'bool>int32': return 'i32(a0)';
    case 'bool>int64': return 'vec2<u32>(a0, 0u)';
  }
  return null;
}

const ELEMENTWISE_BINARY = new Set([...Object.keys(F32_BINARY), ...Object.keys(CMP), 'logical_and', 'logical_or', 'floor_divide',
  'trunc_divide']);
// isnan/isinf/isfinite are not run on WebGPU: WGSL lets an implementation assume finite floats, and
// SwiftShader's loads do not keep NaN's bits for the bit test below (programs with them run on wasm)
const ELEMENTWISE_UNARY = new Set([...Object.keys(F32_UNARY), 'logical_not']);

function binaryExpr(name, dt) {
  if (CMP[name]) return dt === 'int64' ? `select(0u, 1u, ${CMP64[name]})` : `select(0u, 1u, a0 ${CMP[name]} a1)`;
  if (name === 'logical_and' || name === 'logical_or') {
    const t = (a) => (dt === 'float32' ? `${a} != 0.0` : dt === 'int64' ? `(${a}.x | ${a}.y) != 0u`
      : dt === 'int32' ? `${a} != 0` : `${a} != 0u`);
    return `select(0u, 1u, (${t('a0')}) ${name === 'logical_and' ? '&&' : '||'} (${t('a1')}))`;
  }
  return { float32: F32_BINARY, int32: I32_BINARY, int64: I64_BINARY }[dt]?.[name] ?? null;
}

function unaryExpr(name, dt) {
  if (name === 'logical_not') {
    const t = dt === 'float32' ? 'a0 == 0.0' : dt === 'int64' ? '(a0.x | a0.y) == 0u' : dt === 'int32' ? 'a0 == 0' : 'a0 == 0u';
    return `select(0u, 1u, ${t})`;
  }
  if (name === 'isnan') return dt === 'float32' ? 'select(0u, 1u, isnan_(a0))' : null;
  if (name === 'isinf') return dt === 'float32' ? 'select(0u, 1u, (bitcast<u32>(a0) & 0x7fffffffu) == 0x7f800000u)' : null;
  if (name === 'isfinite') return dt === 'float32' ? 'select(0u, 1u, (bitcast<u32>(a0) & 0x7fffffffu) < 0x7f800000u)' : null;
  return { float32: F32_UNARY, int32: I32_UNARY, int64: I64_UNARY }[dt]?.[name] ?? null;
}

// ---- the compiler: op -> dispatches ----------------------------------------------------------------

/** An operand as the kernels address it: its buffer and element offset. `v` is a plan value
 * { dtype, region, offset, shape }; region 1 (constant) is in C, else M at `mBase[region]`. */
export function operand(v, mBase) {
  const src = v.region === 1 ? 'C' : 'M';
  const byte = (v.region === 1 ? 0 : mBase[v.region]) + v.offset;
  return { src, base: byte / SIZE[v.dtype], dtype: v.dtype, shape: v.shape };
}

/** A copy of x (strides over dims) into y (strides over dims), any dtype: one map dispatch. */
function copyDispatch(y, ys, x, xs, dims) {
  const types = [y.dtype, x.dtype], srcs = ['M', x.src];
  return mapDispatch(types, srcs, 'a0', null, dims, [], [{ base: y.base, strides: ys }, { base: x.base, strides: xs }]);
}

function mapDispatch(types, srcs, expr, reduce, dims, rdims, operands, extra = '') {
  const key = `map|${types}|${srcs}|${expr}|${reduce ? JSON.stringify(reduce) : ''}|${extra}`;
  return { key, code: () => mapCode(types, srcs, expr, reduce, extra), params: mapParams(dims, rdims, operands), count: numel(dims) };
}

function special(key, code, params, count) { return { key, code, params, count }; }

/** Why an op cannot run on WebGPU here (a short phrase), or null. `op` = { name, ins, outs, iattr,
 * fattr } with values resolved ({ dtype, shape, region }). */
export function unsupported(op) {
  const { name, ins, outs } = op;
  const d0 = ins[0]?.dtype, y = outs[0];
  const rank = Math.max(...ins.map((v) => v.shape.length), ...outs.map((v) => v.shape.length), 0);
  if (rank > MAXR) return `${name} (rank above 8)`;
  if (ELEMENTWISE_BINARY.has(name)) return binaryExpr(name, d0) ? null : `${name} (${d0})`;
  if (ELEMENTWISE_UNARY.has(name)) return unaryExpr(name, d0) ? null : `${name} (${d0})`;
  switch (name) {
    case 'where': case 'copy': case 'expand': case 'permute': case 'slice': case 'cat': case 'fill':
    case 'check_index': case 'index_select': case 'slice_scatter': case 'embedding_packed':
    case 'rms_norm': case 'layer_norm': case 'softmax': case 'log_softmax': case 'matmul': case 'matmul_packed':
      return null;
    case 'cast': return castExpr(d0, y.dtype) ? null : `cast (${d0} to ${y.dtype})`;
    case 'index_put': {
      if (op.iattr[1] && !['float32', 'int32', 'int64'].includes(ins[2].dtype)) return `index_put (accumulate, ${ins[2].dtype})`;
      const vals = ins[2], base = ins[0], dim = op.iattr[0];
      const want = base.shape.map((s, d) => (d === dim ? ins[1].shape[0] : s));
      return vals.shape.length === want.length && vals.shape.every((s, d) => s === want[d]) ? null : 'index_put (broadcast values)';
    }
    case 'sum': case 'mean': case 'amax': case 'amin':
      return d0 === 'float32' || (d0 === 'int64' && name !== 'mean') ? null : `${name} (${d0})`;
    case 'any': case 'all': return d0 === 'bool' ? null : `${name} (${d0})`;
    case 'argmax': case 'argmin': case 'topk': case 'sort': case 'cumsum':
      return ['float32', 'int64', 'int32'].includes(d0) ? null : `${name} (${d0})`;
    case 'gather': case 'scatter': case 'guard': case 'max_pool': case 'avg_pool': case 'matmul_q8': case 'matmul_q4':
    case 'embedding_q8': case 'embedding_q4':
      return null;
    case 'conv_transpose': return op.iattr[0] === 1 || op.iattr[0] === 2 ? null : 'conv_transpose (rank)';
    case 'attention': {
      const dv = ins[2].shape[ins[2].shape.length - 1], d = ins[0].shape[ins[0].shape.length - 1];
      return dv <= 256 && d <= 256 ? null : 'attention (head size above 256)';
    }
    case 'conv': return op.iattr[0] === 1 || op.iattr[0] === 2 ? null : 'conv (rank)';
  }
  return name;
}

/** The dispatches of one op. `A(v)` resolves a plan value to an operand. */
export function compile(op, A, opIndex) {
  const { name, iattr, fattr } = op;
  const ins = op.ins.map(A), outs = op.outs.map(A);
  const y = outs[0], yst = y ? contiguous(y.shape) : [];
  if (ELEMENTWISE_BINARY.has(name) || name === 'where') {
    const args = ins.map((x) => ({ base: x.base, strides: broadcastStrides(x.shape, y.shape) }));
    const expr = name === 'where' ? 'select(a2, a1, a0 != 0u)' : binaryExpr(name, ins[0].dtype);
    return [mapDispatch([y.dtype, ...ins.map((x) => x.dtype)], ['M', ...ins.map((x) => x.src)], expr, null, y.shape, [],
      [{ base: y.base, strides: yst }, ...args])];
  }
  if (ELEMENTWISE_UNARY.has(name) || name === 'cast') {
    const x = ins[0];
    const expr = name === 'cast' ? castExpr(x.dtype, y.dtype) : unaryExpr(name, x.dtype);
    return [mapDispatch([y.dtype, x.dtype], ['M', x.src], expr, null, [numel(y.shape)], [],
      [{ base: y.base, strides: [1] }, { base: x.base, strides: [1] }])];
  }
  switch (name) {
    case 'copy': return [copyDispatch(y, [1], ins[0], [1], [numel(y.shape)])];
    case 'expand': return [copyDispatch(y, yst, ins[0], broadcastStrides(ins[0].shape, y.shape), y.shape)];
    case 'permute': {
      const xs = contiguous(ins[0].shape);
      return [copyDispatch(y, yst, ins[0], iattr.map((p) => xs[p]), y.shape)];
    }
    case 'slice': {
      const [dim, start, step] = iattr, x = ins[0], xs = contiguous(x.shape);
      const sx = { ...x, base: x.base + start * xs[dim] };
      return [copyDispatch(y, yst, sx, xs.map((s, d) => (d === dim ? s * step : s)), y.shape)];
    }
    case 'cat': {
      const dim = iattr[0];
      let at = 0;
      const list = [];
      for (const x of ins) {
        if (numel(x.shape) > 0) list.push(copyDispatch({ ...y, base: y.base + at * yst[dim] }, yst, x, contiguous(x.shape), x.shape));
        at += x.shape[dim];
      }
      return list;
    }
    case 'fill': {
      const lit = y.dtype === 'float32' ? `bitcast<f32>(${f32bits(fattr[0])}u)` : y.dtype === 'int32' ? `${iattr[0] | 0}`
        : y.dtype === 'bool' ? `${iattr[0] ? 1 : 0}u` : i64lit(BigInt(iattr[0] ?? 0));
      return [mapDispatch([y.dtype], ['M'], lit, null, [numel(y.shape)], [], [{ base: y.base, strides: [1] }])];
    }
    case 'sum': case 'mean': case 'amax': case 'amin': case 'any': case 'all': {
      const x = ins[0], xs = contiguous(x.shape), red = new Set(iattr);
      const keep = x.shape.map((_, d) => d).filter((d) => !red.has(d));
      const dims = keep.map((d) => x.shape[d]), rdims = iattr.map((d) => x.shape[d]);
      const reduce = x.dtype === 'int64' ? {
        sum: { init: 'vec2<u32>(0u, 0u)', step: 'acc = add64(acc, a0);', fin: 'acc' },
        amax: { init: 'vec2<u32>(0u, 0x80000000u)', step: 'acc = select(acc, a0, lt64(acc, a0));', fin: 'acc' },
        amin: { init: 'vec2<u32>(0xffffffffu, 0x7fffffffu)', step: 'acc = select(acc, a0, lt64(a0, acc));', fin: 'acc' },
      }[name] : x.dtype === 'bool' ? {
        any: { init: '0u', step: 'acc = acc | a0;', fin: 'acc' }, all: { init: '1u', step: 'acc = acc & a0;', fin: 'acc' },
      }[name] : {
        sum: { init: '0.0', step: 'acc += a0;', fin: 'acc' }, mean: { init: '0.0', step: 'acc += a0;', fin: 'acc / f32(n)' },
        amax: { init: 'ninf_()', step: 'acc = max_(acc, a0);', fin: 'acc' },
        amin: { init: 'pinf_()', step: 'acc = min_(acc, a0);', fin: 'acc' },
      }[name];
      return [mapDispatch([x.dtype, x.dtype], ['M', x.src], '', reduce, dims, rdims,
        [{ base: y.base, strides: contiguous(dims) },
          { base: x.base, strides: keep.map((d) => xs[d]), rstrides: iattr.map((d) => xs[d]) }])];
    }
    case 'matmul': {
      const [a, b] = ins, r = y.shape.length, K = a.shape[a.shape.length - 1], N = y.shape[r - 1];
      const batch = y.shape.slice(0, r - 2);
      const bs = (x) => { // x's own strides over its batch dims, broadcast to y's (0 where x has 1 or lacks the dim)
        const xs = contiguous(x.shape), xr = x.shape.length - 2;
        return batch.map((n, d) => { const e = d - (batch.length - xr); return e < 0 || (x.shape[e] === 1 && n !== 1) ? 0 : xs[e]; });
      };
      const sa = [...bs(a), K, 0], sb = [...bs(b), 0, 1];
      return [mapDispatch(['float32', 'float32', 'float32'], ['M', a.src, b.src], '',
        { init: '0.0', step: 'acc = fma(a0, a1, acc);', fin: 'acc' },
        y.shape, [K], [{ base: y.base, strides: yst }, { base: a.base, strides: sa, rstrides: [1] },
          { base: b.base, strides: sb, rstrides: [N] }])];
    }
    case 'matmul_packed': {
      const [a, bp] = ins, K = a.shape[a.shape.length - 1], N = iattr[0], rows = numel(y.shape) / (N || 1);
      const code = () => header(false) + reader('ra', 'float32', a.src) + reader('rb', 'float32', bp.src) + writer('wr', 'float32') + MAIN(`
  let N = P[0]; let K = P[1];
  if (i >= P[2]) { return; }
  let r = i / N; let n = i % N;
  let pb = P[5] + (n / 8u) * K * 8u + (n % 8u); let pa = P[4] + r * K;
  var acc = 0.0;
  for (var k = 0u; k < K; k++) { acc = fma(ra(pa + k), rb(pb + k * 8u), acc); }
  wr(P[3] + i, acc);`);
      return [special(`mmp|${a.src}${bp.src}`, code, [N, K, rows * N, y.base, a.base, bp.base], rows * N)];
    }
    case 'embedding_packed': {
      const [bp, idx] = ins, N = iattr[0], K = y.shape[y.shape.length - 1], cnt = numel(idx.shape);
      const code = () => header(false) + reader('rb', 'float32', bp.src) + indexReader('ri', idx.dtype, idx.src) + writer('wr', 'float32')
        + MAIN(`
  let N = P[0]; let K = P[1];
  if (i >= P[2]) { return; }
  let j = i / K; let k = i % K;
  var t = ri(P[5] + j);
  if (t < 0 && t != -2147483647 - 1) { t += i32(N); }
  if (t < 0 || t >= i32(N)) { wr(P[3] + i, 0.0); return; }
  let n = u32(t);
  wr(P[3] + i, rb(P[4] + (n / 8u) * K * 8u + k * 8u + (n % 8u)));`);
      return [special(`emb|${bp.src}${idx.src}${idx.dtype}`, code, [N, K, cnt * K, y.base, bp.base, idx.base], cnt * K)];
    }
    case 'index_select': {
      const [x, idx] = ins, dim = iattr[0], n = x.shape[dim];
      const inner = numel(x.shape.slice(dim + 1)), cnt = numel(idx.shape), total = numel(y.shape);
      const code = () => header(y.dtype === 'bool') + reader('rx', x.dtype, x.src) + indexReader('ri', idx.dtype, idx.src)
        + writer('wr', y.dtype) + MAIN(`
  if (i >= P[0]) { return; }
  let n = P[1]; let inner = P[2]; let cnt = P[3];
  let o = i / (cnt * inner); let j = (i / inner) % cnt; let e = i % inner;
  var t = ri(P[6] + j);
  if (t < 0 && t != -2147483647 - 1) { t += i32(n); }
  if (t < 0 || t >= i32(n)) { wr(P[4] + i, ${zero(y.dtype)}); return; }
  wr(P[4] + i, rx(P[5] + (o * n + u32(t)) * inner + e));`);
      return [special(`isel|${x.dtype}${x.src}|${idx.dtype}${idx.src}`, code, [total, n, inner, cnt, y.base, x.base, idx.base], total)];
    }
    case 'index_put': {
      const [base, idx, vals] = ins, dim = iattr[0], n = base.shape[dim];
      const list = [];
      if (base.base !== y.base || base.src !== 'M') list.push(copyDispatch(y, [1], base, [1], [numel(y.shape)]));
      const inner = numel(base.shape.slice(dim + 1)), cnt = numel(idx.shape), total = numel(vals.shape);
      if (iattr[1]) { // accumulate: one thread per element of y, adding the values of every index equal to its row, in order
        const add = { float32: 'acc = acc + rv(vb);', int32: 'acc = acc + rv(vb);', int64: 'acc = add64(acc, rv(vb));' }[y.dtype];
        const ytotal = numel(y.shape);
        const acode = () => header(false) + MATH + reader('ry', y.dtype, 'M') + reader('rv', vals.dtype, vals.src)
          + indexReader('ri', idx.dtype, idx.src) + writer('wr', y.dtype) + MAIN(`
  if (i >= P[0]) { return; }
  let n = P[1]; let inner = P[2]; let cnt = P[3];
  let o = i / (n * inner); let row = (i / inner) % n; let e = i % inner;
  var acc = ry(P[4] + i);
  for (var j = 0u; j < cnt; j++) {
    var t = ri(P[6] + j);
    if (t < 0 && t != -2147483647 - 1) { t += i32(n); }
    if (t != i32(row)) { continue; }
    let vb = P[5] + (o * cnt + j) * inner + e;
    ${add}
  }
  wr(P[4] + i, acc);`);
        if (cnt > 0) list.push(special(`iputacc|${vals.dtype}${vals.src}|${idx.dtype}${idx.src}`, acode,
          [ytotal, n, inner, cnt, y.base, vals.base, idx.base], ytotal));
        return list;
      }
      const code = () => header(y.dtype === 'bool') + reader('rv', vals.dtype, vals.src) + indexReader('ri', idx.dtype, idx.src)
        + writer('wr', y.dtype) + MAIN(`
  if (i >= P[0]) { return; }
  let n = P[1]; let inner = P[2]; let cnt = P[3];
  let o = i / (cnt * inner); let j = (i / inner) % cnt; let e = i % inner;
  var t = ri(P[6] + j);
  if (t < 0 && t != -2147483647 - 1) { t += i32(n); }
  if (t < 0 || t >= i32(n)) { return; }
  wr(P[4] + (o * n + u32(t)) * inner + e, rv(P[5] + i));`);
      if (total > 0) list.push(special(`iput|${vals.dtype}${vals.src}|${idx.dtype}${idx.src}`, code,
        [total, n, inner, cnt, y.base, vals.base, idx.base], total));
      return list;
    }
    case 'slice_scatter': {
      const [base, src] = ins, [dim, start, step] = iattr, list = [];
      if (base.base !== y.base || base.src !== 'M') list.push(copyDispatch(y, [1], base, [1], [numel(y.shape)]));
      if (numel(src.shape) > 0) list.push(copyDispatch({ ...y, base: y.base + start * yst[dim] },
        yst.map((s, d) => (d === dim ? s * step : s)), src, contiguous(src.shape), src.shape));
      return list;
    }
    case 'check_index': {
      const [idx] = ins, n = iattr[0], cnt = numel(idx.shape);
      const code = () => header(false) + indexReader('ri', idx.dtype, idx.src) + MAIN(`
  if (i >= P[0]) { return; }
  let t = ri(P[2] + i);
  if (t == -2147483647 - 1 || t < -i32(P[1]) || t >= i32(P[1])) { atomicMax(&F[0], P[3]); }`);
      return cnt ? [special(`chk|${idx.dtype}${idx.src}`, code, [cnt, n, idx.base, opIndex + 1], cnt)] : [];
    }
    case 'softmax': case 'log_softmax': {
      const x = ins[0], dim = iattr[0] < 0 ? iattr[0] + x.shape.length : iattr[0];
      const L = x.shape[dim], inner = numel(x.shape.slice(dim + 1)), rows = numel(x.shape) / (L || 1);
      const log = name === 'log_softmax';
      const code = () => header(false) + MATH + reader('rx', 'float32', x.src) + writer('wr', 'float32') + MAIN(`
  if (i >= P[0]) { return; }
  let L = P[1]; let inner = P[2];
  let b = (i / inner) * L * inner + i % inner;
  var m = ninf_();
  for (var t = 0u; t < L; t++) { m = max_(m, rx(P[4] + b + t * inner)); }
  var s = 0.0;
  for (var t = 0u; t < L; t++) { s += exp(rx(P[4] + b + t * inner) - m); }
  for (var t = 0u; t < L; t++) { let v = rx(P[4] + b + t * inner) - m; wr(P[3] + b + t * inner, ${log ? 'v - log(s)' : 'exp(v) / s'}); }`);
      return [special(`${name}|${x.src}`, code, [rows, L, inner, y.base, x.base], rows)];
    }
    case 'rms_norm': case 'layer_norm': {
      const x = ins[0], r = x.shape.length;
      let ndim = 1, axis = r - 1, hasW = iattr[0], hasB = 0;
      if (name === 'layer_norm') {
        ndim = iattr[0]; hasW = iattr[1]; hasB = iattr[2];
        axis = iattr.length > 3 ? iattr[3] : r - ndim;
      }
      const S = numel(x.shape.slice(axis, axis + ndim)), inner = numel(x.shape.slice(axis + ndim)), rows = numel(x.shape) / (S || 1);
      const w = hasW ? ins[1] : null, bb = hasB ? ins[hasW ? 2 : 1] : null;
      const rms = name === 'rms_norm';
      const code = () => header(false) + reader('rx', 'float32', x.src) + (w ? reader('rw', 'float32', w.src) : '')
        + (bb ? reader('rb', 'float32', bb.src) : '') + writer('wr', 'float32') + MAIN(`
  if (i >= P[0]) { return; }
  let S = P[1]; let inner = P[2];
  let b = (i / inner) * S * inner + i % inner;
  var mean = 0.0;
  ${rms ? '' : 'for (var t = 0u; t < S; t++) { mean += rx(P[4] + b + t * inner); } mean = mean / f32(S);'}
  var v = 0.0;
  for (var t = 0u; t < S; t++) { let d = rx(P[4] + b + t * inner) - mean; v += d * d; }
  let inv = 1.0 / sqrt(v / f32(S) + bitcast<f32>(P[7]));
  for (var t = 0u; t < S; t++) {
    var o = (rx(P[4] + b + t * inner) - mean) * inv;
    ${w ? 'o = o * rw(P[5] + t);' : ''}
    ${bb ? 'o = o + rb(P[6] + t);' : ''}
    wr(P[3] + b + t * inner, o);
  }`);
      return [special(`${name}|${x.src}${w?.src}${bb?.src}`, code,
        [rows, S, inner, y.base, x.base, w?.base ?? 0, bb?.base ?? 0, f32bits(fattr[0])], rows)];
    }
    case 'argmax': case 'argmin': return [argExtreme(name === 'argmax', ins[0], y, iattr[0])];
    case 'cumsum': return [cumsum(ins[0], y, iattr[0])];
    case 'topk': return [select(ins[0], outs, iattr[0], iattr[1], iattr[2])];
    case 'sort': return [select(ins[0], outs, iattr[0], ins[0].shape[iattr[0]], iattr[1])];
    case 'gather': return [gather(ins[0], ins[1], y, iattr[0])];
    case 'scatter': {
      const list = [];
      if (ins[0].base !== y.base || ins[0].src !== 'M') list.push(copyDispatch(y, [1], ins[0], [1], [numel(y.shape)]));
      if (numel(ins[1].shape) > 0) list.push(scatter(ins[1], ins[2], y, iattr[0]));
      return list;
    }
    case 'guard': {
      const c = ins[0];
      const code = () => header(false) + reader('rc', 'bool', c.src) + MAIN(`
  if (i >= 1u) { return; }
  if (rc(P[1]) == 0u) { atomicMax(&F[0], P[0]); }`);
      return [special(`guard|${c.src}`, code, [opIndex + 1, c.base], 1)];
    }
    case 'max_pool': case 'avg_pool': return [pool(name === 'max_pool', ins[0], y, iattr)];
    case 'conv_transpose': return [convTranspose(ins, y, iattr)];
    case 'matmul_q8': case 'matmul_q4': return [matmulQ(name === 'matmul_q4', ins, y, iattr)];
    case 'embedding_q8': case 'embedding_q4': return [embeddingQ(name === 'embedding_q4', ins, y, iattr)];
    case 'attention': return attention(op, ins, y, iattr, fattr);
    case 'conv': return conv(ins, y, iattr);
  }
  throw new Error(`no WebGPU kernel for ${name}`);
}

function attention(op, ins, y, iattr, fattr) {
  const [q, k, v] = ins, mask = iattr[0] ? ins[3] : null, r = q.shape.length;
  const Tq = q.shape[r - 2], D = q.shape[r - 1], Tk = k.shape[r - 2], Dv = v.shape[r - 1];
  const H = r >= 3 ? q.shape[r - 3] : 1, Hkv = r >= 3 ? k.shape[r - 3] : 1, G = Math.max(1, H / Hkv);
  const heads = numel(q.shape.slice(0, r - 2));
  let mst = [];
  if (mask) mst = broadcastStrides(mask.shape, [...q.shape.slice(0, r - 1), Tk]);
  // mask offset of head index b: b unravelled over q's batch dims (rank r - 2)
  const bdims = q.shape.slice(0, r - 2);
  const code = () => header(false) + MATH + reader('rq', 'float32', q.src) + reader('rk', 'float32', k.src) + reader('rv', 'float32', v.src)
    + (mask ? reader('rm', mask.dtype, mask.src) : '') + writer('wr', 'float32') + MAIN(`
  if (i >= P[0]) { return; }
  let Tq = P[1]; let D = P[2]; let Tk = P[3]; let Dv = P[4]; let G = P[5]; let causal = P[6]; let scale = bitcast<f32>(P[7]);
  let b = i / Tq; let qi = i % Tq; let kvh = b / G;
  let qo = P[9] + (b * Tq + qi) * D; let ko = P[10] + kvh * Tk * D; let vo = P[11] + kvh * Tk * Dv;
  var mo = P[12] + qi * P[29];
  var rest = b;
  for (var dd = 0u; dd < P[14]; dd++) { let d = P[14] - 1u - dd; mo += (rest % P[15u + d]) * P[21u + d]; rest = rest / P[15u + d]; }
  var jend = Tk;
  if (causal != 0u && qi + 1u < Tk) { jend = qi + 1u; }
  var acc: array<f32, 256>;
  for (var e = 0u; e < Dv; e++) { acc[e] = 0.0; }
  var m = ninf_(); var s = 0.0;
  for (var j = 0u; j < jend; j++) {
    var sc = 0.0;
    for (var e = 0u; e < D; e++) { sc = fma(rq(qo + e), rk(ko + j * D + e), sc); }
    sc = sc * scale;
    ${mask ? (mask.dtype === 'bool' ? 'if (rm(mo + j * P[30]) == 0u) { continue; }' : 'sc = sc + rm(mo + j * P[30]);') : ''}
    if (sc == ninf_()) { continue; }
    let mn = max(m, sc);
    let c = exp(m - mn); let p = exp(sc - mn);
    s = s * c + p;
    for (var e = 0u; e < Dv; e++) { acc[e] = acc[e] * c + p * rv(vo + j * Dv + e); }
    m = mn;
  }
  let inv = select(0.0, 1.0 / s, s > 0.0);
  for (var e = 0u; e < Dv; e++) { wr(P[8] + (b * Tq + qi) * Dv + e, acc[e] * inv); }`);
  // params: 0 count, 1 Tq, 2 D, 3 Tk, 4 Dv, 5 G, 6 causal, 7 scale, 8 y, 9 q, 10 k, 11 v, 12 mask
  // base, 14 batch rank (at most 6), 15..20 batch dims, 21..26 the mask's strides over them, 29 its
  // query-row stride, 30 its key stride.
  const p = new Array(31).fill(0);
  p[0] = heads * Tq; p[1] = Tq; p[2] = D; p[3] = Tk; p[4] = Dv; p[5] = G; p[6] = iattr[1] ? 1 : 0; p[7] = f32bits(fattr[0]);
  p[8] = y.base; p[9] = q.base; p[10] = k.base; p[11] = v.base; p[12] = mask ? mask.base : 0;
  p[14] = bdims.length;
  bdims.forEach((d, j) => { p[15 + j] = d; });
  if (mask) {
    bdims.forEach((_, j) => { p[21 + j] = mst[j]; });
    p[29] = mst[r - 2]; p[30] = mst[r - 1];
  }
  if (bdims.length > 6) throw new Error('attention: rank above 8');
  return [special(`attn|${q.src}${k.src}${v.src}|${mask ? mask.dtype + mask.src : ''}`, code, p, heads * Tq)];
}

function conv(ins, y, iattr) {
  const [x, w] = ins, r = iattr[0], hasBias = iattr[1], groups = iattr[2];
  const stride = iattr.slice(3, 3 + r), padding = iattr.slice(3 + r, 3 + 2 * r), dilation = iattr.slice(3 + 2 * r, 3 + 3 * r);
  const act = iattr.length > 3 + 3 * r ? iattr[3 + 3 * r] : 0;
  const bias = hasBias ? ins[2] : null;
  const [N, Cin] = x.shape, O = y.shape[1];
  const H = r === 2 ? x.shape[2] : 1, W = x.shape[r + 1], OH = r === 2 ? y.shape[2] : 1, OW = y.shape[r + 1];
  const KH = r === 2 ? w.shape[2] : 1, KW = w.shape[r + 1], Cg = Cin / groups, Og = O / groups;
  const [sh, sw] = r === 2 ? stride : [1, stride[0]], [ph, pw] = r === 2 ? padding : [0, padding[0]];
  const [dh, dw] = r === 2 ? dilation : [1, dilation[0]];
  // the conv activations of src/kernels/conv.c: none, relu, hardswish, elu (alpha 1: max(y, exp(min(y, 0)) - 1))
  const actExpr = ['acc', 'max(acc, 0.0)', 'acc * min(max(acc + 3.0, 0.0), 6.0) / 6.0', 'max(acc, exp(min(acc, 0.0)) - 1.0)'][act];
  if (actExpr === undefined) throw new Error(`conv: activation ${act} has no WebGPU kernel`);
  const total = N * O * OH * OW;
  const code = () => header(false) + reader('rx', 'float32', x.src) + reader('rw', 'float32', w.src)
    + (bias ? reader('rb', 'float32', bias.src) : '') + writer('wr', 'float32') + MAIN(`
  if (i >= P[0]) { return; }
  let OW = P[1]; let OH = P[2]; let O = P[3]; let Cg = P[4]; let Og = P[5]; let H = P[6]; let W = P[7]; let KH = P[8]; let KW = P[9];
  let ow = i % OW; let oh = (i / OW) % OH; let o = (i / (OW * OH)) % O; let nb = i / (OW * OH * O);
  let grp = o / Og;
  var acc = ${bias ? 'rb(P[19] + o)' : '0.0'};
  for (var c = 0u; c < Cg; c++) {
    let ci = grp * Cg + c;
    for (var kh = 0u; kh < KH; kh++) {
      let ih = i32(oh * P[10] + kh * P[12]) - i32(P[14]);
      if (ih < 0 || ih >= i32(H)) { continue; }
      for (var kw = 0u; kw < KW; kw++) {
        let iw = i32(ow * P[11] + kw * P[13]) - i32(P[15]);
        if (iw < 0 || iw >= i32(W)) { continue; }
        acc = fma(rx(P[17] + ((nb * P[20] + ci) * H + u32(ih)) * W + u32(iw)), rw(P[18] + ((o * Cg + c) * KH + kh) * KW + kw), acc);
      }
    }
  }
  wr(P[16] + i, ${actExpr});`);
  return [special(`conv|${x.src}${w.src}${bias?.src}|${act}`, code,
    [total, OW, OH, O, Cg, Og, H, W, KH, KW, sh, sw, dh, dw, ph, pw, y.base, x.base, w.base, bias?.base ?? 0, Cin], total)];
}

const zero = (dt) => ({ float32: '0.0', int32: '0', bool: '0u', int64: 'vec2<u32>(0u, 0u)' }[dt]);
const f32buf = new Float32Array(1), u32buf = new Uint32Array(f32buf.buffer);
function f32bits(x) {
  f32buf[0] = x;
  return u32buf[0];
}
function i64lit(v) {
  const u = BigInt.asUintN(64, v);
  return `vec2<u32>(${Number(u & 0xffffffffn)}u, ${Number(u >> 32n)}u)`;
}

// ---- selection, scans, gather/scatter, pooling, transposed conv, quantized weights ---------------

/** x viewed as [outer, n, inner] around dim d. */
function around(shape, d) {
  return { outer: numel(shape.slice(0, d)), n: shape[d], inner: numel(shape.slice(d + 1)) };
}

/** WGSL of an ordered element type: ld(e) -> T (float32 as its bits, so NaN is tested on the bits:
 * SwiftShader does not keep a NaN's bits through f32 loads), st(e, v), isn(v), gt(a, b), eqv(a, b). */
function ordered(dtype, src) {
  const w = src === 'C' ? 'cw' : 'mw';
  if (dtype === 'float32') return `fn ld(e: u32) -> u32 { return ${w}(e); }
fn st(e: u32, v: u32) { M[e] = v; }
fn isn(a: u32) -> bool { return (a & 0x7fffffffu) > 0x7f800000u; }
fn gt(a: u32, b: u32) -> bool { return bitcast<f32>(a) > bitcast<f32>(b); }
fn eqv(a: u32, b: u32) -> bool { return bitcast<f32>(a) == bitcast<f32>(b); }
`;
  if (dtype === 'int32') return `${reader('ld', 'int32', src)}${writer('st', 'int32')}fn isn(a: i32) -> bool { return false; }
fn gt(a: i32, b: i32) -> bool { return a > b; }
fn eqv(a: i32, b: i32) -> bool { return a == b; }
`;
  return `${reader('ld', 'int64', src)}${writer('st', 'int64')}fn isn(a: vec2<u32>) -> bool { return false; }
fn gt(a: vec2<u32>, b: vec2<u32>) -> bool { return lt64(b, a); }
fn eqv(a: vec2<u32>, b: vec2<u32>) -> bool { return eq64(a, b); }
`;
}

/** argmax/argmin along dim (src/kernels/reduce.c): the first index of the extreme; a NaN wins at once. */
function argExtreme(isMax, x, y, dim) {
  const { n, inner } = around(x.shape, dim), rows = numel(x.shape) / (n || 1);
  const code = () => header(false) + MATH + ordered(x.dtype, x.src) + writer('wi', 'int64') + MAIN(`
  if (i >= P[0]) { return; }
  let n = P[1]; let inner = P[2];
  let b = P[4] + (i / inner) * n * inner + i % inner;
  var bv = ld(b); var best = 0u;
  for (var t = 1u; t < n && !isn(bv); t++) {
    let v = ld(b + t * inner);
    if (isn(v) || ${isMax ? 'gt(v, bv)' : 'gt(bv, v)'}) { bv = v; best = t; }
  }
  wi(P[3] + i, vec2<u32>(best, 0u));`);
  return special(`arg${isMax}|${x.dtype}${x.src}`, code, [rows, n, inner, y.base, x.base], rows);
}

/** cumsum along dim: float32 with a compensated sum (the wasm kernel sums in double), integers wrapping. */
function cumsum(x, y, dim) {
  const { n, inner } = around(x.shape, dim), rows = numel(x.shape) / (n || 1);
  const step = {
    float32: 'let v = rx(b + t * inner) - c; let s2 = acc + v; c = (s2 - acc) - v; acc = s2;',
    int32: 'acc = acc + rx(b + t * inner);', int64: 'acc = add64(acc, rx(b + t * inner));',
  }[x.dtype];
  const code = () => header(false) + MATH + reader('rx', x.dtype, x.src) + writer('wr', y.dtype) + MAIN(`
  if (i >= P[0]) { return; }
  let n = P[1]; let inner = P[2];
  let off = (i / inner) * n * inner + i % inner; let b = P[4] + off;
  var acc = ${zero(x.dtype)}; var c = 0.0;
  for (var t = 0u; t < n; t++) { ${step} wr(P[3] + off + t * inner, acc); }`);
  return special(`cumsum|${x.dtype}${x.src}`, code, [rows, n, inner, y.base, x.base], rows);
}

/** topk / sort along dim: per row, k passes, each the best element after the previous one in the
 * total order of src/kernels/select.c (value, then the lower index; NaN above every number). */
function select(x, outs, dim, k, largest) {
  const [vals, ids] = outs, { n, inner } = around(x.shape, dim), rows = numel(x.shape) / (n || 1);
  const code = () => header(false) + MATH + ordered(x.dtype, x.src) + writer('wi', 'int64') + `
fn better(a: ${x.dtype === 'float32' ? 'u32' : x.dtype === 'int32' ? 'i32' : 'vec2<u32>'}, ia: u32, b: ${x.dtype === 'float32'
    ? 'u32' : x.dtype === 'int32' ? 'i32' : 'vec2<u32>'}, ib: u32, largest: bool) -> bool {
  let an = isn(a); let bn = isn(b);
  if (an || bn) { if (an && bn) { return ia < ib; } return select(bn, an, largest); }
  if (!eqv(a, b)) { return select(gt(b, a), gt(a, b), largest); }
  return ia < ib;
}
` + MAIN(`
  if (i >= P[0]) { return; }
  let n = P[1]; let inner = P[2]; let k = P[3]; let largest = P[7] != 0u;
  let o = i / inner; let j = i % inner;
  let xb = P[6] + o * n * inner + j; let yo = o * k * inner + j;
  var pv = ld(xb); var pi = 0u;
  for (var p = 0u; p < k; p++) {
    var bv = ld(xb); var bi = 0xffffffffu;
    for (var t = 0u; t < n; t++) {
      let v = ld(xb + t * inner);
      if (p > 0u && !better(pv, pi, v, t, largest)) { continue; }
      if (bi == 0xffffffffu || better(v, t, bv, bi, largest)) { bv = v; bi = t; }
    }
    st(P[4] + yo + p * inner, bv); wi(P[5] + yo + p * inner, vec2<u32>(bi, 0u));
    pv = bv; pi = bi;
  }`);
  return special(`select|${x.dtype}${x.src}`, code, [rows, n, inner, k, vals.base, ids.base, x.base, largest ? 1 : 0], k > 0 ? rows : 0);
}

/** Params shared by gather and scatter: count, rank, dim, n, then index's dims [8] and x's (or y's) strides [8]. */
function gatherParams(idx, x, dim, bases) {
  return [numel(idx.shape), idx.shape.length, dim, x.shape[dim], ...bases, ...pad(idx.shape, 1), ...pad(contiguous(x.shape), 0)];
}
const UNRAVEL = `
  var rem = i; var off = 0u; var cd = 0u;
  for (var dd = 0u; dd < P[1]; dd++) {
    let d = P[1] - 1u - dd; let c = rem % P[8u + d]; rem = rem / P[8u + d];
    if (d == P[2]) { cd = c; } else { off += c * P[16u + d]; }
  }`;

/** gather: y (index's shape) = x[.., index[..], ..] along dim. */
function gather(x, idx, y, dim) {
  const code = () => header(y.dtype === 'bool') + reader('rx', x.dtype, x.src) + indexReader('ri', idx.dtype, idx.src)
    + writer('wr', y.dtype) + MAIN(`
  if (i >= P[0]) { return; }${UNRAVEL}
  var t = ri(P[6] + i);
  if (t < 0 && t != -2147483647 - 1) { t += i32(P[3]); }
  if (t < 0 || t >= i32(P[3])) { wr(P[4] + i, ${zero(y.dtype)}); return; }
  wr(P[4] + i, rx(P[5] + off + u32(t) * P[16u + P[2]]));`);
  return special(`gather|${x.dtype}${x.src}|${idx.dtype}${idx.src}`, code, gatherParams(idx, x, dim, [y.base, x.base, idx.base, 0]),
    numel(idx.shape));
}

/** scatter into y (already base's copy): y[.., index[..], ..] = src[..]; where indices repeat
 * along dim the last one wins (each thread yields to a later equal index). */
function scatter(idx, src, y, dim) {
  const code = () => header(y.dtype === 'bool') + reader('rs', src.dtype, src.src) + indexReader('ri', idx.dtype, idx.src)
    + writer('wr', y.dtype) + MAIN(`
  if (i >= P[0]) { return; }${UNRAVEL}
  let n = i32(P[3]);
  var t = ri(P[6] + i);
  if (t < 0 && t != -2147483647 - 1) { t += n; }
  if (t < 0 || t >= n) { return; }
  var istride = 1u;
  for (var d = P[2] + 1u; d < P[1]; d++) { istride *= P[8u + d]; }
  for (var c2 = cd + 1u; c2 < P[8u + P[2]]; c2++) {
    var t2 = ri(P[6] + i + (c2 - cd) * istride);
    if (t2 < 0 && t2 != -2147483647 - 1) { t2 += n; }
    if (t2 == t) { return; }
  }
  wr(P[4] + off + u32(t) * P[16u + P[2]], rs(P[5] + i));`);
  return special(`scatter|${src.dtype}${src.src}|${idx.dtype}${idx.src}`, code, gatherParams(idx, y, dim, [y.base, src.base, idx.base, 0]),
    numel(idx.shape));
}

/** max_pool / avg_pool (floor mode): one thread per output; the max lets a NaN through, the mean
 * divides by the taps inside (or, with count_include_pad, the window clipped to the padded input). */
function pool(isMax, x, y, iattr) {
  const r = iattr[0], k = iattr.slice(1, 1 + r), st = iattr.slice(1 + r, 1 + 2 * r), pd = iattr.slice(1 + 2 * r, 1 + 3 * r);
  const dl = iattr.slice(1 + 3 * r, 1 + 4 * r), incl = iattr[1 + 4 * r] ? 1 : 0;
  const two = (a, one) => (r === 2 ? a : [one, a[0]]);
  const [KH, KW] = two(k, 1), [sh, sw] = two(st, 1), [ph, pw] = two(pd, 0), [dh, dw] = two(dl, 1);
  const H = r === 2 ? x.shape[2] : 1, W = x.shape[r + 1], OH = r === 2 ? y.shape[2] : 1, OW = y.shape[r + 1];
  const total = numel(y.shape);
  const code = () => header(false) + MATH + `fn rx(e: u32) -> u32 { return ${x.src === 'C' ? 'cw' : 'mw'}(e); }\n` + writer('wr', 'float32')
    + MAIN(`
  if (i >= P[0]) { return; }
  let OW = P[1]; let OH = P[2]; let H = P[3]; let W = P[4];
  let ow = i % OW; let oh = (i / OW) % OH; let nc = i / (OW * OH);
  let xb = P[15] + nc * H * W;
  var acc = ${isMax ? 'ninf_()' : '0.0'}; var accb = 0u; var nan = false; var count = 0;
  let h0 = i32(oh * P[7]) - i32(P[9]); let w0 = i32(ow * P[8]) - i32(P[10]);
  for (var kh = 0u; kh < P[5]; kh++) {
    let ih = h0 + i32(kh * P[11]);
    if (ih < 0 || ih >= i32(H)) { continue; }
    for (var kw = 0u; kw < P[6]; kw++) {
      let iw = w0 + i32(kw * P[12]);
      if (iw < 0 || iw >= i32(W)) { continue; }
      let b = rx(xb + u32(ih) * W + u32(iw)); let v = bitcast<f32>(b);
      ${isMax ? 'if (!nan && ((b & 0x7fffffffu) > 0x7f800000u || v > acc)) { acc = v; accb = b; nan = (b & 0x7fffffffu) > 0x7f800000u; }'
    : 'acc += v;'}
      count++;
    }
  }
  ${isMax ? 'if (nan) { M[P[14] + i] = accb; return; }' : `
  var div = count;
  if (P[13] != 0u) {
    let h1 = min(h0 + i32(P[5]), i32(H + P[9])); let w1 = min(w0 + i32(P[6]), i32(W + P[10]));
    div = (h1 - h0) * (w1 - w0);
  }
  acc = select(0.0, acc / f32(div), div != 0);`}
  wr(P[14] + i, acc);`);
  return special(`pool${isMax}|${x.src}`, code, [total, OW, OH, H, W, KH, KW, sh, sw, ph, pw, dh, dw, incl, y.base, x.base], total);
}

/** conv_transpose: one thread per output, summing the input positions and taps that land on it;
 * wt is [groups, Og·KH·KW, Cg] (src/kernels/conv.c). */
function convTranspose(ins, y, iattr) {
  const [x, wt] = ins, r = iattr[0], hasBias = iattr[1], groups = iattr[2];
  const at = (j) => iattr.slice(3 + j * r, 3 + (j + 1) * r);
  const two = (a, one) => (r === 2 ? a : [one, a[0]]);
  const [KH, KW] = two(at(0), 1), [sh, sw] = two(at(1), 1), [ph, pw] = two(at(2), 0), [dh, dw] = two(at(3), 1);
  const bias = hasBias ? ins[2] : null, [, C] = x.shape, O = y.shape[1];
  const H = r === 2 ? x.shape[2] : 1, W = x.shape[r + 1], OH = r === 2 ? y.shape[2] : 1, OW = y.shape[r + 1];
  const Cg = C / groups, Og = O / groups, total = numel(y.shape);
  const code = () => header(false) + reader('rx', 'float32', x.src) + reader('rw', 'float32', wt.src)
    + (bias ? reader('rb', 'float32', bias.src) : '') + writer('wr', 'float32') + MAIN(`
  if (i >= P[0]) { return; }
  let OW = P[1]; let OH = P[2]; let O = P[3]; let Cg = P[4]; let Og = P[5]; let H = P[6]; let W = P[7]; let KH = P[8]; let KW = P[9];
  let ow = i % OW; let oh = (i / OW) % OH; let o = (i / (OW * OH)) % O; let nb = i / (OW * OH * O);
  let gi = o / Og; let ol = o % Og;
  var acc = ${bias ? 'rb(P[19] + o)' : '0.0'};
  for (var kh = 0u; kh < KH; kh++) {
    let th = i32(oh + P[14]) - i32(kh * P[12]);
    if (th < 0 || th % i32(P[10]) != 0 || th / i32(P[10]) >= i32(H)) { continue; }
    let ih = u32(th) / P[10];
    for (var kw = 0u; kw < KW; kw++) {
      let tw = i32(ow + P[15]) - i32(kw * P[13]);
      if (tw < 0 || tw % i32(P[11]) != 0 || tw / i32(P[11]) >= i32(W)) { continue; }
      let iw = u32(tw) / P[11];
      let wb = P[18] + ((gi * Og + ol) * KH * KW + kh * KW + kw) * Cg;
      let xb = P[17] + ((nb * P[20] + gi * Cg) * H + ih) * W + iw;
      for (var c = 0u; c < Cg; c++) { acc = fma(rx(xb + c * H * W), rw(wb + c), acc); }
    }
  }
  wr(P[16] + i, acc);`);
  return special(`convt|${x.src}${wt.src}${bias?.src}`, code,
    [total, OW, OH, O, Cg, Og, H, W, KH, KW, sh, sw, dh, dw, ph, pw, y.base, x.base, wt.base, bias?.base ?? 0, C], total);
}

/** Byte and nibble readers of int8 / int4x2 weights (element e = byte e of the buffer). */
function byteReaders(src) {
  const w = src === 'C' ? 'cw' : 'mw';
  return `fn rbyte(e: u32) -> u32 { return (${w}(e >> 2u) >> ((e & 3u) * 8u)) & 0xffu; }
fn rq8(e: u32) -> i32 { return bitcast<i32>(rbyte(e) << 24u) >> 24u; }
fn rq4(e: u32, hi: u32) -> i32 { return bitcast<i32>(((rbyte(e) >> (hi * 4u)) & 0xfu) << 28u) >> 28u; }
`;
}

/** matmul_q8 / matmul_q4 (docs/ops.md, Quantized weights): one thread per output, the weights
 * dequantized as they are read. matmul_q8 with one row of K <= 8192 finite values quantizes the row
 * to int8 per block of 32 and sums in int32 per block, as the wasm kernel does (the same values up
 * to float32 rounding). */
function matmulQ(q4, ins, y, iattr) {
  const [a, q, sc] = ins, K = a.shape[a.shape.length - 1], N = iattr[0], G = q4 ? iattr[1] : 0, rows = numel(a.shape) / (K || 1);
  const total = rows * N, dot = !q4 && rows === 1 && K <= 8192 ? 1 : 0;
  const body = q4 ? `
  let KB = (K + 1u) / 2u; let G = P[7]; let NG = (K + G - 1u) / G;
  let col = P[5] + (j / 8u) * KB * 8u + j % 8u; let scb = P[6] + (j / 8u) * NG * 8u + j % 8u;
  var acc = 0.0;
  for (var g = 0u; g < NG; g++) {
    var s = 0.0;
    for (var k = g * G; k < min(K, g * G + G); k++) { s = fma(ra(pa + k), f32(rq4(col + (k / 2u) * 8u, k & 1u)), s); }
    acc += s * rs(scb + g * 8u);
  }
  wr(P[3] + i, acc);` : `
  let col = P[5] + (j / 8u) * K * 8u + j % 8u;
  if (P[7] != 0u) {
    var finite = true;
    for (var k = 0u; k < K; k++) { if ((raw(pa + k) & 0x7fffffffu) >= 0x7f800000u) { finite = false; } }
    if (finite) {
      var acc = 0.0;
      for (var k0 = 0u; k0 < K; k0 += 32u) {
        let k1 = min(K, k0 + 32u);
        var m = 0.0;
        for (var k = k0; k < k1; k++) { m = max(m, abs(ra(pa + k))); }
        let d = m / 127.0;
        var s = 0;
        for (var k = k0; k < k1; k++) {
          let xq = select(0.0, clamp(round(ra(pa + k) / d), -127.0, 127.0), d > 0.0);
          s += i32(xq) * rq8(col + k * 8u);
        }
        acc = acc + f32(s) * d;
      }
      wr(P[3] + i, acc * rs(P[6] + j));
      return;
    }
  }
  var acc = 0.0;
  for (var k = 0u; k < K; k++) { acc = fma(ra(pa + k), f32(rq8(col + k * 8u)), acc); }
  wr(P[3] + i, acc * rs(P[6] + j));`;
  const code = () => header(false) + reader('ra', 'float32', a.src) + reader('rs', 'float32', sc.src) + byteReaders(q.src)
    + `fn raw(e: u32) -> u32 { return ${a.src === 'C' ? 'cw' : 'mw'}(e); }\n` + writer('wr', 'float32') + MAIN(`
  if (i >= P[2]) { return; }
  let N = P[0]; let K = P[1];
  let r = i / N; let j = i % N; let pa = P[4] + r * K;${body}`);
  return special(`mmq${q4 ? 4 : 8}|${a.src}${q.src}${sc.src}`, code, [N, K, total, y.base, a.base, q.base, sc.base, q4 ? G : dot], total);
}

/** embedding_q8 / embedding_q4: rows of the table the quantized weights hold, dequantized. */
function embeddingQ(q4, ins, y, iattr) {
  const [q, sc, idx] = ins, N = iattr[0], G = q4 ? iattr[1] : 1, K = y.shape[y.shape.length - 1], total = numel(y.shape);
  const code = () => header(false) + reader('rs', 'float32', sc.src) + byteReaders(q.src) + indexReader('ri', idx.dtype, idx.src)
    + writer('wr', 'float32') + MAIN(`
  if (i >= P[2]) { return; }
  let N = P[0]; let K = P[1]; let G = P[7];
  let row = i / K; let k = i % K;
  var t = ri(P[6] + row);
  if (t < 0 && t != -2147483647 - 1) { t += i32(N); }
  if (t < 0 || t >= i32(N)) { wr(P[3] + i, 0.0); return; }
  let n = u32(t);
  ${q4 ? `let KB = (K + 1u) / 2u; let NG = (K + G - 1u) / G;
  wr(P[3] + i, f32(rq4(P[4] + (n / 8u) * KB * 8u + (k / 2u) * 8u + n % 8u, k & 1u)) * rs(P[5] + (n / 8u) * NG * 8u + (k / G) * 8u + n % 8u));`
    : 'wr(P[3] + i, f32(rq8(P[4] + (n / 8u) * K * 8u + k * 8u + n % 8u)) * rs(P[5] + n));'}`);
  return special(`embq${q4 ? 4 : 8}|${q.src}${sc.src}|${idx.dtype}${idx.src}`, code, [N, K, total, y.base, q.base, sc.base, idx.base, G], total);
}
