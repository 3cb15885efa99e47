/* program.h — the runtime's private view of a verified program (src/ only). */
#ifndef TDM_PROGRAM_H
#define TDM_PROGRAM_H

#include "tandem.h"
#include <stdbool.h>

/* Where a value's bytes live. */
typedef enum tdm_region { TDM_REGION_SCRATCH = 0, TDM_REGION_CONST = 1, TDM_REGION_STATE = 2 } tdm_region;

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
  const uint32_t *in;    /* [n_in] value indices (method-local) */
  const uint32_t *out;   /* [n_out] */
  const int64_t *iattr;  /* [n_iattr] */
  const double *fattr;   /* [n_fattr] */
} tdm_op;

typedef struct tdm_io {
  uint32_t value;
  const char *name;
} tdm_io;

typedef struct tdm_method {
  const char *name;
  size_t scratch_size;
  uint32_t n_values, n_inputs, n_outputs, n_ops;
  tdm_value *values;  /* [n_values] */
  tdm_io *inputs;     /* [n_inputs] */
  tdm_io *outputs;    /* [n_outputs] */
  tdm_op *ops;        /* [n_ops] */
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
  uint64_t fingerprint; /* of the state layout */
  uint64_t program_id;  /* of every section but the data */
  void *arena; /* one allocation holding every array above except file */
};

struct tdm_session {
  const tdm_program *program;
  uint8_t *state;   /* [state_size] */
  uint8_t *scratch; /* [scratch_size] */
};

#endif
