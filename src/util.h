/* util.h — status/error plumbing, overflow-safe size arithmetic, the allocator (src/ only). */
#ifndef TDM_UTIL_H
#define TDM_UTIL_H

#include "tandem.h"
#include <stdbool.h>

/* Record a detail message for tdm_last_error() and return `s`. printf-style. */
tdm_status tdm__fail(tdm_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* a*b and a+b into *out; false (and *out untouched) on overflow of size_t. */
static inline bool tdm__mul_size(size_t a, size_t b, size_t *out) {
  if (a != 0 && b > SIZE_MAX / a) return false;
  *out = a * b;
  return true;
}
static inline bool tdm__add_size(size_t a, size_t b, size_t *out) {
  if (b > SIZE_MAX - a) return false;
  *out = a + b;
  return true;
}
/* Round up to a multiple of `align` (a power of two); false on overflow. */
static inline bool tdm__align_size(size_t a, size_t align, size_t *out) {
  return tdm__add_size(a, align - 1, out) && ((*out &= ~(align - 1)), true);
}

/* 64-byte aligned allocation; every allocation of the runtime goes through these. */
void *tdm__alloc(size_t size);
void *tdm__calloc(size_t size);
void tdm__free(void *p);

/* Testing hooks: make the n-th allocation from now fail (1 = the next one; 0 disables), and the
 * cumulative count and bytes of allocations so far. */
void tdm__fail_allocation(uint64_t n);
void tdm__alloc_stats(uint64_t *count, uint64_t *bytes);

uint64_t tdm__max_declared_bytes(void);

#endif
