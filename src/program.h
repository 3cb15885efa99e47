/* program.h — the runtime's private view of a verified program (src/ only). */
#ifndef TDM_PROGRAM_H
#define TDM_PROGRAM_H

#include "tandem.h"
#include "schema.h"
#include <stdbool.h>

/* Where a value's bytes live: tdm_region, TDM_REGION_* (src/schema.h). */

typedef struct tdm_shape {
  int32_t rank;
  int64_t dims[TDM_MAX_RANK];
} tdm_shape;

/* A method's value: a dtype, a static shape and a planned place. */
typedef struct tdm_value {
  int32_t dtype;
  tdm_shape shape;
  int64_t numel;
  size_t nbytes;
  tdm_region region;
  uint32_t ref;  /* CONST, STATE: the constant's or state's index */
  size_t offset; /* byte offset from the start of the region (CONST: of the file's data section) */
} tdm_value;

/* A tensor view a kernel works on: data + dtype + shape. */
typedef struct tdm_tensor {
  void *data;
  int32_t dtype;
  const tdm_shape *shape;
  int64_t numel;
} tdm_tensor;

struct tdm_opdef;

typedef struct tdm_op {
  const struct tdm_opdef *def;
  uint32_t n_in, n_out, n_iattr, n_fattr;
  const uint32_t *in;   /* [n_in] value indices (method-local) */
  const uint32_t *out;  /* [n_out] */
  const int64_t *iattr; /* [n_iattr] */
  const double *fattr;  /* [n_fattr] */
  /* NULL, or what the op's def prepared for the CPU kernels from the program's bytes at load, in
   * memory the CPU backend owns (ops.h, tdm_opdef.prepare: conv_wino.c's Winograd
   * transforms); the file's data is never written */
  void *prepared;
} tdm_op;

typedef struct tdm_io {
  uint32_t value;
  const char *name;
} tdm_io;

/* A dynamic dim of a method (format version 3): its bounds, and the input dim that gives its
 * value in a call (an input dim whose size is exactly this dim). */
typedef struct tdm_dim {
  const char *name;
  int64_t min, max;
  uint32_t input; /* binder: input index */
  int32_t axis;   /* binder: dim of that input */
  int32_t state;  /* -1, or the int64 state whose first element gives the dim's value in a call */
} tdm_dim;

typedef struct tdm_term {
  uint32_t dim;
  int64_t coef;
} tdm_term;

/* A symbolic size: constant + sum(coef * dim), standing for a value's dim, a value's offset (bytes
 * from the start of the tensor it views) or an op's integer attribute (TDM_SYM_*). */
typedef struct tdm_sym {
  uint8_t kind;
  uint16_t index;  /* the dim (TDM_SYM_DIM) or attribute (TDM_SYM_IATTR) index */
  uint32_t target; /* value index (DIM, OFFSET) or op index (IATTR) */
  int64_t constant;
  uint32_t n_terms;
  const tdm_term *terms; /* [n_terms] */
  size_t base, limit;    /* DIM, OFFSET: the bytes of the tensor the value views, [base, limit) */
} tdm_sym;

typedef struct tdm_method {
  const char *name;
  size_t scratch_size;
  uint32_t n_values, n_inputs, n_outputs, n_ops;
  tdm_value *values; /* [n_values] shapes and offsets at the maximum of every dim */
  tdm_io *inputs;    /* [n_inputs] */
  tdm_io *outputs;   /* [n_outputs] */
  tdm_op *ops;       /* [n_ops] */
  uint32_t n_dims, n_syms;
  tdm_dim *dims;         /* [n_dims] */
  tdm_sym *syms;         /* [n_syms] */
  const int64_t *iattrs; /* every op's iattrs, contiguous: op->iattr points inside */
  size_t n_iattrs;
  /* Versions: a method named 'base#k' is another version of 'base', specialized at export to values
   * of the state its leading `when` ops name; a call of base runs the first version whose values the
   * state holds (session.c). next_version links base's versions in file order (UINT32_MAX ends). */
  uint32_t next_version;
  bool is_version;   /* named 'base#k': not a method of its own (tdm_program_method_count lists it) */
  uint32_t fail_end; /* one past the last op that can fail (0: none): the updates before it are journaled */
} tdm_method;

typedef struct tdm_const {
  const char *name;
  int32_t dtype;
  tdm_shape shape;
  size_t data_offset; /* in the data section */
  size_t nbytes;
} tdm_const;

typedef struct tdm_state {
  const char *name;
  int32_t dtype;
  tdm_shape shape;
  size_t offset; /* in the state region */
  size_t nbytes;
  bool init_zero;
  size_t init_offset; /* in the data section when !init_zero */
} tdm_state;

