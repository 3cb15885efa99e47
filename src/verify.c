/* verify.c — the checks every op passes at load (and again at each call's sizes, bind.c): operand
 * indices, overlaps, in-place rules, no failing op after a state write (but a journaled update), the op's own rule; and the
 * def-before-use analysis over scratch bytes. */
#include "ops.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>

tdm_status tdm__verify_op(const tdm_method *m, uint32_t k, int64_t *first_state_write) {
  const tdm_op *op = &m->ops[k];
  if (op->n_in > TDM_MAX_OPERANDS || op->n_out > TDM_MAX_OPERANDS)
    return tdm__fail(TDM_ERR_LIMIT, "method '%s' op %u (%s) has more than %d inputs or outputs", m->name, k, op->def->name,
                     TDM_MAX_OPERANDS);
  for (uint32_t j = 0; j < op->n_in + op->n_out; j++) {
    uint32_t v = j < op->n_in ? op->in[j] : op->out[j - op->n_in];
    if (v >= m->n_values)
      return tdm__fail(TDM_ERR_MALFORMED, "method '%s' op %u (%s): value index %u is out of range (%u values)", m->name, k, op->def->name,
                       v, m->n_values);
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
          x->dtype == y->dtype && (op->def->inplace == TDM_INPLACE_ANY || (op->def->inplace == TDM_INPLACE_FIRST && i == 0));
      if (x->region == y->region && !in_place && tdm__ranges_overlap(x->offset, x->nbytes, y->offset, y->nbytes))
        return tdm__fail(TDM_ERR_MALFORMED, "method '%s' op %u (%s): output %u overlaps one of its operands", m->name, k, op->def->name, j);
    }
    if (y->region == TDM_REGION_STATE && *first_state_write < 0 && !tdm__journaled(m, op)) *first_state_write = k;
  }
  /* An op that can reject runtime values may not run after an op that wrote the state (it may
   * be that op itself: such kernels validate before writing), except an update in place that the
   * session journals and puts back when the call fails. So a failed call never changes the state. */
  if (op->def->can_fail && *first_state_write >= 0 && *first_state_write != (int64_t)k)
    return tdm__fail(TDM_ERR_MALFORMED, "method '%s' op %u (%s) can fail on runtime values after the state was written", m->name, k,
                     op->def->name);
  tdm_status s = op->def->check(m, op);
  if (s) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tdm_last_error());
    return tdm__fail(s, "method '%s' op %u: %s", m->name, k, msg);
  }
  return TDM_OK;
}

/* The branches of cond ops nest: each cond's ops lie inside the branch that holds it, at most
 * TDM_MAX_COND_DEPTH deep (each cond's own rule checked that its branches fit in the method). */
tdm_status tdm__check_blocks(const tdm_method *m) {
  struct {
    uint32_t end, else_end;
  } f[TDM_MAX_COND_DEPTH];
  uint32_t depth = 0;
  for (uint32_t k = 0; k < m->n_ops; k++) {
    while (depth && k == f[depth - 1].end) {
      if (f[depth - 1].end != f[depth - 1].else_end) f[depth - 1].end = f[depth - 1].else_end;
      else depth--;
    }
    const tdm_op *op = &m->ops[k];
    if (!tdm__is_cond(op)) continue;
    const uint32_t then_end = k + 1 + (uint32_t)op->iattr[0], else_end = then_end + (uint32_t)op->iattr[1];
    if (depth && else_end > f[depth - 1].end)
      return tdm__fail(TDM_ERR_MALFORMED, "method '%s' op %u (cond): its branches end after the branch that holds it", m->name, k);
    if (depth == TDM_MAX_COND_DEPTH)
      return tdm__fail(TDM_ERR_LIMIT, "method '%s' op %u (cond): cond ops nest more than %d deep", m->name, k, TDM_MAX_COND_DEPTH);
    f[depth].end = then_end, f[depth].else_end = else_end;
    depth++;
  }
  return TDM_OK;
}

