/* format.c — the only reader of .tandem files: parses and fully verifies a file into a
 * tdm_program. docs/format.md is the byte layout and the list of invariants checked here. */
#include "ops.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tandem reads little-endian files in place; a big-endian host needs byte swapping"
#endif

/* Section ids, record sizes and alignment come from python/tandem/schema.py (src/schema.h); the reads
 * below take each record field by field, in the order these sums spell out. */
_Static_assert(TDM_HEADER_SIZE == 4 + 4 + 8 + 4 + 4 + 8, "header layout");
_Static_assert(TDM_SECTION_SIZE == 4 + 4 + 8 + 8, "section entry layout");
_Static_assert(TDM_CONSTANT_SIZE == 4 + 1 + 1 + 2 + 8 + 8, "constant layout");
_Static_assert(TDM_STATES_HEAD_SIZE == 8 + 4 && TDM_STATE_SIZE == 4 + 1 + 1 + 1 + 1 + 8 + 8 + 8, "state layout");
_Static_assert(TDM_METHOD_SIZE == 6 * 4 + 8, "method layout");
_Static_assert(TDM_VALUE_SIZE == 1 + 1 + 1 + 1 + 4 + 8 && TDM_IO_SIZE == 4 + 4, "value and io layout");
_Static_assert(TDM_OP_HEADER_SIZE == 4 + 4 * 2, "op layout");
#define MAX_METHODS 4096
#define MAX_IO 1024

static const char *const section_names[] = TDM_SECTION_NAMES;
#define OLDEST_VERSION 1 /* version 1: no metadata section; version 2: no dims */

/* A bounded cursor over one section. Reads past the end set `bad` and return 0. */
typedef struct rd {
  const uint8_t *p;
  size_t n, pos;
  bool bad;
  const char *what;
} rd;

static bool rd_take(rd *r, void *dst, size_t k) {
  if (r->bad || k > r->n - r->pos) {
    r->bad = true;
    return false;
  }
  memcpy(dst, r->p + r->pos, k);
  r->pos += k;
  return true;
}
static uint8_t rd_u8(rd *r) { uint8_t v = 0; rd_take(r, &v, 1); return v; }
static uint16_t rd_u16(rd *r) { uint16_t v = 0; rd_take(r, &v, 2); return v; }
static uint32_t rd_u32(rd *r) { uint32_t v = 0; rd_take(r, &v, 4); return v; }
static uint64_t rd_u64(rd *r) { uint64_t v = 0; rd_take(r, &v, 8); return v; }
static size_t rd_left(const rd *r) { return r->n - r->pos; }

static tdm_status truncated(const rd *r) {
  return tdm__fail(TDM_ERR_TRUNCATED, "the %s section ends before the data it declares (at byte %zu of %zu): the file is truncated or corrupt",
                   r->what, r->pos, r->n);
}

/* dtype, rank and dims; numel and nbytes computed with overflow checks. */
static tdm_status read_shape(rd *r, int dtype, int rank, tdm_shape *s, int64_t *numel, size_t *nbytes, const char *ctx) {
  if (tdm_dtype_size(dtype) == 0) return tdm__fail(TDM_ERR_MALFORMED, "%s: unknown dtype %d", ctx, dtype);
  if (rank > TDM_MAX_RANK) return tdm__fail(TDM_ERR_MALFORMED, "%s: rank %d is above the maximum %d", ctx, rank, TDM_MAX_RANK);
  s->rank = rank;
  size_t n = 1;
  for (int i = 0; i < rank; i++) {
    uint64_t d = rd_u64(r);
    if (r->bad) return truncated(r);
    if (d > (uint64_t)INT64_MAX) return tdm__fail(TDM_ERR_MALFORMED, "%s: dim %d is negative", ctx, i);
    if (d > SIZE_MAX || !tdm__mul_size(n, (size_t)d, &n))
      return tdm__fail(TDM_ERR_MALFORMED, "%s: the element count overflows", ctx);
    s->dims[i] = (int64_t)d;
  }
  for (int i = rank; i < TDM_MAX_RANK; i++) s->dims[i] = 0;
  if (n > (size_t)INT64_MAX || !tdm__mul_size(n, tdm_dtype_size(dtype), nbytes))
    return tdm__fail(TDM_ERR_MALFORMED, "%s: the byte size overflows", ctx);
  *numel = (int64_t)n;
  return TDM_OK;
}

static bool range_inside(uint64_t off, uint64_t len, uint64_t total) { return off <= total && len <= total - off; }

static bool ranges_overlap(size_t a, size_t an, size_t b, size_t bn) {
  return an != 0 && bn != 0 && a < b + bn && b < a + an;
}

typedef struct counts {
  size_t values, ios, ops, refs, iattrs, fattrs, dims, syms, terms;
} counts;

/* Pass 1 over the methods section: bounds, counts, totals for the arena. Nothing is stored. */
static tdm_status count_methods(rd r, uint32_t n_methods, uint32_t version, counts *c) {
  for (uint32_t mi = 0; mi < n_methods; mi++) {
    uint32_t hdr[6];
    for (int i = 0; i < 6; i++) hdr[i] = rd_u32(&r);
    rd_u64(&r);
    if (r.bad) return truncated(&r);
    const uint32_t nv = hdr[1], ni = hdr[2], no = hdr[3], nops = hdr[4];
    if (ni > MAX_IO || no > MAX_IO) return tdm__fail(TDM_ERR_LIMIT, "method %u declares more than %d inputs or outputs", mi, MAX_IO);
    /* each value takes >= 16 bytes, each io 8, each op 12: counts are bounded by the section */
    if (nv > rd_left(&r) / TDM_VALUE_SIZE || nops > rd_left(&r) / TDM_OP_HEADER_SIZE || (size_t)ni + no > rd_left(&r) / TDM_IO_SIZE)
      return truncated(&r);
    for (uint32_t v = 0; v < nv; v++) {
      rd_u8(&r);
      const uint8_t rank = rd_u8(&r);
      rd_u16(&r);
      rd_u32(&r);
      rd_u64(&r);
      if (r.bad) return truncated(&r);
      if (rank > TDM_MAX_RANK) return tdm__fail(TDM_ERR_MALFORMED, "method %u value %u: rank %u is above the maximum %d", mi, v, rank, TDM_MAX_RANK);
      if ((size_t)rank * 8 > rd_left(&r)) return truncated(&r);
      r.pos += (size_t)rank * 8;
    }
    if ((size_t)(ni + no) * 8 > rd_left(&r)) return truncated(&r);
    r.pos += (size_t)(ni + no) * 8;
    for (uint32_t k = 0; k < nops; k++) {
      rd_u32(&r);
      const uint16_t a = rd_u16(&r), b = rd_u16(&r), ia = rd_u16(&r), fa = rd_u16(&r);
      if (r.bad) return truncated(&r);
      const size_t body = (size_t)(a + b) * 4 + (size_t)(ia + fa) * 8;
      if (body > rd_left(&r)) return truncated(&r);
      r.pos += body;
      c->refs += (size_t)a + b;
      c->iattrs += ia;
      c->fattrs += fa;
    }
    if (version >= 3) { /* dims, then symbolic sizes */
      const uint32_t nd = hdr[5];
      if (nd > TDM_MAX_DIMS) return tdm__fail(TDM_ERR_LIMIT, "method %u declares %u dynamic dims, above the maximum %d", mi, nd, TDM_MAX_DIMS);
      if ((size_t)nd * TDM_DIM_SIZE > rd_left(&r)) return truncated(&r);
      r.pos += (size_t)nd * TDM_DIM_SIZE;
      const uint32_t ns = rd_u32(&r);
      if (r.bad) return truncated(&r);
      if (ns > rd_left(&r) / TDM_SYM_SIZE) return truncated(&r);
      for (uint32_t k = 0; k < ns; k++) {
        if (rd_left(&r) < TDM_SYM_SIZE) return truncated(&r);
        r.pos += 8; /* kind, reserved, index, target */
        const uint32_t nt = rd_u32(&r);
        r.pos += 4 + 8; /* reserved2, constant */
        if (nt > TDM_MAX_DIMS) return tdm__fail(TDM_ERR_MALFORMED, "method %u symbolic size %u has %u terms, above the maximum %d", mi, k, nt, TDM_MAX_DIMS);
        if ((size_t)nt * TDM_TERM_SIZE > rd_left(&r)) return truncated(&r);
        r.pos += (size_t)nt * TDM_TERM_SIZE;
        c->terms += nt;
      }
      c->dims += nd;
      c->syms += ns;
    }
    c->values += nv;
    c->ios += (size_t)ni + no;
    c->ops += nops;
  }
  if (rd_left(&r) != 0) return tdm__fail(TDM_ERR_MALFORMED, "the methods section has %zu bytes after its last method", rd_left(&r));
  return TDM_OK;
}

