/* util.c — status strings, the last-error message, the allocator. */
#include "util.h"
#include "schema.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__EMSCRIPTEN__) || !defined(__STDC_NO_THREADS__)
#define TDM_THREAD_LOCAL _Thread_local
#else
#define TDM_THREAD_LOCAL
#endif

static TDM_THREAD_LOCAL char last_error[512];

const char *tdm_status_string(tdm_status s) {
  switch (s) {
    case TDM_OK: return "TDM_OK";
    case TDM_ERR_INVALID_ARGUMENT: return "TDM_ERR_INVALID_ARGUMENT";
    case TDM_ERR_OUT_OF_MEMORY: return "TDM_ERR_OUT_OF_MEMORY";
    case TDM_ERR_TRUNCATED: return "TDM_ERR_TRUNCATED";
    case TDM_ERR_BAD_MAGIC: return "TDM_ERR_BAD_MAGIC";
    case TDM_ERR_VERSION: return "TDM_ERR_VERSION";
    case TDM_ERR_MALFORMED: return "TDM_ERR_MALFORMED";
    case TDM_ERR_UNKNOWN_OP: return "TDM_ERR_UNKNOWN_OP";
    case TDM_ERR_OP_RULE: return "TDM_ERR_OP_RULE";
    case TDM_ERR_NOT_FOUND: return "TDM_ERR_NOT_FOUND";
    case TDM_ERR_INDEX: return "TDM_ERR_INDEX";
    case TDM_ERR_LIMIT: return "TDM_ERR_LIMIT";
    case TDM_ERR_STATE_MISMATCH: return "TDM_ERR_STATE_MISMATCH";
    case TDM_ERR_SHAPE: return "TDM_ERR_SHAPE";
    case TDM_ERR_GUARD: return "TDM_ERR_GUARD";
  }
  return "TDM_ERR_UNKNOWN_STATUS";
}

const char *tdm_last_error(void) { return last_error; }

tdm_status tdm__fail(tdm_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return s;
}

/* The public enum in include/tandem.h must give every dtype its schema code (src/schema.h). */
#define X(code, id, name, size) \
  _Static_assert(TDM_##id == code, "include/tandem.h: TDM_" #id " is not " #code " as python/tandem/schema.py declares");
TDM_SCHEMA_DTYPES(X)
#undef X
_Static_assert(TDM_FORMAT_VERSION == TDM_FILE_VERSION, "include/tandem.h: TDM_FORMAT_VERSION differs from python/tandem/schema.py");

size_t tdm_dtype_size(int dtype) {
  switch (dtype) {
#define X(code, id, name, size) \
  case code: return size;
    TDM_SCHEMA_DTYPES(X)
#undef X
  }
  return 0;
}

const char *tdm_dtype_name(int dtype) {
  switch (dtype) {
#define X(code, id, name, size) \
  case code: return name;
    TDM_SCHEMA_DTYPES(X)
#undef X
  }
  return "?";
}

static uint64_t fail_countdown;           /* 0: never fail */
static uint64_t alloc_count, alloc_bytes; /* cumulative, for the resource-bound tests */

void tdm__alloc_stats(uint64_t *count, uint64_t *bytes) {
  *count = alloc_count;
  *bytes = alloc_bytes;
}

void tdm__fail_allocation(uint64_t n) { fail_countdown = n; }

void *tdm__alloc(size_t size) {
  if (fail_countdown && --fail_countdown == 0) return NULL;
  size_t rounded;
  if (!tdm__align_size(size ? size : 1, 64, &rounded)) return NULL;
  alloc_count++;
  alloc_bytes += rounded;
  return aligned_alloc(64, rounded);
}

void *tdm__calloc(size_t size) {
  void *p = tdm__alloc(size);
  if (p) memset(p, 0, size);
  return p;
}

void tdm__free(void *p) { free(p); }

void *tdm_malloc(size_t size) { return tdm__alloc(size); }
void tdm_free(void *p) { tdm__free(p); }

#define TDM_DEFAULT_MAX_DECLARED ((uint64_t)1 << 30)
static uint64_t max_declared = TDM_DEFAULT_MAX_DECLARED;

void tdm_set_max_declared_bytes(uint64_t max_bytes) { max_declared = max_bytes ? max_bytes : TDM_DEFAULT_MAX_DECLARED; }
uint64_t tdm__max_declared_bytes(void) { return max_declared; }
