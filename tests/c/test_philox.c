/* Philox4x32-10 (src/kernels/random.c) against the known-answer vectors Random123 publishes for it
 * (kat_vectors, "philox4x32 10"): the zero counter and key, the all-ones ones, and the digits of
 * pi. A generator that matches these is the published one, so the stream docs/ops.md specifies on
 * top of it can be reproduced elsewhere. */
#include "kernels/random.h"
#include "testing.h"

int main(void) {
  static const uint32_t cases[3][10] = {
      /* ctr[4], key[2], expected[4] */
      {0, 0, 0, 0, 0, 0, 0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
      {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
      {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u, 0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u},
  };
  for (int c = 0; c < 3; c++) {
    uint32_t out[4];
    tdm__philox4x32_10(cases[c], cases[c] + 4, out);
    for (int k = 0; k < 4; k++) {
      if (out[k] != cases[c][6 + k]) fprintf(stderr, "case %d word %d: %08x, expected %08x\n", c, k, out[k], cases[c][6 + k]);
      CHECK(out[k] == cases[c][6 + k]);
    }
  }
  return test_report("test_philox");
}
