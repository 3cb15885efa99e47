/* session.c — sessions (state region + scratch arena), running methods, introspection. */
#include "ops.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

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
  tdm_session_reset_state(s);
  *out = s;
  return TDM_OK;
}

void tdm_session_free(tdm_session *s) {
  if (!s) return;
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

void *tdm_session_input(tdm_session *s, uint32_t method, uint32_t i) {
  const tdm_method *m = s ? method_of(s->program, method) : NULL;
  if (!m || i >= m->n_inputs) return NULL;
  return value_ptr(s, &m->values[m->inputs[i].value]);
}

const void *tdm_session_output(tdm_session *s, uint32_t method, uint32_t i) {
  const tdm_method *m = s ? method_of(s->program, method) : NULL;
  if (!m || i >= m->n_outputs) return NULL;
  return value_ptr(s, &m->values[m->outputs[i].value]);
}

static void view(tdm_session *s, const tdm_value *v, tdm_tensor *t) {
  t->data = value_ptr(s, v);
  t->dtype = v->dtype;
  t->shape = &v->shape;
  t->numel = v->numel;
}

#if defined(__EMSCRIPTEN__)
/* The host's clock (performance.now() in JS), imported by the wasm module (src/wasm_imports.js). */
extern double tdm_now_ms(void);
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
