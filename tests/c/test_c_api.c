/* The C ABI (include/driftscope.h) used from plain C11, the way JNI, Swift or ctypes bindings use
 * it. Usage: test_c_api SCRATCH_DIR. Exits 0 when every check holds, 1 at the first that fails.
 *
 * CHECK is used instead of assert(): assert() vanishes under NDEBUG (RelWithDebInfo/Release),
 * and a test that cannot fail is no test. */
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <threads.h>
#include <unistd.h>

#include "driftscope.h"

static const char* g_dir = ".";
static int g_checks = 0;

#define CHECK(cond)                                                                        \
  do {                                                                                     \
    ++g_checks;                                                                            \
    if (!(cond)) {                                                                         \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n  last error: %s (%s)\n", __FILE__,        \
              __LINE__, #cond, ds_last_error_message(), ds_status_name(ds_last_error_code())); \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

/* A call that must succeed (status >= 0). */
#define OK(call) CHECK((call) >= 0)
/* A call that must fail with exactly this status, leaving a non-empty message behind. */
#define FAILS_WITH(status, call)                                        \
  do {                                                                  \
    int64_t st_ = (int64_t)(call);                                      \
    if (st_ != (status))                                                \
      fprintf(stderr, "  got %lld (%s), expected %s\n", (long long)st_, \
              ds_status_name((int)st_), ds_status_name(status));        \
    CHECK(st_ == (status));                                             \
    CHECK(ds_last_error_code() == (status));                            \
    CHECK(ds_last_error_message()[0] != '\0');                          \
  } while (0)

static void path_in_dir(char* buf, size_t cap, const char* name) {
  int n = snprintf(buf, cap, "%s/%s", g_dir, name);
  CHECK(n > 0 && (size_t)n < cap);
}

static unsigned char* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  CHECK(f != NULL);
  CHECK(fseek(f, 0, SEEK_END) == 0);
  long n = ftell(f);
  CHECK(n > 0);
  CHECK(fseek(f, 0, SEEK_SET) == 0);
  unsigned char* data = malloc((size_t)n);
  CHECK(data != NULL);
  CHECK(fread(data, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  *size = (size_t)n;
  return data;
}

static void write_file(const char* path, const void* data, size_t size) {
  FILE* f = fopen(path, "wb");
  CHECK(f != NULL);
  CHECK(fwrite(data, 1, size, f) == size);
  CHECK(fclose(f) == 0);
}

/* ---- basics ------------------------------------------------------------------------------- */

static void test_version_and_codes(void) {
  CHECK(strcmp(ds_version(), "") != 0);
  CHECK(strchr(ds_version(), '.') != NULL);
  CHECK(strcmp(ds_status_name(DS_OK), "ok") == 0);
  CHECK(strcmp(ds_status_name(DS_E_BAD_MAGIC), "bad_magic") == 0);
  CHECK(strcmp(ds_status_name(DS_E_LIMIT_EXCEEDED), "limit_exceeded") == 0);
  CHECK(strcmp(ds_status_name(DS_E_OUT_OF_MEMORY), "out_of_memory") == 0);
  CHECK(strcmp(ds_status_name(-999), "unknown") == 0);
  CHECK(strcmp(ds_status_name(5), "unknown") == 0);
  CHECK(ds_dtype_size(DS_DTYPE_F16) == 2);
  CHECK(ds_dtype_size(DS_DTYPE_U64) == 8);
  CHECK(ds_dtype_size(16) == 0); /* reserved i4 */
  CHECK(ds_dtype_size(-3) == 0);
  CHECK(strcmp(ds_dtype_name(DS_DTYPE_BF16), "bf16") == 0);
  CHECK(ds_dtype_name(99) == NULL);
  CHECK(ds_dtype_parse("float16") == DS_DTYPE_F16);
  CHECK(ds_dtype_parse("int8") == DS_DTYPE_I8);
  CHECK(ds_dtype_parse("complex64") == 0);
  CHECK(ds_dtype_parse(NULL) == 0);
  CHECK(strcmp(ds_file_state_name(DS_STATE_CUT), "cut") == 0);
  CHECK(ds_file_state_name(7) == NULL);
}

/* ---- filters ------------------------------------------------------------------------------ */

static void test_filters(void) {
  ds_filter* f = NULL;
  OK(ds_filter_parse("encoder.layers.3* -*.dropout rank>=2 budget=1MiB", &f));
  CHECK(f != NULL);
  CHECK(ds_last_error_code() == DS_OK);

  uint64_t shape[3] = {1, 4, 8};
  ds_tensor_desc d;
  ds_tensor_desc_init(&d);
  d.name = "encoder.layers.3.norm";
  d.shape = shape;
  d.rank = 3;
  CHECK(ds_filter_accepts(f, &d, 0) == 1);
  d.name = "encoder.layers.3.dropout";
  CHECK(ds_filter_accepts(f, &d, 0) == 0); /* excludes win */
  d.name = "encoder.layers.1.norm";
  CHECK(ds_filter_accepts(f, &d, 0) == 0);
  d.name = "encoder.layers.31.norm";
  d.rank = 1;
  CHECK(ds_filter_accepts(f, &d, 0) == 0); /* rank>=2 */
  CHECK(ds_filter_may_accept_name(f, "encoder.layers.30.mlp") == 1);
  CHECK(ds_filter_may_accept_name(f, "decoder.layers.3.mlp") == 0);

  uint64_t budget = 0;
  CHECK(ds_filter_budget(f, &budget) == 1);
  CHECK(budget == 1024u * 1024u);

  /* snprintf contract: full length returned, truncated output still terminated. */
  int64_t len = ds_filter_to_string(f, NULL, 0);
  CHECK(len > 0);
  char small[4];
  CHECK(ds_filter_to_string(f, small, sizeof small) == len);
  CHECK(strlen(small) == 3);
  char* text = malloc((size_t)len + 1);
  CHECK(text != NULL);
  CHECK(ds_filter_to_string(f, text, (size_t)len + 1) == len);
  CHECK(strlen(text) == (size_t)len);
  /* The canonical text round-trips to a filter that decides the same. */
  ds_filter* g = NULL;
  OK(ds_filter_parse(text, &g));
  d.name = "encoder.layers.3.norm";
  d.rank = 3;
  CHECK(ds_filter_accepts(g, &d, 0) == 1);
  d.name = "encoder.layers.3.dropout";
  CHECK(ds_filter_accepts(g, &d, 0) == 0);
  free(text);
  ds_filter_free(g);

  ds_filter* every = NULL;
  OK(ds_filter_parse("every=3", &every));
  CHECK(ds_filter_budget(every, &budget) == 0);
  CHECK(ds_filter_accepts(every, &d, 0) == 1);
  CHECK(ds_filter_accepts(every, &d, 1) == 0);
  CHECK(ds_filter_accepts(every, &d, 6) == 1);
  ds_filter_free(every);

  /* Errors: syntax, NULLs, and a descriptor that breaks a limit. */
  ds_filter* bad = (ds_filter*)&budget; /* must be reset to NULL on failure */
  FAILS_WITH(DS_E_FILTER_SYNTAX, ds_filter_parse("rank>=banana", &bad));
  CHECK(bad == NULL);
  FAILS_WITH(DS_E_FILTER_SYNTAX, ds_filter_parse("budget=12XB", &bad));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_filter_parse(NULL, &bad));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_filter_parse("x", NULL));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_filter_accepts(NULL, &d, 0));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_filter_accepts(f, NULL, 0));
  d.rank = 17;
  FAILS_WITH(DS_E_LIMIT_EXCEEDED, ds_filter_accepts(f, &d, 0));
  d.rank = 3;
  d.struct_size = sizeof d - 8;
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_filter_accepts(f, &d, 0));
  d.struct_size = sizeof d + 8;
  FAILS_WITH(DS_E_UNSUPPORTED, ds_filter_accepts(f, &d, 0));
  /* A success after a failure clears the thread's last error. */
  d.struct_size = sizeof d;
  d.name = "encoder.layers.3.norm";
  CHECK(ds_filter_accepts(f, &d, 0) == 1);
  CHECK(ds_last_error_code() == DS_OK);
  CHECK(ds_last_error_message()[0] == '\0');
  CHECK(ds_last_error_offset() == DS_NO_OFFSET);
  ds_filter_free(f);
  ds_filter_free(NULL);
}

