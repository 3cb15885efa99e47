/* session.c — sessions (state region + scratch arena), binding a call's shapes, running methods
 * (the program's queries: introspect.c). */
#include "ops.h"
#include "util.h"

#include <assert.h>
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
    const size_t parts[][2] = {
        {m->n_values, sizeof(tdm_value)}, {m->n_ops, sizeof(tdm_op)}, {m->n_iattrs, 8}, {m->n_inputs, TDM_MAX_RANK * 8}};
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
    for (uint32_t k = 0; k < m->n_inputs; k++)
      memcpy(b->in_dims + k * TDM_MAX_RANK, m->values[m->inputs[k].value].shape.dims, TDM_MAX_RANK * 8);
    tdm_status st = tdm__bind_method(m, b->dims, &b->m, b->iattrs, false); /* verified at load */
    if (st) return st;
  }
  return TDM_OK;
}

static void view(tdm_session *s, const tdm_value *v, tdm_tensor *t);

/* The undo journal's size: over every method (bound at the maximum of its dims), the ranges and bytes
 * its journaled updates before its last op that can fail may write. */
static tdm_status create_journal(tdm_session *s) {
  size_t most_ranges = 0, most_bytes = 0;
  tdm_tensor in[TDM_MAX_OPERANDS], out[1];
  for (uint32_t i = 0; i < s->program->n_methods; i++) {
    const tdm_method *m = s->program->methods[i].n_dims ? &s->bound[i].m : &s->program->methods[i];
    size_t ranges = 0, bytes = 0, n, len, b;
    for (uint32_t k = 0; k < m->fail_end; k++) {
      const tdm_op *op = &m->ops[k];
      if (!tdm__journaled(m, op)) continue;
      for (uint32_t j = 0; j < op->n_in; j++) view(s, &m->values[op->in[j]], &in[j]);
      view(s, &m->values[op->out[0]], &out[0]);
      n = op->def->writes(op, in, out, &len, NULL, NULL);
      if (!tdm__add_size(ranges, n, &ranges) || !tdm__mul_size(n, len, &b) || !tdm__add_size(bytes, b, &bytes))
        return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "method '%s': its undo journal does not fit in memory", m->name);
    }
    most_ranges = ranges > most_ranges ? ranges : most_ranges;
    most_bytes = bytes > most_bytes ? bytes : most_bytes;
  }
  size_t undo_bytes;
  if (!tdm__mul_size(most_ranges, sizeof(tdm_undo), &undo_bytes))
    return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "a session's undo journal does not fit in memory");
  if (!most_ranges) return TDM_OK; /* no update before an op that can fail: no journal */
  s->undo = tdm__alloc(undo_bytes);
  s->journal = most_bytes ? tdm__alloc(most_bytes) : NULL;
  s->n_undo = most_ranges, s->journal_bytes = most_bytes;
  if (!s->undo || (most_bytes && !s->journal))
    return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "out of memory allocating a session's undo journal (%zu bytes)", most_bytes + undo_bytes);
  return TDM_OK;
}

tdm_status tdm_session_create(const tdm_program *p, tdm_session **out) {
  if (!p || !out) return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "tdm_session_create: NULL argument");
  *out = NULL;
  tdm_session *s = tdm__calloc(sizeof *s);
  if (!s) return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "out of memory allocating a session");
  s->program = p;
  s->state = tdm__alloc(p->state_size);
  s->ran = tdm__alloc((p->n_methods ? p->n_methods : 1) * sizeof(uint32_t));
  /* Zeroed: no byte of an earlier allocation (another session's activations or KV cache) can
   * reach an output, even from a value the verifier proved is written before it is read. */
  s->scratch = tdm__calloc(p->scratch_size);
  if (!s->state || !s->scratch || !s->ran) {
    tdm_session_free(s);
    return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "out of memory allocating a session (%zu bytes of state, %zu of scratch)", p->state_size,
                     p->scratch_size);
  }
  tdm_status st = create_bound(s);
  if (!st) st = create_journal(s);
  if (st) {
    tdm_session_free(s);
    return st;
  }
  for (uint32_t i = 0; i < p->n_methods; i++) s->ran[i] = i;
  tdm_session_reset_state(s);
  *out = s;
  return TDM_OK;
}

