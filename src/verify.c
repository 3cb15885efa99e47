/* verify.c — the checks every op passes at load (and again at each call's sizes, bind.c): operand
 * indices, overlaps, in-place rules, no failing op after a state write, the op's own rule; and the
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
    if (y->region == TDM_REGION_STATE && *first_state_write < 0) *first_state_write = k;
  }
  /* An op that can reject runtime values may not run after an op that wrote the state (it may
   * be that op itself: such kernels validate before writing). So a failed call never changes
   * the state. */
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

tdm_status tdm__check_defined(const tdm_method *m) {
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