/* ---- a run written and read back ---------------------------------------------------------- */

enum { kHidden = 8, kSeq = 4 };

static void fill_activation(float* x, size_t n, float scale) {
  for (size_t i = 0; i < n; ++i) x[i] = scale * ((float)i - (float)n / 2.0f) / 8.0f;
}

static void write_run(const char* path) {
  ds_kv meta[3] = {{"framework", "c-test 1.0"}, {"precision", "float32"}, {"model", "toy"}};
  ds_writer_options o;
  ds_writer_options_init(&o);
  CHECK(o.struct_size == sizeof o);
  CHECK(o.overwrite == 1 && o.append == 0 && o.sync_policy == DS_SYNC_ON_CLOSE);
  o.metadata = meta;
  o.metadata_count = 3;
  o.filter = "-*.skipme";
  o.sync_policy = DS_SYNC_EVERY_RECORD;
  o.fixed_salt = 1;
  o.salt = 0x0123456789abcdefull;

  ds_writer* w = NULL;
  OK(ds_writer_open(path, &o, &w));
  CHECK(w != NULL);
  CHECK(ds_writer_salt(w) == 0x0123456789abcdefull);
  CHECK(ds_writer_wants(w, "encoder.layers.0.skipme") == 0);
  CHECK(ds_writer_wants(w, "encoder.layers.0.norm1") == 1);

  /* f32 [1,4,8] with axes, attrs and op type, written twice under one name: occurrences 0, 1. */
  float x[kSeq * kHidden];
  uint64_t shape[3] = {1, kSeq, kHidden};
  ds_kv attrs[2] = {{"eps", "1e-05"}, {"layer", "0"}};
  ds_tensor_desc d;
  ds_tensor_desc_init(&d);
  d.name = "encoder.layers.0.norm1";
  d.op_type = "LayerNorm";
  d.shape = shape;
  d.rank = 3;
  d.axes = "batch,seq,hidden";
  d.attrs = attrs;
  d.attr_count = 2;
  ds_write_result res;
  fill_activation(x, kSeq * kHidden, 1.0f);
  CHECK(ds_writer_write(w, &d, x, sizeof x, &res) == DS_WRITTEN);
  CHECK(res.status == DS_WRITTEN && res.exec_index == 0 && res.occurrence == 0);
  CHECK(res.offset > 0 && res.offset % 64 == 0);
  fill_activation(x, kSeq * kHidden, 2.0f);
  CHECK(ds_writer_write(w, &d, x, sizeof x, &res) == DS_WRITTEN);
  CHECK(res.exec_index == 1 && res.occurrence == 1);

  /* Filtered out by name: consumes an exec index, writes nothing. */
  ds_tensor_desc skip = d;
  skip.name = "encoder.layers.0.skipme";
  CHECK(ds_writer_write(w, &skip, x, sizeof x, &res) == DS_FILTERED);
  CHECK(res.status == DS_FILTERED && res.exec_index == 2);

  /* int8 affine per tensor: value = 0.5 * (q - 2). */
  int8_t q[4] = {-2, 0, 2, 127};
  uint64_t qshape[1] = {4};
  double scale = 0.5;
  int64_t zp = 2;
  ds_tensor_desc dq;
  ds_tensor_desc_init(&dq);
  dq.name = "encoder.layers.0.fc1.weight";
  dq.role = DS_ROLE_PARAMETER;
  dq.dtype = DS_DTYPE_I8;
  dq.shape = qshape;
  dq.rank = 1;
  dq.encoding = DS_ENCODING_AFFINE_TENSOR;
  dq.scales = &scale;
  dq.zero_points = &zp;
  dq.scale_count = 1;
  CHECK(ds_writer_write(w, &dq, q, sizeof q, &res) == DS_WRITTEN);

  /* u8 affine per channel along axis 0 of [2,3]; zero points NULL means all zero. */
  uint8_t qc[6] = {1, 2, 3, 4, 5, 6};
  uint64_t cshape[2] = {2, 3};
  double cscales[2] = {1.0, 0.25};
  ds_tensor_desc dc;
  ds_tensor_desc_init(&dc);
  dc.name = "encoder.layers.0.fc2.weight";
  dc.role = DS_ROLE_PARAMETER;
  dc.dtype = DS_DTYPE_U8;
  dc.shape = cshape;
  dc.rank = 2;
  dc.axes = "out,in";
  dc.encoding = DS_ENCODING_AFFINE_CHANNEL;
  dc.encoding_axis = 0;
  dc.scales = cscales;
  dc.scale_count = 2;
  CHECK(ds_writer_write(w, &dc, qc, sizeof qc, &res) == DS_WRITTEN);

  /* f16 rank 0 with an explicit exec index and role input. 0x3C00 is 1.0. */
  uint16_t h = 0x3C00;
  ds_tensor_desc dh;
  ds_tensor_desc_init(&dh);
  dh.name = "encoder.scale";
  dh.role = DS_ROLE_INPUT;
  dh.role_index = 1;
  dh.dtype = DS_DTYPE_F16;
  dh.exec_index = 100;
  CHECK(ds_writer_write(w, &dh, &h, sizeof h, &res) == DS_WRITTEN);
  CHECK(res.exec_index == 100);

  /* Light mode: a summary computed by the library from the values, and one given by hand. */
  ds_tensor_desc ds;
  ds_tensor_desc_init(&ds);
  ds.name = "encoder.layers.1.mlp";
  ds.op_type = "MLP";
  ds.shape = shape;
  ds.rank = 3;
  ds.axes = "batch,seq,hidden";
  fill_activation(x, kSeq * kHidden, 3.0f);
  x[5] = NAN;
  CHECK(ds_writer_write_summarized(w, &ds, x, sizeof x, 16, 42, &res) == DS_WRITTEN);

  float proj[4] = {1.0f, -2.0f, 3.0f, -4.0f};
  ds_summary s;
  memset(&s, 0, sizeof s);
  s.stats.count = 32;
  s.stats.zero_count = 1;
  s.stats.min = -1.0;
  s.stats.max = 2.0;
  s.stats.mean = 0.5;
  s.stats.std = 0.75;
  s.stats.l2_norm = 4.0;
  s.projection_seed = 7;
  s.projection_kind = 1;
  s.projection_dim = 4;
  s.projection = proj;
  ds.name = "encoder.layers.1.attn";
  ds.op_type = "Attention";
  CHECK(ds_writer_write_summary(w, &ds, &s, &res) == DS_WRITTEN);

  CHECK(ds_writer_records_written(w) == 7);
  OK(ds_writer_flush(w));
  OK(ds_writer_close(w));
  OK(ds_writer_close(w)); /* idempotent */
  CHECK(ds_writer_bytes_written(w) % 64 == 0);
  FAILS_WITH(DS_E_CLOSED, ds_writer_write(w, &d, x, sizeof x, NULL));
  ds_writer_free(w);
  ds_writer_free(NULL);
}

