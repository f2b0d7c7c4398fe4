// TDUMP reader (docs/format.md §4): validates every field before use, recovers the complete
// records before a torn tail, and reports corruption by code, offset and tensor name.
#include "driftscope/reader.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <variant>

#include <fmt/format.h>

#include "common/bytes.hpp"
#include "common/crc32.hpp"
#include "common/file.hpp"
#include "driftscope/limits.hpp"
#include "format/codec.hpp"
#include "format/index.hpp"
#include "format/layout.hpp"

namespace driftscope {

using namespace detail;

std::string_view file_state_name(FileState s) noexcept {
  switch (s) {
    case FileState::clean: return "clean";
    case FileState::unfinished: return "unfinished";
    case FileState::cut: return "cut";
    case FileState::corrupt: return "corrupt";
  }
  return "invalid";
}

std::string_view FileHeader::get(std::string_view key) const {
  for (const auto& [k, v] : metadata)
    if (k == key) return v;
  return {};
}

namespace {

// Index of the first non-zero byte, or n.
uint64_t first_nonzero(const std::byte* p, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i)
    if (p[i] != std::byte{0}) return i;
  return n;
}
bool all_zero(const std::byte* p, uint64_t n) { return first_nonzero(p, n) == n; }

// Why a record could not be accepted: either the file ends inside it (a torn tail, not an
// error) or it is damaged.
struct Cut {};
using Outcome = std::variant<std::monostate, Cut, Error>;

struct Parsed {
  Frame frame;
  uint64_t meta_off = 0;
  uint64_t payload_off = 0;
};

}  // namespace

struct Reader::Impl {
  MappedFile map;                       // empty for from_memory
  std::span<const std::byte> bytes;
  OpenOptions opt;
  FileHeader header;
  Integrity integrity;
  std::vector<Record> records;
  IndexView index;

  mutable std::once_flag lookup_once;
  mutable std::unordered_multimap<std::string_view, size_t> by_name;

  // Checks of §3.1 steps 1–3 on the frame at `pos`. Sets `parsed` when the frame is sound.
  Outcome check_frame(uint64_t pos, Parsed& parsed) const {
    const uint64_t size = bytes.size();
    if (size - pos < kFrameSize) return Cut{};
    const std::byte* p = bytes.data() + pos;
    bool magic_ok = std::memcmp(p, kRecordMagic.data(), 4) == 0;
    uint32_t stored_crc = load_le<uint32_t>(p + frm::frame_crc);
    uint32_t crc = crc32(0, p, frm::frame_crc);
    if (!magic_ok || crc != stored_crc) {
      // A writer killed mid-record may leave a short or zero-filled tail (file systems extend
      // files with zeros): that is a cut. Anything else is damage.
      if (all_zero(p, size - pos)) return Cut{};
      if (!magic_ok)
        return make_error(Errc::bad_record_magic, "record magic is not 8A 52 45 43", pos);
      return make_error(Errc::bad_frame_checksum,
                        fmt::format("record frame_crc is 0x{:08x}, computed 0x{:08x}", stored_crc, crc), pos);
    }
    Frame f = load_frame(p);
    if (f.salt != header.salt)
      return make_error(Errc::salt_mismatch,
                        fmt::format("record salt 0x{:016x} differs from the file's 0x{:016x} (record from another file)",
                                    f.salt, header.salt), pos + frm::salt);
    if (f.reserved != 0) return make_error(Errc::reserved_nonzero, "record frame reserved field is not zero", pos + frm::reserved);
    if (f.flags & ~kFlagSkippable)
      return make_error(Errc::reserved_nonzero, fmt::format("record flags 0x{:04x} use reserved bits", f.flags), pos + frm::flags);
    if (f.meta_length > limits::kMaxMetaLength)
      return make_error(Errc::limit_exceeded, fmt::format("meta_length is {}, allowed at most {}", f.meta_length,
                                                          limits::kMaxMetaLength), pos + frm::meta_length);
    if (f.payload_length > limits::kMaxPayloadLength)
      return make_error(Errc::limit_exceeded, fmt::format("payload_length is {}, allowed at most {}", f.payload_length,
                                                          limits::kMaxPayloadLength), pos + frm::payload_length);
    uint64_t expect = record_length_for(f.meta_length, f.payload_length);
    if (f.record_length != expect)
      return make_error(Errc::length_mismatch,
                        fmt::format("record_length is {}, expected {} for meta_length {} and payload_length {}",
                                    f.record_length, expect, f.meta_length, f.payload_length), pos + frm::record_length);
    if (f.record_length > size - pos) return Cut{};
    parsed.frame = f;
    parsed.meta_off = pos + kFrameSize;
    parsed.payload_off = pos + payload_start(f.meta_length);
    return std::monostate{};
  }

