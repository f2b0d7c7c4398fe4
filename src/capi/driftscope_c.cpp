// C ABI: version, status codes, the thread-local last error, dtypes and tensor descriptors.
#include <cstring>
#include <limits>
#include <type_traits>

#include "capi/capi_internal.hpp"
#include "driftscope/dtype.hpp"
#include "driftscope/limits.hpp"

namespace driftscope::capi {
namespace {

struct LastError {
  int status = DS_OK;
  std::string message;
  uint64_t offset = DS_NO_OFFSET;
};

thread_local LastError t_last_error;

}  // namespace

void clear_error() noexcept {
  t_last_error.status = DS_OK;
  t_last_error.message.clear();  // keeps capacity: no allocation on the success path
  t_last_error.offset = DS_NO_OFFSET;
}

int fail(int status, std::string_view message) noexcept {
  t_last_error.status = status;
  t_last_error.offset = DS_NO_OFFSET;
  try {
    t_last_error.message.assign(message);
  } catch (...) {
    // Storing the message itself ran out of memory: keep the status, which is what matters.
    t_last_error.message.clear();
  }
  return status;
}

int fail(const Error& e) noexcept {
  // Errc values are the negated statuses by definition; a success code here is a library bug.
  int status = e.code == Errc::ok ? DS_E_INTERNAL : -static_cast<int>(e.code);
  fail(status, e.message);
  t_last_error.offset = e.offset;
  return status;
}

Result<void> check_struct_size(size_t given, size_t expected, const char* type) {
  if (given == expected) return {};
  if (given > expected)
    return make_error(Errc::unsupported,
                      std::string(type) + ".struct_size is " + std::to_string(given) +
                          " but this library knows " + std::to_string(expected) +
                          " bytes: the program was built against a newer driftscope.h");
  return make_error(Errc::invalid_argument,
                    std::string(type) + ".struct_size is " + std::to_string(given) +
                        ", expected " + std::to_string(expected) +
                        " (initialise it with its _init function)");
}

Result<void> check_struct_size(size_t given, size_t expected, std::initializer_list<size_t> earlier,
                               const char* type) {
  for (size_t e : earlier)
    if (given == e) return {};
  return check_struct_size(given, expected, type);
}

Result<TensorInfo> to_tensor_info(const ds_tensor_desc* desc) {
  if (!desc) return make_error(Errc::invalid_argument, "tensor descriptor is NULL");
  DRIFTSCOPE_TRY(check_struct_size(desc->struct_size, sizeof(ds_tensor_desc), "ds_tensor_desc"));
  if (!desc->name) return make_error(Errc::invalid_argument, "ds_tensor_desc.name is NULL");
  if (desc->role < DS_ROLE_OUTPUT || desc->role > DS_ROLE_OTHER)
    return make_error(Errc::bad_enum, "ds_tensor_desc.role is " + std::to_string(desc->role) +
                                          ", allowed 0 (output) ... 3 (other)");
  if (desc->dtype < 0 || desc->dtype > 0xFFFF || !dtype_valid(static_cast<uint16_t>(desc->dtype)))
    return make_error(Errc::bad_dtype, "ds_tensor_desc.dtype is " + std::to_string(desc->dtype) +
                                           ", allowed 1 ... 15 (docs/format.md §3.3.1)");
  if (desc->encoding < DS_ENCODING_RAW || desc->encoding > DS_ENCODING_AFFINE_CHANNEL)
    return make_error(Errc::bad_enum, "ds_tensor_desc.encoding is " +
                                          std::to_string(desc->encoding) + ", allowed 0 ... 2");
  if (desc->rank > limits::kMaxRank)
    return make_error(Errc::limit_exceeded, "ds_tensor_desc.rank is " +
                                                std::to_string(desc->rank) + ", allowed 0 ... " +
                                                std::to_string(limits::kMaxRank));
  if (desc->rank > 0 && !desc->shape)
    return make_error(Errc::invalid_argument, "ds_tensor_desc.shape is NULL with rank " +
                                                  std::to_string(desc->rank));
  if (desc->attr_count > limits::kMaxAttributes)
    return make_error(Errc::limit_exceeded, "ds_tensor_desc.attr_count is " +
                                                std::to_string(desc->attr_count) +
                                                ", allowed 0 ... " +
                                                std::to_string(limits::kMaxAttributes));
  if (desc->attr_count > 0 && !desc->attrs)
    return make_error(Errc::invalid_argument, "ds_tensor_desc.attrs is NULL with attr_count " +
                                                  std::to_string(desc->attr_count));
  // Each channel costs 16 bytes of record meta (f64 scale + i64 zero point, §3.3.2), and the
  // meta is at most 1 MiB (§6): a larger count can never be written, so refuse it before
  // allocating.
  constexpr size_t kMaxScales = limits::kMaxMetaLength / 16;
  if (desc->scale_count > kMaxScales)
    return make_error(Errc::limit_exceeded, "ds_tensor_desc.scale_count is " +
                                                std::to_string(desc->scale_count) +
                                                ", allowed 0 ... " + std::to_string(kMaxScales));
  if (desc->scale_count > 0 && !desc->scales)
    return make_error(Errc::invalid_argument, "ds_tensor_desc.scales is NULL with scale_count " +
                                                  std::to_string(desc->scale_count));

  TensorInfo info;
  info.name = desc->name;
  if (desc->op_type) info.op_type = desc->op_type;
  info.role = static_cast<Role>(desc->role);
  info.role_index = desc->role_index;
  info.exec_index = desc->exec_index;
  info.occurrence = desc->occurrence;
  info.dtype = static_cast<DType>(desc->dtype);
  if (desc->rank > 0) info.shape.assign(desc->shape, desc->shape + desc->rank);
  if (desc->axes && desc->axes[0] != '\0') {
    // Axis names are bounded by the axes field (§6); the split below allocates per comma.
    size_t len = std::strlen(desc->axes);
    if (len > limits::kMaxAxesLength)
      return make_error(Errc::limit_exceeded, "ds_tensor_desc.axes is " + std::to_string(len) +
                                                  " bytes, allowed 0 ... " +
                                                  std::to_string(limits::kMaxAxesLength));
    info.axes = split_axes(std::string_view(desc->axes, len));
  }
  info.attrs.reserve(desc->attr_count);
  for (size_t i = 0; i < desc->attr_count; ++i) {
    const ds_kv& kv = desc->attrs[i];
    if (!kv.key || !kv.value)
      return make_error(Errc::invalid_argument,
                        "ds_tensor_desc.attrs[" + std::to_string(i) + "] has a NULL key or value");
    info.attrs.emplace_back(kv.key, kv.value);
  }
  info.encoding.kind = static_cast<EncodingKind>(desc->encoding);
  info.encoding.axis = desc->encoding_axis;
  if (desc->scale_count > 0) {
    info.encoding.scales.assign(desc->scales, desc->scales + desc->scale_count);
    if (desc->zero_points)
      info.encoding.zero_points.assign(desc->zero_points, desc->zero_points + desc->scale_count);
    else
      info.encoding.zero_points.assign(desc->scale_count, 0);
  }
  return info;
}

}  // namespace driftscope::capi

