/* session.c — sessions (state region + scratch arena), running methods, introspection. */
#include "ops.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

/* Per method with dims: a copy of its values and ops bound at the maximum, and its inputs' shapes. */
static tdm_status create_bound(tdm_session *s) {
  const tdm_program *p = s->program;
  size_t bytes = 0, part;
  bool any = false;
  for (uint32_t i = 0; i < p->n_methods; i++) {
    const tdm_method *m = &p->methods[i];
    if (!m->n_dims) continue;
    any = true;
    const size_t parts[][2] = {{m->n_values, sizeof(tdm_value)}, {m->n_ops, sizeof(tdm_op)}, {m->n_iattrs, 8}, {m->n_inputs, TDM_MAX_RANK * 8}};
    for (size_t k = 0; k < 4; k++)
      if (!tdm__mul_size(parts[k][0], parts[k][1], &part) || !tdm__align_size(part, 16, &part) || !tdm__add_size(bytes, part, &bytes))
        return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "a session's dynamic shapes do not fit in memory");
  }
  if (!any) return TDM_OK;
  if (!tdm__mul_size(p->n_methods, sizeof(tdm_bound), &part) || !tdm__add_size(bytes, part, &bytes))
    return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "a session's dynamic shapes do not fit in memory");
  uint8_t *mem = s->bound_mem = tdm__calloc(bytes);
  if (!mem) return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "out of memory allocating a session's dynamic shapes (%zu bytes)", bytes);
  s->bound = (tdm_bound *)mem;
  mem += p->n_methods * sizeof(tdm_bound);
  for (uint32_t i = 0; i < p->n_methods; i++) {
    const tdm_method *m = &p->methods[i];
    tdm_bound *b = &s->bound[i];
    if (!m->n_dims) continue;
#define TAKE(n) (mem += ((n) + 15) & ~(size_t)15, mem - (((n) + 15) & ~(size_t)15))
    b->m.values = (tdm_value *)TAKE(m->n_values * sizeof(tdm_value));
    b->m.ops = (tdm_op *)TAKE(m->n_ops * sizeof(tdm_op));
    b->iattrs = (int64_t *)TAKE(m->n_iattrs * 8);
    b->in_dims = (int64_t *)TAKE(m->n_inputs * TDM_MAX_RANK * 8);
#undef TAKE
    for (uint32_t d = 0; d < m->n_dims; d++) b->dims[d] = m->dims[d].max;
    for (uint32_t k = 0; k < m->n_inputs; k++) memcpy(b->in_dims + k * TDM_MAX_RANK, m->values[m->inputs[k].value].shape.dims, TDM_MAX_RANK * 8);
    tdm_status st = tdm__bind_method(m, b->dims, &b->m, b->iattrs, false); /* verified at load */
    if (st) return st;
  }
  return TDM_OK;
}

tdm_status tdm_session_create(const tdm_program *p, tdm_session **out) {
  if (!p || !out) return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "tdm_session_create: NULL argument");
  *out = NULL;
  tdm_session *s = tdm__calloc(sizeof *s);
  if (!s) return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "out of memory allocating a session");
  s->program = p;
  s->state = tdm__alloc(p->state_size);
  /* Zeroed: no byte of an earlier allocation (another session's activations or KV cache) can
   * reach an output, even from a value the verifier proved is written before it is read. */
  s->scratch = tdm__calloc(p->scratch_size);
  if (!s->state || !s->scratch) {
    tdm_session_free(s);
    return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "out of memory allocating a session (%zu bytes of state, %zu of scratch)", p->state_size, p->scratch_size);
  }
  tdm_status st = create_bound(s);
  if (st) {
    tdm_session_free(s);
    return st;
  }
  tdm_session_reset_state(s);
  *out = s;
  return TDM_OK;
}

void tdm_session_free(tdm_session *s) {
  if (!s) return;
  tdm__free(s->bound_mem);
  tdm__free(s->state);
  tdm__free(s->scratch);
  tdm__free(s);
}

