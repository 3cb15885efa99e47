/* testing.h — a tiny assertion helper for the C tests, and fixture loading. */
#ifndef TDM_TESTING_H
#define TDM_TESTING_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tandem.h"

static int tdm_test_failures;

#define CHECK(cond) \
  do { \
    if (!(cond)) { \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      tdm_test_failures++; \
    } \
  } while (0)

#define CHECK_STATUS(expr, want) \
  do { \
    tdm_status got_ = (expr); \
    if (got_ != (want)) { \
      fprintf(stderr, "%s:%d: %s gave %s (%s), expected %s\n", __FILE__, __LINE__, #expr, tdm_status_string(got_), tdm_last_error(), \
              tdm_status_string(want)); \
      tdm_test_failures++; \
    } \
  } while (0)

static unsigned char *read_fixture(const char *dir, const char *name, size_t *size) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.tandem", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "missing fixture %s: run tests/fixtures/make.py (npm test does)\n", path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)n);
  if (fread(buf, 1, (size_t)n, f) != (size_t)n) exit(1);
  fclose(f);
  *size = (size_t)n;
  return buf;
}

static int test_report(const char *name) {
  if (tdm_test_failures) {
    fprintf(stderr, "%s: %d check(s) failed\n", name, tdm_test_failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

#endif