  uint32_t record_crc(uint64_t pos, const Frame& f) const {
    const std::byte* p = bytes.data() + pos;
    uint32_t crc = crc32(0, p, frm::record_crc);
    crc = crc32(crc, p + kFrameSize, f.meta_length);
    return crc32(crc, p + payload_start(f.meta_length), f.payload_length);
  }

  // §3.1 step 4 and the kind-specific rules. `verify_crc` false skips the payload checksum.
  Outcome check_body(uint64_t pos, const Parsed& ps, bool verify_crc, Record* out, std::string* name) const {
    const Frame& f = ps.frame;
    const std::byte* p = bytes.data() + pos;
    if (verify_crc) {
      uint32_t c = record_crc(pos, f);
      if (c != f.record_crc) {
        // Nothing after it: what a crash mid-payload leaves (the frame was written first).
        if (pos + f.record_length == bytes.size()) return Cut{};
        return make_error(Errc::bad_record_checksum,
                          fmt::format("record_crc is 0x{:08x}, computed 0x{:08x}", f.record_crc, c), pos + frm::record_crc);
      }
    }
    uint64_t meta_end = kFrameSize + f.meta_length;
    uint64_t pstart = payload_start(f.meta_length);
    // Reported at the first offending byte (docs/format.md §4).
    if (uint64_t i = first_nonzero(p + meta_end, pstart - meta_end); i != pstart - meta_end)
      return make_error(Errc::nonzero_padding, "padding after the record meta is not zero", pos + meta_end + i);
    uint64_t tail = pstart + f.payload_length;
    if (uint64_t i = first_nonzero(p + tail, f.record_length - tail); i != f.record_length - tail)
      return make_error(Errc::nonzero_padding, "padding after the payload is not zero", pos + tail + i);
    if (f.kind == kKindTensor || f.kind == kKindSummary) {
      auto info = decode_tensor_meta(bytes.subspan(ps.meta_off, f.meta_length), ps.meta_off, name);
      if (!info) return std::move(info).error();
      auto payload = bytes.subspan(ps.payload_off, f.payload_length);
      if (out) {
        out->kind = static_cast<RecordKind>(f.kind);
        out->offset = pos;
        out->size = f.record_length;
        out->payload_offset = ps.payload_off;
        out->payload = payload;
      }
      if (f.kind == kKindTensor) {
        auto want = tensor_payload_size(*info, ps.meta_off);
        if (!want) return std::move(want).error();
        if (*want != f.payload_length)
          return make_error(Errc::length_mismatch,
                            fmt::format("payload_length of '{}' is {}, but shape and dtype need {}", info->name,
                                        f.payload_length, *want), pos + frm::payload_length);
        if (info->dtype == DType::boolean)
          for (uint64_t i = 0; i < payload.size(); ++i)
            if (static_cast<uint8_t>(payload[i]) > 1)
              return make_error(Errc::bad_value, fmt::format("bool element {} of '{}' is {}", i, info->name,
                                                             static_cast<unsigned>(payload[i])), ps.payload_off + i);
      } else {
        auto s = decode_summary_payload(payload, ps.payload_off);
        if (!s) return std::move(s).error();
        if (s->stats.count != info->numel())
          return make_error(Errc::bad_value, fmt::format("summary of '{}' counts {} elements, its shape has {}",
                                                         info->name, s->stats.count, info->numel()), ps.payload_off);
        if (out) out->summary = std::move(*s);
      }
      if (out) out->info = std::move(*info);
    }
    return std::monostate{};
  }

  void set_corrupt(Error e, std::string name) {
    if (integrity.corruption) return;
    integrity.state = FileState::corrupt;
    integrity.corruption = std::move(e);
    integrity.corrupt_name = std::move(name);
  }