static tdm_status string_ref(const tdm_program *p, uint32_t i, const char **out, const char *ctx) {
  if (i >= p->n_strings) return tdm__fail(TDM_ERR_MALFORMED, "%s: string index %u is out of range (%u strings)", ctx, i, p->n_strings);
  *out = p->strings[i];
  return TDM_OK;
}

/* Carves arrays out of the one arena. */
typedef struct carver {
  uint8_t *next;
} carver;
static void *carve(carver *c, size_t bytes) {
  void *p = c->next;
  c->next += (bytes + 15) & ~(size_t)15;
  return p;
}

static tdm_status verify_op(const tdm_method *m, uint32_t k, int64_t *first_state_write) {
  const tdm_op *op = &m->ops[k];
  if (op->n_in > TDM_MAX_OPERANDS || op->n_out > TDM_MAX_OPERANDS)
    return tdm__fail(TDM_ERR_LIMIT, "method '%s' op %u (%s) has more than %d inputs or outputs", m->name, k, op->def->name, TDM_MAX_OPERANDS);
  for (uint32_t j = 0; j < op->n_in + op->n_out; j++) {
    uint32_t v = j < op->n_in ? op->in[j] : op->out[j - op->n_in];
    if (v >= m->n_values)
      return tdm__fail(TDM_ERR_MALFORMED, "method '%s' op %u (%s): value index %u is out of range (%u values)", m->name, k, op->def->name, v, m->n_values);
  }
  /* The constant-only dtypes (quantized weights) are read by the quantized ops only, whose rules
   * say at which operand; every other op (copy, index_select, ... take any dtype) rejects them. */
  if (!tdm__reads_const_only(op->def))
    for (uint32_t j = 0; j < op->n_in; j++)
      if (TDM_DTYPE_CONST_ONLY(m->values[op->in[j]].dtype))
        return tdm__fail(TDM_ERR_OP_RULE, "method '%s' op %u: op '%s': input %u has dtype %s, which only quantized-weight ops read",
                         m->name, k, op->def->name, j, tdm_dtype_name(m->values[op->in[j]].dtype));
  for (uint32_t j = 0; j < op->n_out; j++) {
    const tdm_value *y = &m->values[op->out[j]];
    if (y->region == TDM_REGION_CONST)
      return tdm__fail(TDM_ERR_MALFORMED, "method '%s' op %u (%s) writes a constant", m->name, k, op->def->name);
    for (uint32_t i = 0; i < op->n_in + j; i++) {
      const tdm_value *x = i < op->n_in ? &m->values[op->in[i]] : &m->values[op->out[i - op->n_in]];
      const bool in_place = j == 0 && i < op->n_in && x->region == y->region && x->offset == y->offset && x->nbytes == y->nbytes &&
                            x->dtype == y->dtype &&
                            (op->def->inplace == TDM_INPLACE_ANY || (op->def->inplace == TDM_INPLACE_FIRST && i == 0));
      if (x->region == y->region && !in_place && ranges_overlap(x->offset, x->nbytes, y->offset, y->nbytes))
        return tdm__fail(TDM_ERR_MALFORMED, "method '%s' op %u (%s): output %u overlaps one of its operands", m->name, k, op->def->name, j);
    }
    if (y->region == TDM_REGION_STATE && *first_state_write < 0) *first_state_write = k;
  }
  /* An op that can reject runtime values may not run after an op that wrote the state (it may
   * be that op itself: such kernels validate before writing). So a failed call never changes
   * the state. */
  if (op->def->can_fail && *first_state_write >= 0 && *first_state_write != (int64_t)k)
    return tdm__fail(TDM_ERR_MALFORMED, "method '%s' op %u (%s) can fail on runtime values after the state was written", m->name, k, op->def->name);
  tdm_status s = op->def->check(m, op);
  if (s) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tdm_last_error());
    return tdm__fail(s, "method '%s' op %u: %s", m->name, k, msg);
  }
  return TDM_OK;
}

/* Def-before-use, in bytes of scratch: every scratch byte an op reads, and every scratch byte of
 * an output of the method, must have been written before, by an earlier op's output or as an input
 * of the method (state and constants are always defined). Values are views, so the reasoning is
 * about byte ranges: the ends of every scratch value cut the arena into segments; each segment gets
 * the time of its first write (0: an input; k + 1: op k), assigned once each with a "next segment
 * not yet written" forest; a read at op k needs the maximum over its segments to be at most k (a
 * segment tree). O((values + operands) log values); memory proportional to the values. */
typedef struct defuse {
  size_t *cut;    /* [2 n] sorted distinct segment ends */
  uint32_t *next; /* [2 n + 1] next unwritten segment at or after i (path-halving forest) */
  uint32_t *tree; /* [4 n] segment tree of first-write times; UINT32_MAX = never written */
  size_t n_cut;
} defuse;

