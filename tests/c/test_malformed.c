/* The malformed-file corpus (tests/fixtures/malformed.py): every file must fail to load with one of
 * its expected statuses, without a crash (this test also runs under ASan+UBSan). Only a mutation
 * whose expected statuses include TDM_OK (one that can leave a valid program, e.g. a renamed
 * state) may load; such files are run with zero inputs. Resource bounds: loading a file of at most
 * 4 KiB allocates at most a fixed multiple of its size, and a session at most its declared state +
 * scratch. */
#include "testing.h"
#include "util.h"

#define LOAD_MULTIPLE 16 /* tables in memory per byte of file, at most (see docs/security.md) */

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "build/fixtures";
  char path[1200], line[1024];
  snprintf(path, sizeof path, "%s/malformed/expected.txt", dir);
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "missing %s: run tests/fixtures/malformed.py (npm test does)\n", path);
    return 1;
  }
  int n = 0, loaded = 0;
  while (fgets(line, sizeof line, f)) {
    char name[64], allowed[512];
    if (sscanf(line, "%63s %511s", name, allowed) != 2) continue;
    char file[1300];
    snprintf(file, sizeof file, "%s/malformed", dir);
    size_t size;
    unsigned char *bytes = read_fixture(file, name, &size);
    uint64_t c0, b0, c1, b1;
    tdm__alloc_stats(&c0, &b0);
    tdm_program *p = NULL;
    tdm_status s = tdm_program_load(bytes, size, &p);
    tdm__alloc_stats(&c1, &b1);
    if (size <= 4096 && b1 - b0 > (uint64_t)size * LOAD_MULTIPLE + 4096) {
      fprintf(stderr, "%s: loading %zu bytes allocated %llu bytes\n", name, size, (unsigned long long)(b1 - b0));
      tdm_test_failures++;
    }
    if (s == TDM_OK && !strstr(allowed, "TDM_OK")) {
      fprintf(stderr, "%s: loaded, but this mutation must fail with one of %s; mutation: %s", name, allowed,
              strchr(strchr(line, ' ') + 1, ' ') + 1);
      tdm_test_failures++;
    }
    if (s == TDM_OK) {
      /* A mutation that may leave a valid program: it must run. */
      loaded++;
      tdm_session *sess;
      tdm__alloc_stats(&c0, &b0);
      if (tdm_session_create(p, &sess) == TDM_OK) {
        tdm__alloc_stats(&c1, &b1);
        /* a method with dynamic dims also has a copy of its tables, bound at its last call's sizes */
        const uint64_t tables = tdm_method_dim_count(p, 0) ? (uint64_t)size * LOAD_MULTIPLE : 0;
        if (b1 - b0 > tdm_program_state_size(p) + tdm_program_scratch_size(p) + 256 + tables) {
          fprintf(stderr, "%s: a session allocated %llu bytes\n", name, (unsigned long long)(b1 - b0));
          tdm_test_failures++;
        }
        for (uint32_t m = 0; m < tdm_program_method_count(p); m++) {
          for (uint32_t i = 0; i < tdm_method_io_count(p, m, 0); i++)
            memset(tdm_session_input(sess, m, i), 0, tdm_method_io_nbytes(p, m, 0, i));
          (void)tdm_session_run(sess, m);
        }
        tdm_session_free(sess);
      }
      tdm_program_free(p);
    } else if (!strstr(allowed, tdm_status_string(s))) {
      fprintf(stderr, "%s: %s (%s), expected one of %s; mutation: %s", name, tdm_status_string(s), tdm_last_error(), allowed,
              strchr(strchr(line, ' ') + 1, ' ') + 1);
      tdm_test_failures++;
    }
    free(bytes);
    n++;
  }
  fclose(f);
  printf("test_malformed: %d files, %d still valid programs\n", n, loaded);
  CHECK(n > 500);
  return test_report("test_malformed");
}