  // Scans every record from the header on (§4).
  void scan() {
    const uint64_t size = bytes.size();
    uint64_t pos = header.header_length;
    bool saw_end = false;
    uint64_t index_pos = kNoOffset;
    integrity.valid_end = integrity.data_end = pos;
    while (pos < size) {
      if (saw_end) {
        set_corrupt(make_error(Errc::record_after_end, fmt::format("{} bytes follow the END record", size - pos), pos), {});
        break;
      }
      Parsed ps;
      Outcome o = check_frame(pos, ps);
      bool last = std::holds_alternative<std::monostate>(o) && pos + ps.frame.record_length == size;
      std::string name;
      Record rec;
      if (std::holds_alternative<std::monostate>(o)) {
        // In frames mode the payload checksum is still checked for the last record: it is the
        // one a crash may have torn.
        bool verify = opt.verify == Verify::full || last;
        o = check_body(pos, ps, verify, &rec, &name);
      }
      if (std::holds_alternative<Cut>(o)) {
        integrity.state = FileState::cut;
        integrity.cut_offset = pos;
        integrity.discarded_bytes = size - pos;
        break;
      }
      if (auto* e = std::get_if<Error>(&o)) {
        set_corrupt(std::move(*e), std::move(name));
        if (!opt.resync) break;
        uint64_t next = resync_from(pos + 64);
        integrity.warnings.push_back(make_error(Errc::bad_record_magic,
            fmt::format("skipped {} damaged bytes while resynchronising", next - pos), pos));
        pos = next;
        continue;
      }
      const Frame& f = ps.frame;
      const bool damaged_before = integrity.corruption.has_value();
      bool failed = false;
      auto fail = [&](Error e) {
        failed = true;
        set_corrupt(std::move(e), {});
      };
      switch (f.kind) {
        case kKindTensor:
        case kKindSummary:
          records.push_back(std::move(rec));
          index_pos = kNoOffset;
          integrity.data_end = pos + f.record_length;
          break;
        case kKindIndex:
          index_pos = pos;
          break;
        case kKindEnd: {
          const std::byte* m = bytes.data() + ps.meta_off;
          if (f.meta_length != kEndMetaSize || f.payload_length != 0) {
            fail(make_error(Errc::length_mismatch, "END record must have a 16-byte meta and no payload", pos));
            break;
          }
          uint64_t idx = load_le<uint64_t>(m), count = load_le<uint64_t>(m + 8);
          // After a resynchronisation records are missing, so the counts cannot agree.
          if (!damaged_before && (idx != index_pos || count != records.size())) {
            fail(make_error(Errc::bad_index,
                fmt::format("END names index at {} with {} records; the scan found {} and {} records",
                            idx, count, index_pos == kNoOffset ? std::string("none") : std::to_string(index_pos),
                            records.size()), pos));
            break;
          }
          saw_end = true;
          break;
        }
        default:
          if (!(f.flags & kFlagSkippable)) {
            fail(make_error(Errc::unknown_record_kind,
                fmt::format("record kind {} is unknown and not marked skippable", f.kind), pos + frm::kind));
          } else {
            integrity.data_end = pos + f.record_length;
          }
      }
      if (failed) break;
      pos += f.record_length;
      integrity.valid_end = pos;
    }
    if (integrity.state != FileState::corrupt && integrity.state != FileState::cut)
      integrity.state = saw_end ? FileState::clean : FileState::unfinished;
    integrity.checksums_verified = opt.verify == Verify::full;
  }

  // Next offset (multiple of 64) holding a valid frame, or the end of the file.
  uint64_t resync_from(uint64_t pos) const {
    for (; pos + kFrameSize <= bytes.size(); pos += 64) {
      Parsed ps;
      if (std::holds_alternative<std::monostate>(check_frame(pos, ps))) return pos;
    }
    return bytes.size();
  }

  // O(1) open of a cleanly closed file: END (last 64 bytes) -> INDEX -> records (§3.5).
  enum class IndexOutcome { used, absent, disagrees };
  IndexOutcome open_from_index() {
    bool footer_valid = false;
    bool ok = try_index(footer_valid);
    if (ok) return IndexOutcome::used;
    return footer_valid ? IndexOutcome::disagrees : IndexOutcome::absent;
  }

