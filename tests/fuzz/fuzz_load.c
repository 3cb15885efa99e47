/* libFuzzer target: load → verify → create a session → run every method with zeroed inputs.
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
      for (uint32_t i = 0; i < tdm_method_io_count(p, m, 0); i++)
        memset(tdm_session_input(s, m, i), 0, tdm_method_io_nbytes(p, m, 0, i));
      (void)tdm_session_run(s, m);
      for (uint32_t i = 0; i < tdm_method_io_count(p, m, 1); i++) {
        volatile uint8_t sink = 0;
        const uint8_t *o = tdm_session_output(s, m, i);
        for (size_t k = 0; k < tdm_method_io_nbytes(p, m, 1, i); k++) sink ^= o[k];
      }
    }
    tdm_session_free(s);
  }
  tdm_program_free(p);
  return 0;
}
