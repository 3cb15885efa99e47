/* State natively, against hand-computed expectations (the fixtures' original_report and initialized):
 * one state shared by two methods, a second session on the same program with its own, a buffer's
 * initial values back after reset; and the documented output lifetime (one scratch arena serves
 * every method); a method in versions, one of them without outputs. */
#include <math.h>

#include "builder.h"
#include "testing.h"

static void call_f32(tdm_session *s, int32_t m, const float *x, size_t n) {
  if (n) memcpy(tdm_session_input(s, (uint32_t)m, 0), x, n * sizeof(float));
  CHECK_STATUS(tdm_session_run(s, (uint32_t)m), TDM_OK);
}

static bool out_eq(tdm_session *s, int32_t m, const float *want, size_t n) {
  const float *y = tdm_session_output(s, (uint32_t)m, 0);
  for (size_t i = 0; i < n; i++)
    if (fabsf(y[i] - want[i]) > 1e-6f) return false;
  return true;
}

static void original_report(const char *dir) {
  size_t size;
  unsigned char *bytes = read_fixture(dir, "original_report", &size);
  tdm_program *p;
  tdm_session *s;
  CHECK_STATUS(tdm_program_load(bytes, size, &p), TDM_OK);
  free(bytes); /* the program keeps its own copy */
  CHECK_STATUS(tdm_session_create(p, &s), TDM_OK);
  const int32_t f1 = tdm_program_find_method(p, "forward1"), f2 = tdm_program_find_method(p, "forward2");
  CHECK(f1 >= 0 && f2 >= 0 && tdm_program_find_method(p, "nope") == -1);
  CHECK(tdm_program_state_count(p) == 1 && strcmp(tdm_state_name(p, 0), "shared_module._v") == 0);
  /* _v starts at 1: forward1(1) -> 2, forward1(2) -> 4, forward2(0) -> 0 (returns x), forward1(5) -> 5 */
  float x = 1, want = 2;
  call_f32(s, f1, &x, 1);
  CHECK(out_eq(s, f1, &want, 1));
  x = 2, want = 4;
  call_f32(s, f1, &x, 1);
  CHECK(out_eq(s, f1, &want, 1));
  x = 0, want = 0;
  call_f32(s, f2, &x, 1);
  CHECK(out_eq(s, f2, &want, 1));
  CHECK(*(float *)tdm_session_state(s) == 0.0f);
  x = 5, want = 5;
  call_f32(s, f1, &x, 1);
  CHECK(out_eq(s, f1, &want, 1));
  /* a second session on the same program has its own state */
  tdm_session *s2;
  CHECK_STATUS(tdm_session_create(p, &s2), TDM_OK);
  x = 1, want = 2;
  call_f32(s2, f1, &x, 1);
  CHECK(out_eq(s2, f1, &want, 1));
  CHECK(*(float *)tdm_session_state(s) == 5.0f);
  tdm_session_reset_state(s);
  CHECK(*(float *)tdm_session_state(s) == 1.0f);
  tdm_session_free(s2);
  tdm_session_free(s);
  tdm_program_free(p);
}

static void initialized(const char *dir) {
  size_t size;
  unsigned char *bytes = read_fixture(dir, "initialized", &size);
  tdm_program *p;
  tdm_session *s;
  CHECK_STATUS(tdm_program_load(bytes, size, &p), TDM_OK);
  free(bytes);
  CHECK_STATUS(tdm_session_create(p, &s), TDM_OK);
  const int32_t fwd = tdm_program_find_method(p, "forward"), reset = tdm_program_find_method(p, "reset");
  const float two[4] = {2, 2, 2, 2}, want[4] = {0, 2, 4, 6}, want2[4] = {0, 4, 8, 12};
  call_f32(s, fwd, two, 4);
  CHECK(out_eq(s, fwd, want, 4));
  call_f32(s, fwd, two, 4);
  CHECK(out_eq(s, fwd, want2, 4));
  CHECK(tdm_method_io_count(p, (uint32_t)reset, 0) == 0 && tdm_method_io_count(p, (uint32_t)reset, 1) == 0);
  call_f32(s, reset, NULL, 0);
  call_f32(s, fwd, two, 4);
  CHECK(out_eq(s, fwd, want, 4));
  tdm_session_free(s);
  tdm_program_free(p);
}


