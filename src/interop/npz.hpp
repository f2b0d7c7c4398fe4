// NumPy .npy arrays and .npz archives (a zip of .npy members), read as hostile input and written
// so that numpy.load opens them.
//
// Reading trusts nothing: no pickle (object arrays are refused; numpy's own allow_pickle=False
// default), header sizes bounded, every size and offset checked with overflow-checked arithmetic
// against the archive before use, members stored or deflated only (inflated with zlib, checked
// against their CRC-32 and against deflate's largest possible expansion), no overlapping members.
// Failures are Errc::bad_npz with a message naming the member and the field, and the offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "driftscope/dtype.hpp"
#include "driftscope/error.hpp"

namespace driftscope::interop {

// Largest .npy header accepted (numpy writes a few hundred bytes; structured dtypes, which are
// refused anyway, are what makes them long).
inline constexpr uint64_t kMaxNpyHeader = 65536;
// zlib's deflate cannot expand more than 1032:1 (RFC 1951 max match 258 bytes per 2 bits); a
// member claiming more is lying, and we refuse it before allocating for it.
inline constexpr uint64_t kMaxDeflateRatio = 1032;

// An array ready for the Writer: elements in C order, little-endian.
struct NpyArray {
  DType dtype = DType::f32;
  std::vector<uint64_t> shape;
  std::span<const std::byte> data;  // into the caller's bytes, or into `storage`
  std::vector<std::byte> storage;   // owns `data` when it was inflated, byte-swapped or transposed
  std::string descr;                // the numpy descr as found ("<f4", ">i8", "|b1")
};

// Parses a whole .npy image. `what` names it in messages (a member name or a path).
Result<NpyArray> parse_npy(std::span<const std::byte> bytes, std::string_view what);
// Same, taking ownership of `owned` (inflated member bytes) so the array may point into it.
Result<NpyArray> parse_npy(std::vector<std::byte>&& owned, std::string_view what);

// The numpy descr for a TDUMP dtype ("<f4"); empty for dtypes numpy lacks (bf16, fp8).
std::string_view npy_descr(DType t) noexcept;
// The .npy header (magic, version, dict, padding to a multiple of 64, final '\n').
std::string npy_header(std::string_view descr, const std::vector<uint64_t>& shape);

struct ZipMember {
  std::string name;              // as stored in the archive
  uint64_t local_offset = 0;     // of the local file header
  uint64_t data_offset = 0;      // of the (compressed) data
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint32_t crc32 = 0;
  uint16_t method = 0;           // 0 stored, 8 deflate
};

class ZipReader {
 public:
  // Validates the end records, the whole central directory and every local header.
  static Result<ZipReader> open(std::span<const std::byte> archive);
  // Members in central-directory order (the order numpy.savez wrote them).
  const std::vector<ZipMember>& members() const { return members_; }
  // The member's bytes, CRC-checked: a view into the archive when stored, `out` when deflated.
  Result<std::span<const std::byte>> read(const ZipMember& m, std::vector<std::byte>& out) const;

 private:
  std::span<const std::byte> bytes_;
  std::vector<ZipMember> members_;
};

// Streams members into a zip (ZIP64 records where sizes or offsets need them), as numpy.savez /
// savez_compressed would. Each member: begin(), any number of write(), end().
class ZipWriter {
 public:
  static Result<std::unique_ptr<ZipWriter>> create(const std::string& path, bool deflate);
  ~ZipWriter();
  ZipWriter(const ZipWriter&) = delete;
  ZipWriter& operator=(const ZipWriter&) = delete;

  // `size` is the member's exact uncompressed size (used to decide on ZIP64 up front). A name
  // holding NUL (zipfile, hence numpy.load, cuts names there) or longer than 65535 bytes is
  // invalid_argument.
  Result<void> begin(std::string_view name, uint64_t size);
  Result<void> write(std::span<const std::byte> data);
  Result<void> end();
  // Writes the central directory and closes the file.
  Result<void> finish();

 private:
  ZipWriter() = default;
  Result<void> put(const void* data, size_t n);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace driftscope::interop
