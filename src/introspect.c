/* introspect.c — queries on a loaded program: its methods, their inputs, outputs, dims and ops,
 * its states, metadata, and the plan other backends (web/webgpu/) run from. */
#include "ops.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

const tdm_sym *tdm__dim_sym(const tdm_method *m, uint32_t v, int axis) {
  for (uint32_t i = 0; i < m->n_syms; i++)
    if (m->syms[i].kind == TDM_SYM_DIM && m->syms[i].target == v && m->syms[i].index == axis) return &m->syms[i];
  return NULL;
}

uint32_t tdm_method_op_count(const tdm_program *p, uint32_t method) {
  const tdm_method *m = tdm__method_of(p, method);
  return m ? m->n_ops : 0;
}

const char *tdm_method_op_name(const tdm_program *p, uint32_t method, uint32_t op) {
  const tdm_method *m = tdm__method_of(p, method);
  return m && op < m->n_ops ? m->ops[op].def->name : NULL;
}

/* Bytes op `k` writes into values of `region` (-1: any region); see tandem.h. */
static size_t op_bytes_written(const tdm_program *p, uint32_t method, uint32_t k, int region) {
  const tdm_method *m = tdm__method_of(p, method);
  if (!m || k >= m->n_ops) return 0;
  const tdm_op *op = &m->ops[k];
  size_t total = 0;
  for (uint32_t j = 0; j < op->n_out; j++) {
    const tdm_value *y = &m->values[op->out[j]];
    if (region >= 0 && (int)y->region != region) continue;
    size_t n = y->nbytes;
    if (j == 0 && op->def->inplace == TDM_INPLACE_FIRST && op->n_in >= 2) {
      const tdm_value *base = &m->values[op->in[0]];
      /* the verifier allows an output to be its base only exactly (same place, size, dtype) */
      if (base->region == y->region && base->offset == y->offset && base->nbytes == y->nbytes)
        n = m->values[op->in[op->n_in - 1]].nbytes; /* the rows written: the values / src input */
    }
    total += n;
  }
  return total;
}

size_t tdm_method_op_bytes_written(const tdm_program *p, uint32_t method, uint32_t op) { return op_bytes_written(p, method, op, -1); }
size_t tdm_method_op_state_bytes_written(const tdm_program *p, uint32_t method, uint32_t op) {
  return op_bytes_written(p, method, op, TDM_REGION_STATE);
}

uint32_t tdm_program_method_count(const tdm_program *p) { return p ? p->n_methods : 0; }

const char *tdm_program_method_name(const tdm_program *p, uint32_t method) {
  const tdm_method *m = tdm__method_of(p, method);
  return m ? m->name : NULL;
}

int32_t tdm_program_find_method(const tdm_program *p, const char *name) {
  if (!p || !name) return -1;
  for (uint32_t i = 0; i < p->n_methods; i++)
    if (strcmp(p->methods[i].name, name) == 0) return (int32_t)i;
  return -1;
}

static const tdm_value *io_value(const tdm_program *p, uint32_t method, int io, uint32_t i, const char **name) {
  const tdm_method *m = tdm__method_of(p, method);
  if (!m) return NULL;
  const tdm_io *list = io ? m->outputs : m->inputs;
  if (i >= (io ? m->n_outputs : m->n_inputs)) return NULL;
  if (name) *name = list[i].name;
  return &m->values[list[i].value];
}

uint32_t tdm_method_io_count(const tdm_program *p, uint32_t method, int io) {
  const tdm_method *m = tdm__method_of(p, method);
  return m ? (io ? m->n_outputs : m->n_inputs) : 0;
}

const char *tdm_method_io_name(const tdm_program *p, uint32_t method, int io, uint32_t i) {
  const char *name = NULL;
  io_value(p, method, io, i, &name);
  return name;
}

int tdm_method_io_dtype(const tdm_program *p, uint32_t method, int io, uint32_t i) {
  const tdm_value *v = io_value(p, method, io, i, NULL);
  return v ? v->dtype : 0;
}

int tdm_method_io_rank(const tdm_program *p, uint32_t method, int io, uint32_t i) {
  const tdm_value *v = io_value(p, method, io, i, NULL);
  return v ? v->shape.rank : -1;
}

int64_t tdm_method_io_dim(const tdm_program *p, uint32_t method, int io, uint32_t i, int d) {
  const tdm_value *v = io_value(p, method, io, i, NULL);
  return v && d >= 0 && d < v->shape.rank ? v->shape.dims[d] : -1;
}

size_t tdm_method_io_nbytes(const tdm_program *p, uint32_t method, int io, uint32_t i) {
  const tdm_value *v = io_value(p, method, io, i, NULL);
  return v ? v->nbytes : 0;
}

uint32_t tdm_method_dim_count(const tdm_program *p, uint32_t method) {
  const tdm_method *m = tdm__method_of(p, method);
  return m ? m->n_dims : 0;
}
static const tdm_dim *dim_of(const tdm_program *p, uint32_t method, uint32_t d) {
  const tdm_method *m = tdm__method_of(p, method);
  return m && d < m->n_dims ? &m->dims[d] : NULL;
}
const char *tdm_method_dim_name(const tdm_program *p, uint32_t method, uint32_t d) {
  const tdm_dim *x = dim_of(p, method, d);
  return x ? x->name : NULL;
}
int64_t tdm_method_dim_min(const tdm_program *p, uint32_t method, uint32_t d) {
  const tdm_dim *x = dim_of(p, method, d);
  return x ? x->min : -1;
}
int64_t tdm_method_dim_max(const tdm_program *p, uint32_t method, uint32_t d) {
  const tdm_dim *x = dim_of(p, method, d);
  return x ? x->max : -1;
}