/* The documented output lifetime (tandem.h): one scratch arena serves every method, so writing
 * another method's inputs may overwrite an output that was not copied out yet. Method a: y = -x
 * with y at bytes [16, 32); method b's input z lives at the same bytes. */
static void output_lifetime(void) {
  tb_program t = {0};
  t.n_methods = 2;
  for (int k = 0; k < 2; k++) {
    tb_method *m = &t.methods[k];
    m->name = k ? "b" : "a";
    m->scratch = 64;
    m->n_values = 2;
    m->values[0] = tb_scratch(TDM_F32, k ? 16 : 0, 1, 4, 0);
    m->values[1] = tb_scratch(TDM_F32, k ? 32 : 16, 1, 4, 0);
    m->n_inputs = 1, m->inputs[0] = 0;
    m->n_outputs = 1, m->outputs[0] = 1;
    m->n_ops = 1, m->ops[0] = (tb_op){"neg", 1, 1, 0, 0, {0}, {1}, {0}, {0}};
  }
  tdm_program *p;
  tdm_session *s;
  CHECK_STATUS(tb_load(&t, &p), TDM_OK);
  CHECK_STATUS(tdm_session_create(p, &s), TDM_OK);
  const float x[4] = {1, 2, 3, 4}, neg[4] = {-1, -2, -3, -4}, z[4] = {9, 9, 9, 9};
  call_f32(s, 0, x, 4);
  CHECK(out_eq(s, 0, neg, 4));
  /* reading pointers and re-reading the output changes nothing */
  (void)tdm_session_input(s, 1, 0);
  (void)tdm_session_output(s, 1, 0);
  CHECK(out_eq(s, 0, neg, 4));
  /* writing method b's input overwrites a's output: a caller must have copied it out before */
  CHECK(tdm_session_output(s, 0, 0) == tdm_session_input(s, 1, 0));
  memcpy(tdm_session_input(s, 1, 0), z, sizeof z);
  CHECK(out_eq(s, 0, z, 4) && !out_eq(s, 0, neg, 4));
  CHECK_STATUS(tdm_session_run(s, 1), TDM_OK);
  const float negz[4] = {-9, -9, -9, -9};
  CHECK(out_eq(s, 1, negz, 4));
  tdm_session_free(s);
  tdm_program_free(p);
}

/* The fixture `delayed` (tests/cases.py): forward returns None for its first 2 calls after a reset (a
 * version without outputs, picked by a `when_in` over a Python int kept as state), then the state
 * doubled. A version without outputs gives NULL for each output. */
static void delayed(const char *dir) {
  size_t size;
  unsigned char *bytes = read_fixture(dir, "delayed", &size);
  tdm_program *p;
  tdm_session *s;
  CHECK_STATUS(tdm_program_load(bytes, size, &p), TDM_OK);
  free(bytes);
  CHECK_STATUS(tdm_session_create(p, &s), TDM_OK);
  const int32_t f = tdm_program_find_method(p, "forward"), r = tdm_program_find_method(p, "reset");
  CHECK(f >= 0 && r >= 0 && tdm_method_io_count(p, (uint32_t)f, 1) == 1);
  for (int round = 0; round < 2; round++) {
    const float x[2] = {1, 2};
    for (int k = 1; k <= 4; k++) {
      call_f32(s, f, x, 2);
      const float want[2] = {2.0f * (float)k, 4.0f * (float)k}; /* acc = k * x, doubled */
      if (k <= 2) CHECK(tdm_session_output(s, (uint32_t)f, 0) == NULL);
      else CHECK(tdm_session_output(s, (uint32_t)f, 0) != NULL && out_eq(s, f, want, 2));
    }
    CHECK_STATUS(tdm_session_run(s, (uint32_t)r), TDM_OK);
  }
  tdm_session_free(s);
  tdm_program_free(p);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "build/fixtures";
  original_report(dir);
  initialized(dir);
  delayed(dir);
  output_lifetime();
  CHECK(tdm_session_run(NULL, 0) == TDM_ERR_INVALID_ARGUMENT);
  tdm_session_free(NULL);
  tdm_program_free(NULL);
  return test_report("test_shared_state");
}