  // `footer_valid` is set once END and INDEX passed every check of their own; a failure after
  // that means the index disagrees with the records it describes.
  bool try_index(bool& footer_valid) {
    const uint64_t size = bytes.size();
    if (size < header.header_length + 128) return false;
    uint64_t end_pos = size - 64;
    Parsed eps;
    if (!std::holds_alternative<std::monostate>(check_frame(end_pos, eps)) || eps.frame.kind != kKindEnd ||
        eps.frame.meta_length != kEndMetaSize || eps.frame.payload_length != 0)
      return false;
    if (!std::holds_alternative<std::monostate>(check_body(end_pos, eps, true, nullptr, nullptr))) return false;
    const std::byte* em = bytes.data() + eps.meta_off;
    uint64_t index_pos = load_le<uint64_t>(em), count = load_le<uint64_t>(em + 8);
    if (index_pos < header.header_length || index_pos >= end_pos) return false;
    Parsed ips;
    if (!std::holds_alternative<std::monostate>(check_frame(index_pos, ips)) || ips.frame.kind != kKindIndex ||
        index_pos + ips.frame.record_length != end_pos || ips.frame.meta_length != kIndexMetaSize)
      return false;
    if (!std::holds_alternative<std::monostate>(check_body(index_pos, ips, true, nullptr, nullptr))) return false;
    const std::byte* im = bytes.data() + ips.meta_off;
    uint64_t n = load_le<uint64_t>(im), m = load_le<uint64_t>(im + 8);
    uint32_t hash = load_le<uint32_t>(im + 16), reserved = load_le<uint32_t>(im + 20);
    if (hash != kHashFnv1a64 || reserved != 0 || n != count || n > limits::kMaxIndexEntries ||
        m != index_slot_count(n) || ips.frame.payload_length != n * kIndexEntrySize + m * 4)
      return false;
    const std::byte* ip = bytes.data() + ips.payload_off;
    IndexView view(ip, n, ip + n * kIndexEntrySize, m);
    footer_valid = true;
    records.reserve(static_cast<size_t>(n));
    uint64_t pos = header.header_length;
    for (uint64_t i = 0; i < n; ++i) {
      IndexEntry e = view.entry(i);
      if (e.offset != pos) return false;  // records tile the file: the index must follow them
      Parsed ps;
      if (!std::holds_alternative<std::monostate>(check_frame(pos, ps))) return false;
      if (ps.frame.kind != e.kind) return false;
      Record rec;
      std::string name;
      Outcome o = check_body(pos, ps, opt.verify == Verify::full, &rec, &name);
      if (!std::holds_alternative<std::monostate>(o)) return false;
      if (fnv1a64(rec.info.name) != e.name_hash || rec.info.occurrence != e.occurrence) return false;
      records.push_back(std::move(rec));
      pos += ps.frame.record_length;
    }
    if (pos != index_pos) return false;  // an unindexed record between the last entry and INDEX
    index = view;
    integrity.state = FileState::clean;
    integrity.valid_end = size;
    integrity.data_end = index_pos;
    integrity.index_used = true;
    integrity.checksums_verified = opt.verify == Verify::full;
    return true;
  }

  void check_duplicates() {
    std::unordered_map<std::string, size_t> seen;
    for (size_t i = 0; i < records.size(); ++i) {
      const TensorInfo& t = records[i].info;
      std::string key = fmt::format("{}\x1f{}\x1f{}\x1f{}", t.name, static_cast<int>(t.role), t.role_index, t.occurrence);
      if (!seen.emplace(std::move(key), i).second)
        integrity.warnings.push_back(make_error(Errc::duplicate_tensor,
            fmt::format("tensor '{}' ({} {}, occurrence {}) appears again; the first one is used", t.name,
                        role_name(t.role), t.role_index, t.occurrence), records[i].offset));
    }
  }

