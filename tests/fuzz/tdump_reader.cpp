// libFuzzer target for the TDUMP reader: open in every mode, iterate, look up, verify and decode
// every record, touching every payload byte. Any crash, hang, leak or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "driftscope/decode.hpp"
#include "driftscope/reader.hpp"
#include "common/bytes.hpp"
#include "common/crc32.hpp"

namespace {

uint64_t le(const std::vector<std::byte>& b, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(b[at + i]) << (8 * i);
  return v;
}

void put32(std::vector<std::byte>& b, size_t at, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) b[at + i] = static_cast<std::byte>(v >> (8 * i));
}

// The input with every CRC made to match, so that mutations reach the checks behind the
// checksums (a crafted INDEX slot table once crashed lookups because the fuzzer never got a
// CRC-valid INDEX past the frame check).
std::vector<std::byte> with_crcs_fixed(std::span<const std::byte> in) {
  using namespace driftscope::detail;
  std::vector<std::byte> b(in.begin(), in.end());
  if (b.size() < 64) return b;
  const uint64_t meta_len = le(b, 36, 4);
  if (64 + meta_len <= b.size()) put32(b, 60, crc32(crc32(0, b.data(), 60), b.data() + 64, meta_len));
  for (uint64_t pos = align64(le(b, 32, 4)); pos >= 64 && pos + 48 <= b.size();) {
    put32(b, pos + 40, crc32(0, b.data() + pos, 40));
    const uint64_t len = le(b, pos + 8, 8), plen = le(b, pos + 16, 8), mlen = le(b, pos + 24, 4);
    const uint64_t pstart = align64(48 + mlen);
    if (mlen > b.size() || plen > b.size() || pos + pstart + plen > b.size()) break;
    uint32_t c = crc32(0, b.data() + pos, 44);
    c = crc32(c, b.data() + pos + 48, mlen);
    put32(b, pos + 44, crc32(c, b.data() + pos + pstart, plen));
    if (len < 64 || len % 64 != 0 || len > b.size() - pos) break;
    pos += len;
  }
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace driftscope;
  const std::vector<std::byte> fixed =
      with_crcs_fixed({reinterpret_cast<const std::byte*>(data), size});
  for (int mode = 0; mode < 4; ++mode) {
    std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    if (mode == 3) bytes = fixed;
    OpenOptions o;
    o.use_index = mode == 0 || mode == 3;
    o.verify = mode == 1 ? Verify::frames : Verify::full;
    o.resync = mode == 2;
    auto r = Reader::from_memory(bytes, o);
    if (!r.ok()) {
      volatile size_t n = r.error().message.size();
      (void)n;
      continue;
    }
    volatile uint64_t sink = r->header().metadata.size();
    sink = sink + (r->find("no such tensor") != nullptr);
    for (const Record& rec : r->records()) {
      (void)r->verify_payload(rec);
      (void)r->find(rec.info.name, rec.info.occurrence, rec.info.role, rec.info.role_index);
      for (std::byte b : rec.payload) sink = sink + static_cast<uint64_t>(b);
      if (rec.kind != RecordKind::tensor) continue;
      uint64_t n = rec.info.numel();
      std::vector<double> chunk(64);
      for (uint64_t first = 0; first < n && first < 4096; first += chunk.size()) {
        size_t len = static_cast<size_t>(std::min<uint64_t>(chunk.size(), n - first));
        if (decode(rec.info, rec.payload, first, std::span<double>(chunk.data(), len)).ok())
          for (size_t i = 0; i < len; ++i) sink = sink + static_cast<uint64_t>(chunk[i] == chunk[i]);
      }
      (void)compute_stats(rec.info, rec.payload);
    }
    (void)sink;
  }
  return 0;
}