void tdm_session_reset_state(tdm_session *s) {
  if (!s) return;
  const tdm_program *p = s->program;
  memset(s->state, 0, p->state_size);
  for (uint32_t i = 0; i < p->n_states; i++) {
    const tdm_state *st = &p->states[i];
    if (!st->init_zero) memcpy(s->state + st->offset, p->data + st->init_offset, st->nbytes);
  }
}

void *tdm_session_state(tdm_session *s) { return s ? s->state : NULL; }

static uint8_t *value_ptr(tdm_session *s, const tdm_value *v) {
  switch (v->region) {
    case TDM_REGION_SCRATCH: return s->scratch + v->offset;
    case TDM_REGION_STATE: return s->state + v->offset;
    default: return (uint8_t *)s->program->data + v->offset; /* kernels never write constants */
  }
}

static const tdm_method *method_of(const tdm_program *p, uint32_t m) { return p && m < p->n_methods ? &p->methods[m] : NULL; }

/* The method as the session runs it: bound at its last call's sizes when it has dims. */
static const tdm_method *session_method(const tdm_session *s, uint32_t method) {
  const tdm_method *m = s ? method_of(s->program, method) : NULL;
  return m && m->n_dims ? &s->bound[method].m : m;
}

void *tdm_session_input(tdm_session *s, uint32_t method, uint32_t i) {
  const tdm_method *m = session_method(s, method);
  if (!m || i >= m->n_inputs) return NULL;
  return value_ptr(s, &m->values[m->inputs[i].value]);
}

const void *tdm_session_output(tdm_session *s, uint32_t method, uint32_t i) {
  const tdm_method *m = session_method(s, method);
  if (!m || i >= m->n_outputs) return NULL;
  return value_ptr(s, &m->values[m->outputs[i].value]);
}

/* The sym giving dim `axis` of value v, or NULL (a static dim). */
static const tdm_sym *dim_sym(const tdm_method *m, uint32_t v, int axis) {
  for (uint32_t i = 0; i < m->n_syms; i++)
    if (m->syms[i].kind == TDM_SYM_DIM && m->syms[i].target == v && m->syms[i].index == axis) return &m->syms[i];
  return NULL;
}

tdm_status tdm_session_set_input_shape(tdm_session *s, uint32_t method, uint32_t i, const int64_t *dims, int rank) {
  const tdm_method *m = s ? method_of(s->program, method) : NULL;
  if (!m || i >= m->n_inputs || (!dims && rank > 0))
    return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "tdm_session_set_input_shape: no method %u input %u, or dims is NULL", method, i);
  const tdm_value *v = &m->values[m->inputs[i].value];
  const char *in = m->inputs[i].name;
  if (rank != v->shape.rank)
    return tdm__fail(TDM_ERR_SHAPE, "method '%s' input '%s' has rank %d, given a shape of rank %d", m->name, in, v->shape.rank, rank);
  for (int d = 0; d < rank; d++) {
    const tdm_sym *y = m->n_dims ? dim_sym(m, m->inputs[i].value, d) : NULL;
    if (!y) {
      if (dims[d] != v->shape.dims[d])
        return tdm__fail(TDM_ERR_SHAPE, "method '%s' input '%s' dim %d is %lld; it must be %lld", m->name, in, d, (long long)dims[d], (long long)v->shape.dims[d]);
      continue;
    }
    const tdm_dim *dim = y->n_terms == 1 && y->terms[0].coef == 1 && y->constant == 0 ? &m->dims[y->terms[0].dim] : NULL;
    const int64_t lo = dim ? dim->min : 0, hi = dim ? dim->max : v->shape.dims[d];
    if (dims[d] < lo || dims[d] > hi)
      return tdm__fail(TDM_ERR_SHAPE, "method '%s' input '%s' dim %d is %lld; %s%s%s is between %lld and %lld: give a size in that range", m->name, in, d,
                       (long long)dims[d], dim ? "its dim '" : "it", dim ? dim->name : "", dim ? "'" : "", (long long)lo, (long long)hi);
  }
  if (m->n_dims) memcpy(s->bound[method].in_dims + (size_t)i * TDM_MAX_RANK, dims, (size_t)rank * 8);
  return TDM_OK;
}

