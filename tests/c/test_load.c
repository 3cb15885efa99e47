/* Loading hostile bytes: truncation at every offset, corrupted header fields, allocation failure,
 * and hand-made programs that break one invariant of docs/format.md each. Each case expects a
 * specific status and no crash (run under ASan+UBSan too). */
#include "builder.h"
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
  struct {
    size_t at;
    unsigned char v;
    tdm_status want;
  } cases[] = {
      {0, 'X', TDM_ERR_BAD_MAGIC},
      {4, 5, TDM_ERR_VERSION},
      {4, 0, TDM_ERR_VERSION},
      {4, 1, TDM_ERR_MALFORMED} /* version 1 has 5 sections */,
      {4, 2, TDM_ERR_TRUNCATED} /* read as version 2: no symbolic sizes after the ops */,
      {16, 7, TDM_ERR_MALFORMED},
      {20, 1, TDM_ERR_MALFORMED},
      {32, 9, TDM_ERR_MALFORMED},    /* section id */
      {47, 0x80, TDM_ERR_MALFORMED}, /* section offset */
      {55, 0x7f, TDM_ERR_MALFORMED}, /* section size */
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


/* One method over f32 [4] values (16 bytes each): value v lives at scratch offset offs[v]. */
static tb_program one_method(int n_values, const uint64_t *offs) {
  tb_program p = {0};
  p.n_methods = 1;
  tb_method *m = &p.methods[0];
  m->name = "forward";
  m->scratch = 256;
  m->n_values = n_values;
  for (int v = 0; v < n_values; v++) m->values[v] = tb_scratch(TDM_F32, offs[v], 1, 4, 0);
  return p;
}

static tb_op unop(const char *name, uint32_t x, uint32_t y) {
  tb_op o = {name, 1, 1, 0, 0, {x}, {y}, {0}, {0}};
  return o;
}

/* Def-before-use: a scratch byte read by an op or returned must have been written before. */
static void def_before_use(void) {
  tdm_program *p = NULL;
  const uint64_t offs[] = {0, 16, 32, 64, 8};
  /* an output no op writes (it would show whatever the arena held) */
  tb_program t = one_method(2, offs);
  t.methods[0].n_inputs = 1, t.methods[0].inputs[0] = 0;
  t.methods[0].n_outputs = 1, t.methods[0].outputs[0] = 1;
  CHECK_STATUS(tb_load(&t, &p), TDM_ERR_MALFORMED);
  /* the same with an op writing it: loads */
  t.methods[0].n_ops = 1, t.methods[0].ops[0] = unop("neg", 0, 1);
  CHECK_STATUS(tb_load(&t, &p), TDM_OK);
  tdm_program_free(p);
  /* an op that reads a value nothing wrote */
  t = one_method(3, offs);
  t.methods[0].n_inputs = 1, t.methods[0].inputs[0] = 0;
  t.methods[0].n_outputs = 1, t.methods[0].outputs[0] = 2;
  t.methods[0].n_ops = 2, t.methods[0].ops[0] = unop("neg", 1, 2), t.methods[0].ops[1] = unop("neg", 0, 1);
  CHECK_STATUS(tb_load(&t, &p), TDM_ERR_MALFORMED); /* op 0 reads value 1, written only by op 1 */
  t.methods[0].ops[0] = unop("neg", 0, 1), t.methods[0].ops[1] = unop("neg", 1, 2);
  CHECK_STATUS(tb_load(&t, &p), TDM_OK);
  tdm_program_free(p);
  /* partly written: value 4 = bytes [8, 24) straddles input [0, 16) and the unwritten [16, 24) */
  t = one_method(5, offs);
  t.methods[0].n_inputs = 1, t.methods[0].inputs[0] = 0;
  t.methods[0].n_outputs = 1, t.methods[0].outputs[0] = 2;
  t.methods[0].n_ops = 1, t.methods[0].ops[0] = unop("neg", 4, 2);
  CHECK_STATUS(tb_load(&t, &p), TDM_ERR_MALFORMED);
  /* ... and covered once [16, 32) is written first (views: bytes, not value identities) */
  t.methods[0].n_ops = 2, t.methods[0].ops[0] = unop("neg", 0, 1), t.methods[0].ops[1] = unop("neg", 4, 2);
  CHECK_STATUS(tb_load(&t, &p), TDM_OK);
  tdm_program_free(p);
  /* an output that is (inside) an input needs no op */
  t = one_method(1, offs);
  t.methods[0].n_inputs = 1, t.methods[0].inputs[0] = 0;
  t.methods[0].n_outputs = 1, t.methods[0].outputs[0] = 0;
  CHECK_STATUS(tb_load(&t, &p), TDM_OK);
  tdm_program_free(p);
  /* state is always defined: an output that is a state tensor, never written by the method */
  t = one_method(0, offs);
  t.n_states = 1, t.states[0] = (tb_state){"s", TDM_F32, 1, {4}};
  t.methods[0].n_values = 1, t.methods[0].values[0] = (tb_value){TDM_F32, 1, TB_STATE, 0, 0, {4}};
  t.methods[0].n_outputs = 1, t.methods[0].outputs[0] = 0;
  CHECK_STATUS(tb_load(&t, &p), TDM_OK);
  tdm_program_free(p);
}

/* A fresh session's scratch is zero, whatever the allocator handed back (here, most likely the
 * block of a session just freed, filled with 0xAB). */
static void scratch_starts_zeroed(void) {
  const uint64_t offs[] = {0, 16};
  tb_program t = one_method(2, offs);
  t.methods[0].scratch = 4096;
  t.methods[0].n_inputs = 1, t.methods[0].inputs[0] = 0;
  t.methods[0].n_outputs = 1, t.methods[0].outputs[0] = 1;
  t.methods[0].n_ops = 1, t.methods[0].ops[0] = unop("neg", 0, 1);
  tdm_program *p;
  CHECK_STATUS(tb_load(&t, &p), TDM_OK);
  for (int round = 0; round < 3; round++) {
    tdm_session *s;
    CHECK_STATUS(tdm_session_create(p, &s), TDM_OK);
    const unsigned char *in = tdm_session_input(s, 0, 0), *out = tdm_session_output(s, 0, 0);
    int nonzero = 0;
    for (int i = 0; i < 16; i++) nonzero += in[i] != 0 || out[i] != 0;
    CHECK(nonzero == 0);
    memset(tdm_session_input(s, 0, 0), 0xAB, 4096); /* the whole arena: input 0 is at offset 0 */
    tdm_session_free(s);
  }
  tdm_program_free(p);
}

/* Ops that can fail on runtime values (check_index) must come before any op that writes the
 * state, so a failed call leaves the state as it was. */
static void check_before_state_write(void) {
  tb_program t = {0};
  t.n_states = 1, t.states[0] = (tb_state){"counter", TDM_I64, 1, {4}};
  t.n_methods = 1;
  tb_method *m = &t.methods[0];
  m->name = "forward";
  m->scratch = 64;
  m->n_values = 2;
  m->values[0] = tb_scratch(TDM_I64, 0, 1, 2, 0);             /* index input */
  m->values[1] = (tb_value){TDM_I64, 1, TB_STATE, 0, 0, {4}}; /* the state */
  m->n_inputs = 1, m->inputs[0] = 0;
  m->n_ops = 2;
  const tb_op add = {"add", 2, 1, 0, 0, {1, 1}, {1}, {0}, {0}}; /* counter += counter, in place */
  const tb_op check = {"check_index", 1, 0, 1, 0, {0}, {0}, {4}, {0}};
  m->ops[0] = add, m->ops[1] = check;
  tdm_program *p = NULL;
  CHECK_STATUS(tb_load(&t, &p), TDM_ERR_MALFORMED);
  CHECK(strstr(tdm_last_error(), "after the state was written") != NULL);
  m->ops[0] = check, m->ops[1] = add;
  CHECK_STATUS(tb_load(&t, &p), TDM_OK);
  tdm_program_free(p);
}

/* guard (a specialized Python branch): a false cond fails the call with TDM_ERR_GUARD, naming the
 * line, before the state is written; placed after a state write it is refused at load. */
static void guard_fails_before_state_write(void) {
  tb_program t = {0};
  t.n_states = 1, t.states[0] = (tb_state){"counter", TDM_I64, 1, {4}};
  t.n_methods = 1;
  tb_method *m = &t.methods[0];
  m->name = "forward";
  m->scratch = 64;
  m->n_values = 2;
  m->values[0] = tb_scratch(TDM_BOOL, 0, 0, 0, 0);            /* cond input, one bool */
  m->values[1] = (tb_value){TDM_I64, 1, TB_STATE, 0, 0, {4}}; /* the state */
  m->n_inputs = 1, m->inputs[0] = 0;
  m->n_ops = 2;
  const tb_op add = {"add", 2, 1, 0, 0, {1, 1}, {1}, {0}, {0}}; /* counter += counter, in place */
  const tb_op guard = {"guard", 1, 0, 1, 0, {0}, {0}, {7}, {0}};
  m->ops[0] = add, m->ops[1] = guard;
  tdm_program *p = NULL;
  CHECK_STATUS(tb_load(&t, &p), TDM_ERR_MALFORMED);
  CHECK(strstr(tdm_last_error(), "after the state was written") != NULL);
  m->ops[0] = guard, m->ops[1] = add;
  CHECK_STATUS(tb_load(&t, &p), TDM_OK);
  tdm_session *s = NULL;
  CHECK_STATUS(tdm_session_create(p, &s), TDM_OK);
  int64_t *counter = (int64_t *)((uint8_t *)tdm_session_state(s) + tdm_state_offset(p, 0));
  for (int i = 0; i < 4; i++) counter[i] = i + 1;
  *(uint8_t *)tdm_session_input(s, 0, 0) = 1;
  CHECK_STATUS(tdm_session_run(s, 0), TDM_OK);
  CHECK(counter[0] == 2 && counter[3] == 8);
  *(uint8_t *)tdm_session_input(s, 0, 0) = 0;
  CHECK_STATUS(tdm_session_run(s, 0), TDM_ERR_GUARD);
  CHECK(strstr(tdm_last_error(), "line 7") != NULL && strstr(tdm_last_error(), "state is unchanged") != NULL);
  CHECK(counter[0] == 2 && counter[3] == 8);
  CHECK(strcmp(tdm_status_string(TDM_ERR_GUARD), "TDM_ERR_GUARD") == 0);
  tdm_session_free(s);
  tdm_program_free(p);
  m->values[0] = tb_scratch(TDM_BOOL, 0, 1, 2, 0); /* cond must be one bool */
  CHECK_STATUS(tb_load(&t, &p), TDM_ERR_OP_RULE);
}

/* Updates in place of the state (index_put, slice_scatter) may come before an op that can fail:
 * the session saves the rows they write and puts them back when the call fails. */
static void update_before_check_is_undone(void) {
  tb_program t = {0};
  t.n_states = 1, t.states[0] = (tb_state){"rows", TDM_F32, 2, {4, 2}};
  t.n_methods = 1;
  tb_method *m = &t.methods[0];
  m->name = "forward";
  m->scratch = 192;
  m->n_values = 4;
  m->values[0] = tb_scratch(TDM_I64, 0, 1, 1, 0);                /* the row to write */
  m->values[1] = tb_scratch(TDM_F32, 64, 2, 1, 2);               /* its values */
  m->values[2] = tb_scratch(TDM_I64, 128, 1, 1, 0);              /* an index checked after the writes */
  m->values[3] = (tb_value){TDM_F32, 2, TB_STATE, 0, 0, {4, 2}}; /* the state */
  m->n_inputs = 3, m->inputs[0] = 0, m->inputs[1] = 1, m->inputs[2] = 2;
  m->n_ops = 4;
  m->ops[0] = (tb_op){"check_index", 1, 0, 1, 0, {0}, {0}, {4}, {0}};
  m->ops[1] = (tb_op){"index_put", 3, 1, 2, 0, {3, 0, 1}, {3}, {0, 0}, {0}};     /* rows[i] = v, in place */
  m->ops[2] = (tb_op){"slice_scatter", 2, 1, 3, 0, {3, 1}, {3}, {0, 3, 1}, {0}}; /* rows[3] = v, in place */
  m->ops[3] = (tb_op){"check_index", 1, 0, 1, 0, {2}, {0}, {4}, {0}};
  tdm_program *p = NULL;
  CHECK_STATUS(tb_load(&t, &p), TDM_OK);
  tdm_session *s = NULL;
  CHECK_STATUS(tdm_session_create(p, &s), TDM_OK);
  float *rows = (float *)((uint8_t *)tdm_session_state(s) + tdm_state_offset(p, 0));
  for (int i = 0; i < 8; i++) rows[i] = (float)i;
  *(int64_t *)tdm_session_input(s, 0, 0) = 1;
  ((float *)tdm_session_input(s, 0, 1))[0] = 10, ((float *)tdm_session_input(s, 0, 1))[1] = 11;
  *(int64_t *)tdm_session_input(s, 0, 2) = 9;
  CHECK_STATUS(tdm_session_run(s, 0), TDM_ERR_INDEX);
  for (int i = 0; i < 8; i++) CHECK(rows[i] == (float)i);
  *(int64_t *)tdm_session_input(s, 0, 2) = 3;
  CHECK_STATUS(tdm_session_run(s, 0), TDM_OK);
  const float want[8] = {0, 1, 10, 11, 4, 5, 10, 11};
  for (int i = 0; i < 8; i++) CHECK(rows[i] == want[i]);
  tdm_session_free(s);
  tdm_program_free(p);
  m->ops[1] = (tb_op){"index_put", 3, 1, 2, 0, {3, 0, 1}, {3}, {0, 1}, {0}}; /* accumulating: the same rows saved */
  CHECK_STATUS(tb_load(&t, &p), TDM_OK);
  CHECK_STATUS(tdm_session_create(p, &s), TDM_OK);
  rows = (float *)((uint8_t *)tdm_session_state(s) + tdm_state_offset(p, 0));
  for (int i = 0; i < 8; i++) rows[i] = (float)i;
  *(int64_t *)tdm_session_input(s, 0, 0) = 2;
  *(int64_t *)tdm_session_input(s, 0, 2) = -7;
  CHECK_STATUS(tdm_session_run(s, 0), TDM_ERR_INDEX);
  for (int i = 0; i < 8; i++) CHECK(rows[i] == (float)i);
  tdm_session_free(s);
  tdm_program_free(p);
  m->n_values = 5, m->values[4] = tb_scratch(TDM_I64, 144, 2, 1, 2); /* scatter's index [1, 2] */
  m->n_inputs = 4, m->inputs[3] = 4;
  m->ops[1] = (tb_op){"scatter", 3, 1, 1, 0, {3, 4, 1}, {3}, {0}, {0}}; /* rows[index[0][c]][c] = v[0][c], in place */
  CHECK_STATUS(tb_load(&t, &p), TDM_OK);
  CHECK_STATUS(tdm_session_create(p, &s), TDM_OK);
  rows = (float *)((uint8_t *)tdm_session_state(s) + tdm_state_offset(p, 0));
  for (int i = 0; i < 8; i++) rows[i] = (float)i;
  ((int64_t *)tdm_session_input(s, 0, 3))[0] = 0, ((int64_t *)tdm_session_input(s, 0, 3))[1] = 2;
  ((float *)tdm_session_input(s, 0, 1))[0] = 10, ((float *)tdm_session_input(s, 0, 1))[1] = 11;
  *(int64_t *)tdm_session_input(s, 0, 2) = 4;
  CHECK_STATUS(tdm_session_run(s, 0), TDM_ERR_INDEX);
  for (int i = 0; i < 8; i++) CHECK(rows[i] == (float)i);
  *(int64_t *)tdm_session_input(s, 0, 2) = 0;
  CHECK_STATUS(tdm_session_run(s, 0), TDM_OK);
  const float scattered[8] = {10, 1, 2, 3, 4, 11, 10, 11};
  for (int i = 0; i < 8; i++) CHECK(rows[i] == scattered[i]);
  tdm_session_free(s);
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
  def_before_use();
  scratch_starts_zeroed();
  check_before_state_write();
  guard_fails_before_state_write();
  update_before_check_is_undone();
  return test_report("test_load");
}
