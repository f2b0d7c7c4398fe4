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
#include "common/out_file.hpp"
#include "driftscope/limits.hpp"
#include "format/codec.hpp"
#include "format/index.hpp"
#include "format/layout.hpp"
#include "format/record_crc.hpp"
#include "format/record_table.hpp"

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
  uint64_t i = 0;
  // Every record's padding is checked on open: eight bytes at a time up to the first non-zero word.
  for (uint64_t w; i + 8 <= n; i += 8) {
    std::memcpy(&w, p + i, 8);
    if (w != 0) break;
  }
  for (; i < n; ++i)
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
  // What the scan keeps of each valid TENSOR/SUMMARY record: 40 bytes, where a built Record
  // holds ~270 plus its strings (a million-record dump: 40 MB instead of 350 MB).
  struct Entry {
    uint64_t offset = 0;      // of the record frame
    uint64_t exec_index = 0;
    uint64_t name_hash = 0;   // fnv1a64 of the name: the footer index's and duplicates' key
    uint32_t occurrence = 0;
    uint16_t role_index = 0;
    uint8_t role = 0;
    uint8_t kind = 0;
  };
  std::vector<Entry> entries;
  // Some TENSOR/SUMMARY record carries an attribute that checks by axis name read (§3.3:
  // `axes_ops`, `norm_axes`, `softmax_axis`): without one, compare skips a pass that would decode
  // every record's meta again after the measuring pass let the pages go (issue 30 item 4).
  bool axes_attributes = false;

  // records(), built on first use from the entries (the file was checked by the scan).
  mutable std::once_flag records_once;
  mutable std::vector<Record> records;
  // find(): the first record of each identity (identity_table()), built on first use. Lookups
  // never walk the footer index's probe chains: its layout is fixed by the file's FNV-1a hashes,
  // which a file's author chooses (issue 23 item 4); the index is checked at open all the same.
  mutable std::once_flag lookup_once;
  mutable std::vector<uint64_t> by_identity;

  // Record i as check_body() built it during the scan; the frame and meta were checked then.
  Record decode(size_t i) const {
    Record r;
    const Entry& e = entries[i];
    const Frame f = load_frame(bytes.data() + e.offset);
    const uint64_t meta_off = e.offset + kFrameSize;
    const uint64_t payload_off = e.offset + payload_start(f.meta_length);
    r.kind = static_cast<RecordKind>(e.kind);
    r.offset = e.offset;
    r.size = f.record_length;
    r.payload_offset = payload_off;
    // A file truncated since the scan reads zeros (driftscope/file.hpp): then the record is an
    // empty tensor, consistent in itself, and check_unchanged() fails the result.
    auto changed = [&] {
      Record empty;
      empty.offset = e.offset;
      empty.info.shape = {0};
      return empty;
    };
    if (f.kind != e.kind || e.offset + f.record_length > bytes.size() ||
        meta_off + f.meta_length > bytes.size() || payload_off + f.payload_length > bytes.size())
      return changed();
    r.payload = bytes.subspan(payload_off, f.payload_length);
    if (!decode_tensor_meta_into(bytes.subspan(meta_off, f.meta_length), meta_off, r.info)) return changed();
    if (f.kind == kKindSummary) {
      auto sm = decode_summary_payload(r.payload, payload_off, r.info.numel());
      if (!sm) return changed();
      detail::ReaderAccess::set_summary(r, std::move(*sm));
    } else if (auto want = tensor_payload_size(r.info); !want || *want != f.payload_length) {
      return changed();
    }
    return r;
  }
  const std::vector<Record>& all() const {
    std::call_once(records_once, [&] {
      records.reserve(entries.size());
      for (size_t i = 0; i < entries.size(); ++i) records.push_back(decode(i));
    });
    return records;
  }

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
    if (f.reserved != 0)
      return make_error(Errc::reserved_nonzero, "record frame reserved field is not zero",
                        pos + frm::reserved + first_nonzero(p + frm::reserved, 4));
    // SKIPPABLE is meaningful only for kinds a reader may not know; on kinds 1-4 it is reserved
    // (§3.2). Reserved bits of a field with defined bits are reported at the field (§1).
    const uint16_t reserved_flags = f.kind >= kKindTensor && f.kind <= kKindEnd ? 0xFFFF : ~kFlagSkippable;
    if (f.flags & reserved_flags)
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
      TensorInfo scratch;
      TensorInfo& info = out ? out->info : scratch;
      if (auto ok = decode_tensor_meta_into(bytes.subspan(ps.meta_off, f.meta_length), ps.meta_off, info, name); !ok)
        return std::move(ok).error();
      // Corruption found past the meta names the tensor too (decode_tensor_meta names it only
      // when the meta itself fails).
      auto named = [&](Error e) -> Outcome {
        if (name) *name = info.name;
        return e;
      };
      auto payload = bytes.subspan(ps.payload_off, f.payload_length);
      if (out) {
        out->kind = static_cast<RecordKind>(f.kind);
        out->offset = pos;
        out->size = f.record_length;
        out->payload_offset = ps.payload_off;
        out->payload = payload;
      }
      if (f.kind == kKindTensor) {
        auto want = tensor_payload_size(info, ps.meta_off);
        if (!want) return named(std::move(want).error());
        if (*want != f.payload_length)
          return named(make_error(Errc::length_mismatch,
                                  fmt::format("payload_length of '{}' is {}, but shape and dtype need {}", info.name,
                                              f.payload_length, *want), pos + frm::payload_length));
        if (info.dtype == DType::boolean)
          for (uint64_t i = 0; i < payload.size(); ++i)
            if (static_cast<uint8_t>(payload[i]) > 1)
              return named(make_error(Errc::bad_value, fmt::format("bool element {} of '{}' is {}", i, info.name,
                                                                   static_cast<unsigned>(payload[i])), ps.payload_off + i));
      } else {
        auto s = decode_summary_payload(payload, ps.payload_off, info.numel());
        if (!s) return named(std::move(s).error());
        if (out) detail::ReaderAccess::set_summary(*out, std::move(*s));
      }
    }
    return std::monostate{};
  }

  void set_corrupt(Error e, std::string name) {
    if (integrity.corruption) return;
    integrity.state = FileState::corrupt;
    integrity.corruption = std::move(e);
    integrity.corrupt_name = std::move(name);
  }

  // The record count of a trailing END record, as a capacity hint only (bounded by what the file
  // can hold, 64 bytes a record; the scan still judges END): a million records are then not
  // moved through the vector's doublings, nor held twice at the last one.
  void reserve_from_end_record() {
    const uint64_t size = bytes.size();
    const uint64_t end_length = record_length_for(kEndMetaSize, 0);
    if (size < header.header_length + end_length) return;
    const std::byte* p = bytes.data() + size - end_length;
    if (std::memcmp(p + frm::magic, kRecordMagic.data(), kRecordMagic.size()) != 0) return;
    const Frame f = load_frame(p);
    if (f.kind != kKindEnd || f.meta_length != kEndMetaSize || f.record_length != end_length) return;
    const uint64_t count = load_le<uint64_t>(p + kFrameSize + 8);
    if (count <= (size - header.header_length) / 64) entries.reserve(static_cast<size_t>(count));
  }

  // Scans every record from the header on (§4).
  void scan() {
    const uint64_t size = bytes.size();
    uint64_t pos = header.header_length;
    bool saw_end = false;
    uint64_t index_pos = kNoOffset;  // the previous record was this INDEX
    integrity.valid_end = integrity.data_end = pos;
    reserve_from_end_record();
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
        // In frames mode the payload checksum is still checked for the last record (the one a
        // crash may have torn) and for every record that is not TENSOR/SUMMARY: verify_payload()
        // cannot check those later, and the verdict must not depend on the mode (§4).
        const bool deferred = ps.frame.kind == kKindTensor || ps.frame.kind == kKindSummary;
        bool verify = opt.verify == Verify::full || last || !deferred;
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
      // Only END may follow an INDEX record (§3.5): an INDEX in the middle of the records
      // describes a file that is not this one.
      if (index_pos != kNoOffset && f.kind != kKindEnd && !damaged_before) {
        fail(make_error(Errc::bad_index, fmt::format("the INDEX record at {} is followed by a record of kind {}; "
                                                     "only END may follow INDEX", index_pos, f.kind), pos));
        break;
      }
      switch (f.kind) {
        case kKindTensor:
        case kKindSummary:
          entries.push_back({rec.offset, rec.info.exec_index, fnv1a64(rec.info.name), rec.info.occurrence,
                             rec.info.role_index, static_cast<uint8_t>(rec.info.role), static_cast<uint8_t>(rec.kind)});
          if (!axes_attributes)
            for (const auto& [k, v] : rec.info.attrs)
              if (k == "axes_ops" || k == "norm_axes" || k == "softmax_axis") axes_attributes = true;
          index_pos = kNoOffset;
          integrity.data_end = pos + f.record_length;
          break;
        case kKindIndex:
          // After a resynchronisation records are missing, so the index cannot agree.
          if (!damaged_before) {
            std::vector<IndexEntry> expected;
            expected.reserve(entries.size());
            for (const Entry& r : entries) expected.push_back({r.offset, r.name_hash, r.occurrence, r.kind});
            if (auto ok = check_index(bytes.subspan(pos, f.record_length), pos, expected); !ok) {
              fail(std::move(ok).error());
              break;
            }
          }
          index_pos = pos;
          break;
        case kKindEnd: {
          const std::byte* m = bytes.data() + ps.meta_off;
          if (f.meta_length != kEndMetaSize || f.payload_length != 0) {
            fail(make_error(Errc::length_mismatch, "END record must have a 16-byte meta and no payload", pos));
            break;
          }
          uint64_t idx = load_le<uint64_t>(m), count = load_le<uint64_t>(m + 8);
          if (!damaged_before && idx != index_pos) {
            fail(make_error(Errc::bad_index,
                index_pos == kNoOffset
                    ? fmt::format("END index_offset is {}, but no INDEX record precedes END", idx)
                    : fmt::format("END index_offset is {}, the INDEX record is at {}", idx, index_pos),
                ps.meta_off));
            break;
          }
          if (!damaged_before && count != entries.size()) {
            fail(make_error(Errc::bad_index,
                fmt::format("END record_count is {}, a scan finds {} TENSOR/SUMMARY records", count, entries.size()),
                ps.meta_off + 8));
            break;
          }
          saw_end = true;
          break;
        }
        default:
          index_pos = kNoOffset;
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
    // check_index() compared every entry and slot with the scan.
    integrity.index_used = integrity.state == FileState::clean && opt.use_index;
  }

  // Next offset (multiple of 64) holding a valid frame, or the end of the file.
  uint64_t resync_from(uint64_t pos) const {
    for (; pos + kFrameSize <= bytes.size(); pos += 64) {
      Parsed ps;
      if (std::holds_alternative<std::monostate>(check_frame(pos, ps))) return pos;
    }
    return bytes.size();
  }

  // The name bytes of entry i, read from the meta without decoding it (§3.3: the name follows the
  // 32 fixed bytes and the dims). Empty when the file changed since the scan (it reads zeros or
  // a frame that no longer fits), which no valid name is.
  std::string_view name_of(size_t i) const {
    const Entry& e = entries[i];
    if (e.offset > bytes.size() || bytes.size() - e.offset < kFrameSize + 32) return {};
    const std::byte* m = bytes.data() + e.offset + kFrameSize;
    const uint64_t at = e.offset + kFrameSize + 32 + 8 * uint64_t{std::to_integer<uint8_t>(m[14])};
    const uint64_t len = load_le<uint16_t>(m + 24);
    if (at > bytes.size() || bytes.size() - at < len) return {};
    return {reinterpret_cast<const char*>(bytes.data() + at), static_cast<size_t>(len)};
  }
  // An identity (§3.3) keyed by SipHash under a per-process secret (format/index.hpp), never by
  // the file's FNV-1a hashes: names chosen so that those share their low bits would make one
  // probe chain of the whole table (issue 23 item 4).
  static uint64_t identity_key(std::string_view name, uint32_t occurrence, uint16_t role_index, uint8_t role) {
    return keyed_name_hash(name, uint64_t{occurrence} | (uint64_t{role_index} << 32) | (uint64_t{role} << 48));
  }
  uint64_t identity_key(size_t i) const {
    const Entry& e = entries[i];
    return identity_key(name_of(i), e.occurrence, e.role_index, e.role);
  }
  bool same_identity(size_t i, std::string_view name, uint32_t occurrence, uint16_t role_index, uint8_t role) const {
    const Entry& e = entries[i];
    return e.occurrence == occurrence && e.role_index == role_index && e.role == role && name_of(i) == name;
  }
  // A slot holds (the key's top bits << kIndexBits) | (record + 1), 0 when empty: 8 bytes a slot,
  // and names are compared only when the key bits agree (a duplicate, or a 1-in-2^24 accident).
  static constexpr int kIndexBits = 40;
  static constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;
  // The first record of each identity, in a table of load <= 1/2: O(1) expected per insert and
  // lookup for any names. Calls on_duplicate(i) for each later record of an identity.
  template <class OnDuplicate>
  std::vector<uint64_t> identity_table(OnDuplicate&& on_duplicate) const {
    uint64_t slots = 16;
    while (slots < 2 * uint64_t{entries.size()}) slots *= 2;
    std::vector<uint64_t> table(slots, 0);
    // More records than kIndexBits can number (a file of 64 TiB): no tag, every candidate compared.
    const bool tagged = entries.size() < kIndexMask;
    // The keys first, then the inserts with each slot fetched some records ahead: a table of a
    // million records is larger than the caches, and one miss per insert in turn was most of
    // opening a million-record dump (issue 30 item 4).
    constexpr size_t kAhead = 16;
    std::vector<uint64_t> keys(entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      const Entry& e = entries[i];
      keys[i] = identity_key(name_of(i), e.occurrence, e.role_index, e.role);
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i + kAhead < entries.size()) __builtin_prefetch(&table[keys[i + kAhead] & (slots - 1)]);
      const Entry& e = entries[i];
      const std::string_view name = name_of(i);
      const uint64_t h = keys[i];
      const uint64_t tag = tagged ? h >> kIndexBits : 0;
      for (uint64_t s = h & (slots - 1);; s = (s + 1) & (slots - 1)) {
        const uint64_t v = table[s];
        if (v == 0) {
          table[s] = (tag << kIndexBits) | (i + 1);
          break;
        }
        if ((v >> kIndexBits) == tag && same_identity(static_cast<size_t>((v & kIndexMask) - 1), name,
                                                      e.occurrence, e.role_index, e.role)) {
          on_duplicate(i);
          break;
        }
      }
    }
    return table;
  }
  std::optional<size_t> lookup(std::string_view name, uint32_t occurrence, uint16_t role_index, uint8_t role) const {
    std::call_once(lookup_once, [&] { by_identity = identity_table([](size_t) {}); });
    const uint64_t slots = by_identity.size();
    const uint64_t h = identity_key(name, occurrence, role_index, role);
    const uint64_t tag = entries.size() < kIndexMask ? h >> kIndexBits : 0;
    for (uint64_t s = h & (slots - 1);; s = (s + 1) & (slots - 1)) {
      const uint64_t v = by_identity[s];
      if (v == 0) return std::nullopt;
      const size_t i = static_cast<size_t>((v & kIndexMask) - 1);
      if ((v >> kIndexBits) == tag && same_identity(i, name, occurrence, role_index, role)) return i;
    }
  }
  void check_duplicates() {
    (void)identity_table([&](size_t i) {
      const TensorInfo t = decode(i).info;
      integrity.warnings.push_back(make_error(Errc::duplicate_tensor,
          fmt::format("tensor '{}' ({} {}, occurrence {}) appears again; the first one is used", t.name,
                      role_name(t.role), t.role_index, t.occurrence), entries[i].offset));
    });
  }

  Result<void> load() {
    auto h = decode_header(bytes);
    if (!h) return std::move(h).error();
    header = std::move(*h);
    integrity.file_size = bytes.size();
    // One walk over the records judges the whole file, the footer index included (§3.4, §4):
    // every tool sees the same verdict whatever options it opened the file with.
    scan();
    if (integrity.state != FileState::cut) integrity.cut_offset = kNoOffset;
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
std::span<const Record> Reader::records() const { return impl_->all(); }
size_t Reader::record_count() const { return impl_->entries.size(); }
std::span<const std::byte> Reader::bytes() const { return impl_->bytes; }

// The first record of an identity (docs/format.md §3.3), found from the entries through the
// keyed identity table, so a lookup never builds records() (issue 13 §5: a million-record float64
// run) and costs O(1) expected whatever the names (issue 23 item 4).
std::optional<size_t> detail::ReaderAccess::find(const Reader& reader, std::string_view name,
                                                 uint32_t occurrence, Role role, uint16_t role_index) {
  if (name.empty()) return std::nullopt;  // §3.3: no record has one (and a file cut since reads as empty names)
  return reader.impl_->lookup(name, occurrence, role_index, static_cast<uint8_t>(role));
}

const Record* Reader::find(std::string_view name, uint32_t occurrence, Role role, uint16_t role_index) const {
  const std::optional<size_t> i = detail::ReaderAccess::find(*this, name, occurrence, role, role_index);
  return i ? &impl_->all()[*i] : nullptr;
}

std::vector<const Record*> Reader::find_all(std::string_view name) const {
  std::vector<const Record*> out;
  for (const Record& r : impl_->all())
    if (r.info.name == name) out.push_back(&r);
  return out;
}

namespace {
Error payload_crc_error(const Record& r, uint32_t stored, uint32_t computed) {
  return make_error(Errc::bad_record_checksum,
                    fmt::format("record_crc of '{}' is 0x{:08x}, computed 0x{:08x}", r.info.name, stored, computed),
                    r.offset + frm::record_crc);
}
}  // namespace

Result<void> Reader::verify_payload(const Record& r) const {
  const std::byte* p = impl_->bytes.data() + r.offset;
  Frame f = load_frame(p);
  uint32_t c = impl_->record_crc(r.offset, f);
  if (c != f.record_crc) return payload_crc_error(r, f.record_crc, c);
  return {};
}

Result<void> detail::verify_payload_crc(const Reader& reader, const Record& r, uint32_t payload_crc) {
  const std::span<const std::byte> bytes = reader.bytes();
  const std::byte* p = bytes.data() + r.offset;
  const Frame f = load_frame(p);
  // The kernel checksummed rec.payload; that is the record's payload field only when they agree.
  if (r.payload.data() != p + payload_start(f.meta_length) || r.payload.size() != f.payload_length)
    return reader.verify_payload(r);
  uint32_t c = crc32(0, p, frm::record_crc);
  c = crc32(c, p + kFrameSize, f.meta_length);
  // A small payload was just read and is still in cache: continuing the checksum over it costs
  // less than combining (zlib's crc32_combine is a few hundred ns whatever the length).
  if (f.payload_length <= 4096) c = crc32(c, r.payload);
  else c = crc32_combine(c, payload_crc, f.payload_length);
  if (c != f.record_crc) return payload_crc_error(r, f.record_crc, c);
  return {};
}

Record detail::ReaderAccess::record(const Reader& r, size_t i) { return r.impl_->decode(i); }
bool detail::ReaderAccess::has_axes_attributes(const Reader& r) { return r.impl_->axes_attributes; }
uint64_t detail::ReaderAccess::exec_index(const Reader& r, size_t i) { return r.impl_->entries[i].exec_index; }

detail::ReaderAccess::Identity detail::ReaderAccess::identity(const Reader& r, size_t i) {
  const auto& e = r.impl_->entries[i];
  return {e.name_hash, e.occurrence, e.role_index, static_cast<Role>(e.role)};
}

std::optional<uint64_t> detail::ReaderAccess::frame_offset(const Reader& r, size_t i,
                                                           std::span<const std::byte> payload) {
  const auto& impl = *r.impl_;
  const auto& e = impl.entries[i];
  if (e.offset + kFrameSize > impl.bytes.size()) return std::nullopt;
  const Frame f = load_frame(impl.bytes.data() + e.offset);
  const uint64_t payload_off = e.offset + payload_start(f.meta_length);
  if (f.kind != e.kind || e.offset + f.record_length > impl.bytes.size() ||
      payload_off + f.payload_length > impl.bytes.size() ||
      impl.bytes.data() + payload_off != payload.data() || f.payload_length != payload.size())
    return std::nullopt;
  return e.offset;
}

}  // namespace driftscope