struct tdm_program {
  uint8_t *file; /* owned copy of the file, 64-byte aligned */
  size_t file_size;
  const uint8_t *data; /* the data section (constants and initial values), 64-byte aligned */
  size_t data_size;
  uint32_t n_strings;
  const char **strings; /* [n_strings], NUL-terminated, inside file */
  uint32_t n_consts, n_states, n_methods;
  tdm_const *consts;
  tdm_state *states;
  tdm_method *methods;
  uint32_t n_metadata;
  const char **metadata; /* [2 * n_metadata]: name, value as JSON text (inside file) */
  size_t state_size, scratch_size;
  uint32_t version;
  uint64_t fingerprint; /* of the state layout */
  uint64_t program_id;  /* of every section but the data */
  void *arena;          /* one allocation holding every array above except file */
  bool prepared;        /* the ops' prepare hooks ran (program.c): tdm_program_free releases what they built */
};

/* A range of the state saved in a session's undo journal. */
typedef struct tdm_undo {
  size_t offset, n; /* bytes [offset, offset + n) of the state region */
} tdm_undo;

/* A dynamic method as a session last called it: the program's method with every symbolic size
 * evaluated at the call's dims (values and ops copied; op iattrs point into `iattrs`). */
typedef struct tdm_bound {
  tdm_method m;
  int64_t dims[TDM_MAX_DIMS]; /* the dims of the last successful bind */
  int64_t *in_dims;           /* [n_inputs * TDM_MAX_RANK] input shapes for the next call */
  int64_t *iattrs;            /* [m.n_iattrs] */
} tdm_bound;

struct tdm_session {
  const tdm_program *program;
  uint8_t *state;   /* [state_size] */
  uint8_t *scratch; /* [scratch_size] */
  tdm_bound *bound; /* [n_methods]; m.values is NULL for a method without dims */
  void *bound_mem;  /* one allocation holding every bound method's arrays */
  uint32_t *ran;    /* [n_methods]: the version of each method that its last run ran */
  /* The undo journal of a call (session.c): the bytes of the state that the journaled updates
   * before the method's last op that can fail overwrite, put back when the call fails. */
  tdm_undo *undo;   /* [n_undo]: where each saved range was in the state */
  uint8_t *journal; /* [journal_bytes]: the saved bytes, range after range */
  size_t n_undo, journal_bytes;
};

/* ---- loading: reader.c and reader_methods.c read, verify.c checks, bind.c evaluates sizes ---- */

/* Read and verify p->file (p->file_size bytes) into p: every invariant of docs/format.md checked
 * (reader.c). On failure p holds what was read so far, for tdm_program_free. */
tdm_status tdm__read_program(tdm_program *p);

/* Whether [off, off + len) lies inside [0, total). */
static inline bool tdm__range_inside(uint64_t off, uint64_t len, uint64_t total) { return off <= total && len <= total - off; }

static inline bool tdm__ranges_overlap(size_t a, size_t an, size_t b, size_t bn) { return an != 0 && bn != 0 && a < b + bn && b < a + an; }

/* Verify op k of m (operands, overlaps, in-place rules, the op's own check); *first_state_write is
 * the first op that wrote the state so far (-1: none) other than a journaled update (ops.h,
 * tdm__journaled), which no op that can fail may follow (verify.c). */
tdm_status tdm__verify_op(const tdm_method *m, uint32_t k, int64_t *first_state_write);

/* The branches of m's cond ops nest, at most TDM_MAX_COND_DEPTH deep (verify.c). */
tdm_status tdm__check_blocks(const tdm_method *m);

/* Def-before-use over m's scratch bytes: every byte an op or the method's outputs read was written
 * before, in the branch that reads it or around it (verify.c; after tdm__check_blocks). */
tdm_status tdm__check_defined(const tdm_method *m);

/* A symbolic size's constant + sum(coef * dims[dim]) into *out; false on int64 overflow (bind.c). */
bool tdm__eval_sym(const tdm_sym *y, const int64_t *dims, int64_t *out);

/* Evaluate method m's symbolic sizes at `dims` into `dst` (dst->values, dst->ops of m's sizes and
 * `iattrs` of m->n_iattrs are the caller's) and verify every value's bytes and every op's rule at
 * those sizes; with `defined`, also def-before-use (bind.c). */
tdm_status tdm__bind_method(const tdm_method *m, const int64_t *dims, tdm_method *dst, int64_t *iattrs, bool defined);

/* ---- queries shared by session.c and introspect.c ---- */

static inline const tdm_method *tdm__method_of(const tdm_program *p, uint32_t m) { return p && m < p->n_methods ? &p->methods[m] : NULL; }
static inline const tdm_op *tdm__op_of(const tdm_method *m, uint32_t op) { return m && op < m->n_ops ? &m->ops[op] : NULL; }
/* The symbolic size giving dim `axis` of value v, or NULL (a static dim) (introspect.c). */
const tdm_sym *tdm__dim_sym(const tdm_method *m, uint32_t v, int axis);

#endif
