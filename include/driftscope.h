/* driftscope C ABI: record named tensors into TDUMP files, read them back, filter, compare.
 *
 * A thin shim over the C++ API (include/driftscope/ headers) for C, JNI, Kotlin/Native, Swift and
 * ctypes. Usage, ownership and lifetime rules: docs/c-api.md. File format: docs/format.md.
 *
 * Conventions (hold for every function below):
 *  - Plain C11. Handles are opaque pointers; a handle is created by exactly one function and
 *    released by exactly one *_free function. *_free(NULL) is a no-op.
 *  - Fallible functions return an int: >= 0 on success, a negative status on failure. A negative
 *    status is -(code) where code is the stable driftscope::Errc value (DS_E_* below), plus two
 *    ABI-only codes (DS_E_OUT_OF_MEMORY, DS_E_INTERNAL) for failures C++ reports by exception.
 *  - After a call returns a negative status, ds_last_error_message() / _code() / _offset() describe
 *    it on the calling thread until the next fallible call on that thread (which clears them).
 *  - Nothing aborts, throws across this boundary, or prints.
 *  - Strings passed in are NUL-terminated UTF-8. Strings handed out are NUL-terminated UTF-8 with
 *    an explicit length as well, and are owned by the handle they came from.
 *  - Option and descriptor structs start with struct_size; initialise them with their *_init
 *    function, which sets the defaults, so a program compiled against this header keeps working
 *    when later versions append fields.
 */
#ifndef DRIFTSCOPE_H_
#define DRIFTSCOPE_H_

#include <stddef.h>
#include <stdint.h>

/* DS_C_API (CMake's GenerateExportHeader): marks what libdriftscope_c.so exports (HACKING.md). */
#include "driftscope/api_c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a function or struct of this header changes incompatibly. */
#define DS_ABI_VERSION 1

/* ---- status codes ------------------------------------------------------------------------- */

enum {
  DS_OK = 0,
  DS_E_INVALID_ARGUMENT = -1,
  DS_E_IO = -2,
  DS_E_NOT_FOUND = -3,
  DS_E_FILTER_SYNTAX = -4,
  DS_E_UNSUPPORTED = -5,
  DS_E_CLOSED = -6,
  DS_E_TRUNCATED_HEADER = -20,
  DS_E_BAD_MAGIC = -21,
  DS_E_UNSUPPORTED_VERSION = -22,
  DS_E_BAD_BYTE_ORDER = -23,
  DS_E_UNSUPPORTED_FEATURE = -24,
  DS_E_BAD_HEADER_CHECKSUM = -25,
  DS_E_BAD_RECORD_MAGIC = -40,
  DS_E_BAD_FRAME_CHECKSUM = -41,
  DS_E_BAD_RECORD_CHECKSUM = -42,
  DS_E_SALT_MISMATCH = -43,
  DS_E_UNKNOWN_RECORD_KIND = -44,
  DS_E_RECORD_AFTER_END = -45,
  DS_E_BAD_INDEX = -46,
  DS_E_RESERVED_NONZERO = -60,
  DS_E_NONZERO_PADDING = -61,
  DS_E_LENGTH_MISMATCH = -62,
  DS_E_LIMIT_EXCEEDED = -63,
  DS_E_SHAPE_OVERFLOW = -64,
  DS_E_BAD_DTYPE = -65,
  DS_E_BAD_ENUM = -66,
  DS_E_BAD_ENCODING = -67,
  DS_E_BAD_VALUE = -68,
  DS_E_BAD_UTF8 = -69,
  DS_E_EMPTY_NAME = -70,
  DS_E_DUPLICATE_KEY = -71,
  DS_E_BAD_AXES = -72,
  DS_E_DUPLICATE_TENSOR = -73,
  DS_E_BAD_NPZ = -80,
  DS_E_BAD_SAFETENSORS = -81,
  DS_E_INCOMPARABLE = -90,
  DS_E_BAD_POLICY = -91,
  /* ABI-only: an allocation failed / an unexpected C++ exception was caught at the boundary. */
  DS_E_OUT_OF_MEMORY = -1000,
  DS_E_INTERNAL = -1001
};

/* Stable snake_case name of a status ("ok", "bad_magic", "out_of_memory"); "unknown" otherwise.
 * The returned string is static. */
DS_C_API const char* ds_status_name(int status);

