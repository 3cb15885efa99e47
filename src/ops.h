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

typedef struct tdm_opdef {
  const char *name;
  int code;        /* sub-operation for families that share a kernel (binary, unary, reduce) */
  bool can_fail;   /* depends on runtime values (indices); validates before writing */
  uint8_t inplace; /* TDM_INPLACE_*: which inputs its output may be exactly (an update in place) */
  /* can_fail and inplace come from python/tandem/schema.py through src/schema.h: write table
   * entries with TDM_OP, which fails to compile for an op the schema does not declare. */
  tdm_op_check_fn check;
  tdm_op_run_fn run;
} tdm_opdef;

/* A table entry: the op `name` (an identifier) with the flags src/schema.h declares for it. */
#define TDM_OP(name, code, check, run) {#name, code, TDM__OPFLAGS_##name, check, run}
#define TDM_OP_END {NULL, 0, false, TDM_INPLACE_NONE, NULL, NULL}

/* The op of that name, or NULL. */
const tdm_opdef *tdm__find_op(const char *name);
/* The wasm builds (TDM_Q8_PAIRED, variants.h) hold matmul_q8's weights in the paired layout, where
 * the SIMD128 integer-dot GEMV needs no interleave: after a program is verified, every int8
 * constant used only as whole matmul_q8 weights with K even (and at most TDM_Q8_DOT_MAX_K) is
 * repacked in the program's own copy of the data and its ops told so; unpairing puts every one back
 * in the file's layout (tdm_program_data, which hands the data to WebGPU and to hosts, calls it).
 * The results are the same bits either way. Out of memory for the flags: nothing is repacked. */
void tdm__q8_pair_weights(tdm_program *p);
void tdm__q8_unpair_weights(tdm_program *p);
/* After a program is verified: every 1-d k3 conv (stride 1, no padding, dilation 1, one group,
 * float32 constant weights, a workspace), and every 1-d conv and transposed conv with kernel 2s and
 * stride s where it pays, gets its weights' Winograd transform in memory the program owns
 * (op->wino_u; kernels/conv_wino.c). Out of memory: none do (the direct path). */
void tdm__conv_wino_prepare(tdm_program *p);
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

/* An index tensor's element i (int64 or int32; the rules admit only those). */
static inline int64_t tdm__index_at(const tdm_tensor *t, int64_t i) {
  return t->dtype == TDM_I32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
}
extern const tdm_opdef tdm__quant_ops[];

#endif
