/* reader.h — the bounded cursor the file readers (reader.c, reader_methods.c) take records with (src/ only). */
#ifndef TDM_READER_H
#define TDM_READER_H

#include "program.h"

#include <string.h>

/* A bounded cursor over one section. Reads past the end set `bad` and return 0. */
typedef struct rd {
  const uint8_t *p;
  size_t n, pos;
  bool bad;
  const char *what;
} rd;

static inline bool rd_take(rd *r, void *dst, size_t k) {
  if (r->bad || k > r->n - r->pos) {
    r->bad = true;
    return false;
  }
  memcpy(dst, r->p + r->pos, k);
  r->pos += k;
  return true;
}
static inline uint8_t rd_u8(rd *r) {
  uint8_t v = 0;
  rd_take(r, &v, 1);
  return v;
}
static inline uint16_t rd_u16(rd *r) {
  uint16_t v = 0;
  rd_take(r, &v, 2);
  return v;
}
static inline uint32_t rd_u32(rd *r) {
  uint32_t v = 0;
  rd_take(r, &v, 4);
  return v;
}
static inline uint64_t rd_u64(rd *r) {
  uint64_t v = 0;
  rd_take(r, &v, 8);
  return v;
}
static inline size_t rd_left(const rd *r) { return r->n - r->pos; }

/* The error for a read past the end of r's section. */
tdm_status tdm__truncated(const rd *r);
/* dtype, rank and dims; numel and nbytes computed with overflow checks. */
tdm_status tdm__read_shape(rd *r, int dtype, int rank, tdm_shape *s, int64_t *numel, size_t *nbytes, const char *ctx);
/* String i of the strings section into *out; an error naming ctx when there is none. */
tdm_status tdm__string_ref(const tdm_program *p, uint32_t i, const char **out, const char *ctx);

typedef struct counts {
  size_t values, ios, ops, refs, iattrs, fattrs, dims, syms, terms;
} counts;

/* Carves arrays out of the one arena. */
typedef struct carver {
  uint8_t *next;
} carver;
static inline void *carve(carver *c, size_t bytes) {
  void *p = c->next;
  c->next += (bytes + 15) & ~(size_t)15;
  return p;
}

/* The methods section (reader_methods.c): pass 1 counts, bounds-checked, for the arena; pass 2
 * reads and verifies every method into it. */
tdm_status tdm__count_methods(rd r, uint32_t n_methods, uint32_t version, counts *c);
tdm_status tdm__read_methods(tdm_program *p, rd r, carver *cv, const counts *c);
/* Links each method 'base#k' to base's versions, after checking it takes and gives what base does. */
tdm_status tdm__link_versions(tdm_program *p);

#endif