/* "0.1.0"; static. */
DS_C_API const char* ds_version(void);

/* ---- last error (thread-local) ------------------------------------------------------------ */

#define DS_NO_OFFSET UINT64_MAX

/* Message of the last failure on this thread ("" when none): one line naming the field, the
 * value found and the allowed range. Valid until the next fallible ds_* call on this thread. */
DS_C_API const char* ds_last_error_message(void);
/* Status of the last failure on this thread (DS_OK when the last fallible call succeeded). */
DS_C_API int ds_last_error_code(void);
/* File offset the last failure refers to, DS_NO_OFFSET when it has none. */
DS_C_API uint64_t ds_last_error_offset(void);
DS_C_API void ds_clear_error(void);

/* ---- tensors: the descriptor shared by writer and filter ---------------------------------- */

/* dtype codes are the on-disk codes (docs/format.md §3.3.1). */
enum {
  DS_DTYPE_F64 = 1,
  DS_DTYPE_F32 = 2,
  DS_DTYPE_F16 = 3,
  DS_DTYPE_BF16 = 4,
  DS_DTYPE_F8E4M3FN = 5,
  DS_DTYPE_F8E5M2 = 6,
  DS_DTYPE_I64 = 7,
  DS_DTYPE_I32 = 8,
  DS_DTYPE_I16 = 9,
  DS_DTYPE_I8 = 10,
  DS_DTYPE_U8 = 11,
  DS_DTYPE_BOOL = 12,
  DS_DTYPE_U16 = 13,
  DS_DTYPE_U32 = 14,
  DS_DTYPE_U64 = 15
};
/* Bytes per element, 0 for an unknown code. */
DS_C_API size_t ds_dtype_size(int32_t dtype);
/* "f32", "bf16", ...; NULL for an unknown code. Static. */
DS_C_API const char* ds_dtype_name(int32_t dtype);
/* Accepts the names above and the usual aliases ("float32", "half", "int8"); 0 when unknown. */
DS_C_API int32_t ds_dtype_parse(const char* name);

enum { DS_ROLE_OUTPUT = 0, DS_ROLE_INPUT = 1, DS_ROLE_PARAMETER = 2, DS_ROLE_OTHER = 3 };
enum { DS_ENCODING_RAW = 0, DS_ENCODING_AFFINE_TENSOR = 1, DS_ENCODING_AFFINE_CHANNEL = 2 };

/* Let the writer number the tensor (exec_index) or count the calls of its identity (occurrence). */
#define DS_AUTO_INDEX UINT64_MAX
#define DS_AUTO_OCCURRENCE UINT32_MAX

typedef struct ds_kv {
  const char* key;
  const char* value;
} ds_kv;

typedef struct ds_tensor_desc {
  size_t struct_size;       /* sizeof(ds_tensor_desc), set by ds_tensor_desc_init */
  const char* name;         /* module path, e.g. "encoder.layers.2.norm1"; required */
  const char* op_type;      /* e.g. "LayerNorm"; NULL or "" for none */
  int32_t role;             /* DS_ROLE_*; default output */
  uint16_t role_index;      /* which output/input/parameter of the module */
  uint64_t exec_index;      /* default DS_AUTO_INDEX */
  uint32_t occurrence;      /* default DS_AUTO_OCCURRENCE */
  int32_t dtype;            /* DS_DTYPE_*; default f32 */
  const uint64_t* shape;    /* rank dims; may be NULL when rank == 0 */
  size_t rank;              /* 0 ... 16 */
  const char* axes;         /* NULL, "", or rank comma-separated names: "batch,seq,hidden" */
  const ds_kv* attrs;       /* attr_count free string attributes */
  size_t attr_count;
  /* Quantisation (docs/format.md §3.3.2): value = scale * (q - zero_point). */
  int32_t encoding;         /* DS_ENCODING_*; default raw */
  uint32_t encoding_axis;   /* affine per channel: the channel axis */
  const double* scales;     /* scale_count entries: 1 per tensor, dims[axis] per channel */
  const int64_t* zero_points; /* scale_count entries, or NULL for all zero */
  size_t scale_count;
} ds_tensor_desc;

DS_C_API void ds_tensor_desc_init(ds_tensor_desc* desc);