void tdm_session_free(tdm_session *s) {
  if (!s) return;
  tdm__free(s->bound_mem);
  tdm__free(s->ran);
  tdm__free(s->undo);
  tdm__free(s->journal);
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

/* The method as the session runs it: bound at its last call's sizes when it has dims. */
static const tdm_method *session_method(const tdm_session *s, uint32_t method) {
  const tdm_method *m = s ? tdm__method_of(s->program, method) : NULL;
  return m && m->n_dims ? &s->bound[method].m : m;
}

/* Whether the state holds the values a version's leading `when` / `when_in` ops name. */
static bool version_fits(const tdm_session *s, const tdm_method *m) {
  for (uint32_t k = 0; k < m->n_ops; k++) {
    const tdm_op *op = &m->ops[k];
    const bool in = strcmp(op->def->name, "when_in") == 0;
    if (!in && strcmp(op->def->name, "when") != 0) break;
    const tdm_value *v = &m->values[op->in[0]]; /* one int64 of the state (when_check, when_in_check) */
    int64_t x;
    memcpy(&x, s->state + v->offset, 8);
    if (in ? x < op->iattr[0] || x > op->iattr[1] : x != op->iattr[0]) return false;
  }
  return true;
}

/* The version of `method` that a call finds fitting the state now: the first whose values the state
 * holds, else the method itself (whose `when` fails the call, typed, with the state unchanged). */
static uint32_t version_now(const tdm_session *s, uint32_t method) {
  const tdm_program *p = s ? s->program : NULL;
  if (!p || method >= p->n_methods) return method;
  const tdm_method *m = &p->methods[method];
  if (m->is_version || m->next_version == UINT32_MAX) return method; /* a method without versions: nothing to pick */
  for (uint32_t v = method; v != UINT32_MAX; v = p->methods[v].next_version)
    if (version_fits(s, &p->methods[v])) return v;
  return method;
}

/* The version of `method` that its last run ran (its outputs and their shapes are that version's). */
static uint32_t version_ran(const tdm_session *s, uint32_t method) { return s && method < s->program->n_methods ? s->ran[method] : method; }

void *tdm_session_input(tdm_session *s, uint32_t method, uint32_t i) {
  const tdm_method *m = session_method(s, version_now(s, method));
  if (!m || i >= m->n_inputs) return NULL;
  return value_ptr(s, &m->values[m->inputs[i].value]);
}

const void *tdm_session_output(tdm_session *s, uint32_t method, uint32_t i) {
  const tdm_method *m = session_method(s, version_ran(s, method));
  if (!m || i >= m->n_outputs) return NULL;
  return value_ptr(s, &m->values[m->outputs[i].value]);
}

static tdm_status set_input_shape(tdm_session *s, uint32_t method, uint32_t i, const int64_t *dims, int rank);

/* Every version of a method takes the same inputs (reader_methods.c): each gets the shape. */
tdm_status tdm_session_set_input_shape(tdm_session *s, uint32_t method, uint32_t i, const int64_t *dims, int rank) {
  tdm_status st = set_input_shape(s, method, i, dims, rank);
  const tdm_method *m = st ? NULL : tdm__method_of(s->program, method);
  if (m && !m->is_version)
    for (uint32_t v = m->next_version; v != UINT32_MAX && !st; v = s->program->methods[v].next_version)
      st = set_input_shape(s, v, i, dims, rank);
  return st;
}

static tdm_status set_input_shape(tdm_session *s, uint32_t method, uint32_t i, const int64_t *dims, int rank) {
  const tdm_method *m = s ? tdm__method_of(s->program, method) : NULL;
  if (!m || i >= m->n_inputs || (!dims && rank > 0))
    return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "tdm_session_set_input_shape: no method %u input %u, or dims is NULL", method, i);
  const tdm_value *v = &m->values[m->inputs[i].value];
  const char *in = m->inputs[i].name;
  if (rank != v->shape.rank)
    return tdm__fail(TDM_ERR_SHAPE, "method '%s' input '%s' has rank %d, given a shape of rank %d", m->name, in, v->shape.rank, rank);
  for (int d = 0; d < rank; d++) {
    const tdm_sym *y = m->n_dims ? tdm__dim_sym(m, m->inputs[i].value, d) : NULL;
    if (!y) {
      if (dims[d] != v->shape.dims[d])
        return tdm__fail(TDM_ERR_SHAPE, "method '%s' input '%s' dim %d is %lld; it must be %lld", m->name, in, d, (long long)dims[d],
                         (long long)v->shape.dims[d]);
      continue;
    }
    const tdm_dim *dim = y->n_terms == 1 && y->terms[0].coef == 1 && y->constant == 0 ? &m->dims[y->terms[0].dim] : NULL;
    const int64_t lo = dim ? dim->min : 0, hi = dim ? dim->max : v->shape.dims[d];
    if (dims[d] < lo || dims[d] > hi)
      return tdm__fail(TDM_ERR_SHAPE, "method '%s' input '%s' dim %d is %lld; %s%s%s is between %lld and %lld: give a size in that range",
                       m->name, in, d, (long long)dims[d], dim ? "its dim '" : "it", dim ? dim->name : "", dim ? "'" : "", (long long)lo,
                       (long long)hi);
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
        return tdm__fail(TDM_ERR_INDEX,
                         "method '%s': dim '%s' is %lld (read from the state); it must be between %lld and %lld, so that the slices it "
                         "makes stay inside their tensors (the state is unchanged)",
                         m->name, dim->name, (long long)dims[d], (long long)dim->min, (long long)dim->max);
      continue;
    }
    dims[d] = b->in_dims[(size_t)dim->input * TDM_MAX_RANK + dim->axis];
    if (dims[d] < dim->min || dims[d] > dim->max)
      return tdm__fail(
          TDM_ERR_SHAPE, "method '%s': dim '%s' is %lld (input '%s' dim %d); it is declared between %lld and %lld (the state is unchanged)",
          m->name, dim->name, (long long)dims[d], m->inputs[dim->input].name, dim->axis, (long long)dim->min, (long long)dim->max);
  }
  const bool again = memcmp(dims, b->dims, m->n_dims * 8) != 0; /* else bound at these sizes already */
  tdm_status st = again ? tdm__bind_method(m, dims, &b->m, b->iattrs, false) : TDM_OK;
  for (uint32_t k = 0; k < m->n_inputs && !st; k++) { /* every input agrees with the dims */
    const tdm_value *v = &b->m.values[m->inputs[k].value];
    for (int d = 0; d < v->shape.rank && !st; d++)
      if (v->shape.dims[d] != b->in_dims[(size_t)k * TDM_MAX_RANK + d])
        st = tdm__fail(TDM_ERR_SHAPE, "method '%s' input '%s' dim %d is %lld, but the other inputs make it %lld", m->name,
                       m->inputs[k].name, d, (long long)b->in_dims[(size_t)k * TDM_MAX_RANK + d], (long long)v->shape.dims[d]);
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
  method = io ? version_ran(s, method) : method;
  const tdm_method *m = session_method(s, method);
  if (!m || i >= (io ? m->n_outputs : m->n_inputs)) return -1;
  const tdm_value *v = &m->values[(io ? m->outputs : m->inputs)[i].value];
  if (d < 0 || d >= v->shape.rank) return -1;
  return !io && m->n_dims ? s->bound[method].in_dims[(size_t)i * TDM_MAX_RANK + d] : v->shape.dims[d];
}