static int cmp_size(const void *a, const void *b) {
  const size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* Segments [*lo, *hi) covering bytes [off, off + n). */
static void segments(const defuse *d, size_t off, size_t n, uint32_t *lo, uint32_t *hi) {
  size_t a = 0, b = d->n_cut;
  while (a < b) {
    const size_t mid = a + (b - a) / 2;
    if (d->cut[mid] < off) a = mid + 1;
    else b = mid;
  }
  *lo = (uint32_t)a;
  for (b = d->n_cut; a < b;) {
    const size_t mid = a + (b - a) / 2;
    if (d->cut[mid] < off + n) a = mid + 1;
    else b = mid;
  }
  *hi = (uint32_t)a;
}

static uint32_t next_unwritten(uint32_t *next, uint32_t i) {
  while (next[i] != i) i = next[i] = next[next[i]];
  return i;
}

/* Segments [lo, hi) not written yet get time t. */
static void write_range(defuse *d, uint32_t lo, uint32_t hi, uint32_t t) {
  const size_t leaves = d->n_cut;
  for (uint32_t i = next_unwritten(d->next, lo); i < hi; i = next_unwritten(d->next, i)) {
    d->tree[leaves + i] = t;
    d->next[i] = i + 1;
  }
}

static uint32_t latest_write(const defuse *d, uint32_t lo, uint32_t hi) {
  uint32_t m = 0;
  for (size_t l = lo + d->n_cut, r = hi + d->n_cut; l < r; l /= 2, r /= 2) {
    if (l & 1) m = d->tree[l] > m ? d->tree[l] : m, l++;
    if (r & 1) --r, m = d->tree[r] > m ? d->tree[r] : m;
  }
  return m;
}

static tdm_status check_defined(const tdm_method *m) {
  if (m->n_ops >= UINT32_MAX - 1) return tdm__fail(TDM_ERR_LIMIT, "method '%s' has too many ops", m->name);
  size_t n_scratch = 0;
  for (uint32_t v = 0; v < m->n_values; v++) n_scratch += m->values[v].region == TDM_REGION_SCRATCH && m->values[v].nbytes;
  if (n_scratch == 0) return TDM_OK;
  /* sizes: n_scratch <= n_values < 2^32 and is bounded by the methods section's bytes */
  const size_t n2 = 2 * n_scratch, bytes = n2 * sizeof(size_t) + (n2 + 1) * sizeof(uint32_t) + 2 * n2 * sizeof(uint32_t);
  uint8_t *mem = tdm__alloc(bytes);
  if (!mem) return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "out of memory checking method '%s'", m->name);
  defuse d = {(size_t *)mem, (uint32_t *)(mem + n2 * sizeof(size_t)), NULL, 0};
  d.tree = d.next + n2 + 1;
  for (uint32_t v = 0; v < m->n_values; v++) {
    const tdm_value *x = &m->values[v];
    if (x->region != TDM_REGION_SCRATCH || !x->nbytes) continue;
    d.cut[d.n_cut++] = x->offset;
    d.cut[d.n_cut++] = x->offset + x->nbytes; /* inside the scratch size: no overflow */
  }
  qsort(d.cut, d.n_cut, sizeof(size_t), cmp_size);
  size_t u = 0;
  for (size_t i = 0; i < d.n_cut; i++)
    if (i == 0 || d.cut[i] != d.cut[u - 1]) d.cut[u++] = d.cut[i];
  d.n_cut = u; /* segment i is [cut[i], cut[i + 1]); the last index is a sentinel */
  for (size_t i = 0; i <= d.n_cut; i++) d.next[i] = (uint32_t)i;
  for (size_t i = 0; i < 2 * d.n_cut; i++) d.tree[i] = UINT32_MAX;
  uint32_t lo, hi;
  const tdm_value *x;
  for (uint32_t i = 0; i < m->n_inputs; i++) {
    x = &m->values[m->inputs[i].value];
    segments(&d, x->offset, x->nbytes, &lo, &hi);
    write_range(&d, lo, hi, 0);
  }
  for (uint32_t k = 0; k < m->n_ops; k++)
    for (uint32_t j = 0; j < m->ops[k].n_out; j++) {
      x = &m->values[m->ops[k].out[j]];
      if (x->region != TDM_REGION_SCRATCH || !x->nbytes) continue;
      segments(&d, x->offset, x->nbytes, &lo, &hi);
      write_range(&d, lo, hi, k + 1);
    }
  for (size_t i = d.n_cut - 1; i > 0; i--) d.tree[i] = d.tree[2 * i] > d.tree[2 * i + 1] ? d.tree[2 * i] : d.tree[2 * i + 1];
  tdm_status s = TDM_OK;
  for (uint32_t k = 0; k <= m->n_ops && !s; k++) {
    /* k < n_ops: op k's inputs; k == n_ops: the method's outputs */
    const uint32_t n = k < m->n_ops ? m->ops[k].n_in : m->n_outputs;
    for (uint32_t j = 0; j < n && !s; j++) {
      const uint32_t v = k < m->n_ops ? m->ops[k].in[j] : m->outputs[j].value;
      x = &m->values[v];
      if (x->region != TDM_REGION_SCRATCH || !x->nbytes) continue;
      segments(&d, x->offset, x->nbytes, &lo, &hi);
      const uint32_t t = latest_write(&d, lo, hi);
      if (t > k && k < m->n_ops)
        s = tdm__fail(TDM_ERR_MALFORMED, "method '%s' op %u (%s) reads value %u before every byte of it was written", m->name, k,
                      m->ops[k].def->name, v);
      else if (t == UINT32_MAX)
        s = tdm__fail(TDM_ERR_MALFORMED, "method '%s' output %u (value %u) has bytes that no op writes", m->name, j, v);
    }
  }
  tdm__free(mem);
  return s;
}

/* constant + sum(coef * dims[dim]) into *out; false on int64 overflow. */
static bool eval_sym(const tdm_sym *y, const int64_t *dims, int64_t *out) {
  int64_t v = y->constant, t;
  for (uint32_t i = 0; i < y->n_terms; i++)
    if (__builtin_mul_overflow(y->terms[i].coef, dims[y->terms[i].dim], &t) || __builtin_add_overflow(v, t, &v)) return false;
  *out = v;
  return true;
}

