/* gather, sort, topk and cumsum (src/kernels/select.c) and int32 arithmetic on values chosen by
 * hand: a gather with no check_index in front reads nothing outside x for any index (zeros); sort
 * and topk order ties by index and NaN above every number; int32 division never traps
 * (INT32_MIN / -1, x / 0) and wraps like PyTorch; the rules reject what does not fit. Also runs
 * under ASan+UBSan. */
#include "builder.h"
#include "testing.h"

#include <math.h>

static tb_op op2(const char *name, uint32_t a, uint32_t b, uint32_t y, int n_iattr, int64_t i0, int64_t i1, int64_t i2) {
  tb_op o = {name, 2, 1, n_iattr, 0, {a, b}, {y}, {i0, i1, i2}, {0}};
  return o;
}

/* One method of one op over scratch values; returns the session (and program in *prog). */
static tdm_session *one_op(tb_program *p, tdm_program **prog) {
  tdm_session *s = NULL;
  *prog = NULL;
  CHECK_STATUS(tb_load(p, prog), TDM_OK);
  if (!*prog) return NULL;
  CHECK_STATUS(tdm_session_create(*prog, &s), TDM_OK);
  return s;
}

static void gather_hostile_indices(void) {
  tb_program p = {0};
  p.n_methods = 1;
  tb_method *m = &p.methods[0];
  m->name = "g";
  m->scratch = 1024;
  m->n_values = 3;
  m->values[0] = tb_scratch(TDM_F32, 0, 2, 2, 3);   /* x [2, 3] */
  m->values[1] = tb_scratch(TDM_I64, 64, 2, 2, 4);  /* index [2, 4] along dim 1 */
  m->values[2] = tb_scratch(TDM_F32, 256, 2, 2, 4); /* y */
  m->n_inputs = 2, m->inputs[0] = 0, m->inputs[1] = 1;
  m->n_outputs = 1, m->outputs[0] = 2;
  m->n_ops = 1;
  m->ops[0] = op2("gather", 0, 1, 2, 1, 1, 0, 0);
  tdm_program *prog;
  tdm_session *s = one_op(&p, &prog);
  if (!s) return;
  float *x = tdm_session_input(s, 0, 0);
  int64_t *ix = tdm_session_input(s, 0, 1);
  for (int i = 0; i < 6; i++) x[i] = (float)(i + 1);
  const int64_t idx[8] = {0, 2, -1, -3, 3, -4, INT64_MIN, INT64_MAX};
  memcpy(ix, idx, sizeof idx);
  CHECK_STATUS(tdm_session_run(s, 0), TDM_OK);
  const float *y = tdm_session_output(s, 0, 0);
  const float want[8] = {1, 3, 3, 1, 0, 0, 0, 0}; /* out of range: zeros, nothing read */
  for (int i = 0; i < 8; i++) CHECK(y[i] == want[i]);
  tdm_session_free(s);
  tdm_program_free(prog);
}

static void sort_and_topk_order(void) {
  tb_program p = {0};
  p.n_methods = 1;
  tb_method *m = &p.methods[0];
  m->name = "s";
  m->scratch = 2048;
  m->n_values = 5;
  m->values[0] = tb_scratch(TDM_F32, 0, 1, 7, 0);   /* x [7] */
  m->values[1] = tb_scratch(TDM_F32, 64, 1, 7, 0);  /* sorted values */
  m->values[2] = tb_scratch(TDM_I64, 128, 1, 7, 0); /* sorted indices */
  m->values[3] = tb_scratch(TDM_F32, 256, 1, 3, 0); /* top-3 values */
  m->values[4] = tb_scratch(TDM_I64, 320, 1, 3, 0); /* top-3 indices */
  m->n_inputs = 1, m->inputs[0] = 0;
  m->n_outputs = 4, m->outputs[0] = 1, m->outputs[1] = 2, m->outputs[2] = 3, m->outputs[3] = 4;
  m->n_ops = 2;
  tb_op sort = {"sort", 1, 2, 2, 0, {0}, {1, 2}, {0, 1}, {0}};    /* descending */
  tb_op topk = {"topk", 1, 2, 3, 0, {0}, {3, 4}, {0, 3, 0}, {0}}; /* 3 smallest */
  m->ops[0] = sort, m->ops[1] = topk;
  tdm_program *prog;
  tdm_session *s = one_op(&p, &prog);
  if (!s) return;
  float *x = tdm_session_input(s, 0, 0);
  const float in[7] = {1, NAN, -2, 1, NAN, -INFINITY, 1};
  memcpy(x, in, sizeof in);
  CHECK_STATUS(tdm_session_run(s, 0), TDM_OK);
  const int64_t *si = tdm_session_output(s, 0, 1), *ti = tdm_session_output(s, 0, 3);
  const int64_t want_sort[7] = {1, 4, 0, 3, 6, 2, 5}; /* NaN first (largest), ties by index */
  const int64_t want_top[3] = {5, 2, 0};
  for (int i = 0; i < 7; i++) CHECK(si[i] == want_sort[i]);
  for (int i = 0; i < 3; i++) CHECK(ti[i] == want_top[i]);
  const float *sv = tdm_session_output(s, 0, 0);
  CHECK(isnan(sv[0]) && isnan(sv[1]) && sv[2] == 1 && sv[6] == -INFINITY);
  tdm_session_free(s);
  tdm_program_free(prog);
}

