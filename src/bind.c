/* bind.c — a dynamic method at one call's dims: every symbolic size evaluated, every value's bytes
 * and every op's rule verified at those sizes. Runs on every call whose dims changed (session.c), and
 * at load at the corners of the dims' box (reader_methods.c). */
#include "ops.h"
#include "util.h"

#include <string.h>

bool tdm__eval_sym(const tdm_sym *y, const int64_t *dims, int64_t *out) {
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
    if (!tdm__eval_sym(y, dims, &v)) return tdm__fail(TDM_ERR_OP_RULE, "method '%s': symbolic size %u overflows", m->name, i);
    if (y->kind == TDM_SYM_IATTR) {
      iattrs[ops[y->target].iattr - iattrs + y->index] = v;
      continue;
    }
    tdm_value *x = &values[y->target];
    if (v < 0)
      return tdm__fail(TDM_ERR_OP_RULE, "method '%s' value %u: %s %u is negative (%lld)", m->name, y->target,
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
    if (!tdm__mul_size(n, tdm_dtype_size(x->dtype), &nb) || x->offset < y->base ||
        !tdm__range_inside(x->offset - y->base, nb, y->limit - y->base))
      return tdm__fail(TDM_ERR_OP_RULE, "method '%s' value %u: its bytes lie outside the tensor it views", m->name, y->target);
    x->numel = (int64_t)n;
    x->nbytes = nb;
  }
  int64_t first_state_write = -1;
  tdm_status s;
  for (uint32_t k = 0; k < m->n_ops; k++)
    if ((s = tdm__verify_op(dst, k, &first_state_write))) return s;
  for (uint32_t i = 0; i < m->n_inputs; i++) { /* inputs stay apart at every size */
    const tdm_value *a = &values[m->inputs[i].value];
    for (uint32_t e = 0; e < i; e++) {
      const tdm_value *b = &values[m->inputs[e].value];
      if (tdm__ranges_overlap(a->offset, a->nbytes, b->offset, b->nbytes))
        return tdm__fail(TDM_ERR_MALFORMED, "method '%s' input %u overlaps input %u", m->name, i, e);
    }
  }
  return defined ? tdm__check_defined(dst) : TDM_OK;
}