/* Bind method's dims from its inputs' shapes; on failure the last successful binding stays. */
static tdm_status bind_call(tdm_session *s, uint32_t method) {
  const tdm_method *m = &s->program->methods[method];
  tdm_bound *b = &s->bound[method];
  int64_t dims[TDM_MAX_DIMS];
  for (uint32_t d = 0; d < m->n_dims; d++) {
    const tdm_dim *dim = &m->dims[d];
    if (dim->state >= 0) { /* bound from the state (an offset): its first element, as int64 */
      memcpy(&dims[d], s->state + s->program->states[dim->state].offset, 8);
      if (dims[d] < dim->min || dims[d] > dim->max)
        return tdm__fail(TDM_ERR_INDEX, "method '%s': dim '%s' is %lld (read from the state); it must be between %lld and %lld, so that the slices it "
                         "makes stay inside their tensors (the state is unchanged)", m->name, dim->name, (long long)dims[d], (long long)dim->min, (long long)dim->max);
      continue;
    }
    dims[d] = b->in_dims[(size_t)dim->input * TDM_MAX_RANK + dim->axis];
    if (dims[d] < dim->min || dims[d] > dim->max)
      return tdm__fail(TDM_ERR_SHAPE, "method '%s': dim '%s' is %lld (input '%s' dim %d); it is declared between %lld and %lld (the state is unchanged)",
                       m->name, dim->name, (long long)dims[d], m->inputs[dim->input].name, dim->axis, (long long)dim->min, (long long)dim->max);
  }
  const bool again = memcmp(dims, b->dims, m->n_dims * 8) != 0; /* else bound at these sizes already */
  tdm_status st = again ? tdm__bind_method(m, dims, &b->m, b->iattrs, false) : TDM_OK;
  for (uint32_t k = 0; k < m->n_inputs && !st; k++) { /* every input agrees with the dims */
    const tdm_value *v = &b->m.values[m->inputs[k].value];
    for (int d = 0; d < v->shape.rank && !st; d++)
      if (v->shape.dims[d] != b->in_dims[(size_t)k * TDM_MAX_RANK + d])
        st = tdm__fail(TDM_ERR_SHAPE, "method '%s' input '%s' dim %d is %lld, but the other inputs make it %lld", m->name, m->inputs[k].name, d,
                       (long long)b->in_dims[(size_t)k * TDM_MAX_RANK + d], (long long)v->shape.dims[d]);
  }
  if (st) {
    char msg[400];
    snprintf(msg, sizeof msg, "%s", tdm_last_error());
    if (again) tdm__bind_method(m, b->dims, &b->m, b->iattrs, false); /* back to the last good binding */
    return tdm__fail(TDM_ERR_SHAPE, "%s (the state is unchanged)", msg);
  }
  memcpy(b->dims, dims, m->n_dims * sizeof dims[0]);
  return TDM_OK;
}

int64_t tdm_session_io_dim(const tdm_session *s, uint32_t method, int io, uint32_t i, int d) {
  const tdm_method *m = session_method(s, method);
  if (!m || i >= (io ? m->n_outputs : m->n_inputs)) return -1;
  const tdm_value *v = &m->values[(io ? m->outputs : m->inputs)[i].value];
  if (d < 0 || d >= v->shape.rank) return -1;
  return !io && m->n_dims ? s->bound[method].in_dims[(size_t)i * TDM_MAX_RANK + d] : v->shape.dims[d];
}