/* Statistics of a tensor's decoded values, float64 accumulation (docs/format.md §3.6). */
typedef struct ds_tensor_stats {
  uint64_t count, nan_count, posinf_count, neginf_count, zero_count;
  double min, max;  /* finite values only; NaN when there are none */
  double mean, std; /* population std */
  double l2_norm;   /* of the finite values */
} ds_tensor_stats;

/* A SUMMARY record's content (light mode). `projection` has projection_dim floats. */
typedef struct ds_summary {
  ds_tensor_stats stats;
  uint64_t projection_seed;
  uint32_t projection_kind; /* 1: Rademacher from SplitMix64 */
  uint32_t projection_dim;
  const float* projection;
} ds_summary;

/* ---- filters (docs/filters.md) ------------------------------------------------------------ */

typedef struct ds_filter ds_filter;

/* Parses a filter string ("encoder.layers.3* -*.dropout op=LayerNorm budget=1GiB").
 * On failure returns DS_E_FILTER_SYNTAX naming the clause and its position; *out stays NULL. */
DS_C_API int ds_filter_parse(const char* text, ds_filter** out);
DS_C_API void ds_filter_free(ds_filter* filter);
/* 1 when the tensor passes every clause except the byte budget, 0 when not, < 0 on bad input.
 * exec_index is the writer's index (every=N); desc->exec_index is ignored. */
DS_C_API int ds_filter_accepts(const ds_filter* filter, const ds_tensor_desc* desc, uint64_t exec_index);
/* 0 when no tensor of this name can pass (producers skip work early), 1 otherwise, < 0 on bad
 * input. */
DS_C_API int ds_filter_may_accept_name(const ds_filter* filter, const char* name);
/* 1 and *bytes set when the filter has a byte budget, 0 when unlimited. */
DS_C_API int ds_filter_budget(const ds_filter* filter, uint64_t* bytes);
/* Canonical text of the filter, snprintf-style: writes at most `capacity` bytes including the
 * NUL into buf (buf may be NULL when capacity is 0) and returns the full length without the NUL. */
DS_C_API int64_t ds_filter_to_string(const ds_filter* filter, char* buf, size_t capacity);

/* ---- data flow (docs/format.md §3.3.3) ------------------------------------------------------ */
/* A recorded tensor's identity, as named by the reserved attribute "ds.inputs". */
typedef struct ds_tensor_ref {
  const char* name;         /* required, non-empty */
  int32_t role;             /* DS_ROLE_* */
  uint16_t role_index;
  uint32_t occurrence;
} ds_tensor_ref;
/* The "ds.inputs" attribute value naming `count` tensors (a tensor was computed from them),
 * snprintf-style like ds_filter_to_string: returns the full length without the NUL, < 0 on bad
 * input (DS_E_INVALID_ARGUMENT: a NULL or empty name, a bad role). Pass it as the value of the
 * attribute "ds.inputs"; "ds.kind" is one of "float", "index", "shape", "mask". */
DS_C_API int64_t ds_format_inputs(const ds_tensor_ref* refs, size_t count, char* buf, size_t capacity);

/* ---- writer (docs/format.md §5) ----------------------------------------------------------- */

typedef struct ds_writer ds_writer;

enum { DS_SYNC_ON_CLOSE = 0, DS_SYNC_EVERY_RECORD = 1, DS_SYNC_EVERY_BYTES = 2 };

typedef struct ds_writer_options {
  size_t struct_size;      /* sizeof(ds_writer_options), set by ds_writer_options_init */
  const ds_kv* metadata;   /* run metadata (framework, backend, precision, model, ...) */
  size_t metadata_count;   /* "writer" is added by the library */
  const char* filter;      /* NULL or "": record everything */
  int32_t sync_policy;     /* DS_SYNC_*; default on close */
  uint64_t sync_bytes;     /* for DS_SYNC_EVERY_BYTES; default 64 MiB */
  int32_t append;          /* 1: continue an existing file, truncating a torn tail first */
  int32_t overwrite;       /* when not appending: 1 (default) replaces an existing file */
  int32_t background;      /* 1: a writer thread does the I/O from a bounded queue */
  uint64_t queue_bytes;    /* bound of that queue; default 256 MiB */
  int32_t fixed_salt;      /* 1: use `salt` instead of a random one (golden files, tests) */
  uint64_t salt;
  /* Appended after the first release: a struct_size of offsetof(ds_writer_options, drop_behind)
   * is that release's struct and gets the default (0) for what follows. */
  int32_t drop_behind;     /* 1: write the file back every 4 MiB and evict it from the page cache,
                              keeping about its last 20 MiB cached; bytes and durability unchanged
                              (docs/c-api.md "Writing"); default 0 */
} ds_writer_options;

