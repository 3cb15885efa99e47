/* builder.h — writes small .tandem files by hand for the C tests (docs/format.md's layout), so a
 * test can state exactly the program it loads: one that breaks a single invariant, or one op on
 * chosen operands. No constants; states start at zero. Not a second exporter: fixed small limits,
 * exit(1) when a test asks for more. */
#ifndef TDM_BUILDER_H
#define TDM_BUILDER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tandem.h"
#include "schema.h" /* TDM_REGION_*, TDM_INIT_* */

enum { TB_SCRATCH = TDM_REGION_SCRATCH, TB_STATE = TDM_REGION_STATE };

typedef struct tb_value {
  int dtype, rank, region; /* region: TB_SCRATCH or TB_STATE */
  uint32_t ref;            /* state index */
  uint64_t offset;         /* bytes into the scratch arena or the state tensor */
  int64_t dims[TDM_MAX_RANK];
} tb_value;

typedef struct tb_op {
  const char *name;
  int n_in, n_out, n_iattr, n_fattr;
  uint32_t in[8], out[8];
  int64_t iattr[8];
  double fattr[4];
} tb_op;

typedef struct tb_dim {
  const char *name;
  int64_t min, max;
} tb_dim;

/* A symbolic size (format version 3): constant + sum(coef[i] * dims[dim[i]]). */
typedef struct tb_sym {
  int kind, index; /* TDM_SYM_DIM / OFFSET / IATTR codes: 0, 1, 2 */
  uint32_t target;
  int64_t constant;
  int n_terms;
  uint32_t dim[2];
  int64_t coef[2];
} tb_sym;

typedef struct tb_method {
  const char *name;
  uint64_t scratch;
  int n_values, n_inputs, n_outputs, n_ops;
  tb_value values[16];
  uint32_t inputs[8], outputs[8];
  tb_op ops[16];
  int n_dims, n_syms; /* a program with dims is written as version 3 */
  tb_dim dims[2];
  tb_sym syms[16];
} tb_method;

typedef struct tb_state {
  const char *name;
  int dtype, rank;
  int64_t dims[TDM_MAX_RANK];
} tb_state;

typedef struct tb_program {
  int version; /* 0: 1, or 3 when a method has dims; 2: version 2 (6 sections, no dims) */
  int n_states, n_methods;
  tb_state states[4];
  tb_method methods[4];
} tb_program;

typedef struct tb_buf {
  unsigned char *p;
  size_t n, cap;
} tb_buf;

static void tb_put(tb_buf *b, const void *src, size_t k) {
  if (b->n + k > b->cap) {
    b->cap = (b->n + k) * 2 + 256;
    b->p = realloc(b->p, b->cap);
    if (!b->p) exit(1);
  }
  memcpy(b->p + b->n, src, k);
  b->n += k;
}
static void tb_u8(tb_buf *b, uint8_t v) { tb_put(b, &v, 1); }
static void tb_u16(tb_buf *b, uint16_t v) { tb_put(b, &v, 2); }
static void tb_u32(tb_buf *b, uint32_t v) { tb_put(b, &v, 4); }
static void tb_u64(tb_buf *b, uint64_t v) { tb_put(b, &v, 8); }
static void tb_pad(tb_buf *b, size_t align) {
  while (b->n % align) tb_u8(b, 0);
}

typedef struct tb_strings {
  const char *s[128];
  uint32_t n;
} tb_strings;

static uint32_t tb_str(tb_strings *t, const char *s) {
  for (uint32_t i = 0; i < t->n; i++)
    if (strcmp(t->s[i], s) == 0) return i;
  if (t->n == 128) exit(1);
  t->s[t->n] = s;
  return t->n++;
}

static size_t tb_nbytes(int dtype, int rank, const int64_t *dims) {
  size_t n = tdm_dtype_size(dtype);
  for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
  return n;
}