size_t tdm_session_io_nbytes(const tdm_session *s, uint32_t method, int io, uint32_t i) {
  method = io ? version_ran(s, method) : method;
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

/* A call's undo journal as it fills: ranges saved, bytes saved. */
typedef struct journal_cx {
  tdm_session *s;
  size_t n, used;
} journal_cx;

/* Save the state's bytes [p, p + n) before a journaled update writes them. */
static void journal_save(void *cx, uint8_t *p, size_t n) {
  journal_cx *j = cx;
  tdm_session *s = j->s;
  assert(j->n < s->n_undo && n <= s->journal_bytes - j->used); /* sized from the same hooks (create_journal) */
  s->undo[j->n++] = (tdm_undo){(size_t)(p - s->state), n};
  if (n) memcpy(s->journal + j->used, p, n);
  j->used += n;
}

/* Put the saved bytes back, the last saved first: the state as it was before the call. */
static void journal_undo(const journal_cx *j) {
  size_t used = j->used;
  for (size_t i = j->n; i-- > 0;) {
    used -= j->s->undo[i].n;
    if (j->s->undo[i].n) memcpy(j->s->state + j->s->undo[i].offset, j->s->journal + used, j->s->undo[i].n);
  }
}

static tdm_status run(tdm_session *s, uint32_t method, double *op_ms) {
  const tdm_method *m = s ? tdm__method_of(s->program, method) : NULL;
  if (!m) return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "tdm_session_run: no method %u", method);
  const uint32_t called = method, n_timed = m->n_ops; /* op_ms has room for the called method's ops */
  method = version_now(s, method);
  m = &s->program->methods[method];
  if (m->n_dims) {
    tdm_status st = bind_call(s, method);
    if (st) return st;
    m = &s->bound[method].m;
  }
  tdm_tensor in[TDM_MAX_OPERANDS], out[TDM_MAX_OPERANDS];
  if (op_ms)
    for (uint32_t k = 0; k < n_timed; k++) op_ms[k] = 0;
  /* cond ops (verified to nest, at most TDM_MAX_COND_DEPTH deep): at `end`, the end of the branch
   * that runs, the run goes on at `resume`, the end of the other branch */
  struct {
    uint32_t end, resume;
  } branch[TDM_MAX_COND_DEPTH];
  uint32_t depth = 0;
  journal_cx journal = {s, 0, 0};
  for (uint32_t k = 0; k < m->n_ops; k++) {
    while (depth && k == branch[depth - 1].end) k = branch[--depth].resume;
    if (k >= m->n_ops) break;
    const tdm_op *op = &m->ops[k];
    if (tdm__is_cond(op)) {
      const bool pred = *value_ptr(s, &m->values[op->in[0]]) != 0;
      const uint32_t then_end = k + 1 + (uint32_t)op->iattr[0], else_end = then_end + (uint32_t)op->iattr[1];
      branch[depth].end = pred ? then_end : else_end;
      branch[depth++].resume = else_end;
      if (!pred) k = then_end - 1; /* the else branch */
      continue;
    }
    for (uint32_t j = 0; j < op->n_in; j++) view(s, &m->values[op->in[j]], &in[j]);
    for (uint32_t j = 0; j < op->n_out; j++) view(s, &m->values[op->out[j]], &out[j]);
    const double t0 = op_ms ? now_ms() : 0;
    if (k < m->fail_end && tdm__journaled(m, op)) {
      /* sized at the maximum of the dims (create_journal); a size that shrinks as a dim grows is refused here */
      size_t len;
      const size_t n = op->def->writes(op, in, out, &len, NULL, NULL);
      if (n > s->n_undo - journal.n || (len && n > (s->journal_bytes - journal.used) / len)) {
        journal_undo(&journal);
        return tdm__fail(TDM_ERR_LIMIT,
                         "method '%s' op %u (%s): the rows it updates at these sizes do not fit in the session's undo "
                         "journal, sized at the maximum of the dims (the state is unchanged)",
                         m->name, k, op->def->name);
      }
      op->def->writes(op, in, out, &len, journal_save, &journal);
    }
    tdm_status st = op->def->run(op, in, out);
    if (op_ms && k < n_timed) op_ms[k] = now_ms() - t0;
    if (st) {
      journal_undo(&journal);
      char msg[400];
      snprintf(msg, sizeof msg, "%s", tdm_last_error());
      return tdm__fail(st, "method '%s' op %u: %s (the state is unchanged)", m->name, k, msg);
    }
  }
  s->ran[called] = method;
  return TDM_OK;
}