DS_C_API void ds_writer_options_init(ds_writer_options* options);

/* Creates (or with append, reopens) a TDUMP file. options may be NULL for the defaults.
 * On failure *out stays NULL. */
DS_C_API int ds_writer_open(const char* path, const ds_writer_options* options, ds_writer** out);

enum { DS_WRITTEN = 0, DS_FILTERED = 1, DS_OVER_BUDGET = 2 };

typedef struct ds_write_result {
  int32_t status;      /* DS_WRITTEN, DS_FILTERED, DS_OVER_BUDGET */
  uint64_t exec_index; /* assigned (filtered tensors consume one too) */
  uint32_t occurrence;
  uint64_t offset;     /* record offset in the file, when written */
} ds_write_result;

/* Records a tensor: `data` holds size = numel * dtype size bytes, row-major, little-endian.
 * Returns DS_WRITTEN, DS_FILTERED or DS_OVER_BUDGET (>= 0), or a negative status; `result` may
 * be NULL. Thread-safe. In background mode the bytes are copied before the call returns. */
DS_C_API int ds_writer_write(ds_writer* writer, const ds_tensor_desc* desc, const void* data, size_t size,
                    ds_write_result* result);
/* Light mode with a summary the caller computed. */
DS_C_API int ds_writer_write_summary(ds_writer* writer, const ds_tensor_desc* desc,
                            const ds_summary* summary, ds_write_result* result);
/* Light mode: computes stats and a projection of dimension projection_dim (0 ... 4096) with
 * `seed` from the tensor's bytes and records that summary instead of the values. */
DS_C_API int ds_writer_write_summarized(ds_writer* writer, const ds_tensor_desc* desc, const void* data,
                               size_t size, uint32_t projection_dim, uint64_t seed,
                               ds_write_result* result);
/* 1 when a tensor of this name may pass the writer's filter, 0 when it cannot. */
DS_C_API int ds_writer_wants(const ds_writer* writer, const char* name);
/* Waits for queued records and fdatasyncs. */
DS_C_API int ds_writer_flush(ds_writer* writer);
/* Writes INDEX and END, syncs and closes the file. Idempotent; the handle stays valid for the
 * getters below and must still be freed. Further writes return DS_E_CLOSED. */
DS_C_API int ds_writer_close(ds_writer* writer);
/* Closes if still open (errors are then lost: call ds_writer_close to see them) and frees. */
DS_C_API void ds_writer_free(ds_writer* writer);
DS_C_API uint64_t ds_writer_records_written(const ds_writer* writer);
DS_C_API uint64_t ds_writer_bytes_written(const ds_writer* writer);
DS_C_API uint64_t ds_writer_salt(const ds_writer* writer);

/* ---- reader (docs/format.md §4) ----------------------------------------------------------- */

typedef struct ds_reader ds_reader;
/* A TENSOR or SUMMARY record; owned by its reader and valid until ds_reader_free. */
typedef struct ds_record ds_record;

enum { DS_VERIFY_FULL = 0, DS_VERIFY_FRAMES = 1 };

typedef struct ds_open_options {
  size_t struct_size; /* sizeof(ds_open_options), set by ds_open_options_init */
  int32_t verify;     /* DS_VERIFY_FULL (default): every CRC before returning; FRAMES: payload
                         CRCs later, by ds_reader_verify_payload */
  int32_t use_index;  /* 1 (default): on a clean file look names up through the checked footer index */
  int32_t resync;     /* 1: after corruption, search for the next valid record and go on */
} ds_open_options;

DS_C_API void ds_open_options_init(ds_open_options* options);

/* Maps and validates a file. Fails only when it cannot be opened or its header is invalid;
 * damage to records is reported by ds_reader_integrity with every record before it available.
 * options may be NULL. On failure *out stays NULL. */
DS_C_API int ds_reader_open(const char* path, const ds_open_options* options, ds_reader** out);
/* The same over bytes the caller keeps alive and unchanged until ds_reader_free. */
DS_C_API int ds_reader_open_memory(const void* data, size_t size, const ds_open_options* options,
                          ds_reader** out);
DS_C_API void ds_reader_free(ds_reader* reader);

