/* The plain-read baseline of the throughput benchmarks, in C: what "reading the bytes" costs
 * with nothing else done, so that compare's figures are ratios against it (issue 30 item 5). */
#ifndef DRIFTSCOPE_BENCH_PLAIN_READ_H_
#define DRIFTSCOPE_BENCH_PLAIN_READ_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Loads every 8-byte word of [p, p + n) once (a tail of n % 8 bytes byte by byte) and returns
 * their wrapping sum, so that no load can be optimised away. */
uint64_t ds_plain_read_sum(const void* p, size_t n);

#ifdef __cplusplus
}
#endif

#endif
