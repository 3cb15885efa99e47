/* Loading hostile bytes: truncation at every offset, corrupted header fields, allocation failure.
 * Each case expects a specific status and no crash (run under ASan+UBSan too). */
#include "testing.h"
#include "util.h"

static void truncation_everywhere(const unsigned char *bytes, size_t size) {
  for (size_t cut = 0; cut < size; cut++) {
    tdm_program *p = (tdm_program *)1;
    tdm_status s = tdm_program_load(bytes, cut, &p);
    const tdm_status want = cut < 4 ? TDM_ERR_BAD_MAGIC : TDM_ERR_TRUNCATED;
    if (s != want || p != NULL) {
      fprintf(stderr, "cut at %zu: %s (%s)\n", cut, tdm_status_string(s), tdm_last_error());
      tdm_test_failures++;
    }
  }
}

static void corrupt_header(const unsigned char *bytes, size_t size) {
  unsigned char *b = malloc(size);
  tdm_program *p;
  struct { size_t at; unsigned char v; tdm_status want; } cases[] = {
      {0, 'X', TDM_ERR_BAD_MAGIC}, {4, 2, TDM_ERR_VERSION},
      {16, 6, TDM_ERR_MALFORMED},  {20, 1, TDM_ERR_MALFORMED}, {32, 9, TDM_ERR_MALFORMED}, /* section id */
      {47, 0x80, TDM_ERR_MALFORMED},                                                      /* section offset */
      {55, 0x7f, TDM_ERR_MALFORMED},                                                      /* section size */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memcpy(b, bytes, size);
    b[cases[i].at] = cases[i].v;
    CHECK_STATUS(tdm_program_load(b, size, &p), cases[i].want);
  }
  /* declared file size larger, then smaller, than the bytes given */
  uint64_t declared = size + 1;
  memcpy(b, bytes, size);
  memcpy(b + 8, &declared, 8);
  CHECK_STATUS(tdm_program_load(b, size, &p), TDM_ERR_TRUNCATED);
  declared = size - 1;
  memcpy(b + 8, &declared, 8);
  CHECK_STATUS(tdm_program_load(b, size, &p), TDM_ERR_MALFORMED);
  free(b);
}

static void allocation_failures(const unsigned char *bytes, size_t size) {
  /* Fail the 1st, 2nd, ... allocation of load + session create; each must report out of memory
   * (LeakSanitizer checks nothing leaks), and a normal load must work afterwards. */
  int n_ok = 0;
  for (uint64_t n = 1; n < 20; n++) {
    tdm__fail_allocation(n);
    tdm_program *p = NULL;
    tdm_session *s = NULL;
    tdm_status st = tdm_program_load(bytes, size, &p);
    if (st == TDM_OK) st = tdm_session_create(p, &s);
    tdm__fail_allocation(0);
    if (st == TDM_OK) {
      n_ok++;
    } else {
      CHECK_STATUS(st, TDM_ERR_OUT_OF_MEMORY);
    }
    tdm_session_free(s);
    tdm_program_free(p);
  }
  CHECK(n_ok > 0); /* past the number of allocations there are, loading succeeds */
  tdm_program *p;
  CHECK_STATUS(tdm_program_load(bytes, size, &p), TDM_OK);
  tdm_program_free(p);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "build/fixtures";
  const char *names[] = {"accumulator", "original_report", "state_io", "gru", "initialized"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    size_t size;
    unsigned char *bytes = read_fixture(dir, names[i], &size);
    tdm_program *p;
    CHECK_STATUS(tdm_program_load(bytes, size, &p), TDM_OK);
    tdm_program_free(p);
    truncation_everywhere(bytes, size);
    corrupt_header(bytes, size);
    allocation_failures(bytes, size);
    free(bytes);
  }
  return test_report("test_load");
}
