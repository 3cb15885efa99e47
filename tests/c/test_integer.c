/* Integer division, remainder and pow on int64 are exact over the whole int64 range, and a zero
 * divisor or INT64_MIN / -1 gives the documented result instead of a trap (docs/ops.md). The
 * expectations were computed with Python's unbounded integers (floor: a // b, trunc: the quotient of
 * the magnitudes with the sign of a * b, remainder: a - (a // b) * b, then wrapped to int64). Also
 * runs under ASan+UBSan, which would flag a C division by zero or overflow. */
#include "builder.h"
#include "testing.h"

#define N 20

static const int64_t DIV_CASES[N][5] = {
    /* a, b, floor(a / b), trunc(a / b), remainder(a, b) */
    {7, 2, 3, 3, 1},
    {-7, 2, -4, -3, 1},
    {7, -2, -4, -3, -1},
    {-7, -2, 3, 3, -1},
    {1099511627779LL, 7, 157073089682LL, 157073089682LL, 5}, /* 2^40 + 3 */
    {-1099511627779LL, 7, -157073089683LL, -157073089682LL, 2},
    {INT64_MAX, 2, 4611686018427387903LL, 4611686018427387903LL, 1},
    {INT64_MIN, 3, -3074457345618258603LL, -3074457345618258602LL, 1},
    {INT64_MIN, -1, INT64_MIN, INT64_MIN, 0}, /* wraps; a trap in C */
    {INT64_MIN, 1, INT64_MIN, INT64_MIN, 0},
    {INT64_MAX, -1, -INT64_MAX, -INT64_MAX, 0},
    {5, 0, 0, 0, 0}, /* division by zero: 0 */
    {-5, 0, 0, 0, 0},
    {0, 0, 0, 0, 0},
    {INT64_MIN, INT64_MAX, -2, -1, 9223372036854775806LL},
    {INT64_MAX, INT64_MIN, -1, 0, -1},
    {9007199254740993LL, 3, 3002399751580331LL, 3002399751580331LL, 0}, /* 2^53 + 1: not a float */
    {-4611686018427387905LL, 2147483648LL, -2147483649LL, -2147483648LL, 2147483647LL},
    {123456789012345678LL, -1000000007LL, -123456789LL, -123456788LL, -851851845LL},
    {-1, INT64_MAX, -1, 0, 9223372036854775806LL},
};

#define NP 13
static const int64_t POW_CASES[NP][3] = {
    {2, 62, 4611686018427387904LL},
    {2, 63, INT64_MIN},
    {3, 41, -420491770248316829LL},
    {-3, 3, -27},
    {1, -5, 1},
    {-1, -5, -1},
    {-1, -4, 1},
    {5, -1, 0},
    {0, 0, 1},
    {-2, 63, INT64_MIN},
    {7, 0, 1},
    {10, 18, 1000000000000000000LL},
    {3, 40, -6289078614652622815LL},
};

static tb_op binop(const char *name, uint32_t a, uint32_t b, uint32_t y) {
  tb_op o = {name, 2, 1, 0, 0, {a, b}, {y}, {0}, {0}};
  return o;
}

static void division(void) {
  tb_program p = {0};
  p.n_methods = 2;
  tb_method *m = &p.methods[0];
  m->name = "div";
  m->scratch = 5 * 8 * N;
  m->n_values = 5;
  for (int v = 0; v < 5; v++) m->values[v] = tb_scratch(TDM_I64, (uint64_t)v * 8 * N, 1, N, 0);
  m->n_inputs = 2, m->inputs[0] = 0, m->inputs[1] = 1;
  m->n_outputs = 3, m->outputs[0] = 2, m->outputs[1] = 3, m->outputs[2] = 4;
  m->n_ops = 3;
  m->ops[0] = binop("floor_divide", 0, 1, 2);
  m->ops[1] = binop("trunc_divide", 0, 1, 3);
  m->ops[2] = binop("remainder", 0, 1, 4);
  tb_method *q = &p.methods[1];
  q->name = "pow";
  q->scratch = 3 * 8 * NP;
  q->n_values = 3;
  for (int v = 0; v < 3; v++) q->values[v] = tb_scratch(TDM_I64, (uint64_t)v * 8 * NP, 1, NP, 0);
  q->n_inputs = 2, q->inputs[0] = 0, q->inputs[1] = 1;
  q->n_outputs = 1, q->outputs[0] = 2;
  q->n_ops = 1;
  q->ops[0] = binop("pow", 0, 1, 2);

  tdm_program *prog;
  tdm_session *s;
  CHECK_STATUS(tb_load(&p, &prog), TDM_OK);
  if (!prog) return;
  CHECK_STATUS(tdm_session_create(prog, &s), TDM_OK);
  int64_t *a = tdm_session_input(s, 0, 0), *b = tdm_session_input(s, 0, 1);
  for (int i = 0; i < N; i++) a[i] = DIV_CASES[i][0], b[i] = DIV_CASES[i][1];
  CHECK_STATUS(tdm_session_run(s, 0), TDM_OK);
  for (int k = 0; k < 3; k++) {
    const int64_t *y = tdm_session_output(s, 0, (uint32_t)k);
    for (int i = 0; i < N; i++)
      if (y[i] != DIV_CASES[i][2 + k]) {
        fprintf(stderr, "%s(%lld, %lld) = %lld, expected %lld\n",
                k == 0       ? "floor_divide"
                    : k == 1 ? "trunc_divide"
                             : "remainder",
                (long long)DIV_CASES[i][0], (long long)DIV_CASES[i][1], (long long)y[i], (long long)DIV_CASES[i][2 + k]);
        tdm_test_failures++;
      }
  }
  a = tdm_session_input(s, 1, 0), b = tdm_session_input(s, 1, 1);
  for (int i = 0; i < NP; i++) a[i] = POW_CASES[i][0], b[i] = POW_CASES[i][1];
  CHECK_STATUS(tdm_session_run(s, 1), TDM_OK);
  const int64_t *y = tdm_session_output(s, 1, 0);
  for (int i = 0; i < NP; i++)
    if (y[i] != POW_CASES[i][2]) {
      fprintf(stderr, "pow(%lld, %lld) = %lld, expected %lld\n", (long long)POW_CASES[i][0], (long long)POW_CASES[i][1], (long long)y[i],
              (long long)POW_CASES[i][2]);
      tdm_test_failures++;
    }
  tdm_session_free(s);
  tdm_program_free(prog);
}

/* floor_divide and trunc_divide are int64 only; true division stays float32 only. */
static void dtype_rules(void) {
  const char *ops[] = {"floor_divide", "trunc_divide", "div"};
  const int dtypes[] = {TDM_F32, TDM_F32, TDM_I64};
  for (int k = 0; k < 3; k++) {
    tb_program p = {0};
    p.n_methods = 1;
    tb_method *m = &p.methods[0];
    m->name = "f";
    m->scratch = 3 * 64;
    m->n_values = 3;
    for (int v = 0; v < 3; v++) m->values[v] = tb_scratch(dtypes[k], (uint64_t)v * 64, 1, 4, 0);
    m->n_inputs = 2, m->inputs[0] = 0, m->inputs[1] = 1;
    m->n_outputs = 1, m->outputs[0] = 2;
    m->n_ops = 1;
    m->ops[0] = binop(ops[k], 0, 1, 2);
    tdm_program *prog = NULL;
    CHECK_STATUS(tb_load(&p, &prog), TDM_ERR_OP_RULE);
    tdm_program_free(prog);
  }
}

int main(void) {
  division();
  dtype_rules();
  return test_report("test_integer");
}