using namespace driftscope;

// The C enums are the C++ codes; a renumbering on either side must fail to compile.
static_assert(DS_E_INVALID_ARGUMENT == -static_cast<int>(Errc::invalid_argument));
static_assert(DS_E_CLOSED == -static_cast<int>(Errc::closed));
static_assert(DS_E_TRUNCATED_HEADER == -static_cast<int>(Errc::truncated_header));
static_assert(DS_E_BAD_HEADER_CHECKSUM == -static_cast<int>(Errc::bad_header_checksum));
static_assert(DS_E_BAD_RECORD_MAGIC == -static_cast<int>(Errc::bad_record_magic));
static_assert(DS_E_BAD_INDEX == -static_cast<int>(Errc::bad_index));
static_assert(DS_E_RESERVED_NONZERO == -static_cast<int>(Errc::reserved_nonzero));
static_assert(DS_E_DUPLICATE_TENSOR == -static_cast<int>(Errc::duplicate_tensor));
static_assert(DS_E_BAD_SAFETENSORS == -static_cast<int>(Errc::bad_safetensors));
static_assert(DS_E_BAD_POLICY == -static_cast<int>(Errc::bad_policy));
static_assert(DS_DTYPE_F32 == static_cast<int>(DType::f32));
static_assert(DS_DTYPE_BOOL == static_cast<int>(DType::boolean));
static_assert(DS_DTYPE_U64 == static_cast<int>(DType::u64));
static_assert(DS_ROLE_OTHER == static_cast<int>(Role::other));
static_assert(DS_ENCODING_AFFINE_CHANNEL == static_cast<int>(EncodingKind::affine_channel));
static_assert(DS_SYNC_EVERY_BYTES == static_cast<int>(SyncPolicy::every_bytes));
static_assert(DS_WRITTEN == static_cast<int>(WriteStatus::written));
static_assert(DS_OVER_BUDGET == static_cast<int>(WriteStatus::over_budget));
static_assert(DS_STATE_CORRUPT == static_cast<int>(FileState::corrupt));
static_assert(DS_KIND_SUMMARY == static_cast<int>(RecordKind::summary));
static_assert(std::is_same_v<decltype(driftscope::kAutoIndex), const uint64_t> &&
              DS_AUTO_INDEX == driftscope::kAutoIndex && DS_AUTO_OCCURRENCE == kAutoOccurrence);
