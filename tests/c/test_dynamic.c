/* Dynamic dims (format version 3): a method with a bounded dim n runs at several sizes, and the
 * verifier rejects malformed dims and symbolic sizes. */
#include "builder.h"
#include "testing.h"

enum { SYM_DIM = 0, SYM_OFFSET = 1, SYM_IATTR = 2 };

static tb_sym sym1(int kind, uint32_t target, int index, int64_t coef, int64_t constant) {
  tb_sym y = {kind, index, target, constant, 1, {0, 0}, {coef, 0}};
  return y;
}

/* f(x [n, 4]), 1 <= n <= 8: y = x + x [n, 4]; c = cat(x, x) [2n, 4]; w = c's second half as a view
 * at offset 256 + 16 n [n, 4]; t = slice(c, dim 0, start n) [n, 4]. Outputs y, w, t. */
static tb_program dynamic_program(void) {
  tb_program p = {0};
  p.n_methods = 1;
  tb_method *m = &p.methods[0];
  m->name = "f";
  m->scratch = 640;
  m->n_values = 5;
  m->values[0] = tb_scratch(TDM_F32, 0, 2, 8, 4);
  m->values[1] = tb_scratch(TDM_F32, 128, 2, 8, 4);
  m->values[2] = tb_scratch(TDM_F32, 256, 2, 16, 4);
  m->values[3] = tb_scratch(TDM_F32, 384, 2, 8, 4);
  m->values[4] = tb_scratch(TDM_F32, 512, 2, 8, 4);
  m->n_inputs = 1;
  m->inputs[0] = 0;
  m->n_outputs = 3;
  m->outputs[0] = 1, m->outputs[1] = 3, m->outputs[2] = 4;
  m->n_ops = 3;
  m->ops[0] = (tb_op){"add", 2, 1, 0, 0, {0, 0}, {1}, {0}, {0}};
  m->ops[1] = (tb_op){"cat", 2, 1, 1, 0, {0, 0}, {2}, {0}, {0}};
  m->ops[2] = (tb_op){"slice", 1, 1, 3, 0, {2}, {4}, {0, 8, 1}, {0}};
  m->n_dims = 1;
  m->dims[0] = (tb_dim){"n", 1, 8};
  m->n_syms = 7;
  m->syms[0] = sym1(SYM_DIM, 0, 0, 1, 0);
  m->syms[1] = sym1(SYM_DIM, 1, 0, 1, 0);
  m->syms[2] = sym1(SYM_DIM, 2, 0, 2, 0);
  m->syms[3] = sym1(SYM_DIM, 3, 0, 1, 0);
  m->syms[4] = sym1(SYM_OFFSET, 3, 0, 16, 256);
  m->syms[5] = sym1(SYM_DIM, 4, 0, 1, 0);
  m->syms[6] = sym1(SYM_IATTR, 2, 1, 1, 0);
  return p;
}

static void runs_at_each_size(void) {
  tb_program prog = dynamic_program();
  tdm_program *p;
  tdm_session *s;
  CHECK_STATUS(tb_load(&prog, &p), TDM_OK);
  if (!p) return;
  CHECK(tdm_method_dim_count(p, 0) == 1 && strcmp(tdm_method_dim_name(p, 0, 0), "n") == 0);
  CHECK(tdm_method_dim_min(p, 0, 0) == 1 && tdm_method_dim_max(p, 0, 0) == 8 && tdm_method_dim_max(p, 0, 1) == -1);
  char buf[32];
  CHECK(tdm_method_io_dim_expr(p, 0, 0, 0, 0, buf, sizeof buf) == 1 && strcmp(buf, "n") == 0);
  CHECK(tdm_method_io_dim_expr(p, 0, 0, 0, 1, buf, sizeof buf) == 0 && buf[0] == 0);
  CHECK(tdm_method_io_dim(p, 0, 1, 0, 0) == 8); /* the maximum */
  CHECK_STATUS(tdm_session_create(p, &s), TDM_OK);
  const int64_t sizes[] = {3, 1, 8, 5};
  for (int c = 0; c < 4; c++) {
    const int64_t n = sizes[c], shape[2] = {n, 4};
    CHECK_STATUS(tdm_session_set_input_shape(s, 0, 0, shape, 2), TDM_OK);
    float *x = tdm_session_input(s, 0, 0);
    for (int i = 0; i < n * 4; i++) x[i] = (float)(i + 10 * c);
    CHECK_STATUS(tdm_session_run(s, 0), TDM_OK);
    for (uint32_t o = 0; o < 3; o++) {
      CHECK(tdm_session_io_dim(s, 0, 1, o, 0) == n && tdm_session_io_dim(s, 0, 1, o, 1) == 4);
      CHECK(tdm_session_io_nbytes(s, 0, 1, o) == (size_t)n * 16);
    }
    const float *y = tdm_session_output(s, 0, 0), *w = tdm_session_output(s, 0, 1), *t = tdm_session_output(s, 0, 2);
    int bad = 0;
    for (int i = 0; i < n * 4; i++) bad += y[i] != 2.0f * (float)(i + 10 * c) || w[i] != (float)(i + 10 * c) || t[i] != (float)(i + 10 * c);
    CHECK(bad == 0);
  }
  /* out of range, wrong rank, a static dim changed: typed errors, the input keeps its shape */
  const int64_t too_big[2] = {9, 4}, zero[2] = {0, 4}, wide[2] = {2, 5};
  CHECK_STATUS(tdm_session_set_input_shape(s, 0, 0, too_big, 2), TDM_ERR_SHAPE);
  CHECK(strstr(tdm_last_error(), "'n'") != NULL && strstr(tdm_last_error(), "between 1 and 8") != NULL);
  CHECK_STATUS(tdm_session_set_input_shape(s, 0, 0, zero, 2), TDM_ERR_SHAPE);
  CHECK_STATUS(tdm_session_set_input_shape(s, 0, 0, wide, 2), TDM_ERR_SHAPE);
  CHECK_STATUS(tdm_session_set_input_shape(s, 0, 0, too_big, 1), TDM_ERR_SHAPE);
  CHECK(tdm_session_io_dim(s, 0, 0, 0, 0) == 5);
  CHECK_STATUS(tdm_session_run(s, 0), TDM_OK);
  CHECK(tdm_session_io_dim(s, 0, 1, 2, 0) == 5);
  tdm_session_free(s);
  tdm_program_free(p);
}