static void read_run(const char* path) {
  ds_open_options oo;
  ds_open_options_init(&oo);
  CHECK(oo.struct_size == sizeof oo && oo.verify == DS_VERIFY_FULL && oo.use_index == 1);
  ds_reader* r = NULL;
  OK(ds_reader_open(path, &oo, &r));
  CHECK(r != NULL);

  ds_file_info fi;
  OK(ds_reader_info(r, &fi));
  CHECK(fi.version_major == 1);
  CHECK(fi.salt == 0x0123456789abcdefull);
  CHECK(fi.record_count == 7);
  CHECK(fi.metadata_count >= 3); /* plus the library's "writer" key */
  CHECK(fi.header_length % 64 == 0);
  CHECK(strcmp(ds_reader_metadata_get(r, "framework"), "c-test 1.0") == 0);
  CHECK(strcmp(ds_reader_metadata_get(r, "precision"), "float32") == 0);
  CHECK(ds_reader_metadata_get(r, "writer") != NULL);
  CHECK(ds_reader_metadata_get(r, "no-such-key") == NULL);
  const char* key = NULL;
  size_t klen = 0;
  OK(ds_reader_metadata(r, 0, &key, &klen, NULL, NULL));
  CHECK(key != NULL && strlen(key) == klen);
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_reader_metadata(r, fi.metadata_count, &key, NULL, NULL, NULL));

  ds_integrity g;
  OK(ds_reader_integrity(r, &g));
  CHECK(g.state == DS_STATE_CLEAN);
  CHECK(g.corruption_status == DS_OK);
  CHECK(g.discarded_bytes == 0);
  CHECK(g.valid_end == g.file_size);
  CHECK(g.checksums_verified == 1);
  CHECK(g.warning_count == 0);

  /* Iterate in file order. */
  CHECK(ds_reader_record_count(r) == 7);
  CHECK(ds_reader_record(r, 7) == NULL);
  const char* expect[7] = {"encoder.layers.0.norm1", "encoder.layers.0.norm1",
                           "encoder.layers.0.fc1.weight", "encoder.layers.0.fc2.weight",
                           "encoder.scale", "encoder.layers.1.mlp", "encoder.layers.1.attn"};
  uint64_t prev_offset = 0;
  for (size_t i = 0; i < 7; ++i) {
    ds_record_info info;
    OK(ds_record_get_info(ds_reader_record(r, i), &info));
    CHECK(strcmp(info.name, expect[i]) == 0);
    CHECK(info.name_length == strlen(expect[i]));
    CHECK(info.position == i);
    CHECK(info.offset > prev_offset);
    CHECK(info.payload_offset % 64 == 0);
    prev_offset = info.offset;
  }

  /* Lookup by name and occurrence; full descriptor. */
  const ds_record* rec = NULL;
  OK(ds_reader_find(r, "encoder.layers.0.norm1", 1, DS_ROLE_OUTPUT, 0, &rec));
  ds_record_info info;
  OK(ds_record_get_info(rec, &info));
  CHECK(info.kind == DS_KIND_TENSOR);
  CHECK(info.occurrence == 1 && info.exec_index == 1 && info.position == 1);
  CHECK(strcmp(info.op_type, "LayerNorm") == 0);
  CHECK(info.dtype == DS_DTYPE_F32 && info.rank == 3 && info.numel == kSeq * kHidden);
  CHECK(info.shape[0] == 1 && info.shape[1] == kSeq && info.shape[2] == kHidden);
  CHECK(strcmp(info.axes, "batch,seq,hidden") == 0 && info.axes_length == 16);
  CHECK(info.attr_count == 2);
  CHECK(strcmp(ds_record_attr_get(rec, "eps"), "1e-05") == 0);
  CHECK(ds_record_attr_get(rec, "missing") == NULL);
  const char* ak = NULL;
  const char* av = NULL;
  OK(ds_record_attr(rec, 1, &ak, NULL, &av, NULL));
  CHECK(strcmp(ak, "layer") == 0 && strcmp(av, "0") == 0);
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_record_attr(rec, 2, &ak, NULL, &av, NULL));
  CHECK(info.payload_size == kSeq * kHidden * sizeof(float));

  /* Raw payload in place, 64-byte aligned in memory as in the file. */
  const void* raw = NULL;
  uint64_t raw_size = 0;
  OK(ds_record_payload(rec, &raw, &raw_size));
  CHECK(raw_size == info.payload_size);
  CHECK(((uintptr_t)raw) % 64 == 0);
  float expected[kSeq * kHidden];
  fill_activation(expected, kSeq * kHidden, 2.0f);
  CHECK(memcmp(raw, expected, sizeof expected) == 0);

  /* Decode a sub-range to f32 and f64. */
  float f[5];
  OK(ds_record_decode_f32(rec, 10, f, 5));
  for (int i = 0; i < 5; ++i) CHECK(f[i] == expected[10 + i]);
  double dd[kSeq * kHidden];
  OK(ds_record_decode_f64(rec, 0, dd, kSeq * kHidden));
  CHECK(dd[31] == (double)expected[31]);
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_record_decode_f32(rec, 30, f, 5)); /* past numel */
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_record_decode_f32(rec, 0, NULL, 5));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_record_decode_f64(rec, UINT64_MAX - 1, dd, 4)); /* wraps */

  ds_tensor_stats st;
  OK(ds_record_stats(rec, &st));
  CHECK(st.count == 32 && st.nan_count == 0);
  CHECK(st.min == (double)expected[0] && st.max == (double)expected[31]);

  /* Dequantisation: per tensor 0.5 * (q - 2); per channel scale[row] * q. */
  OK(ds_reader_find(r, "encoder.layers.0.fc1.weight", 0, DS_ROLE_PARAMETER, 0, &rec));
  OK(ds_record_get_info(rec, &info));
  CHECK(info.encoding == DS_ENCODING_AFFINE_TENSOR && info.scale_count == 1);
  CHECK(info.scales[0] == 0.5 && info.zero_points[0] == 2);
  double dq[4];
  OK(ds_record_decode_f64(rec, 0, dq, 4));
  CHECK(dq[0] == -2.0 && dq[1] == -1.0 && dq[2] == 0.0 && dq[3] == 62.5);
  OK(ds_reader_find(r, "encoder.layers.0.fc2.weight", 0, DS_ROLE_PARAMETER, 0, &rec));
  OK(ds_record_get_info(rec, &info));
  CHECK(info.encoding == DS_ENCODING_AFFINE_CHANNEL && info.encoding_axis == 0);
  CHECK(info.scale_count == 2 && info.zero_points[0] == 0 && info.zero_points[1] == 0);
  double dc[6];
  OK(ds_record_decode_f64(rec, 0, dc, 6));
  CHECK(dc[0] == 1.0 && dc[2] == 3.0 && dc[3] == 1.0 && dc[5] == 1.5);
  float dc4;
  OK(ds_record_decode_f32(rec, 4, &dc4, 1)); /* channel known from the element position */
  CHECK(dc4 == 1.25f);

  /* f16 rank 0, input role 1. */
  OK(ds_reader_find(r, "encoder.scale", 0, DS_ROLE_INPUT, 1, &rec));
  OK(ds_record_get_info(rec, &info));
  CHECK(info.rank == 0 && info.shape == NULL && info.numel == 1 && info.exec_index == 100);
  CHECK(info.axes[0] == '\0' && info.dtype == DS_DTYPE_F16);
  OK(ds_record_decode_f32(rec, 0, f, 1));
  CHECK(f[0] == 1.0f);
  FAILS_WITH(DS_E_NOT_FOUND, ds_reader_find(r, "encoder.scale", 0, DS_ROLE_OUTPUT, 0, &rec));
  CHECK(rec == NULL);

  /* Summaries: stats and projection, no values. */
  OK(ds_reader_find(r, "encoder.layers.1.mlp", 0, DS_ROLE_OUTPUT, 0, &rec));
  OK(ds_record_get_info(rec, &info));
  CHECK(info.kind == DS_KIND_SUMMARY && info.numel == 32);
  ds_summary sm;
  OK(ds_record_summary(rec, &sm));
  CHECK(sm.stats.count == 32 && sm.stats.nan_count == 1);
  CHECK(sm.projection_dim == 16 && sm.projection_seed == 42 && sm.projection != NULL);
  OK(ds_record_stats(rec, &st));
  CHECK(st.nan_count == 1 && st.count == 32);
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_record_decode_f32(rec, 0, f, 1));
  OK(ds_reader_find(r, "encoder.layers.1.attn", 0, DS_ROLE_OUTPUT, 0, &rec));
  OK(ds_record_summary(rec, &sm));
  CHECK(sm.projection_dim == 4 && sm.projection[3] == -4.0f && sm.stats.l2_norm == 4.0);
  OK(ds_reader_find(r, "encoder.layers.0.norm1", 0, DS_ROLE_OUTPUT, 0, &rec));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_record_summary(rec, &sm));

  /* find_all: both occurrences, with a count even when the buffer is too small. */
  const ds_record* all[4];
  CHECK(ds_reader_find_all(r, "encoder.layers.0.norm1", all, 4) == 2);
  OK(ds_record_get_info(all[1], &info));
  CHECK(info.occurrence == 1);
  CHECK(ds_reader_find_all(r, "encoder.layers.0.norm1", NULL, 0) == 2);
  CHECK(ds_reader_find_all(r, "nothing", all, 4) == 0);
  ds_reader_free(r);
  ds_reader_free(NULL);

  /* Frames-only verification, then one record checked on demand; no index. */
  oo.verify = DS_VERIFY_FRAMES;
  oo.use_index = 0;
  OK(ds_reader_open(path, &oo, &r));
  OK(ds_reader_integrity(r, &g));
  CHECK(g.index_used == 0);
  OK(ds_reader_verify_payload(r, ds_reader_record(r, 0)));
  OK(ds_reader_check_unchanged(r));
  ds_reader_free(r);
  CHECK(ds_reader_check_unchanged(NULL) == DS_E_INVALID_ARGUMENT);
}

