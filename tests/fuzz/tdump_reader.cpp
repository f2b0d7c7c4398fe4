// libFuzzer target for the TDUMP reader: open in every mode, iterate, look up, verify and decode
// every record, touching every payload byte. Any crash, hang, leak or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "driftscope/decode.hpp"
#include "driftscope/reader.hpp"
#include "tdump_crcs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace driftscope;
  const std::vector<std::byte> fixed =
      ds_fuzz::with_crcs_fixed({reinterpret_cast<const std::byte*>(data), size});
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