tdm_status tdm__bind_method(const tdm_method *m, const int64_t *dims, tdm_method *dst, int64_t *iattrs, bool defined) {
  tdm_value *values = dst->values;
  tdm_op *ops = dst->ops;
  *dst = *m;
  dst->values = values;
  dst->ops = ops;
  memcpy(values, m->values, m->n_values * sizeof(tdm_value));
  memcpy(iattrs, m->iattrs, m->n_iattrs * sizeof(int64_t));
  for (uint32_t k = 0; k < m->n_ops; k++) {
    ops[k] = m->ops[k];
    ops[k].iattr = iattrs + (m->ops[k].iattr - m->iattrs);
  }
  int64_t v;
  for (uint32_t i = 0; i < m->n_syms; i++) {
    const tdm_sym *y = &m->syms[i];
    if (!eval_sym(y, dims, &v)) return tdm__fail(TDM_ERR_OP_RULE, "method '%s': symbolic size %u overflows", m->name, i);
    if (y->kind == TDM_SYM_IATTR) {
      iattrs[ops[y->target].iattr - iattrs + y->index] = v;
      continue;
    }
    tdm_value *x = &values[y->target];
    if (v < 0) return tdm__fail(TDM_ERR_OP_RULE, "method '%s' value %u: %s %u is negative (%lld)", m->name, y->target,
                                y->kind == TDM_SYM_DIM ? "dim" : "offset", y->index, (long long)v);
    if (y->kind == TDM_SYM_DIM) x->shape.dims[y->index] = v;
    else if ((uint64_t)v > SIZE_MAX - y->base || v % (int64_t)tdm_dtype_size(x->dtype))
      return tdm__fail(TDM_ERR_OP_RULE, "method '%s' value %u: offset %lld is out of range or unaligned", m->name, y->target, (long long)v);
    else x->offset = y->base + (size_t)v;
  }
  for (uint32_t i = 0; i < m->n_syms; i++) { /* sizes, and bytes inside the viewed tensor */
    const tdm_sym *y = &m->syms[i];
    if (y->kind == TDM_SYM_IATTR) continue;
    tdm_value *x = &values[y->target];
    size_t n = 1, nb;
    for (int d = 0; d < x->shape.rank; d++)
      if ((uint64_t)x->shape.dims[d] > SIZE_MAX || !tdm__mul_size(n, (size_t)x->shape.dims[d], &n) || n > (size_t)INT64_MAX)
        return tdm__fail(TDM_ERR_OP_RULE, "method '%s' value %u: the element count overflows", m->name, y->target);
    if (!tdm__mul_size(n, tdm_dtype_size(x->dtype), &nb) || x->offset < y->base || !range_inside(x->offset - y->base, nb, y->limit - y->base))
      return tdm__fail(TDM_ERR_OP_RULE, "method '%s' value %u: its bytes lie outside the tensor it views", m->name, y->target);
    x->numel = (int64_t)n;
    x->nbytes = nb;
  }
  int64_t first_state_write = -1;
  tdm_status s;
  for (uint32_t k = 0; k < m->n_ops; k++)
    if ((s = verify_op(dst, k, &first_state_write))) return s;
  for (uint32_t i = 0; i < m->n_inputs; i++) { /* inputs stay apart at every size */
    const tdm_value *a = &values[m->inputs[i].value];
    for (uint32_t e = 0; e < i; e++) {
      const tdm_value *b = &values[m->inputs[e].value];
      if (ranges_overlap(a->offset, a->nbytes, b->offset, b->nbytes))
        return tdm__fail(TDM_ERR_MALFORMED, "method '%s' input %u overlaps input %u", m->name, i, e);
    }
  }
  return defined ? check_defined(dst) : TDM_OK;
}

static const char *const sym_kinds[] = {"dim", "offset", "iattr"};

/* Version 3: a method's dims and symbolic sizes after its ops; every op verified again at the
 * minimum of every dim (at every corner of the box of dims when there are at most 4 dims). */
static tdm_status read_dims(const tdm_program *p, tdm_method *m, rd *r, tdm_term **terms) {
  char ctx[160];
  tdm_status s;
  int64_t maxs[TDM_MAX_DIMS];
  for (uint32_t d = 0; d < m->n_dims; d++) {
    tdm_dim *dim = &m->dims[d];
    const uint32_t name = rd_u32(r), res = rd_u32(r);
    dim->min = (int64_t)rd_u64(r);
    dim->max = (int64_t)rd_u64(r);
    if (r->bad) return truncated(r);
    snprintf(ctx, sizeof ctx, "method '%s' dim %u", m->name, d);
    if ((s = string_ref(p, name, &dim->name, ctx))) return s;
    if (res != 0 || !dim->name[0]) return tdm__fail(TDM_ERR_MALFORMED, "%s: empty name or nonzero reserved field", ctx);
    if (dim->min < 0 || dim->min > dim->max || dim->max > INT32_MAX)
      return tdm__fail(TDM_ERR_MALFORMED, "%s ('%s'): bounds [%lld, %lld] are not 0 <= min <= max < 2^31", ctx, dim->name, (long long)dim->min, (long long)dim->max);
    for (uint32_t e = 0; e < d; e++)
      if (strcmp(m->dims[e].name, dim->name) == 0) return tdm__fail(TDM_ERR_MALFORMED, "method '%s': two dims are named '%s'", m->name, dim->name);
    dim->axis = -1;
    maxs[d] = dim->max;
  }
  m->n_syms = rd_u32(r);
  if (r->bad) return truncated(r);
  for (uint32_t i = 0; i < m->n_syms; i++) {
    tdm_sym *y = &m->syms[i];
    y->kind = rd_u8(r);
    const uint8_t res = rd_u8(r);
    y->index = rd_u16(r);
    y->target = rd_u32(r);
    y->n_terms = rd_u32(r);
    const uint32_t res2 = rd_u32(r);
    y->constant = (int64_t)rd_u64(r);
    if (r->bad) return truncated(r);
    snprintf(ctx, sizeof ctx, "method '%s' symbolic size %u", m->name, i);
    if (res || res2 || y->kind > TDM_SYM_IATTR || y->n_terms == 0 || y->constant > TDM_MAX_SYM_COEF || y->constant < -TDM_MAX_SYM_COEF)
      return tdm__fail(TDM_ERR_MALFORMED, "%s: unknown kind %u, no terms, a constant out of range or a nonzero reserved field", ctx, y->kind);
    tdm_term *t = *terms;
    y->terms = t;
    for (uint32_t j = 0; j < y->n_terms; j++) {
      t[j].dim = rd_u32(r);
      const uint32_t tres = rd_u32(r);
      t[j].coef = (int64_t)rd_u64(r);
      if (r->bad) return truncated(r);
      if (tres || t[j].dim >= m->n_dims || t[j].coef == 0 || t[j].coef > TDM_MAX_SYM_COEF || t[j].coef < -TDM_MAX_SYM_COEF)
        return tdm__fail(TDM_ERR_MALFORMED, "%s term %u: dim %u out of range (%u dims), a zero or too large coefficient, or a nonzero reserved field", ctx, j, t[j].dim, m->n_dims);
      for (uint32_t e = 0; e < j; e++)
        if (t[e].dim == t[j].dim) return tdm__fail(TDM_ERR_MALFORMED, "%s names dim %u twice", ctx, t[j].dim);
    }
    *terms += y->n_terms;
    int64_t at_max;
    if (!eval_sym(y, maxs, &at_max)) return tdm__fail(TDM_ERR_MALFORMED, "%s overflows at the maximum", ctx);
    int64_t stored;
    if (y->kind == TDM_SYM_IATTR) {
      if (y->target >= m->n_ops || y->index >= m->ops[y->target].n_iattr)
        return tdm__fail(TDM_ERR_MALFORMED, "%s: op %u attribute %u does not exist", ctx, y->target, y->index);
      stored = m->ops[y->target].iattr[y->index];
    } else {
      if (y->target >= m->n_values) return tdm__fail(TDM_ERR_MALFORMED, "%s: value %u does not exist", ctx, y->target);
      const tdm_value *x = &m->values[y->target];
      if (y->kind == TDM_SYM_DIM && y->index >= x->shape.rank)
        return tdm__fail(TDM_ERR_MALFORMED, "%s: value %u has no dim %u", ctx, y->target, y->index);
      /* the tensor the value views: the method's scratch, or its constant or state tensor */
      y->base = 0;
      y->limit = m->scratch_size;
      const uint32_t ref = x->ref;
      if (x->region == TDM_REGION_CONST) y->base = p->consts[ref].data_offset, y->limit = y->base + p->consts[ref].nbytes;
      if (x->region == TDM_REGION_STATE) y->base = p->states[ref].offset, y->limit = y->base + p->states[ref].nbytes;
      stored = y->kind == TDM_SYM_DIM ? x->shape.dims[y->index] : (int64_t)(x->offset - y->base);
    }
    if (at_max != stored)
      return tdm__fail(TDM_ERR_MALFORMED, "%s (%s of %u) is %lld at the maximum of every dim, but the file stores %lld there", ctx,
                       sym_kinds[y->kind], y->target, (long long)at_max, (long long)stored);
    for (uint32_t e = 0; e < i; e++)
      if (m->syms[e].kind == y->kind && m->syms[e].target == y->target && m->syms[e].index == y->index)
        return tdm__fail(TDM_ERR_MALFORMED, "%s: %s %u of %u has two symbolic sizes", ctx, sym_kinds[y->kind], y->index, y->target);
    for (uint32_t k = 0; k < m->n_inputs; k++) {
      if (m->inputs[k].value != y->target || y->kind == TDM_SYM_IATTR) continue;
      if (y->kind == TDM_SYM_OFFSET) return tdm__fail(TDM_ERR_MALFORMED, "%s: input %u has a symbolic offset", ctx, k);
      if (y->n_terms == 1 && y->terms[0].coef == 1 && y->constant == 0 && m->dims[y->terms[0].dim].axis < 0) {
        m->dims[y->terms[0].dim].input = k; /* this input dim gives the dim's value in a call */
        m->dims[y->terms[0].dim].axis = y->index;
      }
    }
  }
  for (uint32_t d = 0; d < m->n_dims; d++)
    if (m->dims[d].axis < 0)
      return tdm__fail(TDM_ERR_MALFORMED, "method '%s' dim '%s' is not the size of any input dim, so no call can give it", m->name, m->dims[d].name);
  if (m->n_dims == 0) return TDM_OK;
  /* Verify at the minimum of every dim, and at every corner when there are few dims. */
  size_t bytes = m->n_values * sizeof(tdm_value) + m->n_ops * sizeof(tdm_op) + m->n_iattrs * sizeof(int64_t) + 64;
  uint8_t *mem = tdm__alloc(bytes);
  if (!mem) return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "out of memory verifying method '%s'", m->name);
  tdm_method b;
  b.values = (tdm_value *)mem;
  b.ops = (tdm_op *)(mem + m->n_values * sizeof(tdm_value));
  int64_t *ia = (int64_t *)(mem + m->n_values * sizeof(tdm_value) + m->n_ops * sizeof(tdm_op));
  const uint32_t corners = m->n_dims <= 4 ? 1u << m->n_dims : 1u;
  s = TDM_OK;
  for (uint32_t c = 0; c < corners && !s; c++) {
    int64_t at[TDM_MAX_DIMS];
    for (uint32_t d = 0; d < m->n_dims; d++) at[d] = (c >> d) & 1 ? m->dims[d].max : m->dims[d].min;
    if ((c + 1 == corners && corners > 1)) continue; /* all at the maximum: verified above */
    s = tdm__bind_method(m, at, &b, ia, true);
    if (s) {
      char msg[512], where[200];
      int n = 0;
      for (uint32_t d = 0; d < m->n_dims && n < (int)sizeof where - 40; d++)
        n += snprintf(where + n, sizeof where - n, "%s%s=%lld", d ? ", " : "", m->dims[d].name, (long long)at[d]);
      snprintf(msg, sizeof msg, "%s", tdm_last_error());
      s = tdm__fail(s, "%s (at %s)", msg, where);
    }
  }
  tdm__free(mem);
  return s;
}