static void rejects(const char *what, tb_program prog, tdm_status want) {
  tdm_program *p = NULL;
  tdm_status got = tb_load(&prog, &p);
  if (got != want) fprintf(stderr, "case '%s': ", what);
  CHECK_STATUS(got, want);
  tdm_program_free(p);
}

static void verifier_rejects_malformed_dims(void) {
  tb_program p;
  p = dynamic_program(), p.methods[0].syms[1].target = 9;
  rejects("sym target out of range", p, TDM_ERR_MALFORMED);
  p = dynamic_program(), p.methods[0].syms[4].constant = 240;
  rejects("stored offset is not the expression at the maximum", p, TDM_ERR_MALFORMED);
  p = dynamic_program(), p.methods[0].values[1].dims[0] = 7;
  rejects("stored dim breaks the rule at the maximum", p, TDM_ERR_OP_RULE);
  p = dynamic_program(), p.methods[0].dims[0].min = 9;
  rejects("min above max", p, TDM_ERR_MALFORMED);
  p = dynamic_program(), p.methods[0].dims[0].min = -1;
  rejects("negative min", p, TDM_ERR_MALFORMED);
  p = dynamic_program(), p.methods[0].n_dims = 2, p.methods[0].dims[1] = (tb_dim){"m", 1, 4};
  rejects("a dim no input gives", p, TDM_ERR_MALFORMED);
  p = dynamic_program(), p.methods[0].n_dims = 2, p.methods[0].dims[1] = (tb_dim){"n", 1, 4};
  rejects("two dims with one name", p, TDM_ERR_MALFORMED);
  p = dynamic_program(), p.methods[0].syms[6].index = 3;
  rejects("iattr index out of range", p, TDM_ERR_MALFORMED);
  p = dynamic_program(), p.methods[0].syms[2].dim[0] = 1;
  rejects("term names a dim that does not exist", p, TDM_ERR_MALFORMED);
  p = dynamic_program(), p.methods[0].syms[2].coef[0] = 0, p.methods[0].syms[2].constant = 16;
  rejects("zero coefficient", p, TDM_ERR_MALFORMED);
  p = dynamic_program(), p.methods[0].syms[2].n_terms = 0, p.methods[0].syms[2].constant = 16;
  rejects("no terms", p, TDM_ERR_MALFORMED);
  p = dynamic_program(), p.methods[0].syms[3] = p.methods[0].syms[1];
  rejects("two sizes for one dim", p, TDM_ERR_MALFORMED);
  p = dynamic_program(), p.methods[0].syms[0].kind = 3;
  rejects("unknown kind", p, TDM_ERR_MALFORMED);
  p = dynamic_program(), p.methods[0].syms[1].index = 2;
  rejects("dim index above the rank", p, TDM_ERR_MALFORMED);
  p = dynamic_program(), p.methods[0].syms[4].constant = 255, p.methods[0].values[3].offset = 383;
  rejects("offset not a multiple of the element size", p, TDM_ERR_MALFORMED);
  p = dynamic_program(), p.methods[0].n_syms = 7, p.methods[0].syms[1] = sym1(SYM_OFFSET, 0, 0, 0, 0);
  p.methods[0].syms[1] = sym1(SYM_OFFSET, 0, 0, 16, -128);
  rejects("an input with a symbolic offset", p, TDM_ERR_MALFORMED);
  /* y = x + x with y static [8, 4]: holds at n = 8 only, so the rule fails at the minimum */
  p = dynamic_program(), p.methods[0].syms[1] = p.methods[0].syms[6], p.methods[0].n_syms = 6;
  rejects("a rule that breaks at the minimum", p, TDM_ERR_OP_RULE);
  /* w at 512 - 16 n: right at n = 8; at n = 1 it reads bytes that no op wrote */
  p = dynamic_program(), p.methods[0].syms[4].constant = 512, p.methods[0].syms[4].coef[0] = -16;
  rejects("a view that reads unwritten bytes at the minimum", p, TDM_ERR_MALFORMED);
  /* an output of static size 32 elements viewing [n, 4] of c: its bytes leave c below the max */
  p = dynamic_program(), p.methods[0].syms[4].constant = 128 + 256 + 16 * 8, p.methods[0].syms[4].coef[0] = -16;
  p.methods[0].scratch = 640;
  rejects("a view past the arena's written bytes", p, TDM_ERR_MALFORMED);
}