size_t tdm_session_io_nbytes(const tdm_session *s, uint32_t method, int io, uint32_t i) {
  const tdm_method *m = session_method(s, method);
  if (!m || i >= (io ? m->n_outputs : m->n_inputs)) return 0;
  const tdm_value *v = &m->values[(io ? m->outputs : m->inputs)[i].value];
  if (io || !m->n_dims) return v->nbytes;
  size_t n = tdm_dtype_size(v->dtype);
  for (int d = 0; d < v->shape.rank; d++) n *= (size_t)s->bound[method].in_dims[(size_t)i * TDM_MAX_RANK + d]; /* each <= the max */
  return n;
}

static void view(tdm_session *s, const tdm_value *v, tdm_tensor *t) {
  t->data = value_ptr(s, v);
  t->dtype = v->dtype;
  t->shape = &v->shape;
  t->numel = v->numel;
}

#if defined(__wasm__)
/* The host's clock (performance.now() in JS), imported by the wasm module from env (web/loader.js;
 * Emscripten declares it in src/wasm_imports.js, the wasi build by the attribute). */
extern double tdm_now_ms(void) __attribute__((import_module("env"), import_name("tdm_now_ms")));
static double now_ms(void) { return tdm_now_ms(); }
#else
#include <time.h>
static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}
#endif

static tdm_status run(tdm_session *s, uint32_t method, double *op_ms) {
  const tdm_method *m = s ? method_of(s->program, method) : NULL;
  if (!m) return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "tdm_session_run: no method %u", method);
  if (m->n_dims) {
    tdm_status st = bind_call(s, method);
    if (st) return st;
    m = &s->bound[method].m;
  }
  tdm_tensor in[TDM_MAX_OPERANDS], out[TDM_MAX_OPERANDS];
  for (uint32_t k = 0; k < m->n_ops; k++) {
    const tdm_op *op = &m->ops[k];
    for (uint32_t j = 0; j < op->n_in; j++) view(s, &m->values[op->in[j]], &in[j]);
    for (uint32_t j = 0; j < op->n_out; j++) view(s, &m->values[op->out[j]], &out[j]);
    const double t0 = op_ms ? now_ms() : 0;
    tdm_status st = op->def->run(op, in, out);
    if (op_ms) op_ms[k] = now_ms() - t0;
    if (st) {
      char msg[400];
      snprintf(msg, sizeof msg, "%s", tdm_last_error());
      return tdm__fail(st, "method '%s' op %u: %s (the state is unchanged)", m->name, k, msg);
    }
  }
  return TDM_OK;
}

tdm_status tdm_session_run(tdm_session *s, uint32_t method) { return run(s, method, NULL); }

tdm_status tdm_session_run_profiled(tdm_session *s, uint32_t method, double *op_ms) {
  if (!op_ms) return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "tdm_session_run_profiled: op_ms is NULL");
  return run(s, method, op_ms);
}

/* ---- introspection ---------------------------------------------------------------------- */

uint32_t tdm_method_op_count(const tdm_program *p, uint32_t method) {
  const tdm_method *m = method_of(p, method);
  return m ? m->n_ops : 0;
}

const char *tdm_method_op_name(const tdm_program *p, uint32_t method, uint32_t op) {
  const tdm_method *m = method_of(p, method);
  return m && op < m->n_ops ? m->ops[op].def->name : NULL;
}

/* Bytes op `k` writes into values of `region` (-1: any region); see tandem.h. */
static size_t op_bytes_written(const tdm_program *p, uint32_t method, uint32_t k, int region) {
  const tdm_method *m = method_of(p, method);
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
  const tdm_method *m = method_of(p, method);
  return m ? m->name : NULL;
}

int32_t tdm_program_find_method(const tdm_program *p, const char *name) {
  if (!p || !name) return -1;
  for (uint32_t i = 0; i < p->n_methods; i++)
    if (strcmp(p->methods[i].name, name) == 0) return (int32_t)i;
  return -1;
}

