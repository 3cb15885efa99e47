/* ops.h — the runtime's operator table: every op has a rule (checked once, at load) and a kernel
 * (run per call). Kernels never allocate; only ops marked `can_fail` may return an error, and they
 * do so before writing anything (src/ only). */
#ifndef TDM_OPS_H
#define TDM_OPS_H

#include "program.h"
#include "schema.h"

#define TDM_MAX_OPERANDS 64

/* In-place updates an op allows (the output is exactly an input: same region, offset, size), from
 * src/schema.h: TDM_INPLACE_NONE; TDM_INPLACE_FIRST, input 0 (index_put, slice_scatter: only the
 * updated rows are written); TDM_INPLACE_ANY, any input of the output's dtype and size
 * (elementwise: y[i] needs only x[i]). */

typedef tdm_status (*tdm_op_check_fn)(const tdm_method *m, const tdm_op *op);
typedef tdm_status (*tdm_op_run_fn)(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out);

/* What the CPU backend prepares for its kernels from a verified program's bytes (packed or
 * transformed weights), never written into the file's data: an op def's `prepare` hook returns the
 * op's prepared data (op->prepared), or NULL, where the kernel reads the file's bytes as they are
 * (also when out of memory: prepared data only ever makes a kernel faster, never changes its
 * result); its `release` hook frees it, once per op, when the program is freed. Both run on the
 * program alone (tdm_program_load / tdm_program_free), never while a method runs. */
typedef struct tdm_prepare_cx {
  const tdm_program *program;
} tdm_prepare_cx;
typedef void *(*tdm_op_prepare_fn)(tdm_prepare_cx *cx, const tdm_method *m, const tdm_op *op);
typedef void (*tdm_op_release_fn)(void *prepared);

/* The undo journal of an update in place (index_put, slice_scatter, scatter writing their input 0's
 * bytes): the bytes the op is about to write, so that a call which fails later can put them back
 * (session.c). The hook returns how many ranges of out the op writes at most and sets *len to the
 * largest, from the shapes alone; with fn, it also calls fn on each range it will write, from the
 * inputs' values (indices), before the kernel runs. */
typedef void (*tdm_range_fn)(void *cx, uint8_t *p, size_t n);
typedef size_t (*tdm_op_writes_fn)(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out, size_t *len, tdm_range_fn fn, void *cx);

typedef struct tdm_opdef {
  const char *name;
  int code;        /* sub-operation for families that share a kernel (binary, unary, reduce) */
  bool can_fail;   /* depends on runtime values (indices); validates before writing */
  uint8_t inplace; /* TDM_INPLACE_*: which inputs its output may be exactly (an update in place) */
  /* can_fail and inplace come from python/tandem/schema.py through src/schema.h: write table
   * entries with TDM_OP, which fails to compile for an op the schema does not declare. */
  tdm_op_check_fn check;
  tdm_op_run_fn run;
  tdm_op_prepare_fn prepare; /* NULL, or the op's prepared data for the CPU kernels (above) */
  tdm_op_release_fn release; /* with prepare: frees what it returned */
  tdm_op_writes_fn writes;   /* NULL, or the ranges an update in place writes (above) */
} tdm_opdef;

/* A table entry: the op `name` (an identifier) with the flags src/schema.h declares for it;
 * TDM_OP_PREPARED also with its prepare and release hooks. */
#define TDM_OP(name, code, check, run) {#name, code, TDM__OPFLAGS_##name, check, run, NULL, NULL, NULL}
#define TDM_OP_PREPARED(name, code, check, run, prepare, release) {#name, code, TDM__OPFLAGS_##name, check, run, prepare, release, NULL}
#define TDM_OP_UPDATE(name, code, check, run, writes) {#name, code, TDM__OPFLAGS_##name, check, run, NULL, NULL, writes}
#define TDM_OP_END {NULL, 0, false, TDM_INPLACE_NONE, NULL, NULL, NULL, NULL, NULL}

/* The op of that name, or NULL. */
const tdm_opdef *tdm__find_op(const char *name);
/* Every op's prepare hook, over a verified program (program.c, at load). tdm__release_ops frees
 * what they built. */
void tdm__prepare_ops(tdm_program *p);
void tdm__release_ops(tdm_program *p);
/* Whether the op may read the constant-only dtypes (quantized weights): the quant family only. */
bool tdm__reads_const_only(const tdm_opdef *def);
/* How many ops the runtime has (every family's table). */
size_t tdm__op_count(void);

/* Shape helpers shared by rules and kernels. */
bool tdm__shape_eq(const tdm_shape *a, const tdm_shape *b);
/* out = broadcast(a, b) following PyTorch; false if they do not broadcast. */
bool tdm__broadcast(const tdm_shape *a, const tdm_shape *b, tdm_shape *out);
/* Strides (in elements) of `in` viewed in the index space of `out` (0 on broadcast dims), aligned
 * to out's rank. Requires `in` to broadcast to `out`. */