typedef struct ds_file_info {
  uint16_t version_major, version_minor;
  uint64_t salt;
  uint32_t required_features, optional_features;
  uint32_t header_length;
  size_t metadata_count;
  size_t record_count; /* TENSOR and SUMMARY records */
} ds_file_info;

DS_C_API int ds_reader_info(const ds_reader* reader, ds_file_info* out);
/* Metadata entry i (0 <= i < metadata_count), in file order. Any out pointer may be NULL. */
DS_C_API int ds_reader_metadata(const ds_reader* reader, size_t i, const char** key, size_t* key_length,
                       const char** value, size_t* value_length);
/* Value of a metadata key, NULL when absent. */
DS_C_API const char* ds_reader_metadata_get(const ds_reader* reader, const char* key);

enum { DS_STATE_CLEAN = 0, DS_STATE_UNFINISHED = 1, DS_STATE_CUT = 2, DS_STATE_CORRUPT = 3 };

typedef struct ds_integrity {
  int32_t state;              /* DS_STATE_* */
  uint64_t file_size;
  uint64_t valid_end;         /* offset just past the last valid record */
  uint64_t cut_offset;        /* cut: where the torn tail starts; DS_NO_OFFSET otherwise */
  uint64_t discarded_bytes;   /* cut: bytes from cut_offset to the end of the file */
  int32_t corruption_status;  /* corrupt: the first failure as a negative status; DS_OK otherwise */
  uint64_t corruption_offset; /* corrupt: its offset, DS_NO_OFFSET otherwise */
  const char* corruption_message; /* corrupt: the message; "" otherwise */
  const char* corrupt_name;   /* tensor name of the failing record when readable; "" otherwise */
  size_t warning_count;       /* see ds_reader_warning */
  int32_t index_used;         /* 1 when lookups go through the (checked) footer index */
  int32_t checksums_verified; /* 1 when every record's CRC was checked */
} ds_integrity;

/* Strings in *out are owned by the reader. */
DS_C_API int ds_reader_integrity(const ds_reader* reader, ds_integrity* out);
/* "clean", "unfinished", "cut", "corrupt"; static; NULL for an unknown state. */
DS_C_API const char* ds_file_state_name(int32_t state);
/* Warning i (e.g. DS_E_DUPLICATE_TENSOR) as a negative status; message owned by the reader. */
DS_C_API int ds_reader_warning(const ds_reader* reader, size_t i, int32_t* status, const char** message);

/* TENSOR and SUMMARY records, in file order. NULL when i is out of range. */
DS_C_API size_t ds_reader_record_count(const ds_reader* reader);
DS_C_API const ds_record* ds_reader_record(const ds_reader* reader, size_t i);
/* Lookup by identity (uses the footer index when the file has one). DS_E_NOT_FOUND when absent. */
DS_C_API int ds_reader_find(const ds_reader* reader, const char* name, uint32_t occurrence, int32_t role,
                   uint16_t role_index, const ds_record** out);
/* Every record with this name (any role or occurrence) in file order: writes at most `capacity`
 * into out (out may be NULL when capacity is 0) and returns how many there are in total. */
DS_C_API int64_t ds_reader_find_all(const ds_reader* reader, const char* name, const ds_record** out,
                           size_t capacity);
/* Checks one record's CRC (needed after DS_VERIFY_FRAMES): DS_OK or DS_E_BAD_RECORD_CHECKSUM. */
DS_C_API int ds_reader_verify_payload(const ds_reader* reader, const ds_record* record);
/* DS_OK, or DS_E_IO ("file changed while reading") when the file shrank since
 * it was opened: reads past the cut returned zeros (never SIGBUS). Call before trusting values. */
DS_C_API int ds_reader_check_unchanged(const ds_reader* reader);

enum { DS_KIND_TENSOR = 1, DS_KIND_SUMMARY = 2 };