static const tdm_value *io_value(const tdm_program *p, uint32_t method, int io, uint32_t i, const char **name) {
  const tdm_method *m = method_of(p, method);
  if (!m) return NULL;
  const tdm_io *list = io ? m->outputs : m->inputs;
  if (i >= (io ? m->n_outputs : m->n_inputs)) return NULL;
  if (name) *name = list[i].name;
  return &m->values[list[i].value];
}

uint32_t tdm_method_io_count(const tdm_program *p, uint32_t method, int io) {
  const tdm_method *m = method_of(p, method);
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
  const tdm_method *m = method_of(p, method);
  return m ? m->n_dims : 0;
}
static const tdm_dim *dim_of(const tdm_program *p, uint32_t method, uint32_t d) {
  const tdm_method *m = method_of(p, method);
  return m && d < m->n_dims ? &m->dims[d] : NULL;
}
const char *tdm_method_dim_name(const tdm_program *p, uint32_t method, uint32_t d) { const tdm_dim *x = dim_of(p, method, d); return x ? x->name : NULL; }
int64_t tdm_method_dim_min(const tdm_program *p, uint32_t method, uint32_t d) { const tdm_dim *x = dim_of(p, method, d); return x ? x->min : -1; }
int64_t tdm_method_dim_max(const tdm_program *p, uint32_t method, uint32_t d) { const tdm_dim *x = dim_of(p, method, d); return x ? x->max : -1; }

size_t tdm_method_io_dim_expr(const tdm_program *p, uint32_t method, int io, uint32_t i, int d, char *buf, size_t size) {
  const tdm_method *m = method_of(p, method);
  char text[512];
  size_t n = 0;
  text[0] = 0;
  const tdm_sym *y = NULL;
  if (m && i < (io ? m->n_outputs : m->n_inputs)) y = dim_sym(m, (io ? m->outputs : m->inputs)[i].value, d);
  for (uint32_t t = 0; y && t < y->n_terms && n < sizeof text - 64; t++) {
    const int64_t c = y->terms[t].coef;
    const char *sign = t == 0 ? (c < 0 ? "-" : "") : (c < 0 ? " - " : " + ");
    const long long a = c < 0 ? -(long long)c : (long long)c;
    if (a == 1) n += (size_t)snprintf(text + n, sizeof text - n, "%s%s", sign, m->dims[y->terms[t].dim].name);
    else n += (size_t)snprintf(text + n, sizeof text - n, "%s%lld*%s", sign, a, m->dims[y->terms[t].dim].name);
  }
  if (y && y->constant && n < sizeof text - 32)
    n += (size_t)snprintf(text + n, sizeof text - n, " %s %lld", y->constant < 0 ? "-" : "+", y->constant < 0 ? -(long long)y->constant : (long long)y->constant);
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
const char *tdm_state_name(const tdm_program *p, uint32_t i) { const tdm_state *s = state_of(p, i); return s ? s->name : NULL; }
int tdm_state_dtype(const tdm_program *p, uint32_t i) { const tdm_state *s = state_of(p, i); return s ? s->dtype : 0; }
int tdm_state_rank(const tdm_program *p, uint32_t i) { const tdm_state *s = state_of(p, i); return s ? s->shape.rank : -1; }
int64_t tdm_state_dim(const tdm_program *p, uint32_t i, int d) {
  const tdm_state *s = state_of(p, i);
  return s && d >= 0 && d < s->shape.rank ? s->shape.dims[d] : -1;
}
size_t tdm_state_offset(const tdm_program *p, uint32_t i) { const tdm_state *s = state_of(p, i); return s ? s->offset : 0; }
size_t tdm_state_nbytes(const tdm_program *p, uint32_t i) { const tdm_state *s = state_of(p, i); return s ? s->nbytes : 0; }
size_t tdm_program_state_size(const tdm_program *p) { return p ? p->state_size : 0; }
size_t tdm_program_scratch_size(const tdm_program *p) { return p ? p->scratch_size : 0; }
uint64_t tdm_program_fingerprint(const tdm_program *p) { return p ? p->fingerprint : 0; }
uint64_t tdm_program_id(const tdm_program *p) { return p ? p->program_id : 0; }

uint32_t tdm_program_metadata_count(const tdm_program *p) { return p ? p->n_metadata : 0; }
const char *tdm_program_metadata_name(const tdm_program *p, uint32_t i) { return p && i < p->n_metadata ? p->metadata[2 * i] : NULL; }
const char *tdm_program_metadata_value(const tdm_program *p, uint32_t i) { return p && i < p->n_metadata ? p->metadata[2 * i + 1] : NULL; }

/* ---- the plan, for other backends (web/webgpu/) ------------------------------------------ */

tdm_status tdm_session_bind(tdm_session *s, uint32_t method) {
  const tdm_method *m = s ? method_of(s->program, method) : NULL;
  if (!m) return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "tdm_session_bind: no method %u", method);
  return m->n_dims ? bind_call(s, method) : TDM_OK;
}

