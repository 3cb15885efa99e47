/* The runtime's operators are exactly those python/tandem/schema.py declares (through the generated
 * src/schema.h), with its flags: no op missing, none extra, can_fail and inplace as declared. The
 * planner (python/tandem/plan.py) takes the same flags from the schema, so the exporter never plans
 * an update in place or an order that this verifier rejects. */
#include "ops.h"
#include "testing.h"

int main(void) {
  size_t declared = 0;
#define X(name, fails, in_place) \
  do { \
    const tdm_opdef *d = tdm__find_op(#name); \
    declared++; \
    if (!d) { \
      fprintf(stderr, "op '%s' is in python/tandem/schema.py but not in the runtime's tables\n", #name); \
      tdm_test_failures++; \
    } else { \
      CHECK(d->can_fail == (fails)); \
      CHECK(d->inplace == (in_place)); \
      CHECK(d->check && d->run); \
    } \
  } while (0);
  TDM_SCHEMA_OPS(X)
#undef X
  CHECK(declared == TDM_SCHEMA_OP_COUNT);
  /* With every declared op found, a larger count means an op the schema does not declare (or one
   * listed twice, which tdm__find_op would never reach). */
  if (tdm__op_count() != declared) {
    fprintf(stderr, "the runtime has %zu ops, python/tandem/schema.py declares %zu\n", tdm__op_count(), declared);
    tdm_test_failures++;
  }
  /* Dtypes: the public functions answer what the schema declares. */
#define X(code, id, name, size) CHECK(tdm_dtype_size(code) == (size) && strcmp(tdm_dtype_name(code), name) == 0);
  TDM_SCHEMA_DTYPES(X)
#undef X
  CHECK(tdm_dtype_size(0) == 0);
  return test_report("test_schema");
}
