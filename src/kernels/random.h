/* random.h — the counter-based generator behind the random ops (src/kernels/random.c), declared for
 * the known-answer test (tests/c/test_philox.c). (src/ only) */
#ifndef TDM_RANDOM_H
#define TDM_RANDOM_H

#include <stdint.h>

/* Philox4x32-10: out = the 10-round bijection of the 128-bit counter under the 64-bit key. */
void tdm__philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

#endif