size_t tdm_method_io_dim_expr(const tdm_program *p, uint32_t method, int io, uint32_t i, int d, char *buf, size_t size) {
  const tdm_method *m = tdm__method_of(p, method);
  char text[512];
  size_t n = 0;
  text[0] = 0;
  const tdm_sym *y = NULL;
  if (m && i < (io ? m->n_outputs : m->n_inputs)) y = tdm__dim_sym(m, (io ? m->outputs : m->inputs)[i].value, d);
  for (uint32_t t = 0; y && t < y->n_terms && n < sizeof text - 64; t++) {
    const int64_t c = y->terms[t].coef;
    const char *sign = t == 0 ? (c < 0 ? "-" : "") : (c < 0 ? " - " : " + ");
    const long long a = c < 0 ? -(long long)c : (long long)c;
    if (a == 1) n += (size_t)snprintf(text + n, sizeof text - n, "%s%s", sign, m->dims[y->terms[t].dim].name);
    else n += (size_t)snprintf(text + n, sizeof text - n, "%s%lld*%s", sign, a, m->dims[y->terms[t].dim].name);
  }
  if (y && y->constant && n < sizeof text - 32)
    n += (size_t)snprintf(text + n, sizeof text - n, " %s %lld", y->constant < 0 ? "-" : "+",
                          y->constant < 0 ? -(long long)y->constant : (long long)y->constant);
  if (n >= sizeof text) n = sizeof text - 1;
  if (buf && size) {
    const size_t k = n < size - 1 ? n : size - 1;
    memcpy(buf, text, k);
    buf[k] = 0;
  }
  return n;
}

static const tdm_state *state_of(const tdm_program *p, uint32_t i) { return p && i < p->n_states ? &p->states[i] : NULL; }

uint32_t tdm_program_state_count(const tdm_program *p) { return p ? p->n_states : 0; }
const char *tdm_state_name(const tdm_program *p, uint32_t i) {
  const tdm_state *s = state_of(p, i);
  return s ? s->name : NULL;
}
int tdm_state_dtype(const tdm_program *p, uint32_t i) {
  const tdm_state *s = state_of(p, i);
  return s ? s->dtype : 0;
}
int tdm_state_rank(const tdm_program *p, uint32_t i) {
  const tdm_state *s = state_of(p, i);
  return s ? s->shape.rank : -1;
}
int64_t tdm_state_dim(const tdm_program *p, uint32_t i, int d) {
  const tdm_state *s = state_of(p, i);
  return s && d >= 0 && d < s->shape.rank ? s->shape.dims[d] : -1;
}
size_t tdm_state_offset(const tdm_program *p, uint32_t i) {
  const tdm_state *s = state_of(p, i);
  return s ? s->offset : 0;
}
size_t tdm_state_nbytes(const tdm_program *p, uint32_t i) {
  const tdm_state *s = state_of(p, i);
  return s ? s->nbytes : 0;
}
size_t tdm_program_state_size(const tdm_program *p) { return p ? p->state_size : 0; }
size_t tdm_program_scratch_size(const tdm_program *p) { return p ? p->scratch_size : 0; }
uint64_t tdm_program_fingerprint(const tdm_program *p) { return p ? p->fingerprint : 0; }
uint64_t tdm_program_id(const tdm_program *p) { return p ? p->program_id : 0; }

uint32_t tdm_program_metadata_count(const tdm_program *p) { return p ? p->n_metadata : 0; }
const char *tdm_program_metadata_name(const tdm_program *p, uint32_t i) { return p && i < p->n_metadata ? p->metadata[2 * i] : NULL; }
const char *tdm_program_metadata_value(const tdm_program *p, uint32_t i) { return p && i < p->n_metadata ? p->metadata[2 * i + 1] : NULL; }

const void *tdm_program_data(const tdm_program *p) { return p ? p->data : NULL; }
size_t tdm_program_data_size(const tdm_program *p) { return p ? p->data_size : 0; }

uint32_t tdm_method_value_count(const tdm_program *p, uint32_t method) {
  const tdm_method *m = tdm__method_of(p, method);
  return m ? m->n_values : 0;
}

uint32_t tdm_method_io_value(const tdm_program *p, uint32_t method, int io, uint32_t i) {
  const tdm_method *m = tdm__method_of(p, method);
  if (!m || i >= (io ? m->n_outputs : m->n_inputs)) return UINT32_MAX;
  return (io ? m->outputs : m->inputs)[i].value;
}

uint32_t tdm_method_op_operand_count(const tdm_program *p, uint32_t method, uint32_t op, int io) {
  const tdm_op *o = tdm__op_of(tdm__method_of(p, method), op);
  return o ? (io ? o->n_out : o->n_in) : 0;
}

uint32_t tdm_method_op_operand(const tdm_program *p, uint32_t method, uint32_t op, int io, uint32_t j) {
  const tdm_op *o = tdm__op_of(tdm__method_of(p, method), op);
  if (!o || j >= (io ? o->n_out : o->n_in)) return UINT32_MAX;
  return (io ? o->out : o->in)[j];
}

uint32_t tdm_method_op_attr_count(const tdm_program *p, uint32_t method, uint32_t op, int kind) {
  const tdm_op *o = tdm__op_of(tdm__method_of(p, method), op);
  return o ? (kind ? o->n_fattr : o->n_iattr) : 0;
}

double tdm_method_op_fattr(const tdm_program *p, uint32_t method, uint32_t op, uint32_t j) {
  const tdm_op *o = tdm__op_of(tdm__method_of(p, method), op);
  return o && j < o->n_fattr ? o->fattr[j] : 0.0;
}
