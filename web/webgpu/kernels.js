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
const SIZE = { float32: 4, int32: 4, int64: 8, bool: 1 };

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
const I32_BINARY = { add: 'a0 + a1', sub: 'a0 - a1', mul: 'a0 * a1', maximum: 'max(a0, a1)', minimum: 'min(a0, a1)' };
const I64_BINARY = {
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

const ELEMENTWISE_BINARY = new Set([...Object.keys(F32_BINARY), ...Object.keys(CMP), 'logical_and', 'logical_or']);
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
      if (op.iattr[1]) return 'index_put (accumulate)';
      const vals = ins[2], base = ins[0], dim = op.iattr[0];
      const want = base.shape.map((s, d) => (d === dim ? ins[1].shape[0] : s));
      return vals.shape.length === want.length && vals.shape.every((s, d) => s === want[d]) ? null : 'index_put (broadcast values)';
    }
    case 'sum': case 'mean': case 'amax': case 'amin':
      return d0 === 'float32' ? null : `${name} (${d0})`;
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
    case 'sum': case 'mean': case 'amax': case 'amin': {
      const x = ins[0], xs = contiguous(x.shape), red = new Set(iattr);
      const keep = x.shape.map((_, d) => d).filter((d) => !red.has(d));
      const dims = keep.map((d) => x.shape[d]), rdims = iattr.map((d) => x.shape[d]);
      const reduce = {
        sum: { init: '0.0', step: 'acc += a0;', fin: 'acc' }, mean: { init: '0.0', step: 'acc += a0;', fin: 'acc / f32(n)' },
        amax: { init: 'ninf_()', step: 'acc = max_(acc, a0);', fin: 'acc' },
        amin: { init: 'pinf_()', step: 'acc = min_(acc, a0);', fin: 'acc' },
      }[name];
      return [mapDispatch(['float32', 'float32'], ['M', x.src], '', reduce, dims, rdims,
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