/* ---- a dump truncated while it is open: zeros and DS_E_IO, never SIGBUS (issue 7 bug 5) ----- */

/* ds.inputs (docs/format.md §3.3.3): escapes, snprintf contract, bad input. */
static void test_format_inputs(void) {
  ds_tensor_ref refs[2] = {{"encoder.layer.0", DS_ROLE_OUTPUT, 0, 0}, {"a,b\\c", DS_ROLE_INPUT, 1, 2}};
  const char* want = "output/0/0:encoder.layer.0,input/1/2:a\\,b\\\\c";
  int64_t len = ds_format_inputs(refs, 2, NULL, 0);
  CHECK(len == (int64_t)strlen(want));
  char buf[64];
  CHECK(ds_format_inputs(refs, 2, buf, sizeof buf) == len);
  CHECK(strcmp(buf, want) == 0);
  char small[5];
  CHECK(ds_format_inputs(refs, 2, small, sizeof small) == len && strcmp(small, "outp") == 0);
  CHECK(ds_format_inputs(refs, 0, buf, sizeof buf) == 0 && buf[0] == '\0');
  refs[1].name = "";
  CHECK(ds_format_inputs(refs, 2, buf, sizeof buf) == DS_E_INVALID_ARGUMENT);
  refs[1].name = "x";
  refs[1].role = 7;
  CHECK(ds_format_inputs(refs, 2, buf, sizeof buf) == DS_E_INVALID_ARGUMENT);
  CHECK(ds_format_inputs(NULL, 1, buf, sizeof buf) == DS_E_INVALID_ARGUMENT);
}

static void test_cut_while_open(const char* good_path) {
  char path[4096];
  path_in_dir(path, sizeof path, "c_api_cut.tdump");
  size_t size = 0;
  unsigned char* bytes = read_file(good_path, &size);
  write_file(path, bytes, size);
  free(bytes);
  ds_open_options oo;
  ds_open_options_init(&oo);
  oo.verify = DS_VERIFY_FRAMES;
  ds_reader* r = NULL;
  OK(ds_reader_open(path, &oo, &r));
  OK(ds_reader_check_unchanged(r));
  FILE* f = fopen(path, "wb"); /* a writer starts over: the file is cut to 0 bytes */
  CHECK(f != NULL);
  fclose(f);
  for (size_t i = 0; i < ds_reader_record_count(r); ++i)
    (void)ds_reader_verify_payload(r, ds_reader_record(r, i)); /* reads zeros */
  CHECK(ds_reader_check_unchanged(r) == DS_E_IO);
  CHECK(strstr(ds_last_error_message(), "file changed while reading") != NULL);
  ds_reader_free(r);
  remove(path);
}

/* ---- append, background mode -------------------------------------------------------------- */

static void test_append_and_background(const char* path) {
  ds_writer_options o;
  ds_writer_options_init(&o);
  o.append = 1;
  o.background = 1;
  o.queue_bytes = 1024; /* smaller than a few records: write() must block, not fail */
  ds_writer* w = NULL;
  OK(ds_writer_open(path, &o, &w));
  CHECK(ds_writer_salt(w) == 0x0123456789abcdefull); /* the header (and salt) is kept */
  float x[256];
  uint64_t shape[1] = {256};
  ds_tensor_desc d;
  ds_tensor_desc_init(&d);
  d.shape = shape;
  d.rank = 1;
  char name[64];
  for (int i = 0; i < 10; ++i) {
    snprintf(name, sizeof name, "appended.%d", i);
    d.name = name;
    fill_activation(x, 256, (float)i);
    CHECK(ds_writer_write(w, &d, x, sizeof x, NULL) == DS_WRITTEN);
  }
  OK(ds_writer_close(w));
  ds_writer_free(w);

  ds_reader* r = NULL;
  OK(ds_reader_open(path, NULL, &r));
  CHECK(ds_reader_record_count(r) == 17);
  ds_integrity g;
  OK(ds_reader_integrity(r, &g));
  CHECK(g.state == DS_STATE_CLEAN);
  const ds_record* rec = NULL;
  OK(ds_reader_find(r, "appended.9", 0, DS_ROLE_OUTPUT, 0, &rec));
  float back[256];
  OK(ds_record_decode_f32(rec, 0, back, 256));
  fill_activation(x, 256, 9.0f);
  CHECK(memcmp(back, x, sizeof x) == 0);
  ds_reader_free(r);

  /* Overwrite refused when asked to keep an existing file. */
  ds_writer_options_init(&o);
  o.overwrite = 0;
  w = (ds_writer*)&o;
  CHECK(ds_writer_open(path, &o, &w) < 0);
  CHECK(w == NULL);
}

/* ---- drop-behind -------------------------------------------------------------------------- */

static size_t resident_bytes(const char* path) {
  size_t size = 0;
  free(read_file(path, &size));
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0);
  void* m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  CHECK(m != MAP_FAILED);
  size_t page = (size_t)sysconf(_SC_PAGESIZE), n = 0;
  unsigned char* v = malloc((size + page - 1) / page);
  CHECK(v != NULL);
  if (mincore(m, size, v) == 0)
    for (size_t i = 0; i < (size + page - 1) / page; ++i) n += (v[i] & 1) ? page : 0;
  free(v);
  munmap(m, size);
  return n;
}