tdm_status tdm_session_run(tdm_session *s, uint32_t method) { return run(s, method, NULL); }

tdm_status tdm_session_run_profiled(tdm_session *s, uint32_t method, double *op_ms) {
  if (!op_ms) return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "tdm_session_run_profiled: op_ms is NULL");
  return run(s, method, op_ms);
}

/* ---- the plan, for other backends (web/webgpu/) ------------------------------------------ */

tdm_status tdm_session_bind(tdm_session *s, uint32_t method) {
  const tdm_method *m = s ? tdm__method_of(s->program, method) : NULL;
  if (!m) return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "tdm_session_bind: no method %u", method);
  return m->n_dims ? bind_call(s, method) : TDM_OK;
}

tdm_status tdm_session_value_info(const tdm_session *s, uint32_t method, uint32_t v, int64_t *out) {
  const tdm_method *m = session_method(s, method);
  if (!m || v >= m->n_values || !out)
    return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "tdm_session_value_info: no method %u value %u, or out is NULL", method, v);
  const tdm_value *x = &m->values[v];
  out[0] = x->dtype;
  out[1] = x->region;
  out[2] = x->ref;
  out[3] = (int64_t)x->offset;
  out[4] = x->shape.rank;
  for (int d = 0; d < TDM_MAX_RANK; d++) out[5 + d] = d < x->shape.rank ? x->shape.dims[d] : 0;
  return TDM_OK;
}

int64_t tdm_session_op_iattr(const tdm_session *s, uint32_t method, uint32_t op, uint32_t j) {
  const tdm_op *o = tdm__op_of(session_method(s, method), op);
  return o && j < o->n_iattr ? o->iattr[j] : 0;
}