const void *tdm_program_data(const tdm_program *p) { return p ? p->data : NULL; }
size_t tdm_program_data_size(const tdm_program *p) { return p ? p->data_size : 0; }

uint32_t tdm_method_value_count(const tdm_program *p, uint32_t method) {
  const tdm_method *m = method_of(p, method);
  return m ? m->n_values : 0;
}

uint32_t tdm_method_io_value(const tdm_program *p, uint32_t method, int io, uint32_t i) {
  const tdm_method *m = method_of(p, method);
  if (!m || i >= (io ? m->n_outputs : m->n_inputs)) return UINT32_MAX;
  return (io ? m->outputs : m->inputs)[i].value;
}

tdm_status tdm_session_value_info(const tdm_session *s, uint32_t method, uint32_t v, int64_t *out) {
  const tdm_method *m = session_method(s, method);
  if (!m || v >= m->n_values || !out) return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "tdm_session_value_info: no method %u value %u, or out is NULL", method, v);
  const tdm_value *x = &m->values[v];
  out[0] = x->dtype;
  out[1] = x->region;
  out[2] = x->ref;
  out[3] = (int64_t)x->offset;
  out[4] = x->shape.rank;
  for (int d = 0; d < TDM_MAX_RANK; d++) out[5 + d] = d < x->shape.rank ? x->shape.dims[d] : 0;
  return TDM_OK;
}

static const tdm_op *op_of(const tdm_method *m, uint32_t op) { return m && op < m->n_ops ? &m->ops[op] : NULL; }

uint32_t tdm_method_op_operand_count(const tdm_program *p, uint32_t method, uint32_t op, int io) {
  const tdm_op *o = op_of(method_of(p, method), op);
  return o ? (io ? o->n_out : o->n_in) : 0;
}

uint32_t tdm_method_op_operand(const tdm_program *p, uint32_t method, uint32_t op, int io, uint32_t j) {
  const tdm_op *o = op_of(method_of(p, method), op);
  if (!o || j >= (io ? o->n_out : o->n_in)) return UINT32_MAX;
  return (io ? o->out : o->in)[j];
}

uint32_t tdm_method_op_attr_count(const tdm_program *p, uint32_t method, uint32_t op, int kind) {
  const tdm_op *o = op_of(method_of(p, method), op);
  return o ? (kind ? o->n_fattr : o->n_iattr) : 0;
}

int64_t tdm_session_op_iattr(const tdm_session *s, uint32_t method, uint32_t op, uint32_t j) {
  const tdm_op *o = op_of(session_method(s, method), op);
  return o && j < o->n_iattr ? o->iattr[j] : 0;
}

double tdm_method_op_fattr(const tdm_program *p, uint32_t method, uint32_t op, uint32_t j) {
  const tdm_op *o = op_of(method_of(p, method), op);
  return o && j < o->n_fattr ? o->fattr[j] : 0.0;
}