/* 24 tensors of 2 MiB: 48 MiB, twelve of the writer's 4 MiB drop-behind windows. */
static void write_large(const char* path, const ds_writer_options* o) {
  static float x[512 * 1024];
  uint64_t shape[1] = {512 * 1024};
  ds_tensor_desc d;
  ds_tensor_desc_init(&d);
  d.shape = shape;
  d.rank = 1;
  char name[64];
  ds_writer* w = NULL;
  OK(ds_writer_open(path, o, &w));
  for (int i = 0; i < 24; ++i) {
    snprintf(name, sizeof name, "layer.%d", i);
    d.name = name;
    fill_activation(x, 512 * 1024, (float)(i + 1));
    CHECK(ds_writer_write(w, &d, x, sizeof x, NULL) == DS_WRITTEN);
  }
  OK(ds_writer_close(w));
  ds_writer_free(w);
}

static int same_file(const char* a, const char* b) {
  size_t na = 0, nb = 0;
  unsigned char* x = read_file(a, &na);
  unsigned char* y = read_file(b, &nb);
  int same = na == nb && memcmp(x, y, na) == 0;
  free(x);
  free(y);
  return same;
}

static void test_drop_behind(void) {
  char keep[4096], drop[4096], first_release[4096];
  path_in_dir(keep, sizeof keep, "drop_keep.tdump");
  path_in_dir(drop, sizeof drop, "drop_drop.tdump");
  path_in_dir(first_release, sizeof first_release, "drop_first.tdump");
  ds_writer_options o;
  ds_writer_options_init(&o);
  CHECK(o.drop_behind == 0);
  o.fixed_salt = 1;
  o.salt = 42;
  write_large(keep, &o);
  o.drop_behind = 1;
  write_large(drop, &o);
  size_t resident_drop = resident_bytes(drop); /* before anything reads it back */
  CHECK(same_file(keep, drop));                /* bytes unchanged */

  /* A program built against the first release passes the struct without drop_behind: accepted,
   * and nothing past its size is read (a heap block of exactly that size: ASan sees a read past). */
  const size_t first = offsetof(ds_writer_options, drop_behind);
  ds_writer_options* old = malloc(first);
  CHECK(old != NULL);
  o.struct_size = first;
  memcpy(old, &o, first);
  write_large(first_release, old);
  free(old);
  CHECK(same_file(keep, first_release));
  ds_writer* w = (ds_writer*)&o;
  o.struct_size = first + 4; /* no release had this size */
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_writer_open(drop, &o, &w));
  CHECK(w == NULL);
  CHECK(strstr(ds_last_error_message(), "ds_writer_options.struct_size") != NULL);

  /* The option reached the writer: where the file system evicts clean pages at all (tmpfs never
   * does), the drop-behind file keeps about its last 20 MiB of 48 cached. */
  int fd = open(keep, O_RDONLY);
  CHECK(fd >= 0);
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
  if (resident_bytes(keep) < (8u << 20)) CHECK(resident_drop <= (26u << 20));
  remove(keep);
  remove(drop);
  remove(first_release);
}

/* ---- damaged and invalid input ------------------------------------------------------------ */

static void test_bad_files(const char* good_path) {
  char path[4096];
  ds_reader* r = (ds_reader*)&path; /* must be reset to NULL on failure */

  path_in_dir(path, sizeof path, "does-not-exist.tdump");
  remove(path);
  FAILS_WITH(DS_E_IO, ds_reader_open(path, NULL, &r));
  CHECK(r == NULL);
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_reader_open(NULL, NULL, &r));

  /* Not a TDUMP file. */
  static const char text[] = "this is a text file, not a dump; it is long enough to hold a "
                             "header of sixty-four bytes and then some more text";
  path_in_dir(path, sizeof path, "text.tdump");
  write_file(path, text, sizeof text);
  FAILS_WITH(DS_E_BAD_MAGIC, ds_reader_open(path, NULL, &r));
  CHECK(r == NULL);

  size_t size = 0;
  unsigned char* bytes = read_file(good_path, &size);
  CHECK(size > 1024);
  /* The right magic, then the file ends inside the 64-byte header. */
  FAILS_WITH(DS_E_TRUNCATED_HEADER, ds_reader_open_memory(bytes, 40, NULL, &r));

  /* A future major version is refused by name. */
  unsigned char* copy = malloc(size);
  CHECK(copy != NULL);
  memcpy(copy, bytes, size);
  copy[8] = 2;
  FAILS_WITH(DS_E_UNSUPPORTED_VERSION, ds_reader_open_memory(copy, size, NULL, &r));
  /* A flipped header byte breaks the header checksum. */
  memcpy(copy, bytes, size);
  copy[20] ^= 0x01; /* inside the salt */
  FAILS_WITH(DS_E_BAD_HEADER_CHECKSUM, ds_reader_open_memory(copy, size, NULL, &r));

  /* A torn tail (the writer was killed): the complete records survive, the cut is reported. */
  ds_reader* full = NULL;
  OK(ds_reader_open_memory(bytes, size, NULL, &full));
  ds_record_info third;
  OK(ds_record_get_info(ds_reader_record(full, 2), &third));
  size_t cut_at = (size_t)(third.offset + third.size / 2);
  OK(ds_reader_open_memory(bytes, cut_at, NULL, &r));
  ds_integrity g;
  OK(ds_reader_integrity(r, &g));
  CHECK(g.state == DS_STATE_CUT);
  CHECK(ds_reader_record_count(r) == 2);
  CHECK(g.cut_offset == third.offset);
  CHECK(g.discarded_bytes == cut_at - third.offset);
  ds_reader_free(r);

  /* A bit flipped inside the first record's payload with more data after it: corrupt, named. */
  ds_record_info first;
  OK(ds_record_get_info(ds_reader_record(full, 0), &first));
  memcpy(copy, bytes, size);
  copy[first.payload_offset + 3] ^= 0x10;
  OK(ds_reader_open_memory(copy, size, NULL, &r));
  OK(ds_reader_integrity(r, &g));
  CHECK(g.state == DS_STATE_CORRUPT);
  CHECK(g.corruption_status == DS_E_BAD_RECORD_CHECKSUM);
  CHECK(g.corruption_offset >= first.offset && g.corruption_offset < first.offset + first.size);
  CHECK(g.corruption_message[0] != '\0');
  CHECK(ds_reader_record_count(r) == 0);
  ds_reader_free(r);
  /* With resynchronisation the records after the damage are found again. */
  ds_open_options oo;
  ds_open_options_init(&oo);
  oo.resync = 1;
  OK(ds_reader_open_memory(copy, size, &oo, &r));
  OK(ds_reader_integrity(r, &g));
  CHECK(g.state == DS_STATE_CORRUPT);
  CHECK(ds_reader_record_count(r) >= 6);
  ds_reader_free(r);
  ds_reader_free(full);

  /* Bad options. */
  ds_open_options_init(&oo);
  oo.verify = 9;
  FAILS_WITH(DS_E_BAD_ENUM, ds_reader_open_memory(bytes, size, &oo, &r));
  ds_open_options_init(&oo);
  oo.struct_size = 4;
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_reader_open_memory(bytes, size, &oo, &r));
  free(copy);
  free(bytes);
}

