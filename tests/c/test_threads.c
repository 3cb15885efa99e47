/* The thread split never changes a result: every method of the model fixtures, called in turn
 * (twice, so state carries over), gives bit-identical outputs and state with 1 thread and with 2,
 * 3 and 5 (in this build the parts run one after another on the caller with the same split as the
 * threaded wasm build; tests/js/threads.test.js runs the real threads). Also the pool's contract:
 * counts out of range are refused, start twice is refused, stop returns to one thread. */
#include <math.h>

#include "testing.h"

static const char *const FIXTURES[] = {"parallel", "parallel_conv", "parallel_int8", "parallel_int4", "transformer",   "hf_llama",
                                       "cnn",      "codec",         "gru",           "lstm",          "streaming_conv"};

/* Deterministic inputs: floats in [-1, 1], integers 0..2 (valid token ids, indices and lengths in
 * every fixture), bools alternating. */
static void fill_inputs(tdm_program *p, tdm_session *s, uint32_t m) {
  for (uint32_t i = 0; i < tdm_method_io_count(p, m, 0); i++) {
    unsigned char *x = tdm_session_input(s, m, i);
    const size_t n = tdm_method_io_nbytes(p, m, 0, i), es = tdm_dtype_size(tdm_method_io_dtype(p, m, 0, i));
    for (size_t e = 0; e < n / es; e++) {
      switch (tdm_method_io_dtype(p, m, 0, i)) {
        case TDM_F32: ((float *)x)[e] = sinf(0.37f * (float)e + (float)i + 1.0f); break;
        case TDM_I64: ((int64_t *)x)[e] = (int64_t)((e * 7 + 3) % 3); break;
        case TDM_I32: ((int32_t *)x)[e] = (int32_t)((e * 7 + 3) % 3); break;
        default: x[e] = (unsigned char)(e & 1); break;
      }
    }
  }
}

/* Runs every method twice in turn; returns the concatenated statuses, outputs and final state. */
static unsigned char *run_all(const char *dir, const char *name, size_t *len) {
  size_t size, cap = 1 << 20;
  unsigned char *bytes = read_fixture(dir, name, &size), *trace = malloc(cap);
  tdm_program *p;
  tdm_session *s;
  CHECK_STATUS(tdm_program_load(bytes, size, &p), TDM_OK);
  free(bytes);
  CHECK_STATUS(tdm_session_create(p, &s), TDM_OK);
  *len = 0;
#define APPEND(ptr, n) \
  do { \
    while (*len + (n) > cap) trace = realloc(trace, cap *= 2); \
    memcpy(trace + *len, (ptr), (n)); \
    *len += (n); \
  } while (0)
  for (int round = 0; round < 2; round++)
    for (uint32_t m = 0; m < tdm_program_method_count(p); m++) {
      fill_inputs(p, s, m);
      const tdm_status st = tdm_session_run(s, m);
      APPEND(&st, sizeof st);
      if (st != TDM_OK) continue;
      for (uint32_t o = 0; o < tdm_method_io_count(p, m, 1); o++) APPEND(tdm_session_output(s, m, o), tdm_method_io_nbytes(p, m, 1, o));
    }
  APPEND(tdm_session_state(s), tdm_program_state_size(p));
#undef APPEND
  tdm_session_free(s);
  tdm_program_free(p);
  return trace;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "build/fixtures";
  CHECK(tdm_threads_count() == 1);
  CHECK_STATUS(tdm_threads_start(0, 1), TDM_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(tdm_threads_start(65, 1), TDM_ERR_INVALID_ARGUMENT);
  for (size_t f = 0; f < sizeof FIXTURES / sizeof FIXTURES[0]; f++) {
    size_t n1;
    unsigned char *one = run_all(dir, FIXTURES[f], &n1);
    for (int threads = 2; threads <= 5; threads += threads == 3 ? 2 : 1) {
      CHECK_STATUS(tdm_threads_start(threads, 1), TDM_OK);
      CHECK(tdm_threads_count() == threads);
      CHECK_STATUS(tdm_threads_start(2, 1), TDM_ERR_INVALID_ARGUMENT); /* already started */
      size_t nt;
      unsigned char *many = run_all(dir, FIXTURES[f], &nt);
      if (nt != n1 || memcmp(one, many, n1) != 0) {
        fprintf(stderr, "%s: %d threads differ from 1\n", FIXTURES[f], threads);
        tdm_test_failures++;
      }
      free(many);
      tdm_threads_stop();
      CHECK(tdm_threads_count() == 1);
    }
    free(one);
  }
  return test_report("test_threads");
}
