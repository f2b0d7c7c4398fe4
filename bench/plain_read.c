/* See plain_read.h. Eight independent sums keep the load ports, not the adder, the bottleneck;
 * -O3 vectorises the loop for the baseline ISA (SSE2 on x86-64): two 16-byte loads a cycle are
 * far beyond what DRAM delivers to one core, so the figure is the memory's, not the ISA's. */
#include "plain_read.h"

#include <string.h>

uint64_t ds_plain_read_sum(const void* p, size_t n) {
  const unsigned char* b = (const unsigned char*)p;
  uint64_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const size_t words = n / 8;
  size_t i = 0;
  for (; i + 8 <= words; i += 8) {
    for (int k = 0; k < 8; ++k) {
      uint64_t w;
      memcpy(&w, b + 8 * (i + (size_t)k), 8);
      acc[k] += w;
    }
  }
  for (; i < words; ++i) {
    uint64_t w;
    memcpy(&w, b + 8 * i, 8);
    acc[0] += w;
  }
  uint64_t t = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
  for (size_t j = words * 8; j < n; ++j) t += b[j];
  return t;
}