static void test_writer_errors(void) {
  char path[4096];
  path_in_dir(path, sizeof path, "errors.tdump");
  ds_writer* w = (ds_writer*)&path;

  /* Unparsable filter: the writer is not created. */
  ds_writer_options o;
  ds_writer_options_init(&o);
  o.filter = "rank>>2";
  FAILS_WITH(DS_E_FILTER_SYNTAX, ds_writer_open(path, &o, &w));
  CHECK(w == NULL);
  ds_writer_options_init(&o);
  o.sync_policy = 3;
  FAILS_WITH(DS_E_BAD_ENUM, ds_writer_open(path, &o, &w));
  ds_writer_options_init(&o);
  o.metadata_count = 5000;
  FAILS_WITH(DS_E_LIMIT_EXCEEDED, ds_writer_open(path, &o, &w));
  ds_kv dup[2] = {{"model", "a"}, {"model", "b"}};
  ds_writer_options_init(&o);
  o.metadata = dup;
  o.metadata_count = 2;
  FAILS_WITH(DS_E_DUPLICATE_KEY, ds_writer_open(path, &o, &w));
  FAILS_WITH(DS_E_IO, ds_writer_open("/nonexistent-dir/x/y.tdump", NULL, &w));
  CHECK(w == NULL);

  OK(ds_writer_open(path, NULL, &w));
  float x[4] = {1, 2, 3, 4};
  uint64_t shape[2] = {2, 2};
  ds_tensor_desc d;
  ds_tensor_desc_init(&d);
  d.name = "t";
  d.shape = shape;
  d.rank = 2;

  /* Every refusal below leaves the file writable: the next good write succeeds. */
  FAILS_WITH(DS_E_LENGTH_MISMATCH, ds_writer_write(w, &d, x, sizeof x - 4, NULL));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_writer_write(w, &d, NULL, sizeof x, NULL));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_writer_write(NULL, &d, x, sizeof x, NULL));
  d.rank = 17;
  FAILS_WITH(DS_E_LIMIT_EXCEEDED, ds_writer_write(w, &d, x, sizeof x, NULL));
  d.rank = 2;
  d.shape = NULL;
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_writer_write(w, &d, x, sizeof x, NULL));
  d.shape = shape;
  d.name = "";
  FAILS_WITH(DS_E_EMPTY_NAME, ds_writer_write(w, &d, x, sizeof x, NULL));
  d.name = NULL;
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_writer_write(w, &d, x, sizeof x, NULL));
  char* long_name = malloc(4098);
  CHECK(long_name != NULL);
  memset(long_name, 'a', 4097);
  long_name[4097] = '\0';
  d.name = long_name;
  FAILS_WITH(DS_E_LIMIT_EXCEEDED, ds_writer_write(w, &d, x, sizeof x, NULL));
  d.name = "t";
  d.axes = "batch,seq,hidden"; /* three names for rank 2 */
  FAILS_WITH(DS_E_BAD_AXES, ds_writer_write(w, &d, x, sizeof x, NULL));
  d.axes = "rows,";
  FAILS_WITH(DS_E_BAD_AXES, ds_writer_write(w, &d, x, sizeof x, NULL));
  d.axes = NULL;
  d.dtype = 16; /* reserved i4 */
  FAILS_WITH(DS_E_BAD_DTYPE, ds_writer_write(w, &d, x, sizeof x, NULL));
  d.dtype = DS_DTYPE_F32;
  d.role = 4;
  FAILS_WITH(DS_E_BAD_ENUM, ds_writer_write(w, &d, x, sizeof x, NULL));
  d.role = DS_ROLE_OUTPUT;
  d.attr_count = 257;
  FAILS_WITH(DS_E_LIMIT_EXCEEDED, ds_writer_write(w, &d, x, sizeof x, NULL));
  ds_kv attrs[2] = {{"k", "1"}, {"k", "2"}};
  d.attrs = attrs;
  d.attr_count = 2;
  FAILS_WITH(DS_E_DUPLICATE_KEY, ds_writer_write(w, &d, x, sizeof x, NULL));
  d.attr_count = 0;
  /* Affine encoding on a float tensor is refused (§3.3.2); so is a non-finite scale. */
  double scale = 0.5;
  d.encoding = DS_ENCODING_AFFINE_TENSOR;
  d.scales = &scale;
  d.scale_count = 1;
  FAILS_WITH(DS_E_BAD_ENCODING, ds_writer_write(w, &d, x, sizeof x, NULL));
  int8_t q[4] = {1, 2, 3, 4};
  d.dtype = DS_DTYPE_I8;
  scale = INFINITY;
  FAILS_WITH(DS_E_BAD_VALUE, ds_writer_write(w, &d, q, sizeof q, NULL));
  scale = 0.5;
  d.scale_count = 1u << 20;
  FAILS_WITH(DS_E_LIMIT_EXCEEDED, ds_writer_write(w, &d, q, sizeof q, NULL));
  d.scale_count = 1;
  CHECK(ds_writer_write(w, &d, q, sizeof q, NULL) == DS_WRITTEN);

  ds_summary s;
  memset(&s, 0, sizeof s);
  s.projection_dim = 5000;
  FAILS_WITH(DS_E_LIMIT_EXCEEDED, ds_writer_write_summary(w, &d, &s, NULL));
  FAILS_WITH(DS_E_LIMIT_EXCEEDED, ds_writer_write_summarized(w, &d, q, sizeof q, 4097, 1, NULL));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_writer_write_summary(w, &d, NULL, NULL));

  CHECK(ds_writer_records_written(w) == 1);
  OK(ds_writer_close(w));
  ds_writer_free(w);
  free(long_name);

  ds_reader* r = NULL;
  OK(ds_reader_open(path, NULL, &r));
  CHECK(ds_reader_record_count(r) == 1);
  ds_reader_free(r);
}

/* A writer dropped without close still leaves a readable file (its destructor closes). */
static void test_free_closes(void) {
  char path[4096];
  path_in_dir(path, sizeof path, "freed.tdump");
  ds_writer* w = NULL;
  OK(ds_writer_open(path, NULL, &w));
  float x = 3.5f;
  ds_tensor_desc d;
  ds_tensor_desc_init(&d);
  d.name = "scalar";
  CHECK(ds_writer_write(w, &d, &x, sizeof x, NULL) == DS_WRITTEN);
  ds_writer_free(w);
  ds_reader* r = NULL;
  OK(ds_reader_open(path, NULL, &r));
  ds_integrity g;
  OK(ds_reader_integrity(r, &g));
  CHECK(g.state == DS_STATE_CLEAN);
  CHECK(ds_reader_record_count(r) == 1);
  ds_reader_free(r);
}

/* ---- threads: one writer shared by several threads; the last error is per thread ---------- */

enum { kThreads = 4, kPerThread = 25 };

typedef struct {
  ds_writer* writer;
  int id;
} thread_arg;

static int writer_thread(void* p) {
  thread_arg* a = p;
  /* A fresh thread has no last error, whatever other threads did. */
  CHECK(ds_last_error_code() == DS_OK && ds_last_error_message()[0] == '\0');
  float x[32];
  uint64_t shape[1] = {32};
  char name[64];
  ds_tensor_desc d;
  ds_tensor_desc_init(&d);
  d.shape = shape;
  d.rank = 1;
  for (int i = 0; i < kPerThread; ++i) {
    snprintf(name, sizeof name, "thread%d.op%d", a->id, i);
    d.name = name;
    fill_activation(x, 32, (float)(a->id * 100 + i));
    CHECK(ds_writer_write(a->writer, &d, x, sizeof x, NULL) == DS_WRITTEN);
    if (i == kPerThread / 2) {
      /* A failure here is this thread's alone. */
      d.rank = 17;
      CHECK(ds_writer_write(a->writer, &d, x, sizeof x, NULL) == DS_E_LIMIT_EXCEEDED);
      CHECK(ds_last_error_code() == DS_E_LIMIT_EXCEEDED);
      d.rank = 1;
    }
  }
  return 0;
}

