/* Issue 7 bug 1 through the C ABI: a crafted footer index (every hash slot 0xFFFFFFFF, slots
 * swapped, an entry naming a record that does not exist) never crashes ds_reader_find; the file
 * is corrupt with bad_index and lookups fall back to the scan. Usage: test_c_index (the golden
 * vectors are found through DS_SOURCE_DIR). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftscope.h"

static int g_checks = 0;

#define CHECK(cond)                                                                         \
  do {                                                                                      \
    ++g_checks;                                                                             \
    if (!(cond)) {                                                                          \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n  last error: %s\n", __FILE__, __LINE__, \
              #cond, ds_last_error_message());                                              \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

static void check_vector(const char* stem, uint64_t offset) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/vectors/damaged/%s.tdump", DS_SOURCE_DIR, stem);
  for (int use_index = 0; use_index <= 1; ++use_index) {
    ds_open_options oo;
    ds_open_options_init(&oo);
    oo.use_index = use_index;
    ds_reader* r = NULL;
    CHECK(ds_reader_open(path, &oo, &r) >= 0);
    ds_integrity in;
    CHECK(ds_reader_integrity(r, &in) >= 0);
    CHECK(in.state == DS_STATE_CORRUPT);
    CHECK(in.corruption_status == DS_E_BAD_INDEX);
    CHECK(in.corruption_offset == offset);
    CHECK(in.index_used == 0);
    const ds_record* rec = NULL;
    /* structure.tdump's records are all intact: found by scanning */
    CHECK(ds_reader_find(r, "encoder.layers.0.act", 2, 0, 0, &rec) >= 0 && rec != NULL);
    CHECK(ds_reader_find(r, "scalar.loss", 0, 0, 0, &rec) >= 0 && rec != NULL);
    rec = NULL;
    CHECK(ds_reader_find(r, "no.such.tensor", 0, 0, 0, &rec) < 0 || rec == NULL);
    ds_reader_free(r);
  }
}

int main(void) {
  /* offsets from tests/vectors/damaged/*.json */
  check_vector("index_slots_ffff", 3144);
  check_vector("index_slots_swapped", 3172);
  check_vector("index_entry_offset", 2904);
  printf("test_c_index: %d checks passed\n", g_checks);
  return 0;
}
