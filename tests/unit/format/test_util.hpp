// Helpers shared by the format tests: deterministic tensors, raw record construction with
// correct checksums (to reach the check *after* the CRC), scratch files.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "common/bytes.hpp"
#include "common/crc32.hpp"
#include "driftscope/reader.hpp"
#include "driftscope/writer.hpp"
#include "format/layout.hpp"

namespace dstest {

inline std::string scratch_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / "driftscope-tests";
  std::filesystem::create_directories(dir);
  return (dir / (name + "-" + std::to_string(::getpid()))).string();
}

inline std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  std::memcpy(out.data(), c.data(), c.size());
  return out;
}

inline void write_file(const std::string& path, std::span<const std::byte> bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<float> ramp(size_t n, float scale = 1.0f, float offset = 0.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>(i);
  return v;
}

template <class T>
std::span<const std::byte> as_bytes(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

inline driftscope::TensorInfo f32_info(std::string name, std::vector<uint64_t> shape) {
  driftscope::TensorInfo t;
  t.name = std::move(name);
  t.op_type = "Linear";
  t.dtype = driftscope::DType::f32;
  t.shape = std::move(shape);
  return t;
}

// Recomputes the header CRC after a test edited header bytes.
inline void refresh_header_crc(std::vector<std::byte>& f) {
  using namespace driftscope::detail;
  uint32_t meta_len = load_le<uint32_t>(f.data() + hdr::metadata_length);
  uint32_t crc = crc32(0, f.data(), hdr::crc);
  if (kFixedHeaderSize + meta_len <= f.size()) crc = crc32(crc, f.data() + kFixedHeaderSize, meta_len);
  store_le<uint32_t>(f.data() + hdr::crc, crc);
}

// Recomputes frame and record CRCs of the record at `pos` after a test edited it.
inline void refresh_record_crcs(std::vector<std::byte>& f, uint64_t pos) {
  using namespace driftscope::detail;
  std::byte* p = f.data() + pos;
  store_le<uint32_t>(p + frm::frame_crc, crc32(0, p, frm::frame_crc));
  Frame fr = load_frame(p);
  uint64_t ps = payload_start(fr.meta_length);
  uint32_t crc = crc32(0, p, frm::record_crc);
  if (pos + kFrameSize + fr.meta_length <= f.size()) crc = crc32(crc, p + kFrameSize, fr.meta_length);
  if (pos + ps + fr.payload_length <= f.size()) crc = crc32(crc, p + ps, fr.payload_length);
  store_le<uint32_t>(p + frm::record_crc, crc);
}

// A complete record built from raw parts, with valid CRCs.
inline std::vector<std::byte> raw_record(uint16_t kind, uint16_t flags, const std::string& meta,
                                         std::span<const std::byte> payload, uint64_t salt) {
  using namespace driftscope::detail;
  Frame fr;
  fr.kind = kind;
  fr.flags = flags;
  fr.meta_length = static_cast<uint32_t>(meta.size());
  fr.payload_length = payload.size();
  fr.record_length = record_length_for(meta.size(), payload.size());
  fr.salt = salt;
  std::vector<std::byte> r(fr.record_length);
  store_frame(fr, r.data());
  std::memcpy(r.data() + kFrameSize, meta.data(), meta.size());
  if (!payload.empty()) std::memcpy(r.data() + payload_start(meta.size()), payload.data(), payload.size());
  refresh_record_crcs(r, 0);
  return r;
}

}  // namespace dstest