/* Pass 2: read and verify every method into the arena. */
static tdm_status read_methods(tdm_program *p, rd r, carver *cv, const counts *c) {
  uint32_t *refs = carve(cv, c->refs * sizeof(uint32_t));
  int64_t *iattrs = carve(cv, c->iattrs * sizeof(int64_t));
  double *fattrs = carve(cv, c->fattrs * sizeof(double));
  tdm_value *values = carve(cv, c->values * sizeof(tdm_value));
  tdm_io *ios = carve(cv, c->ios * sizeof(tdm_io));
  tdm_op *ops = carve(cv, c->ops * sizeof(tdm_op));
  tdm_dim *dims = carve(cv, c->dims * sizeof(tdm_dim));
  tdm_sym *syms = carve(cv, c->syms * sizeof(tdm_sym));
  tdm_term *terms = carve(cv, c->terms * sizeof(tdm_term));
  const uint64_t cap = tdm__max_declared_bytes();
  char ctx[96];
  tdm_status s;
  for (uint32_t mi = 0; mi < p->n_methods; mi++) {
    tdm_method *m = &p->methods[mi];
    uint32_t name = rd_u32(&r);
    m->n_values = rd_u32(&r);
    m->n_inputs = rd_u32(&r);
    m->n_outputs = rd_u32(&r);
    m->n_ops = rd_u32(&r);
    m->n_dims = rd_u32(&r);
    uint64_t scratch = rd_u64(&r);
    if (p->version < 3 && m->n_dims != 0) return tdm__fail(TDM_ERR_MALFORMED, "method %u: reserved field is not zero", mi);
    snprintf(ctx, sizeof ctx, "method %u", mi);
    if ((s = string_ref(p, name, &m->name, ctx))) return s;
    for (uint32_t e = 0; e < mi; e++)
      if (strcmp(p->methods[e].name, m->name) == 0) return tdm__fail(TDM_ERR_MALFORMED, "two methods are named '%s'", m->name);
    if (scratch > cap || scratch > SIZE_MAX)
      return tdm__fail(TDM_ERR_LIMIT, "method '%s' declares %llu bytes of scratch, above the cap of %llu", m->name, (unsigned long long)scratch, (unsigned long long)cap);
    m->scratch_size = (size_t)scratch;
    if (m->scratch_size > p->scratch_size) p->scratch_size = m->scratch_size;
    m->values = values;
    values += m->n_values;
    for (uint32_t v = 0; v < m->n_values; v++) {
      tdm_value *val = &m->values[v];
      snprintf(ctx, sizeof ctx, "method '%s' value %u", m->name, v);
      val->dtype = rd_u8(&r);
      const int rank = rd_u8(&r);
      const int region = rd_u8(&r);
      const uint8_t reserved = rd_u8(&r);
      const uint32_t ref = rd_u32(&r);
      const uint64_t off = rd_u64(&r);
      if ((s = read_shape(&r, val->dtype, rank, &val->shape, &val->numel, &val->nbytes, ctx))) return s;
      if (reserved != 0) return tdm__fail(TDM_ERR_MALFORMED, "%s: reserved byte is not zero", ctx);
      const size_t es = tdm_dtype_size(val->dtype);
      if (off % es) return tdm__fail(TDM_ERR_MALFORMED, "%s: offset %llu is not aligned to its element size", ctx, (unsigned long long)off);
      val->region = (tdm_region)region;
      val->ref = ref;
      if (TDM_DTYPE_CONST_ONLY(val->dtype) && region != TDM_REGION_CONST)
        return tdm__fail(TDM_ERR_MALFORMED, "%s: dtype %s is for constants only", ctx, tdm_dtype_name(val->dtype));
      if (region == TDM_REGION_SCRATCH) {
        if (ref != 0) return tdm__fail(TDM_ERR_MALFORMED, "%s: a scratch value has a reference", ctx);
        if (!range_inside(off, val->nbytes, m->scratch_size))
          return tdm__fail(TDM_ERR_MALFORMED, "%s: bytes [%llu, +%zu) lie outside the method's scratch of %zu bytes", ctx, (unsigned long long)off, val->nbytes, m->scratch_size);
        val->offset = (size_t)off;
      } else if (region == TDM_REGION_CONST) {
        if (ref >= p->n_consts) return tdm__fail(TDM_ERR_MALFORMED, "%s: constant %u does not exist (%u constants)", ctx, ref, p->n_consts);
        const tdm_const *k = &p->consts[ref];
        if (k->dtype != val->dtype || !range_inside(off, val->nbytes, k->nbytes))
          return tdm__fail(TDM_ERR_MALFORMED, "%s: does not fit inside constant '%s'", ctx, k->name);
        val->offset = k->data_offset + (size_t)off;
      } else if (region == TDM_REGION_STATE) {
        if (ref >= p->n_states) return tdm__fail(TDM_ERR_MALFORMED, "%s: state %u does not exist (%u states)", ctx, ref, p->n_states);
        const tdm_state *st = &p->states[ref];
        if (st->dtype != val->dtype || !range_inside(off, val->nbytes, st->nbytes))
          return tdm__fail(TDM_ERR_MALFORMED, "%s: does not fit inside state '%s'", ctx, st->name);
        val->offset = st->offset + (size_t)off;
      } else {
        return tdm__fail(TDM_ERR_MALFORMED, "%s: unknown region %d", ctx, region);
      }
    }
    for (int io = 0; io < 2; io++) {
      const uint32_t n = io ? m->n_outputs : m->n_inputs;
      tdm_io *list = ios;
      ios += n;
      if (io) m->outputs = list;
      else m->inputs = list;
      for (uint32_t i = 0; i < n; i++) {
        uint32_t v = rd_u32(&r), nm = rd_u32(&r);
        snprintf(ctx, sizeof ctx, "method '%s' %s %u", m->name, io ? "output" : "input", i);
        if (r.bad) return truncated(&r);
        if ((s = string_ref(p, nm, &list[i].name, ctx))) return s;
        if (v >= m->n_values) return tdm__fail(TDM_ERR_MALFORMED, "%s: value %u is out of range", ctx, v);
        list[i].value = v;
        const tdm_value *val = &m->values[v];
        if (TDM_DTYPE_CONST_ONLY(val->dtype))
          return tdm__fail(TDM_ERR_MALFORMED, "%s: dtype %s is for constants only, never an input or output", ctx, tdm_dtype_name(val->dtype));
        if (!io) {
          if (val->region != TDM_REGION_SCRATCH) return tdm__fail(TDM_ERR_MALFORMED, "%s: inputs must live in scratch", ctx);
          for (uint32_t e = 0; e < i; e++) {
            const tdm_value *o = &m->values[list[e].value];
            if (ranges_overlap(o->offset, o->nbytes, val->offset, val->nbytes))
              return tdm__fail(TDM_ERR_MALFORMED, "%s overlaps input %u", ctx, e);
          }
        }
      }
    }
    m->ops = ops;
    ops += m->n_ops;
    m->iattrs = iattrs;
    int64_t first_state_write = -1;
    for (uint32_t k = 0; k < m->n_ops; k++) {
      tdm_op *op = &m->ops[k];
      const uint32_t nm = rd_u32(&r);
      op->n_in = rd_u16(&r);
      op->n_out = rd_u16(&r);
      op->n_iattr = rd_u16(&r);
      op->n_fattr = rd_u16(&r);
      snprintf(ctx, sizeof ctx, "method '%s' op %u", m->name, k);
      const char *opname = NULL;
      if ((s = string_ref(p, nm, &opname, ctx))) return s;
      op->def = tdm__find_op(opname);
      if (!op->def)
        return tdm__fail(TDM_ERR_UNKNOWN_OP, "method '%s' op %u: unknown operator '%s' (this runtime is older than the exporter, or the file is corrupt)", m->name, k, opname);
      op->in = refs;
      for (uint32_t j = 0; j < op->n_in; j++) *refs++ = rd_u32(&r);
      op->out = refs;
      for (uint32_t j = 0; j < op->n_out; j++) *refs++ = rd_u32(&r);
      op->iattr = iattrs;
      for (uint32_t j = 0; j < op->n_iattr; j++) *iattrs++ = (int64_t)rd_u64(&r);
      op->fattr = fattrs;
      for (uint32_t j = 0; j < op->n_fattr; j++) {
        uint64_t bits = rd_u64(&r);
        memcpy(fattrs++, &bits, 8);
      }
      if (r.bad) return truncated(&r);
      if ((s = verify_op(m, k, &first_state_write))) return s;
    }
    m->n_iattrs = (size_t)(iattrs - m->iattrs);
    if ((s = check_defined(m))) return s;
    if (p->version >= 3) {
      m->dims = dims;
      dims += m->n_dims;
      m->syms = syms;
      if ((s = read_dims(p, m, &r, &terms))) return s;
      syms += m->n_syms;
    }
  }
  return TDM_OK;
}