/* The file's bytes (malloc'd, the caller frees) and their count in *size. */
static unsigned char *tb_build(const tb_program *p, size_t *size) {
  static const char *io_names[] = {"io0", "io1", "io2", "io3", "io4", "io5", "io6", "io7"};
  tb_strings st = {{0}, 0};
  tb_buf strings = {0}, states = {0}, methods = {0};
  /* states: 64-aligned offsets, ascending */
  uint64_t state_off[4], state_size = 0;
  for (int i = 0; i < p->n_states; i++) {
    const tb_state *s = &p->states[i];
    state_off[i] = state_size;
    state_size = (state_size + tb_nbytes(s->dtype, s->rank, s->dims) + 63) / 64 * 64;
  }
  tb_u64(&states, state_size);
  tb_u32(&states, (uint32_t)p->n_states);
  for (int i = 0; i < p->n_states; i++) {
    const tb_state *s = &p->states[i];
    tb_u32(&states, tb_str(&st, s->name));
    tb_u8(&states, (uint8_t)s->dtype);
    tb_u8(&states, (uint8_t)s->rank);
    tb_u8(&states, TDM_INIT_ZEROS);
    tb_u8(&states, 0);
    tb_u64(&states, state_off[i]);
    tb_u64(&states, tb_nbytes(s->dtype, s->rank, s->dims));
    tb_u64(&states, 0);
    for (int d = 0; d < s->rank; d++) tb_u64(&states, (uint64_t)s->dims[d]);
  }
  int v3 = 0;
  for (int mi = 0; mi < p->n_methods; mi++) v3 |= p->methods[mi].n_dims > 0 || p->methods[mi].n_syms > 0;
  const int version = v3 ? 3 : p->version == 2 ? 2 : 1;
  tb_u32(&methods, (uint32_t)p->n_methods);
  for (int mi = 0; mi < p->n_methods; mi++) {
    const tb_method *m = &p->methods[mi];
    tb_u32(&methods, tb_str(&st, m->name));
    tb_u32(&methods, (uint32_t)m->n_values);
    tb_u32(&methods, (uint32_t)m->n_inputs);
    tb_u32(&methods, (uint32_t)m->n_outputs);
    tb_u32(&methods, (uint32_t)m->n_ops);
    tb_u32(&methods, (uint32_t)m->n_dims);
    tb_u64(&methods, m->scratch);
    for (int v = 0; v < m->n_values; v++) {
      const tb_value *x = &m->values[v];
      tb_u8(&methods, (uint8_t)x->dtype);
      tb_u8(&methods, (uint8_t)x->rank);
      tb_u8(&methods, (uint8_t)x->region);
      tb_u8(&methods, 0);
      tb_u32(&methods, x->ref);
      tb_u64(&methods, x->offset);
      for (int d = 0; d < x->rank; d++) tb_u64(&methods, (uint64_t)x->dims[d]);
    }
    for (int i = 0; i < m->n_inputs; i++) tb_u32(&methods, m->inputs[i]), tb_u32(&methods, tb_str(&st, io_names[i]));
    for (int i = 0; i < m->n_outputs; i++) tb_u32(&methods, m->outputs[i]), tb_u32(&methods, tb_str(&st, io_names[i]));
    for (int k = 0; k < m->n_ops; k++) {
      const tb_op *o = &m->ops[k];
      tb_u32(&methods, tb_str(&st, o->name));
      tb_u16(&methods, (uint16_t)o->n_in);
      tb_u16(&methods, (uint16_t)o->n_out);
      tb_u16(&methods, (uint16_t)o->n_iattr);
      tb_u16(&methods, (uint16_t)o->n_fattr);
      for (int j = 0; j < o->n_in; j++) tb_u32(&methods, o->in[j]);
      for (int j = 0; j < o->n_out; j++) tb_u32(&methods, o->out[j]);
      for (int j = 0; j < o->n_iattr; j++) tb_u64(&methods, (uint64_t)o->iattr[j]);
      for (int j = 0; j < o->n_fattr; j++) tb_put(&methods, &o->fattr[j], 8);
    }
    if (!v3) continue;
    for (int d = 0; d < m->n_dims; d++) {
      tb_u32(&methods, tb_str(&st, m->dims[d].name));
      tb_u32(&methods, 0);
      tb_u64(&methods, (uint64_t)m->dims[d].min);
      tb_u64(&methods, (uint64_t)m->dims[d].max);
    }
    tb_u32(&methods, (uint32_t)m->n_syms);
    for (int k = 0; k < m->n_syms; k++) {
      const tb_sym *y = &m->syms[k];
      tb_u8(&methods, (uint8_t)y->kind);
      tb_u8(&methods, 0);
      tb_u16(&methods, (uint16_t)y->index);
      tb_u32(&methods, y->target);
      tb_u32(&methods, (uint32_t)y->n_terms);
      tb_u32(&methods, 0);
      tb_u64(&methods, (uint64_t)y->constant);
      for (int t = 0; t < y->n_terms; t++) tb_u32(&methods, y->dim[t]), tb_u32(&methods, 0), tb_u64(&methods, (uint64_t)y->coef[t]);
    }
  }
  tb_u32(&strings, st.n);
  for (uint32_t i = 0; i < st.n; i++) {
    tb_u32(&strings, (uint32_t)strlen(st.s[i]));
    tb_put(&strings, st.s[i], strlen(st.s[i]) + 1);
  }
  /* header, section table, then strings, constants, states, methods (8-aligned), data (64) */
  tb_buf f = {0};
  size_t off[7], len[7];
  const tb_buf *secs[7] = {NULL, &strings, NULL, &states, &methods, NULL, NULL};
  const uint32_t zero_consts = 0;
  const int n_sec = version >= 2 ? 6 : 5;
  size_t at = 32 + (size_t)n_sec * 24;
  for (int id = 1; id <= n_sec; id++) {
    at = id == 5 ? (at + 63) / 64 * 64 : (at + 7) / 8 * 8;
    off[id] = at;
    len[id] = id == 2 || id == 6 ? 4 : id == 5 ? 0 : secs[id]->n;
    at += len[id];
  }
  tb_put(&f, "TNDM", 4);
  /* a version-1 file (no metadata section): also tests that the reader reads them; version 3
   * (an empty metadata section) when a method has dims */
  tb_u32(&f, (uint32_t)version);
  tb_u64(&f, at);
  tb_u32(&f, (uint32_t)n_sec);
  tb_u32(&f, 0);
  tb_u64(&f, 0);
  for (int id = 1; id <= n_sec; id++) tb_u32(&f, (uint32_t)id), tb_u32(&f, 0), tb_u64(&f, off[id]), tb_u64(&f, len[id]);
  for (int id = 1; id <= n_sec; id++) {
    while (f.n < off[id]) tb_u8(&f, 0);
    if (id == 2 || id == 6) tb_put(&f, &zero_consts, 4);
    else if (secs[id]) tb_put(&f, secs[id]->p, secs[id]->n);
  }
  while (f.n < at) tb_u8(&f, 0);
  free(strings.p), free(states.p), free(methods.p);
  *size = f.n;
  return f.p;
}

/* A scratch value of `dtype` with dims {d0[, d1]} (rank given) at `offset`. */
static tb_value tb_scratch(int dtype, uint64_t offset, int rank, int64_t d0, int64_t d1) {
  tb_value v = {dtype, rank, TB_SCRATCH, 0, offset, {d0, d1}};
  return v;
}

/* Loads p; returns the status (and the program in *out when TDM_OK, else NULL). */
static tdm_status tb_load(const tb_program *p, tdm_program **out) {
  size_t size;
  unsigned char *bytes = tb_build(p, &size);
  tdm_status s = tdm_program_load(bytes, size, out);
  free(bytes);
  return s;
}

#endif
