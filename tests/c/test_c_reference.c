/* The hash initialiser through the C ABI from a real C file (include/driftscope.h,
 * ds_hash_fill_*): every float32 and float64 golden value of tests/vectors/hashinit/golden.json
 * (found through DS_SOURCE_DIR), read with a small scanner of that generated file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftscope.h"

static int failures = 0;
#define CHECK(cond, ...)                 \
  do {                                   \
    if (!(cond)) {                       \
      fprintf(stderr, __VA_ARGS__);      \
      fputc('\n', stderr);               \
      ++failures;                        \
    }                                    \
  } while (0)

static char* slurp(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

/* The next quoted string at or after *p into out (at most cap-1 chars); advances *p past it. */
static int next_quoted(const char** p, char* out, size_t cap) {
  const char* a = strchr(*p, '"');
  const char* b = a ? strchr(a + 1, '"') : NULL;
  if (!b || (size_t)(b - a - 1) >= cap) return 0;
  memcpy(out, a + 1, (size_t)(b - a - 1));
  out[b - a - 1] = 0;
  *p = b + 1;
  return 1;
}

/* The string value of `"key": "..."` at or after p (NULL when absent or escaped). */
static const char* string_after(const char* p, const char* key, char* out, size_t cap) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\": ", key);
  p = strstr(p, pat);
  if (!p) return NULL;
  p += strlen(pat);
  if (!next_quoted(&p, out, cap) || strchr(out, '\\')) return NULL;
  return p;
}

int main(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/vectors/hashinit/golden.json", DS_SOURCE_DIR);
  char* json = slurp(path);
  if (!json) {
    fprintf(stderr, "cannot read %s\n", path);
    return 1;
  }
  int cases = 0;
  const char* p = strstr(json, "\"values\": [");
  const char* end = strstr(json, "\"digests\": [");
  char name[256], seed_s[32], dist[16], std_hex[32], hex[32];
  while (p && end && (p = strstr(p, "\"name\": ")) != NULL && p < end) {
    const char* q = string_after(p, "name", name, sizeof name);
    p += 8;
    if (!q) continue; /* a name with escapes: the C++, Python and Java tests cover it */
    q = string_after(q, "seed", seed_s, sizeof seed_s);
    q = q ? string_after(q, "distribution", dist, sizeof dist) : NULL;
    q = q ? string_after(q, "std_bits", std_hex, sizeof std_hex) : NULL;
    if (!q) break;
    uint64_t seed = strtoull(seed_s, NULL, 10), sb = strtoull(std_hex, NULL, 16);
    double sd;
    memcpy(&sd, &sb, sizeof sd);
    int d = strcmp(dist, "normal") == 0 ? DS_HASH_NORMAL : DS_HASH_UNIFORM;
    float f32[4];
    double f64[4];
    CHECK(ds_hash_fill_f32(name, strlen(name), d, sd, seed, 0, f32, 4) == DS_OK, "f32 %s", name);
    CHECK(ds_hash_fill_f64(name, strlen(name), d, sd, seed, 0, f64, 4) == DS_OK, "f64 %s", name);
    const char* b64 = strstr(q, "\"float64_bits\": [");
    const char* b32 = strstr(q, "\"float32_bits\": [");
    if (!b64 || !b32) break;
    b64 += 17;
    b32 += 17;
    for (int i = 0; i < 4; ++i) { /* every case has at least 4 values */
      CHECK(next_quoted(&b64, hex, sizeof hex), "%s: float64 value %d missing", name, i);
      uint64_t want64 = strtoull(hex, NULL, 16), got64;
      memcpy(&got64, &f64[i], 8);
      CHECK(got64 == want64, "%s float64 %d: %016llx != %s", name, i, (unsigned long long)got64, hex);
      CHECK(next_quoted(&b32, hex, sizeof hex), "%s: float32 value %d missing", name, i);
      uint32_t want32 = (uint32_t)strtoul(hex, NULL, 16), got32;
      memcpy(&got32, &f32[i], 4);
      CHECK(got32 == want32, "%s float32 %d: %08x != %s", name, i, got32, hex);
    }
    ++cases;
  }
  CHECK(cases >= 6, "only %d golden cases read", cases);
  /* misuse is a status, not a crash */
  float v[2];
  CHECK(ds_hash_fill_f32("w", 1, DS_HASH_UNIFORM, -1.0, 0, 0, v, 2) == DS_E_INVALID_ARGUMENT, "negative std");
  CHECK(ds_hash_fill_f32(NULL, 1, DS_HASH_UNIFORM, 1.0, 0, 0, v, 2) == DS_E_INVALID_ARGUMENT, "NULL name");
  free(json);
  if (failures) return 1;
  printf("test_c_reference: %d golden cases agree\n", cases);
  return 0;
}