static void int32_division_and_cumsum(void) {
  enum { N = 6 };
  const int32_t a[N] = {INT32_MIN, INT32_MIN, 7, -7, 5, INT32_MAX};
  const int32_t b[N] = {-1, 1, 0, 2, -3, -1};
  const int32_t floor_q[N] = {INT32_MIN, INT32_MIN, 0, -4, -2, -INT32_MAX};
  const int32_t rem[N] = {0, 0, 0, 1, -1, 0};
  tb_program p = {0};
  p.n_methods = 1;
  tb_method *m = &p.methods[0];
  m->name = "d";
  m->scratch = 1024;
  m->n_values = 5;
  for (int v = 0; v < 5; v++) m->values[v] = tb_scratch(TDM_I32, (uint64_t)v * 64, 1, N, 0);
  m->n_inputs = 2, m->inputs[0] = 0, m->inputs[1] = 1;
  m->n_outputs = 3, m->outputs[0] = 2, m->outputs[1] = 3, m->outputs[2] = 4;
  m->n_ops = 3;
  m->ops[0] = op2("floor_divide", 0, 1, 2, 0, 0, 0, 0);
  m->ops[1] = op2("remainder", 0, 1, 3, 0, 0, 0, 0);
  tb_op cs = {"cumsum", 1, 1, 1, 0, {0}, {4}, {0}, {0}};
  m->ops[2] = cs;
  tdm_program *prog;
  tdm_session *s = one_op(&p, &prog);
  if (!s) return;
  memcpy(tdm_session_input(s, 0, 0), a, sizeof a);
  memcpy(tdm_session_input(s, 0, 1), b, sizeof b);
  CHECK_STATUS(tdm_session_run(s, 0), TDM_OK);
  const int32_t *q = tdm_session_output(s, 0, 0), *r = tdm_session_output(s, 0, 1), *c = tdm_session_output(s, 0, 2);
  uint32_t acc = 0;
  for (int i = 0; i < N; i++) {
    CHECK(q[i] == floor_q[i]);
    CHECK(r[i] == rem[i]);
    acc += (uint32_t)a[i];
    CHECK(c[i] == (int32_t)acc); /* wraps */
  }
  tdm_session_free(s);
  tdm_program_free(prog);
}

/* Programs each breaking one rule load with TDM_ERR_OP_RULE. */
static void rules(void) {
  for (int k = 0; k < 5; k++) {
    tb_program p = {0};
    p.n_methods = 1;
    tb_method *m = &p.methods[0];
    m->name = "r";
    m->scratch = 1024;
    m->n_values = 3;
    m->values[0] = tb_scratch(TDM_F32, 0, 2, 2, 3);
    m->values[1] = tb_scratch(TDM_F32, 64, 2, 2, 4);
    m->values[2] = tb_scratch(TDM_I64, 128, 2, 2, 4);
    m->n_inputs = 1, m->inputs[0] = 0;
    m->n_outputs = 1, m->outputs[0] = 1;
    m->n_ops = 1;
    if (k == 0) { /* topk with k = 4 > 3 */
      tb_op o = {"topk", 1, 2, 3, 0, {0}, {1, 2}, {1, 4, 1}, {0}};
      m->ops[0] = o;
    } else if (k == 1) { /* gather with an index larger than x outside dim */
      m->values[2] = tb_scratch(TDM_I64, 128, 2, 3, 1);
      m->values[1] = tb_scratch(TDM_F32, 64, 2, 3, 1);
      m->n_inputs = 2, m->inputs[1] = 2;
      m->ops[0] = op2("gather", 0, 2, 1, 1, 1, 0, 0);
    } else if (k == 2) { /* gather with a float index */
      m->values[2] = tb_scratch(TDM_F32, 128, 2, 2, 4);
      m->n_inputs = 2, m->inputs[1] = 2;
      m->ops[0] = op2("gather", 0, 2, 1, 1, 1, 0, 0);
    } else if (k == 3) { /* an int32 fill out of range */
      m->values[1] = tb_scratch(TDM_I32, 64, 2, 2, 4);
      tb_op o = {"fill", 0, 1, 1, 0, {0}, {1}, {(int64_t)1 << 40}, {0}};
      m->ops[0] = o;
    } else { /* sort with values of another dtype */
      m->values[1] = tb_scratch(TDM_I32, 64, 2, 2, 3);
      m->values[2] = tb_scratch(TDM_I64, 128, 2, 2, 3);
      tb_op o = {"sort", 1, 2, 2, 0, {0}, {1, 2}, {1, 0}, {0}};
      m->ops[0] = o;
    }
    tdm_program *prog = NULL;
    CHECK_STATUS(tb_load(&p, &prog), TDM_ERR_OP_RULE);
    tdm_program_free(prog);
  }
}

int main(void) {
  gather_hostile_indices();
  sort_and_topk_order();
  int32_division_and_cumsum();
  rules();
  return test_report("test_select");
}