/* Everything a record says about its tensor. Pointers are owned by the reader. */
typedef struct ds_record_info {
  int32_t kind;              /* DS_KIND_TENSOR or DS_KIND_SUMMARY */
  size_t position;           /* i such that ds_reader_record(reader, i) is this record */
  const char* name;
  size_t name_length;
  const char* op_type;       /* "" when none */
  size_t op_type_length;
  int32_t role;
  uint16_t role_index;
  uint64_t exec_index;
  uint32_t occurrence;
  int32_t dtype;
  size_t rank;
  const uint64_t* shape;     /* rank dims (NULL when rank == 0) */
  uint64_t numel;
  const char* axes;          /* "batch,seq,hidden", or "" when the tensor has no axis names */
  size_t axes_length;
  size_t attr_count;         /* see ds_record_attr */
  int32_t encoding;          /* DS_ENCODING_* */
  uint32_t encoding_axis;
  size_t scale_count;
  const double* scales;
  const int64_t* zero_points;
  uint64_t offset;           /* of the record in the file */
  uint64_t size;             /* record_length */
  uint64_t payload_offset;   /* 64-byte aligned */
  uint64_t payload_size;
} ds_record_info;

DS_C_API int ds_record_get_info(const ds_record* record, ds_record_info* out);
/* Attribute i in file order. Any out pointer may be NULL. */
DS_C_API int ds_record_attr(const ds_record* record, size_t i, const char** key, size_t* key_length,
                   const char** value, size_t* value_length);
/* Value of an attribute, NULL when absent. */
DS_C_API const char* ds_record_attr_get(const ds_record* record, const char* key);
/* The raw payload in place (a view into the reader's mapping, 64-byte aligned for mapped files):
 * TENSOR: the elements; SUMMARY: the encoded summary (docs/format.md §3.6). */
DS_C_API int ds_record_payload(const ds_record* record, const void** data, uint64_t* size);
/* Decodes (and dequantizes) elements [first, first + count) of a TENSOR record to f32 or f64.
 * DS_E_INVALID_ARGUMENT for a SUMMARY record or a range past numel. */
DS_C_API int ds_record_decode_f32(const ds_record* record, uint64_t first, float* out, size_t count);
DS_C_API int ds_record_decode_f64(const ds_record* record, uint64_t first, double* out, size_t count);
/* Statistics: computed from the values of a TENSOR record, stored ones for a SUMMARY record. */
DS_C_API int ds_record_stats(const ds_record* record, ds_tensor_stats* out);
/* A SUMMARY record's content (projection owned by the reader); DS_E_INVALID_ARGUMENT for a
 * TENSOR record. */
DS_C_API int ds_record_summary(const ds_record* record, ds_summary* out);

/* ---- compare (docs/compare.md) ------------------------------------------------------------ */

/* DS_VERDICT_NOTHING_COMPARED: no pair was compared (dumps without tensors, a filter or name map
 * that paired nothing, every pair skipped); not a pass. */
enum {
  DS_VERDICT_PASS = 0,
  DS_VERDICT_DIVERGED = 1,
  DS_VERDICT_SILENT_FAILURE = 2,
  DS_VERDICT_NOTHING_COMPARED = 3
};

/* Compares a candidate run against a reference run with the engine of `driftscope compare`.
 * options_json: NULL, "" or a JSON object whose keys mirror the command's options
 * (docs/c-api.md: "min_sqnr", "atol", "policy", "map_a", "stop_at_first", "format", ...); an
 * unknown key or a mistyped value is DS_E_INVALID_ARGUMENT naming it.
 * Returns the verdict (DS_VERDICT_*, >= 0) or a negative status when the request failed (a file
 * that cannot be read, a bad policy). When `report` is not NULL it receives the report (JSON per
 * docs/report-schema.json unless options say "format": "text", "markdown", "html" (the
 * self-contained page of `compare --html`) or "model_explorer" (node data)), a NUL-terminated
 * string the caller releases with ds_string_free; report_length (may be NULL) its length. */
DS_C_API int ds_compare(const char* reference_path, const char* candidate_path, const char* options_json,
               char** report, size_t* report_length);
/* Releases a string the library allocated for the caller (ds_compare's report). NULL is a no-op. */
DS_C_API void ds_string_free(char* s);

/* ---- import and export (docs/c-api.md; the engine of `driftscope import` / `export`) ------- */

enum { DS_FORMAT_AUTO = 0, DS_FORMAT_NPZ = 1, DS_FORMAT_NPY = 2, DS_FORMAT_SAFETENSORS = 3 };

typedef struct ds_import_options {
  size_t struct_size;     /* sizeof(ds_import_options), set by ds_import_options_init */
  int32_t format;         /* DS_FORMAT_*; AUTO (default): by content, then by extension */
  const char* filter;     /* NULL or "": import every tensor */
  const ds_kv* metadata;  /* run metadata; replaces "source", "source_format" and safetensors'
                             "__metadata__" entries of the same key */
  size_t metadata_count;
  int32_t fixed_salt;     /* 1: use `salt` instead of a random one */
  uint64_t salt;
} ds_import_options;