/* Version 2 files (6 sections, no dims) still load and run. */
static void version_2_loads(void) {
  tb_program prog = dynamic_program();
  prog.version = 2;
  prog.methods[0].n_dims = prog.methods[0].n_syms = 0;
  tdm_program *p;
  tdm_session *s;
  CHECK_STATUS(tb_load(&prog, &p), TDM_OK);
  if (!p) return;
  CHECK(tdm_method_dim_count(p, 0) == 0);
  CHECK_STATUS(tdm_session_create(p, &s), TDM_OK);
  float *x = tdm_session_input(s, 0, 0);
  for (int i = 0; i < 32; i++) x[i] = (float)i;
  CHECK_STATUS(tdm_session_run(s, 0), TDM_OK);
  CHECK(((const float *)tdm_session_output(s, 0, 0))[31] == 62.0f && tdm_session_io_dim(s, 0, 1, 0, 0) == 8);
  const int64_t other[2] = {3, 4};
  CHECK_STATUS(tdm_session_set_input_shape(s, 0, 0, other, 2), TDM_ERR_SHAPE); /* a static input */
  tdm_session_free(s);
  tdm_program_free(p);
}

/* g(a [n, 4], b [n, 4]) = a + b: both inputs give n, and a call where they disagree is rejected. */
static void inputs_must_agree(void) {
  tb_program prog = {0};
  prog.n_methods = 1;
  tb_method *m = &prog.methods[0];
  m->name = "g";
  m->scratch = 384;
  m->n_values = 3;
  for (int v = 0; v < 3; v++) m->values[v] = tb_scratch(TDM_F32, 128 * (uint64_t)v, 2, 8, 4);
  m->n_inputs = 2, m->inputs[0] = 0, m->inputs[1] = 1;
  m->n_outputs = 1, m->outputs[0] = 2;
  m->n_ops = 1;
  m->ops[0] = (tb_op){"add", 2, 1, 0, 0, {0, 1}, {2}, {0}, {0}};
  m->n_dims = 1;
  m->dims[0] = (tb_dim){"n", 0, 8};
  m->n_syms = 3;
  for (int v = 0; v < 3; v++) m->syms[v] = sym1(SYM_DIM, (uint32_t)v, 0, 1, 0);
  tdm_program *p;
  tdm_session *s;
  CHECK_STATUS(tb_load(&prog, &p), TDM_OK);
  if (!p) return;
  CHECK_STATUS(tdm_session_create(p, &s), TDM_OK);
  const int64_t three[2] = {3, 4}, five[2] = {5, 4}, zero[2] = {0, 4};
  CHECK_STATUS(tdm_session_set_input_shape(s, 0, 0, three, 2), TDM_OK);
  CHECK_STATUS(tdm_session_set_input_shape(s, 0, 1, three, 2), TDM_OK);
  float *a = tdm_session_input(s, 0, 0), *b = tdm_session_input(s, 0, 1);
  for (int i = 0; i < 12; i++) a[i] = (float)i, b[i] = 100.0f;
  CHECK_STATUS(tdm_session_run(s, 0), TDM_OK);
  CHECK(((const float *)tdm_session_output(s, 0, 0))[11] == 111.0f && tdm_session_io_dim(s, 0, 1, 0, 0) == 3);
  CHECK_STATUS(tdm_session_set_input_shape(s, 0, 1, five, 2), TDM_OK);
  CHECK_STATUS(tdm_session_run(s, 0), TDM_ERR_SHAPE); /* a says 3, b says 5 */
  CHECK(strstr(tdm_last_error(), "other inputs") != NULL);
  CHECK(tdm_session_io_dim(s, 0, 1, 0, 0) == 3); /* the last good call's shapes stay */
  CHECK_STATUS(tdm_session_set_input_shape(s, 0, 0, zero, 2), TDM_OK);
  CHECK_STATUS(tdm_session_set_input_shape(s, 0, 1, zero, 2), TDM_OK);
  CHECK_STATUS(tdm_session_run(s, 0), TDM_OK); /* an empty call */
  CHECK(tdm_session_io_nbytes(s, 0, 1, 0) == 0);
  tdm_session_free(s);
  tdm_program_free(p);
}

int main(void) {
  inputs_must_agree();
  runs_at_each_size();
  version_2_loads();
  verifier_rejects_malformed_dims();
  return tdm_test_failures ? 1 : 0;
}
