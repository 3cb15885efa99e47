/* libFuzzer target: load → verify → create a session → run every method with zeroed inputs (a
 * method with dynamic dims also at the minimum of each, and once with a size out of range).
 * Seeded with real exported programs (build/fixtures). Any crash, sanitizer report or leak is a
 * bug; each one found becomes a case in the malformed-file tests. */
#include <stdint.h>
#include <string.h>

#include "tandem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tdm_set_max_declared_bytes(64u << 20); /* keep each input's memory small */
  tdm_program *p = NULL;
  if (tdm_program_load(data, size, &p) != TDM_OK) return 0;
  tdm_session *s = NULL;
  if (tdm_session_create(p, &s) == TDM_OK) {
    for (uint32_t m = 0; m < tdm_program_method_count(p); m++) {
      for (uint32_t i = 0; i < tdm_method_io_count(p, m, 0); i++) memset(tdm_session_input(s, m, i), 0, tdm_method_io_nbytes(p, m, 0, i));
      (void)tdm_session_run(s, m);
      for (uint32_t i = 0; i < tdm_method_io_count(p, m, 1); i++) {
        volatile uint8_t sink = 0;
        const uint8_t *o = tdm_session_output(s, m, i); /* NULL: the version that ran gives no outputs (None) */
        for (size_t k = 0; o && k < tdm_method_io_nbytes(p, m, 1, i); k++) sink ^= o[k];
      }
      if (tdm_method_dim_count(p, m) == 0) continue;
      /* every input dim that is exactly a dim at that dim's minimum (below it for the second try) */
      for (int below = 0; below < 2; below++) {
        for (uint32_t i = 0; i < tdm_method_io_count(p, m, 0); i++) {
          int64_t dims[TDM_MAX_RANK];
          char expr[64];
          const int rank = tdm_method_io_rank(p, m, 0, i);
          for (int d = 0; d < rank; d++) {
            dims[d] = tdm_method_io_dim(p, m, 0, i, d);
            if (!tdm_method_io_dim_expr(p, m, 0, i, d, expr, sizeof expr)) continue;
            for (uint32_t k = 0; k < tdm_method_dim_count(p, m); k++)
              if (strcmp(expr, tdm_method_dim_name(p, m, k)) == 0) dims[d] = tdm_method_dim_min(p, m, k) - below;
          }
          (void)tdm_session_set_input_shape(s, m, i, dims, rank);
        }
        (void)tdm_session_run(s, m);
        for (uint32_t i = 0; i < tdm_method_io_count(p, m, 1); i++) {
          volatile uint8_t sink = 0;
          const uint8_t *o = tdm_session_output(s, m, i);
          for (size_t k = 0; o && k < tdm_session_io_nbytes(s, m, 1, i); k++) sink ^= o[k];
        }
      }
    }
    tdm_session_free(s);
  }
  tdm_program_free(p);
  return 0;
}