DS_C_API void ds_import_options_init(ds_import_options* options);

typedef struct ds_import_result {
  int32_t format;          /* DS_FORMAT_* that was read */
  uint64_t written;        /* tensors recorded */
  uint64_t filtered;       /* tensors the filter refused */
  uint64_t payload_bytes;  /* element bytes recorded */
  uint64_t skipped;        /* npz members skipped because they are not .npy arrays */
} ds_import_result;

/* Converts an .npz, .npy or .safetensors file into the dump out_path (replaced if it exists).
 * The input is hostile: DS_E_BAD_NPZ / DS_E_BAD_SAFETENSORS name the member or tensor, the field
 * and the offset; a FIFO or other non-regular input is DS_E_IO (never waited on). On any failure
 * out_path is not created and no temporary file is left. options and result may be NULL. */
DS_C_API int ds_import(const char* in_path, const char* out_path, const ds_import_options* options,
              ds_import_result* result);

typedef struct ds_export_options {
  size_t struct_size;     /* sizeof(ds_export_options), set by ds_export_options_init */
  int32_t format;         /* DS_FORMAT_NPZ or _SAFETENSORS; AUTO (default): .safetensors by
                             out_path's extension, else npz */
  const char* filter;     /* NULL or "": every tensor record */
  int32_t compress;       /* 1: deflate npz members (numpy.savez_compressed) */
  int32_t raw_quantized;  /* 1: quantized tensors as their integer codes, not dequantized */
} ds_export_options;

DS_C_API void ds_export_options_init(ds_export_options* options);

typedef struct ds_export_result {
  int32_t format;              /* DS_FORMAT_* written */
  uint64_t written;            /* arrays / tensors in the file */
  uint64_t widened;            /* bf16/fp8 tensors written as float32 (npz has no such dtype) */
  uint64_t dequantized;        /* quantized tensors written as float32 values */
  uint64_t summaries_skipped;  /* light-mode records (no values) */
  uint64_t duplicates_skipped; /* records whose key repeats an earlier one (docs/cli.md) */
} ds_export_result;

/* Writes the tensor records of the dump in_path to out_path in execution order, with the keys
 * docs/cli.md (export) defines. A name holding NUL cannot be an npz member name:
 * DS_E_UNSUPPORTED naming the record. out_path naming the input is DS_E_INVALID_ARGUMENT. On any
 * failure out_path is not created and no temporary file is left. options and result may be
 * NULL. */
DS_C_API int ds_export(const char* in_path, const char* out_path, const ds_export_options* options,
              ds_export_result* result);

/* ---- reference weights: the hash initialiser (docs/references.md) ------------------------ */

enum { DS_HASH_UNIFORM = 0, DS_HASH_NORMAL = 1 };

/* Fills out[0 .. count-1] with elements first .. first+count-1 (flat row-major index) of the
 * tensor `name` (name_len bytes, any bytes; NUL allowed) drawn by the hash initialiser with
 * distribution DS_HASH_UNIFORM or DS_HASH_NORMAL, mean 0 and standard deviation std_dev, key
 * `seed`. The same bits as driftscope::reference::hash_fill, driftscope.reference.hash_tensor and
 * org.driftscope.tdump.HashInit. DS_E_INVALID_ARGUMENT for a NULL pointer with count > 0, a
 * negative or non-finite std_dev or an unknown distribution. */
DS_C_API int ds_hash_fill_f32(const char* name, size_t name_len, int32_t distribution, double std_dev,
                     uint64_t seed, uint64_t first, float* out, size_t count);
DS_C_API int ds_hash_fill_f64(const char* name, size_t name_len, int32_t distribution, double std_dev,
                     uint64_t seed, uint64_t first, double* out, size_t count);
/* Integer inputs: out[i] = low + (draw i mod (high - low)); needs low < high, width fits int64. */
DS_C_API int ds_hash_fill_i64(const char* name, size_t name_len, int64_t low, int64_t high, uint64_t seed,
                     uint64_t first, int64_t* out, size_t count);

#ifdef __cplusplus
}
#endif
#endif /* DRIFTSCOPE_H_ */