static_assert(DS_NO_OFFSET == kNoOffset);

extern "C" {

const char* ds_version(void) { return DRIFTSCOPE_VERSION; }

const char* ds_status_name(int status) {
  if (status == DS_E_OUT_OF_MEMORY) return "out_of_memory";
  if (status == DS_E_INTERNAL) return "internal";
  if (status > 0 || status < -0xFFFF) return "unknown";
  // errc_name returns literals of its switch, so data() is NUL-terminated and static.
  return errc_name(static_cast<Errc>(-status)).data();
}

const char* ds_last_error_message(void) { return capi::t_last_error.message.c_str(); }
int ds_last_error_code(void) { return capi::t_last_error.status; }
uint64_t ds_last_error_offset(void) { return capi::t_last_error.offset; }
void ds_clear_error(void) { capi::clear_error(); }

size_t ds_dtype_size(int32_t dtype) {
  if (dtype < 0 || dtype > 0xFFFF || !dtype_valid(static_cast<uint16_t>(dtype))) return 0;
  return dtype_size(static_cast<DType>(dtype));
}

const char* ds_dtype_name(int32_t dtype) {
  if (ds_dtype_size(dtype) == 0) return nullptr;
  return dtype_name(static_cast<DType>(dtype)).data();  // literals: NUL-terminated, static
}

int32_t ds_dtype_parse(const char* name) {
  if (!name) return 0;
  auto t = parse_dtype(name);
  return t ? static_cast<int32_t>(*t) : 0;
}

void ds_tensor_desc_init(ds_tensor_desc* desc) {
  if (!desc) return;
  *desc = ds_tensor_desc{};
  desc->struct_size = sizeof(ds_tensor_desc);
  desc->role = DS_ROLE_OUTPUT;
  desc->exec_index = DS_AUTO_INDEX;
  desc->occurrence = DS_AUTO_OCCURRENCE;
  desc->dtype = DS_DTYPE_F32;
  desc->encoding = DS_ENCODING_RAW;
}

}  // extern "C"