static void test_threads(void) {
  char path[4096];
  path_in_dir(path, sizeof path, "threads.tdump");
  /* The main thread's error must survive whatever the workers do. */
  ds_filter* f = NULL;
  FAILS_WITH(DS_E_FILTER_SYNTAX, ds_filter_parse("rank>>1", &f));

  ds_writer* w = NULL;
  ds_writer_options o;
  ds_writer_options_init(&o);
  o.background = 1;
  OK(ds_writer_open(path, &o, &w));
  CHECK(ds_last_error_code() == DS_OK);
  FAILS_WITH(DS_E_FILTER_SYNTAX, ds_filter_parse("rank>>1", &f));
  thrd_t threads[kThreads];
  thread_arg args[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    args[t].writer = w;
    args[t].id = t;
    CHECK(thrd_create(&threads[t], writer_thread, &args[t]) == thrd_success);
  }
  for (int t = 0; t < kThreads; ++t) {
    int rc = -1;
    CHECK(thrd_join(threads[t], &rc) == thrd_success && rc == 0);
  }
  CHECK(ds_last_error_code() == DS_E_FILTER_SYNTAX);
  OK(ds_writer_close(w));
  ds_writer_free(w);

  /* Every record is there, intact, each exec index used once. */
  ds_reader* r = NULL;
  OK(ds_reader_open(path, NULL, &r));
  CHECK(ds_reader_record_count(r) == kThreads * kPerThread);
  unsigned char seen[kThreads * kPerThread];
  memset(seen, 0, sizeof seen);
  for (size_t i = 0; i < ds_reader_record_count(r); ++i) {
    ds_record_info info;
    OK(ds_record_get_info(ds_reader_record(r, i), &info));
    /* Indices 0 ... 99, each once: a refused write consumes none (a filtered one would). */
    CHECK(info.exec_index < sizeof seen && !seen[info.exec_index]);
    seen[info.exec_index] = 1;
    int tid = -1, op = -1;
    CHECK(sscanf(info.name, "thread%d.op%d", &tid, &op) == 2);
    float x[32], back[32];
    fill_activation(x, 32, (float)(tid * 100 + op));
    OK(ds_record_decode_f32(ds_reader_record(r, i), 0, back, 32));
    CHECK(memcmp(x, back, sizeof x) == 0);
  }
  ds_reader_free(r);
}

/* ---- compare ------------------------------------------------------------------------------ */

/* Three tensors; the candidate's second one is scaled by `scale` at element 5 and, with
 * `nan`, holds a NaN there. */
static void write_compare_run(const char* path, float scale, int nan) {
  ds_writer* w = NULL;
  OK(ds_writer_open(path, NULL, &w));
  uint64_t shape[2] = {4, 16};
  ds_tensor_desc d;
  ds_tensor_desc_init(&d);
  d.shape = shape;
  d.rank = 2;
  d.axes = "seq,hidden";
  const char* names[3] = {"block.0", "block.1", "block.2"};
  float x[64];
  for (int t = 0; t < 3; ++t) {
    fill_activation(x, 64, (float)(t + 1));
    if (t == 1) x[5] *= scale;
    if (t >= 1 && nan) x[5] = NAN;
    d.name = names[t];
    d.op_type = t == 1 ? "LayerNorm" : "Linear";
    CHECK(ds_writer_write(w, &d, x, sizeof x, NULL) == DS_WRITTEN);
  }
  OK(ds_writer_close(w));
  ds_writer_free(w);
}

static void test_compare(void) {
  char ref[4096], same[4096], scaled[4096], nan[4096], missing[4096];
  path_in_dir(ref, sizeof ref, "cmp_ref.tdump");
  path_in_dir(same, sizeof same, "cmp_same.tdump");
  path_in_dir(scaled, sizeof scaled, "cmp_scaled.tdump");
  path_in_dir(nan, sizeof nan, "cmp_nan.tdump");
  path_in_dir(missing, sizeof missing, "cmp_missing.tdump");
  remove(missing);
  write_compare_run(ref, 1.0f, 0);
  write_compare_run(same, 1.0f, 0);
  write_compare_run(scaled, 3.0f, 0);
  write_compare_run(nan, 1.0f, 1);

  char* report = NULL;
  size_t length = 0;
  CHECK(ds_compare(ref, same, NULL, &report, &length) == DS_VERDICT_PASS);
  CHECK(report != NULL && length == strlen(report) && report[0] == '{');
  CHECK(strstr(report, "\"verdict\": \"pass\"") != NULL);
  ds_string_free(report);

  /* A NaN where the reference is healthy: silent failure at block.1, named in the report. */
  CHECK(ds_compare(ref, nan, "", &report, NULL) == DS_VERDICT_SILENT_FAILURE);
  CHECK(strstr(report, "\"silent_failure\"") != NULL);
  const char* first = strstr(report, "\"first_divergence\"");
  CHECK(first != NULL);
  const char* name = strstr(first, "\"name\"");
  CHECK(name != NULL && strncmp(strchr(name + 6, '"'), "\"block.1\"", 9) == 0);
  ds_string_free(report);

  /* A finite error: diverged by default; a loose criterion given as JSON lets it pass. */
  CHECK(ds_compare(ref, scaled, NULL, NULL, NULL) == DS_VERDICT_DIVERGED);
  CHECK(ds_compare(ref, scaled, "{\"min_cosine\": 0.5}", NULL, NULL) == DS_VERDICT_PASS);
  /* A policy given inline (JSON inside the JSON options) that skips the damaged tensor. */
  CHECK(ds_compare(ref, scaled, "{\"policy_text\": \"{\\\"version\\\": 1, \\\"rules\\\": [{\\\"match\\\": "
                                "\\\"block.1\\\", \\\"skip\\\": true}]}\"}", NULL, NULL) == DS_VERDICT_PASS);
  CHECK(ds_compare(ref, scaled, "{\"format\": \"markdown\", \"stop_at_first\": true}", &report,
                   NULL) == DS_VERDICT_DIVERGED);
  CHECK(report != NULL && report[0] != '{' && strstr(report, "block.1") != NULL);
  ds_string_free(report);
  CHECK(ds_compare(ref, scaled, "{\"format\": \"text\"}", &report, NULL) == DS_VERDICT_DIVERGED);
  CHECK(strstr(report, "block.1") != NULL);
  ds_string_free(report);
  /* The HTML page carries the per-tensor detail (computed because the format asks for it). */
  CHECK(ds_compare(ref, scaled, "{\"format\": \"html\"}", &report, NULL) == DS_VERDICT_DIVERGED);
  CHECK(strncmp(report, "<!DOCTYPE html>", 15) == 0 && strstr(report, "default-src 'none'") != NULL);
  CHECK(strstr(report, "\"hm\":") != NULL && strstr(report, "block.1") != NULL);
  ds_string_free(report);
  CHECK(ds_compare(ref, scaled, "{\"format\": \"model_explorer\"}", &report, NULL) ==
        DS_VERDICT_DIVERGED);
  CHECK(strstr(report, "\"results\"") != NULL && strstr(report, "\"block.1\"") != NULL);
  ds_string_free(report);
  ds_string_free(NULL);

  /* Nothing compared (here: a filter that matches no tensor) is not a pass. */
  CHECK(ds_compare(ref, same, "{\"filter\": \"no.such.tensor\"}", &report, NULL) ==
        DS_VERDICT_NOTHING_COMPARED);
  CHECK(strstr(report, "\"verdict\": \"nothing_compared\"") != NULL);
  CHECK(strstr(report, "\"exit_code\": 2") != NULL);
  ds_string_free(report);

  /* The keys are the rows of the library's option table (include/driftscope/compare_options.hpp):
     every settings row is a key, numbers may be "inf"/"-inf"/"nan" (JSON has none), null leaves
     an optional criterion unset; the command's own options (report files) are not keys. */
  CHECK(ds_compare(ref, scaled, "{\"details\": true, \"min_cosine\": null}", NULL, NULL) ==
        DS_VERDICT_DIVERGED);
  CHECK(ds_compare(ref, scaled, "{\"atol\": \"inf\"}", NULL, NULL) == DS_VERDICT_PASS);
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_compare(ref, same, "{\"json\": \"r.json\"}", NULL, NULL));
  CHECK(strcmp(ds_last_error_message(), "unknown compare option 'json'") == 0);
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_compare(ref, same, "{\"atol\": \"1e-3\"}", NULL, NULL));
  CHECK(strcmp(ds_last_error_message(), "compare option 'atol' must be a number") == 0);

  /* Errors: the request, not the comparison. */
  report = (char*)ref;
  FAILS_WITH(DS_E_IO, ds_compare(ref, missing, NULL, &report, NULL));
  CHECK(report == NULL);
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_compare(NULL, ref, NULL, NULL, NULL));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_compare(ref, same, "{\"min_cosin\": 0.9}", NULL, NULL));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_compare(ref, same, "{\"min_cosine\": 2}", NULL, NULL));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_compare(ref, same, "{\"atol\": \"1e-3\"}", NULL, NULL));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_compare(ref, same, "{\"threads\": -1}", NULL, NULL));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_compare(ref, same, "{\"min_sqnr\": 40", NULL, NULL));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_compare(ref, same, "[1, 2]", NULL, NULL));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_compare(ref, same, "{\"atol\": 1e999}", NULL, NULL));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_compare(ref, same, "{\"max_mismatch_fraction\": 0.1}", NULL, NULL));
  FAILS_WITH(DS_E_BAD_POLICY, ds_compare(ref, same, "{\"policy_text\": \"[[[\"}", NULL, NULL));

  /* Out-of-range values: the library's one validator of compare options decides, with the same
     message as the command and Python (tests/python/test_compare_options.py has the same table). */
  static const char* const bad[][2] = {
      {"{\"atol\": -1}", "compare option 'atol' is -1, allowed 0 .. inf"},
      {"{\"min_cosine\": 2}", "compare option 'min_cosine' is 2, allowed -1 .. 1"},
      {"{\"max_ulp\": -1}", "compare option 'max_ulp' is -1, allowed 0 .. 9223372036854775807"},
      {"{\"threads\": -1}", "compare option 'threads' is -1, allowed 0 .. 4096"},
      {"{\"threads\": 100000}", "compare option 'threads' is 100000, allowed 0 .. 4096"},
      {"{\"top_k\": 0}", "compare option 'top_k' is 0, allowed 1 .. 1000"},
      {"{\"top_k\": -3}", "compare option 'top_k' is -3, allowed 1 .. 1000"},
      {"{\"r64_floor\": -1}", "compare option 'r64_floor' is -1, allowed 0 .. 1e+12"},
      {"{\"max_amplifiers\": -1}", "compare option 'max_amplifiers' is -1, allowed 0 .. 1000"},
      {"{\"pairs\": \"sideways\"}", "compare option 'pairs' is 'sideways', allowed name, positional"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_compare(ref, same, bad[i][0], NULL, NULL));
    if (strcmp(ds_last_error_message(), bad[i][1]) != 0)
      fprintf(stderr, "  %s: got '%s', expected '%s'\n", bad[i][0], ds_last_error_message(), bad[i][1]);
    CHECK(strcmp(ds_last_error_message(), bad[i][1]) == 0);
  }
}