static uint64_t fnv1a(const uint8_t *p, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static tdm_status parse(tdm_program *p) {
  const uint8_t *f = p->file;
  const size_t size = p->file_size;
  if (size < 4 || memcmp(f, TDM_FILE_MAGIC, 4) != 0)
    return tdm__fail(TDM_ERR_BAD_MAGIC, "not a .tandem file: it does not start with the bytes '" TDM_FILE_MAGIC "'");
  if (size < TDM_HEADER_SIZE) return tdm__fail(TDM_ERR_TRUNCATED, "the file is %zu bytes, shorter than the %d-byte header: it is truncated", size, TDM_HEADER_SIZE);
  rd h = {f, size, 4, false, "header"};
  const uint32_t version = rd_u32(&h);
  const uint64_t declared = rd_u64(&h);
  const uint32_t n_sec = rd_u32(&h), flags = rd_u32(&h);
  const uint64_t reserved = rd_u64(&h);
  if (version < OLDEST_VERSION || version > TDM_FORMAT_VERSION)
    return tdm__fail(TDM_ERR_VERSION, "format version %u; this runtime reads versions %d to %u: re-export the model with a matching tandem", version, OLDEST_VERSION, TDM_FORMAT_VERSION);
  if (declared != size)
    return tdm__fail(declared > size ? TDM_ERR_TRUNCATED : TDM_ERR_MALFORMED, "the header declares %llu bytes but %zu were given%s",
                     (unsigned long long)declared, size, declared > size ? ": the file is truncated" : "");
  /* version 1 files have every section but the metadata (the last id) */
  const int n_want = version == 1 ? TDM_SEC_COUNT - 1 : TDM_SEC_COUNT;
  if (n_sec != (uint32_t)n_want || flags != 0 || reserved != 0)
    return tdm__fail(TDM_ERR_MALFORMED, "header: %u sections (expected %d), flags %u, reserved %llu (expected 0)", n_sec, n_want, flags, (unsigned long long)reserved);
  rd sec[TDM_SEC_COUNT + 1];
  memset(sec, 0, sizeof sec);
  if ((size_t)n_want * TDM_SECTION_SIZE > size - TDM_HEADER_SIZE) return tdm__fail(TDM_ERR_TRUNCATED, "the section table is truncated");
  for (int i = 0; i < n_want; i++) {
    const uint32_t id = rd_u32(&h), res = rd_u32(&h);
    const uint64_t off = rd_u64(&h), len = rd_u64(&h);
    if (id < 1 || id > (uint32_t)n_want || sec[id].p || res != 0)
      return tdm__fail(TDM_ERR_MALFORMED, "section table entry %d: id %u is unknown or repeated", i, id);
    if (off < TDM_HEADER_SIZE + (uint64_t)n_want * TDM_SECTION_SIZE || !range_inside(off, len, size))
      return tdm__fail(TDM_ERR_MALFORMED, "the %s section [%llu, +%llu) lies outside the file (%zu bytes)", section_names[id], (unsigned long long)off, (unsigned long long)len, size);
    sec[id] = (rd){f + off, (size_t)len, 0, false, section_names[id]};
  }
  for (int a = 1; a <= n_want; a++)
    for (int b = a + 1; b <= n_want; b++)
      if (ranges_overlap((size_t)(sec[a].p - f), sec[a].n, (size_t)(sec[b].p - f), sec[b].n))
        return tdm__fail(TDM_ERR_MALFORMED, "the %s and %s sections overlap", section_names[a], section_names[b]);
  if ((size_t)(sec[TDM_SEC_DATA].p - f) % TDM_FILE_ALIGN)
    return tdm__fail(TDM_ERR_MALFORMED, "the data section is not %d-byte aligned", TDM_FILE_ALIGN);
  p->data = sec[TDM_SEC_DATA].p;
  p->data_size = sec[TDM_SEC_DATA].n;

  /* Counts first, so one arena holds everything. */
  rd rs = sec[TDM_SEC_STRINGS], rc = sec[TDM_SEC_CONSTANTS], rst = sec[TDM_SEC_STATES], rm = sec[TDM_SEC_METHODS];
  p->n_strings = rd_u32(&rs);
  p->n_consts = rd_u32(&rc);
  const uint64_t state_size = rd_u64(&rst);
  p->n_states = rd_u32(&rst);
  p->n_methods = rd_u32(&rm);
  rd rmd = sec[TDM_SEC_METADATA];
  p->n_metadata = version >= 2 ? rd_u32(&rmd) : 0;
  if (rmd.bad) return truncated(&rmd);
  if (p->n_metadata > rd_left(&rmd) / TDM_METADATA_ENTRY_SIZE) return truncated(&rmd);
  if (rs.bad) return truncated(&rs);
  if (rc.bad) return truncated(&rc);
  if (rst.bad) return truncated(&rst);
  if (rm.bad) return truncated(&rm);
  if (p->n_strings > rd_left(&rs) / (TDM_STRING_SIZE + 1)) return truncated(&rs); /* + its 0 byte */
  if (p->n_consts > rd_left(&rc) / TDM_CONSTANT_SIZE) return truncated(&rc);
  if (p->n_states > rd_left(&rst) / TDM_STATE_SIZE) return truncated(&rst);
  if (p->n_methods > rd_left(&rm) / TDM_METHOD_SIZE) return truncated(&rm);
  if (p->n_methods > MAX_METHODS) return tdm__fail(TDM_ERR_LIMIT, "%u methods, above the maximum %d", p->n_methods, MAX_METHODS);
  const uint64_t cap = tdm__max_declared_bytes();
  if (state_size > cap || state_size > SIZE_MAX)
    return tdm__fail(TDM_ERR_LIMIT, "the state region declares %llu bytes, above the cap of %llu", (unsigned long long)state_size, (unsigned long long)cap);
  p->state_size = (size_t)state_size;
  counts c = {0};
  p->version = version;
  tdm_status s = count_methods(rm, p->n_methods, version, &c);
  if (s) return s;
  size_t arena = 0, part;
  const size_t parts[][2] = {{p->n_strings, sizeof(char *)}, {p->n_consts, sizeof(tdm_const)}, {p->n_states, sizeof(tdm_state)},
                             {p->n_methods, sizeof(tdm_method)}, {p->n_metadata, 2 * sizeof(char *)}, {c.refs, 4}, {c.iattrs, 8}, {c.fattrs, 8},
                             {c.values, sizeof(tdm_value)}, {c.ios, sizeof(tdm_io)}, {c.ops, sizeof(tdm_op)},
                             {c.dims, sizeof(tdm_dim)}, {c.syms, sizeof(tdm_sym)}, {c.terms, sizeof(tdm_term)}};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    if (!tdm__mul_size(parts[i][0], parts[i][1], &part) || !tdm__align_size(part, 16, &part) || !tdm__add_size(arena, part, &arena))
      return tdm__fail(TDM_ERR_LIMIT, "the file declares more structures than fit in memory");
  p->arena = tdm__calloc(arena);
  if (!p->arena) return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes for the program's tables", arena);
  carver cv = {p->arena};
  p->strings = carve(&cv, p->n_strings * sizeof(char *));
  p->consts = carve(&cv, p->n_consts * sizeof(tdm_const));
  p->states = carve(&cv, p->n_states * sizeof(tdm_state));
  p->methods = carve(&cv, p->n_methods * sizeof(tdm_method));
  p->metadata = carve(&cv, p->n_metadata * 2 * sizeof(char *));

  for (uint32_t i = 0; i < p->n_strings; i++) {
    const uint32_t len = rd_u32(&rs);
    if (rs.bad || len >= rd_left(&rs)) return truncated(&rs);
    const char *str = (const char *)rs.p + rs.pos;
    if (memchr(str, 0, len) || str[len] != 0)
      return tdm__fail(TDM_ERR_MALFORMED, "string %u is not NUL-terminated at its declared length %u", i, len);
    p->strings[i] = str;
    rs.pos += (size_t)len + 1;
  }
  if (rd_left(&rs)) return tdm__fail(TDM_ERR_MALFORMED, "the strings section has %zu trailing bytes", rd_left(&rs));

  /* Metadata: unique non-empty names, each with its value as JSON text (parsed by the hosts). */
  char ctx[64];
  for (uint32_t i = 0; i < p->n_metadata; i++) {
    const uint32_t key = rd_u32(&rmd), value = rd_u32(&rmd);
    if (rmd.bad) return truncated(&rmd);
    snprintf(ctx, sizeof ctx, "metadata entry %u", i);
    if ((s = string_ref(p, key, &p->metadata[2 * i], ctx)) || (s = string_ref(p, value, &p->metadata[2 * i + 1], ctx))) return s;
    if (!p->metadata[2 * i][0]) return tdm__fail(TDM_ERR_MALFORMED, "%s has an empty name", ctx);
    for (uint32_t e = 0; e < i; e++)
      if (strcmp(p->metadata[2 * e], p->metadata[2 * i]) == 0) return tdm__fail(TDM_ERR_MALFORMED, "two metadata entries are named '%s'", p->metadata[2 * i]);
  }
  if (rd_left(&rmd)) return tdm__fail(TDM_ERR_MALFORMED, "the metadata section has %zu trailing bytes", rd_left(&rmd));

  for (uint32_t i = 0; i < p->n_consts; i++) {
    tdm_const *k = &p->consts[i];
    snprintf(ctx, sizeof ctx, "constant %u", i);
    const uint32_t name = rd_u32(&rc);
    k->dtype = rd_u8(&rc);
    const int rank = rd_u8(&rc);
    const uint16_t res = rd_u16(&rc);
    const uint64_t off = rd_u64(&rc), nbytes = rd_u64(&rc);
    int64_t numel;
    if (rc.bad) return truncated(&rc);
    if ((s = string_ref(p, name, &k->name, ctx)) || (s = read_shape(&rc, k->dtype, rank, &k->shape, &numel, &k->nbytes, ctx))) return s;
    if (res != 0 || nbytes != k->nbytes) return tdm__fail(TDM_ERR_MALFORMED, "constant '%s': declares %llu bytes, its shape needs %zu", k->name, (unsigned long long)nbytes, k->nbytes);
    if (off % TDM_FILE_ALIGN || !range_inside(off, nbytes, p->data_size))
      return tdm__fail(TDM_ERR_MALFORMED, "constant '%s': bytes [%llu, +%llu) are unaligned or outside the data section", k->name, (unsigned long long)off, (unsigned long long)nbytes);
    k->data_offset = (size_t)off;
  }
  if (rd_left(&rc)) return tdm__fail(TDM_ERR_MALFORMED, "the constants section has %zu trailing bytes", rd_left(&rc));

  size_t state_end = 0;
  /* The fingerprint hashes the state layout only (names, dtypes, shapes, offsets, sizes), not
   * where the file keeps them (string indices, initial-value offsets): a program re-exported with
   * another method, other weights or other initial values reads the same saved state. */
  uint64_t fp = fnv1a((const uint8_t *)&state_size, 8, 1469598103934665603ull);
  fp = fnv1a((const uint8_t *)&p->n_states, 4, fp);
  for (uint32_t i = 0; i < p->n_states; i++) {
    tdm_state *st = &p->states[i];
    snprintf(ctx, sizeof ctx, "state %u", i);
    const uint32_t name = rd_u32(&rst);
    st->dtype = rd_u8(&rst);
    const int rank = rd_u8(&rst), init = rd_u8(&rst), res = rd_u8(&rst);
    const uint64_t off = rd_u64(&rst), nbytes = rd_u64(&rst), init_off = rd_u64(&rst);
    int64_t numel;
    if (rst.bad) return truncated(&rst);
    if ((s = string_ref(p, name, &st->name, ctx)) || (s = read_shape(&rst, st->dtype, rank, &st->shape, &numel, &st->nbytes, ctx))) return s;
    if (res != 0 || init >= TDM_INIT_COUNT || nbytes != st->nbytes)
      return tdm__fail(TDM_ERR_MALFORMED, "state '%s': bad size, init kind or reserved byte", st->name);
    if (TDM_DTYPE_CONST_ONLY(st->dtype))
      return tdm__fail(TDM_ERR_MALFORMED, "state '%s': dtype %s is for constants only", st->name, tdm_dtype_name(st->dtype));
    if (off % TDM_FILE_ALIGN || off < state_end || !range_inside(off, nbytes, p->state_size))
      return tdm__fail(TDM_ERR_MALFORMED, "state '%s': bytes [%llu, +%llu) are unaligned, out of order, overlapping or outside the state region (%zu bytes)",
                       st->name, (unsigned long long)off, (unsigned long long)nbytes, p->state_size);
    st->offset = (size_t)off;
    state_end = st->offset + st->nbytes;
    st->init_zero = init == TDM_INIT_ZEROS;
    if (!st->init_zero && (init_off % TDM_FILE_ALIGN || !range_inside(init_off, nbytes, p->data_size)))
      return tdm__fail(TDM_ERR_MALFORMED, "state '%s': its initial value lies outside the data section", st->name);
    if (st->init_zero && init_off != 0) return tdm__fail(TDM_ERR_MALFORMED, "state '%s': an all-zero state has a data offset", st->name);
    st->init_offset = (size_t)init_off;
    const uint64_t layout[3] = {(uint64_t)st->dtype | (uint64_t)rank << 8, st->offset, st->nbytes};
    fp = fnv1a((const uint8_t *)st->name, strlen(st->name) + 1, fp);
    fp = fnv1a((const uint8_t *)layout, sizeof layout, fp);
    fp = fnv1a((const uint8_t *)st->shape.dims, (size_t)rank * 8, fp);
  }
  if (rd_left(&rst)) return tdm__fail(TDM_ERR_MALFORMED, "the states section has %zu trailing bytes", rd_left(&rst));
  p->fingerprint = fp;
  /* The program's identity: every section but the data (weights are not hashed: too slow for
   * large files), and the data's size. */
  uint64_t id = 1469598103934665603ull;
  for (int i = 1; i <= TDM_SEC_COUNT; i++)
    if (i != TDM_SEC_DATA) id = fnv1a(sec[i].p, sec[i].n, id);
  const uint64_t data_size = p->data_size; /* 8 bytes on every host, so native and wasm ids agree */
  p->program_id = fnv1a((const uint8_t *)&data_size, sizeof data_size, id);

  if ((s = read_methods(p, rm, &cv, &c))) return s;
  size_t total;
  if (!tdm__add_size(p->state_size, p->scratch_size, &total) || total > cap)
    return tdm__fail(TDM_ERR_LIMIT, "state (%zu bytes) plus scratch (%zu bytes) is above the cap of %llu", p->state_size, p->scratch_size, (unsigned long long)cap);
  return TDM_OK;
}

tdm_status tdm_program_load_owned(void *data, size_t size, tdm_program **out) {
  if (!out || (!data && size)) {
    tdm__free(data);
    return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "tdm_program_load: NULL argument");
  }
  *out = NULL;
  tdm_program *p = tdm__calloc(sizeof *p);
  if (!p) {
    tdm__free(data);
    return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "out of memory allocating a program");
  }
  p->file = data;
  p->file_size = size;
  tdm_status s = parse(p);
  if (s) {
    tdm_program_free(p);
    return s;
  }
  *out = p;
  return TDM_OK;
}

tdm_status tdm_program_load(const void *data, size_t size, tdm_program **out) {
  if (!out || (!data && size)) return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "tdm_program_load: NULL argument");
  *out = NULL;
  void *copy = tdm__alloc(size);
  if (!copy) return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "out of memory copying a %zu-byte file", size);
  if (size) memcpy(copy, data, size);
  return tdm_program_load_owned(copy, size, out);
}

void tdm_program_free(tdm_program *p) {
  if (!p) return;
  tdm__free(p->arena);
  tdm__free(p->file);
  tdm__free(p);
}
