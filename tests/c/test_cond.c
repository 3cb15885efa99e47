/* cond (a branch in the program, docs/format.md): the session runs the branch its pred picks, nested
 * conds and empty branches included; the loader refuses branches that do not nest, that run past
 * the method, that leave an output unwritten, or whose values are read outside them. Also runs
 * under ASan+UBSan. */
#include "builder.h"
#include "testing.h"

#include <math.h>

static tb_op op1(const char *name, uint32_t x, uint32_t y) {
  tb_op o = {name, 1, 1, 0, 0, {x}, {y}, {0}, {0}};
  return o;
}

static tb_op op2(const char *name, uint32_t a, uint32_t b, uint32_t y) {
  tb_op o = {name, 2, 1, 0, 0, {a, b}, {y}, {0}, {0}};
  return o;
}

static tb_op cond(uint32_t pred, uint32_t y, int64_t n_then, int64_t n_else) {
  tb_op o = {"cond", 1, 1, 2, 0, {pred}, {y}, {n_then, n_else}, {0}};
  return o;
}

/* f(p, q, x [3]) with values p 0, q 1, x 2, y 3 (the output), t 4 (a branch's own value). */
static tb_program base(void) {
  tb_program p = {0};
  p.n_methods = 1;
  tb_method *m = &p.methods[0];
  m->name = "f";
  m->scratch = 1024;
  m->n_values = 6;
  m->values[0] = tb_scratch(TDM_BOOL, 0, 0, 0, 0);
  m->values[1] = tb_scratch(TDM_BOOL, 64, 0, 0, 0);
  m->values[2] = tb_scratch(TDM_F32, 128, 1, 3, 0);
  m->values[3] = tb_scratch(TDM_F32, 256, 1, 3, 0);
  m->values[4] = tb_scratch(TDM_F32, 384, 1, 3, 0);
  m->values[5] = tb_scratch(TDM_F32, 512, 1, 3, 0);
  m->n_inputs = 3, m->inputs[0] = 0, m->inputs[1] = 1, m->inputs[2] = 2;
  m->n_outputs = 1, m->outputs[0] = 3;
  return p;
}

/* y = p ? (q ? -x * x : relu(x)) : exp(x), the inner cond in the outer's then branch, and a cond
 * with an empty then branch over a value defined before it. */
static void runs_the_branch_pred_picks(void) {
  tb_program p = base();
  tb_method *m = &p.methods[0];
  m->ops[0] = cond(0, 3, 4, 1);
  m->ops[1] = cond(1, 3, 2, 1);
  m->ops[2] = op1("neg", 2, 4);
  m->ops[3] = op2("mul", 4, 2, 3);
  m->ops[4] = op1("relu", 2, 3);
  m->ops[5] = op1("exp", 2, 3);
  m->ops[6] = op1("neg", 3, 5); /* after the branches: reads the cond's output */
  m->ops[7] = cond(1, 5, 0, 1); /* q: keeps -y; else y + y */
  m->ops[8] = op2("add", 3, 3, 5);
  m->n_ops = 9;
  m->outputs[0] = 5;
  tdm_program *prog = NULL;
  tdm_session *s = NULL;
  CHECK_STATUS(tb_load(&p, &prog), TDM_OK);
  if (!prog) return;
  CHECK_STATUS(tdm_session_create(prog, &s), TDM_OK);
  const float x[3] = {-1.5f, 0.5f, 2.0f};
  for (int pq = 0; pq < 4; pq++) {
    const bool pv = pq & 1, qv = pq >> 1;
    *(uint8_t *)tdm_session_input(s, 0, 0) = pv;
    *(uint8_t *)tdm_session_input(s, 0, 1) = qv;
    memcpy(tdm_session_input(s, 0, 2), x, sizeof x);
    CHECK_STATUS(tdm_session_run(s, 0), TDM_OK);
    const float *out = tdm_session_output(s, 0, 0);
    for (int i = 0; i < 3; i++) {
      const float y = pv ? (qv ? -x[i] * x[i] : (x[i] > 0 ? x[i] : 0)) : expf(x[i]);
      const float want = qv ? -y : y + y;
      CHECK(fabsf(out[i] - want) <= 1e-6f * (1 + fabsf(want)));
    }
  }
  tdm_session_free(s);
  tdm_program_free(prog);
}

