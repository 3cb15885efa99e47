/* ops.c — op lookup by name and the shape helpers every rule uses. */
#include "ops.h"
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const tdm_opdef *const families[] = {tdm__elementwise_ops, tdm__linalg_ops,    tdm__shape_ops,  tdm__reduce_ops,
                                            tdm__scatter_ops,     tdm__attention_ops, tdm__conv_ops,   tdm__select_ops,
                                            tdm__quant_ops,       tdm__random_ops,    tdm__conv_q8_ops};

const tdm_opdef *tdm__find_op(const char *name) {
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (const tdm_opdef *d = families[f]; d->name; d++)
      if (strcmp(d->name, name) == 0) return d;
  return NULL;
}

void tdm__prepare_ops(tdm_program *p) {
  tdm_prepare_cx cx = {p};
  for (uint32_t i = 0; i < p->n_methods; i++)
    for (uint32_t k = 0; k < p->methods[i].n_ops; k++) {
      tdm_op *op = &p->methods[i].ops[k];
      if (op->def->prepare) op->prepared = op->def->prepare(&cx, &p->methods[i], op);
    }
  p->prepared = true;
}

void tdm__release_ops(tdm_program *p) {
  for (uint32_t i = 0; p->prepared && i < p->n_methods; i++)
    for (uint32_t k = 0; k < p->methods[i].n_ops; k++) {
      tdm_op *op = &p->methods[i].ops[k];
      if (op->prepared && op->def->release) op->def->release(op->prepared);
      op->prepared = NULL;
    }
  p->prepared = false;
}

bool tdm__reads_const_only(const tdm_opdef *def) {
  for (const tdm_opdef *d = tdm__quant_ops; d->name; d++)
    if (d == def) return true;
  for (const tdm_opdef *d = tdm__conv_q8_ops; d->name; d++)
    if (d == def) return true;
  return false;
}

size_t tdm__op_count(void) {
  size_t n = 0;
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (const tdm_opdef *d = families[f]; d->name; d++) n++;
  return n;
}

bool tdm__shape_eq(const tdm_shape *a, const tdm_shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

int64_t tdm__numel(const tdm_shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->dims[i]; /* verified not to overflow at load */
  return n;
}

bool tdm__broadcast(const tdm_shape *a, const tdm_shape *b, tdm_shape *out) {
  int r = a->rank > b->rank ? a->rank : b->rank;
  out->rank = r;
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->rank), ib = i - (r - b->rank);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    out->dims[i] = da == 1 ? db : da;
  }
  return true;
}

void tdm__broadcast_strides(const tdm_shape *in, const tdm_shape *out, int64_t *strides) {
  int64_t s = 1;
  for (int i = out->rank - 1; i >= 0; i--) {
    int ii = i - (out->rank - in->rank);
    if (ii < 0 || in->dims[ii] == 1) {
      strides[i] = 0;
    } else {
      strides[i] = s;
    }
    if (ii >= 0) s *= in->dims[ii];
  }
}

tdm_status tdm__rule(const tdm_op *op, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return tdm__fail(TDM_ERR_OP_RULE, "op '%s': %s", op->def->name, msg);
}