void tdm__broadcast_strides(const tdm_shape *in, const tdm_shape *out, int64_t *strides);
int64_t tdm__numel(const tdm_shape *s);

/* Rule failure with the op's name and position. */
tdm_status tdm__rule(const tdm_op *op, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#define TDM_VAL(m, op, k) (&(m)->values[(op)->in[k]])
#define TDM_OUTVAL(m, op, k) (&(m)->values[(op)->out[k]])

/* Families, one file each in src/kernels/. */
extern const tdm_opdef tdm__elementwise_ops[];
extern const tdm_opdef tdm__linalg_ops[];
extern const tdm_opdef tdm__shape_ops[];
extern const tdm_opdef tdm__reduce_ops[];
extern const tdm_opdef tdm__scatter_ops[];
extern const tdm_opdef tdm__attention_ops[];
extern const tdm_opdef tdm__conv_ops[];
extern const tdm_opdef tdm__conv_q8_ops[]; /* conv_q8, conv_transpose_q8, conv_bf16, conv_transpose_bf16:
                                              int8 or bfloat16 weights (conv_q8.c); conv_i16,
                                              conv_transpose_i16: int16 (conv_i16.c) */
extern const tdm_opdef tdm__select_ops[];
extern const tdm_opdef tdm__random_ops[]; /* random.c: the generator's state is the `__rng__` slot */

/* Whether op is an update in place of the state that the session journals (its def has a `writes`
 * hook and its one output is exactly its input 0, in the state region): such an op may run before an
 * op that can fail, whose failure puts the bytes it wrote back (verify.c, session.c). */
static inline bool tdm__journaled(const tdm_method *m, const tdm_op *op) {
  if (!op->def->writes || op->n_out != 1 || op->n_in < 1) return false;
  const tdm_value *x = TDM_VAL(m, op, 0), *y = TDM_OUTVAL(m, op, 0);
  return y->region == TDM_REGION_STATE && x->region == y->region && x->offset == y->offset && x->nbytes == y->nbytes &&
      x->dtype == y->dtype;
}

/* cond's kernel (scatter.c), which does nothing: the session loop runs its branches. */
tdm_status tdm__cond_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out);
static inline bool tdm__is_cond(const tdm_op *op) { return op->def->run == tdm__cond_run; }

/* An index tensor's element i (int64 or int32; the rules admit only those). */
static inline int64_t tdm__index_at(const tdm_tensor *t, int64_t i) {
  return t->dtype == TDM_I32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
}

/* matmul_grouped's (and its int8 / int4 twins') end row of expert e, whose rows start at lo: offs[e]
 * clamped between lo and S, so no row is read twice or outside [0, S). */
static inline int64_t tdm__expert_end(const tdm_tensor *offs, int64_t e, int64_t lo, int64_t S) {
  const int64_t hi = tdm__index_at(offs, e);
  return hi < lo ? lo : hi > S ? S : hi;
}

/* s viewed as [outer, s[d], inner] around dim d. */
static inline void tdm__outer_inner(const tdm_shape *s, int64_t d, int64_t *outer, int64_t *inner) {
  *outer = *inner = 1;
  for (int i = 0; i < d; i++) *outer *= s->dims[i];
  for (int i = (int)d + 1; i < s->rank; i++) *inner *= s->dims[i];
}

/* The walk of gather and scatter over an index tensor's positions in order (index of x's rank, no
 * larger than x outside dim d): `off` is x's element offset of the current position with dim d's
 * coordinate 0, so index value j (in [0, x[d])) addresses x's element off + j·st[d]. */
typedef struct tdm_index_walk {
  const tdm_shape *is;
  int64_t d, off;
  int64_t st[TDM_MAX_RANK];  /* x's strides (elements) */
  int64_t idx[TDM_MAX_RANK]; /* the current position in the index */
} tdm_index_walk;

static inline void tdm__index_walk_start(tdm_index_walk *w, const tdm_shape *xs, const tdm_shape *is, int64_t d) {
  w->is = is, w->d = d, w->off = 0;
  int64_t k = 1;
  for (int i = xs->rank - 1; i >= 0; i--) {
    w->st[i] = k;
    k *= xs->dims[i];
  }
  for (int i = 0; i < TDM_MAX_RANK; i++) w->idx[i] = 0;
}

/* To the next position of the index (row-major). */
static inline void tdm__index_walk_next(tdm_index_walk *w) {
  for (int i = w->is->rank - 1; i >= 0; i--) {
    if (++w->idx[i] < w->is->dims[i]) {
      if (i != w->d) w->off += w->st[i];
      return;
    }
    if (i != w->d) w->off -= w->st[i] * (w->is->dims[i] - 1);
    w->idx[i] = 0;
  }
}
extern const tdm_opdef tdm__quant_ops[];

#endif