static void load_fails(const tb_program *p, tdm_status want, const char *what) {
  tdm_program *prog = NULL;
  const tdm_status got = tb_load(p, &prog);
  if (got != want) fprintf(stderr, "%s: ", what);
  CHECK_STATUS(got, want);
  CHECK(prog == NULL);
  tdm_program_free(prog);
}

static void refuses_malformed_branches(void) {
  tb_program p = base();
  tb_method *m = &p.methods[0];
  /* the else branch does not write the output */
  m->ops[0] = cond(0, 3, 1, 1), m->ops[1] = op1("neg", 2, 3), m->ops[2] = op1("neg", 2, 4), m->n_ops = 3;
  load_fails(&p, TDM_ERR_MALFORMED, "else writes no output");
  /* an empty else branch over an output nothing wrote before */
  m->ops[0] = cond(0, 3, 1, 0), m->n_ops = 2;
  load_fails(&p, TDM_ERR_MALFORMED, "empty else");
  /* a value of the then branch read after the cond */
  m->ops[0] = cond(0, 3, 2, 1), m->ops[1] = op1("neg", 2, 4), m->ops[2] = op1("neg", 4, 3), m->ops[3] = op1("exp", 2, 3);
  m->ops[4] = op2("add", 3, 4, 5), m->n_ops = 5, m->outputs[0] = 5;
  load_fails(&p, TDM_ERR_MALFORMED, "then's value read after");
  /* the else branch reads a value of the then branch */
  m->ops[3] = op1("exp", 4, 3), m->n_ops = 4, m->outputs[0] = 3;
  load_fails(&p, TDM_ERR_MALFORMED, "then's value read by else");
  /* a cond whose branches end after those of the cond that holds it */
  m->ops[0] = cond(0, 3, 2, 1), m->ops[1] = cond(1, 3, 1, 1), m->ops[2] = op1("neg", 2, 3), m->ops[3] = op1("exp", 2, 3);
  m->n_ops = 4;
  load_fails(&p, TDM_ERR_MALFORMED, "straddling");
  /* branches longer than the method, a pred that is not one bool, a wrong attribute count */
  m->ops[0] = cond(0, 3, 2, 5), m->ops[1] = op1("neg", 2, 3), m->ops[2] = op1("exp", 2, 3), m->n_ops = 3;
  load_fails(&p, TDM_ERR_OP_RULE, "past the end");
  m->ops[0] = cond(0, 3, -1, 1);
  load_fails(&p, TDM_ERR_OP_RULE, "negative");
  m->ops[0] = cond(2, 3, 1, 1);
  load_fails(&p, TDM_ERR_OP_RULE, "float pred");
  m->ops[0] = cond(0, 3, 1, 1), m->ops[0].n_iattr = 1;
  load_fails(&p, TDM_ERR_OP_RULE, "one attribute");
  /* the same program with two attributes loads */
  m->ops[0].n_iattr = 2;
  tdm_program *prog = NULL;
  CHECK_STATUS(tb_load(&p, &prog), TDM_OK);
  tdm_program_free(prog);
}

/* Conds nested 14 deep (the builder's 16 ops: one before, a leaf inside), each with an empty else
 * branch over the output the first op wrote. */
static void nested_conds_load(void) {
  tb_program p = base();
  tb_method *m = &p.methods[0];
  m->ops[0] = op1("exp", 2, 3);
  for (int k = 1; k < 15; k++) m->ops[k] = cond(0, 3, 15 - k, 0);
  m->ops[15] = op1("neg", 2, 3);
  m->n_ops = 16;
  tdm_program *prog = NULL;
  tdm_session *s = NULL;
  CHECK_STATUS(tb_load(&p, &prog), TDM_OK);
  if (!prog) return;
  CHECK_STATUS(tdm_session_create(prog, &s), TDM_OK);
  const float x[3] = {1, 2, 3};
  for (int pv = 0; pv < 2; pv++) {
    *(uint8_t *)tdm_session_input(s, 0, 0) = (uint8_t)pv;
    memcpy(tdm_session_input(s, 0, 2), x, sizeof x);
    CHECK_STATUS(tdm_session_run(s, 0), TDM_OK);
    const float *out = tdm_session_output(s, 0, 0);
    for (int i = 0; i < 3; i++) CHECK(out[i] == (pv ? -x[i] : expf(x[i])));
  }
  tdm_session_free(s);
  tdm_program_free(prog);
}

int main(void) {
  runs_the_branch_pred_picks();
  refuses_malformed_branches();
  nested_conds_load();
  return test_report("test_cond");
}