/* ds_import / ds_export: a round trip through both formats, and the refusals. */
static void test_import_export(const char* run) {
  char npz[4096], st[4096], back[4096], bad[4096];
  path_in_dir(npz, sizeof npz, "c_api_export.npz");
  path_in_dir(st, sizeof st, "c_api_export.safetensors");
  path_in_dir(back, sizeof back, "c_api_back.tdump");
  path_in_dir(bad, sizeof bad, "c_api_bad.npz");

  ds_export_options eo;
  ds_export_options_init(&eo);
  CHECK(eo.struct_size == sizeof eo && eo.format == DS_FORMAT_AUTO && eo.compress == 0);
  eo.compress = 1;
  ds_export_result er;
  OK(ds_export(run, npz, &eo, &er));
  CHECK(er.format == DS_FORMAT_NPZ && er.written > 0);
  ds_export_result er2;
  OK(ds_export(run, st, NULL, &er2));
  CHECK(er2.format == DS_FORMAT_SAFETENSORS && er2.written == er.written);

  ds_import_options io;
  ds_import_options_init(&io);
  CHECK(io.struct_size == sizeof io && io.format == DS_FORMAT_AUTO);
  ds_kv meta[1] = {{"backend", "c"}};
  io.metadata = meta;
  io.metadata_count = 1;
  io.fixed_salt = 1;
  io.salt = 7;
  ds_import_result ir;
  OK(ds_import(st, back, &io, &ir));
  CHECK(ir.format == DS_FORMAT_SAFETENSORS && ir.written == er2.written && ir.filtered == 0);

  /* The re-imported tensor holds the original bytes. */
  ds_reader *a = NULL, *b = NULL;
  OK(ds_reader_open(run, NULL, &a));
  OK(ds_reader_open(back, NULL, &b));
  CHECK(strcmp(ds_reader_metadata_get(b, "backend"), "c") == 0);
  CHECK(strcmp(ds_reader_metadata_get(b, "source_format"), "safetensors") == 0);
  const ds_record *ra = NULL, *rb = NULL;
  OK(ds_reader_find(a, "encoder.layers.0.norm1", 0, DS_ROLE_OUTPUT, 0, &ra));
  OK(ds_reader_find(b, "encoder.layers.0.norm1", 0, DS_ROLE_OUTPUT, 0, &rb));
  const void *pa, *pb;
  uint64_t na, nb;
  OK(ds_record_payload(ra, &pa, &na));
  OK(ds_record_payload(rb, &pb, &nb));
  CHECK(na == nb && memcmp(pa, pb, (size_t)na) == 0);
  ds_reader_free(a);
  ds_reader_free(b);

  OK(ds_import(npz, back, NULL, &ir));
  CHECK(ir.format == DS_FORMAT_NPZ && ir.written == er.written);

  /* Refusals: hostile input (nothing left behind), same file, bad enums, NULLs. */
  write_file(bad, "PK\x05\x06", 4);
  FAILS_WITH(DS_E_BAD_NPZ, ds_import(bad, back, NULL, NULL));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_export(run, run, NULL, NULL));
  eo.format = DS_FORMAT_NPY;
  FAILS_WITH(DS_E_BAD_ENUM, ds_export(run, npz, &eo, NULL));
  io.format = 9;
  FAILS_WITH(DS_E_BAD_ENUM, ds_import(st, back, &io, NULL));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_import(NULL, back, NULL, NULL));
  FAILS_WITH(DS_E_INVALID_ARGUMENT, ds_export(run, NULL, NULL, NULL));
  remove(npz);
  remove(st);
  remove(back);
  remove(bad);
}

int main(int argc, char** argv) {
  if (argc > 1) g_dir = argv[1];
  char path[4096];
  path_in_dir(path, sizeof path, "c_api_run.tdump");

  test_version_and_codes();
  test_filters();
  test_format_inputs();
  write_run(path);
  read_run(path);
  test_bad_files(path);
  test_cut_while_open(path);
  test_append_and_background(path);
  test_drop_behind();
  test_writer_errors();
  test_free_closes();
  test_compare();
  test_import_export(path);
  test_threads();
  printf("test_c_api: %d checks passed\n", g_checks);
  return 0;
}