/* Def-before-use, in bytes of scratch: every scratch byte an op reads, and every scratch byte of
 * an output of the method, must have been written before, by an earlier op's output or as an input
 * of the method (state and constants are always defined). Branches are scopes: what an op inside a
 * cond's branch writes is seen by the later ops of that branch only; the cond's outputs, which each
 * branch must write in full, are seen after its branches. Values are views, so the reasoning is
 * about byte ranges: the ends of every scratch value cut the arena into segments; a segment tree
 * counts, per segment, the writes visible at the current op (range add, range minimum); a branch's
 * writes are logged and taken back at its end. O((values + operands) log values); memory
 * proportional to the values and the ops' outputs. */
typedef struct defuse {
  size_t *cut;   /* [2 n] sorted distinct segment ends */
  int64_t *mn;   /* [4 n] segment tree: the fewest visible writes of a segment under the node */
  int64_t *add;  /* [4 n] what was added to the whole node */
  uint32_t *log; /* [2 writes]: segment ranges [lo, hi) written, in order */
  size_t n_cut, n_log;
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

/* Add v to segments [lo, hi) under node (covering [l, r)). */
static void tree_add(defuse *d, size_t node, size_t l, size_t r, size_t lo, size_t hi, int64_t v) {
  if (hi <= l || r <= lo) return;
  if (lo <= l && r <= hi) {
    d->mn[node] += v;
    d->add[node] += v;
    return;
  }
  const size_t mid = l + (r - l) / 2;
  tree_add(d, 2 * node, l, mid, lo, hi, v);
  tree_add(d, 2 * node + 1, mid, r, lo, hi, v);
  d->mn[node] = d->add[node] + (d->mn[2 * node] < d->mn[2 * node + 1] ? d->mn[2 * node] : d->mn[2 * node + 1]);
}

/* The fewest visible writes of any segment in [lo, hi) (INT64_MAX for none). */
static int64_t tree_min(const defuse *d, size_t node, size_t l, size_t r, size_t lo, size_t hi) {
  if (hi <= l || r <= lo) return INT64_MAX;
  if (lo <= l && r <= hi) return d->mn[node];
  const size_t mid = l + (r - l) / 2;
  const int64_t a = tree_min(d, 2 * node, l, mid, lo, hi), b = tree_min(d, 2 * node + 1, mid, r, lo, hi);
  const int64_t x = a < b ? a : b;
  return x == INT64_MAX ? x : x + d->add[node];
}

/* Segments [lo, hi) of a value, or false for a value without scratch bytes. */
static bool value_segments(const defuse *d, const tdm_value *x, uint32_t *lo, uint32_t *hi) {
  if (x->region != TDM_REGION_SCRATCH || !x->nbytes) return false;
  segments(d, x->offset, x->nbytes, lo, hi);
  return true;
}

/* A write of x's bytes, logged (so the end of a branch takes it back) unless it is an input's. */
static void write_value(defuse *d, const tdm_value *x, bool logged) {
  uint32_t lo, hi;
  if (!value_segments(d, x, &lo, &hi)) return;
  tree_add(d, 1, 0, d->n_cut - 1, lo, hi, 1);
  if (!logged) return;
  d->log[2 * d->n_log] = lo, d->log[2 * d->n_log + 1] = hi;
  d->n_log++;
}

static bool defined(const defuse *d, const tdm_value *x) {
  uint32_t lo, hi;
  return !value_segments(d, x, &lo, &hi) || tree_min(d, 1, 0, d->n_cut - 1, lo, hi) >= 1;
}

tdm_status tdm__check_defined(const tdm_method *m) {
  if (m->n_ops >= UINT32_MAX - 1) return tdm__fail(TDM_ERR_LIMIT, "method '%s' has too many ops", m->name);
  size_t n_scratch = 0, n_writes = 0;
  for (uint32_t v = 0; v < m->n_values; v++) n_scratch += m->values[v].region == TDM_REGION_SCRATCH && m->values[v].nbytes;
  if (n_scratch == 0) return TDM_OK;
  for (uint32_t k = 0; k < m->n_ops; k++) n_writes += m->ops[k].n_out; /* bounded by the methods section's bytes */
  const size_t n2 = 2 * n_scratch;                                     /* n_scratch <= n_values, bounded by the methods section's bytes */
  size_t bytes = 0, tree = 0, log = 0;
  uint8_t *mem = tdm__mul_size(n2, 4 * sizeof(int64_t), &tree) && tdm__mul_size(n_writes + 1, 2 * sizeof(uint32_t), &log) &&
          tdm__mul_size(n2, sizeof(size_t), &bytes) && tdm__add_size(bytes, 2 * tree, &bytes) && tdm__add_size(bytes, log, &bytes)
      ? tdm__calloc(bytes)
      : NULL;
  if (!mem) return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "out of memory checking method '%s'", m->name);
  defuse d = {(size_t *)mem, (int64_t *)(mem + n2 * sizeof(size_t)), NULL, NULL, 0, 0};
  d.add = d.mn + 4 * n2;
  d.log = (uint32_t *)(d.add + 4 * n2);
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
  d.n_cut = u; /* segment i is [cut[i], cut[i + 1]): n_cut - 1 segments (at least 1) */
  for (uint32_t i = 0; i < m->n_inputs; i++) write_value(&d, &m->values[m->inputs[i].value], false);
  struct {
    uint32_t cond, end, else_end;
    bool in_else;
    size_t mark;
  } f[TDM_MAX_COND_DEPTH];
  uint32_t depth = 0;
  tdm_status s = TDM_OK;
  for (uint32_t k = 0; !s; k++) {
    while (depth && k == f[depth - 1].end && !s) { /* the end of a branch */
      const tdm_op *c = &m->ops[f[depth - 1].cond];
      for (uint32_t j = 0; j < c->n_out && !s; j++)
        if (!defined(&d, &m->values[c->out[j]]))
          s = tdm__fail(TDM_ERR_MALFORMED, "method '%s' op %u (cond): its %s branch does not write every byte of output %u", m->name,
                        f[depth - 1].cond, f[depth - 1].in_else ? "else" : "then", j);
      for (; d.n_log > f[depth - 1].mark; d.n_log--) tree_add(&d, 1, 0, d.n_cut - 1, d.log[2 * d.n_log - 2], d.log[2 * d.n_log - 1], -1);
      if (!f[depth - 1].in_else) {
        f[depth - 1].in_else = true;
        f[depth - 1].end = f[depth - 1].else_end;
        continue;
      }
      depth--;
      for (uint32_t j = 0; j < c->n_out; j++) write_value(&d, &m->values[c->out[j]], true);
    }
    if (s || k == m->n_ops) break;
    const tdm_op *op = &m->ops[k];
    for (uint32_t j = 0; j < op->n_in && !s; j++)
      if (!defined(&d, &m->values[op->in[j]]))
        s = tdm__fail(TDM_ERR_MALFORMED, "method '%s' op %u (%s) reads value %u before every byte of it was written", m->name, k,
                      op->def->name, op->in[j]);
    if (s) break;
    if (!tdm__is_cond(op)) {
      for (uint32_t j = 0; j < op->n_out; j++) write_value(&d, &m->values[op->out[j]], true);
      continue;
    }
    if (depth == TDM_MAX_COND_DEPTH) { /* tdm__check_blocks refused it at load */
      s = tdm__fail(TDM_ERR_LIMIT, "method '%s' op %u (cond): cond ops nest more than %d deep", m->name, k, TDM_MAX_COND_DEPTH);
      break;
    }
    f[depth].cond = k;
    f[depth].end = k + 1 + (uint32_t)op->iattr[0];
    f[depth].else_end = f[depth].end + (uint32_t)op->iattr[1];
    f[depth].in_else = false;
    f[depth].mark = d.n_log;
    depth++;
  }
  for (uint32_t j = 0; j < m->n_outputs && !s; j++)
    if (!defined(&d, &m->values[m->outputs[j].value]))
      s = tdm__fail(TDM_ERR_MALFORMED, "method '%s' output %u (value %u) has bytes that no op writes", m->name, j, m->outputs[j].value);
  tdm__free(mem);
  return s;
}