  Result<void> load() {
    auto h = decode_header(bytes);
    if (!h) return std::move(h).error();
    header = std::move(*h);
    integrity.file_size = bytes.size();
    IndexOutcome outcome = IndexOutcome::absent;
    if (opt.use_index) {
      outcome = open_from_index();
      if (outcome != IndexOutcome::used) {
        records.clear();
        integrity = Integrity{};
        integrity.file_size = bytes.size();
      }
    }
    if (outcome != IndexOutcome::used) {
      scan();
      integrity.cut_offset = integrity.state == FileState::cut ? integrity.cut_offset : kNoOffset;
      // A sound footer that does not describe the records is itself damage (§3.4), even when
      // every record is fine; set_corrupt keeps an earlier, more specific failure.
      if (outcome == IndexOutcome::disagrees)
        set_corrupt(make_error(Errc::bad_index, "the footer index disagrees with a scan of the records",
                               bytes.size() - 64), {});
    }
    check_duplicates();
    return {};
  }
};

Reader::Reader() : impl_(std::make_unique<Impl>()) {}
Reader::Reader(Reader&&) noexcept = default;
Reader& Reader::operator=(Reader&&) noexcept = default;
Reader::~Reader() = default;

Result<Reader> Reader::open(const std::string& path, const OpenOptions& options) {
  auto m = MappedFile::open(path);
  if (!m) return std::move(m).error();
  Reader r;
  r.impl_->map = std::move(*m);
  r.impl_->bytes = r.impl_->map.bytes();
  r.impl_->opt = options;
  auto loaded = r.impl_->load();
  // A file cut under us reads zeros past its new end: that, not what the zeros look like, is
  // the error to report (also when the header itself was lost).
  DRIFTSCOPE_TRY(r.impl_->map.check_unchanged());
  if (!loaded) {
    Error e = std::move(loaded).error();
    e.message = fmt::format("{}: {}", path, e.message);
    return e;
  }
  return r;
}

Result<void> Reader::check_unchanged() const { return impl_->map.check_unchanged(); }

Result<Reader> Reader::from_memory(std::span<const std::byte> bytes, const OpenOptions& options) {
  Reader r;
  r.impl_->bytes = bytes;
  r.impl_->opt = options;
  DRIFTSCOPE_TRY(r.impl_->load());
  return r;
}

const FileHeader& Reader::header() const { return impl_->header; }
const Integrity& Reader::integrity() const { return impl_->integrity; }
std::span<const Record> Reader::records() const { return impl_->records; }
std::span<const std::byte> Reader::bytes() const { return impl_->bytes; }

const Record* Reader::find(std::string_view name, uint32_t occurrence, Role role, uint16_t role_index) const {
  auto matches = [&](const Record& r) {
    return r.info.name == name && r.info.occurrence == occurrence && r.info.role == role &&
           r.info.role_index == role_index;
  };
  const Impl& im = *impl_;
  if (im.integrity.index_used) {
    int64_t e = im.index.probe(fnv1a64(name), occurrence,
                               [&](uint64_t i) { return matches(im.records[static_cast<size_t>(i)]); });
    return e < 0 ? nullptr : &im.records[static_cast<size_t>(e)];
  }
  std::call_once(im.lookup_once, [&] {
    im.by_name.reserve(im.records.size());
    for (size_t i = 0; i < im.records.size(); ++i) im.by_name.emplace(im.records[i].info.name, i);
  });
  const Record* best = nullptr;
  auto [b, e] = im.by_name.equal_range(name);
  for (auto it = b; it != e; ++it) {
    const Record& r = im.records[it->second];
    if (matches(r) && (!best || r.offset < best->offset)) best = &r;
  }
  return best;
}

std::vector<const Record*> Reader::find_all(std::string_view name) const {
  std::vector<const Record*> out;
  for (const Record& r : impl_->records)
    if (r.info.name == name) out.push_back(&r);
  return out;
}

Result<void> Reader::verify_payload(const Record& r) const {
  const std::byte* p = impl_->bytes.data() + r.offset;
  Frame f = load_frame(p);
  uint32_t c = impl_->record_crc(r.offset, f);
  if (c != f.record_crc)
    return make_error(Errc::bad_record_checksum,
                      fmt::format("record_crc of '{}' is 0x{:08x}, computed 0x{:08x}", r.info.name, f.record_crc, c),
                      r.offset + frm::record_crc);
  return {};
}

}  // namespace driftscope
