// Streaming TDUMP writer (docs/format.md §5).
#include "driftscope/writer.hpp"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <random>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "common/bytes.hpp"
#include "common/crc32.hpp"
#include "common/out_file.hpp"
#include "driftscope/reader.hpp"
#include "format/codec.hpp"
#include "format/index.hpp"
#include "format/layout.hpp"

namespace driftscope {

using namespace detail;

namespace {

uint64_t random_salt() {
  std::random_device rd;
  uint64_t s = (uint64_t{rd()} << 32) ^ rd();
  s ^= static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count());
  return s;
}

std::string identity_key(const TensorInfo& info) {
  std::string k = info.name;
  k.push_back('\0');
  k.push_back(static_cast<char>(info.role));
  put_le<uint16_t>(k, info.role_index);
  return k;
}

// One encoded record: everything before the payload (frame, meta, padding) plus the padding after.
struct EncodedRecord {
  std::string head;
  uint64_t record_length = 0;
  uint64_t tail_padding = 0;
};

EncodedRecord encode_record(uint16_t kind, uint64_t salt, std::string_view meta,
                            std::span<const std::byte> payload) {
  EncodedRecord r;
  Frame f;
  f.kind = kind;
  f.payload_length = payload.size();
  f.meta_length = static_cast<uint32_t>(meta.size());
  f.record_length = record_length_for(meta.size(), payload.size());
  f.salt = salt;
  uint64_t start = payload_start(meta.size());
  r.head.assign(static_cast<size_t>(start), '\0');
  auto* h = reinterpret_cast<std::byte*>(r.head.data());
  store_frame(f, h);
  std::memcpy(h + kFrameSize, meta.data(), meta.size());
  uint32_t crc = crc32(0, h, frm::record_crc);
  crc = crc32(crc, meta.data(), meta.size());
  crc = crc32(crc, payload);
  store_le<uint32_t>(h + frm::record_crc, crc);
  r.record_length = f.record_length;
  r.tail_padding = f.record_length - start - payload.size();
  return r;
}

const char kZeros[64] = {};

}  // namespace

struct Writer::Impl {
  WriterOptions opt;
  OutFile file;
  uint64_t salt = 0;
  Filter filter;
  std::optional<uint64_t> budget;

  std::mutex mu;  // serialises writers: records land in call order with no holes
  uint64_t pos = 0;
  uint64_t payload_bytes = 0;
  bool budget_exhausted = false;
  uint64_t next_index = 0;
  uint64_t since_sync = 0;
  uint64_t records = 0;
  bool closed = false;
  std::unordered_map<std::string, uint32_t> occurrences;
  std::vector<IndexEntry> entries;

  // Background mode: a bounded queue drained by one I/O thread. Payloads are staged in one ring
  // of queue_bytes, allocated at the first queued record and reused record after record: a fresh
  // allocation per record made the kernel fault in (and zero) new pages for every byte queued,
  // which costs 3-5x a copy into warm pages on VMs with free-page reporting (issue 13 item 5).
  // Jobs leave the ring in the order they entered it (one worker), so the ring is a FIFO: the
  // bytes in use are the `ring_used` bytes before `ring_head`. When the queue runs empty the
  // head goes back to the start, so a writer that keeps up touches little more than its largest
  // record. A record that cannot be staged (larger than the ring) is written from the caller's
  // buffer once the queue has drained: memory stays within queue_bytes, bytes are unchanged.
  struct Job {
    EncodedRecord rec;
    uint64_t ring_at = 0;  // payload's first byte in the ring; it may wrap to the ring's start
    uint64_t size = 0;     // payload bytes
    uint64_t offset = 0;
  };
  std::thread worker;
  std::mutex qmu;
  std::condition_variable q_not_full, q_not_empty, q_drained;
  std::deque<Job> queue;
  uint64_t queued_bytes = 0;
  bool busy = false;
  bool stopping = false;
  std::optional<Error> io_failure;
  std::unique_ptr<std::byte[]> ring;
  uint64_t ring_cap = 0;
  uint64_t ring_head = 0;  // where the next payload goes
  uint64_t ring_used = 0;  // bytes of queued (or being written) payloads before ring_head
  bool ring_tried = false;

  // queue_bytes, or the largest power-of-two fraction of it down to 1 MiB that can be reserved;
  // 0 when not even that (every record is then written from the caller's buffer). Untouched
  // pages of the reservation cost no memory.
  void reserve_ring() {
    ring_tried = true;
    for (uint64_t cap = opt.queue_bytes; cap > 0; cap /= 2) {
      if (cap < (1ull << 20) && cap != opt.queue_bytes) break;
      if (cap > SIZE_MAX) continue;
      ring.reset(new (std::nothrow) std::byte[static_cast<size_t>(cap)]);
      if (ring) {
        ring_cap = cap;
        return;
      }
    }
  }

  // The job's payload in the ring: one piece, or two when it wraps.
  size_t ring_pieces(const Job& job, OutFile::Piece* out) const {
    const uint64_t first = std::min(job.size, ring_cap - job.ring_at);
    out[0] = {ring.get() + job.ring_at, static_cast<size_t>(first)};
    if (first == job.size) return 1;
    out[1] = {ring.get(), static_cast<size_t>(job.size - first)};
    return 2;
  }

  Result<void> write_now(const EncodedRecord& rec, std::span<const std::byte> payload, uint64_t offset) {
    const OutFile::Piece body{payload.data(), payload.size()};
    return write_pieces(rec, {&body, 1}, offset);
  }

  // One gathered write per record: header, the payload in place (the caller's buffer or the
  // ring), zero padding.
  Result<void> write_pieces(const EncodedRecord& rec, std::span<const OutFile::Piece> body, uint64_t offset) {
    OutFile::Piece pieces[4];
    size_t n = 0;
    pieces[n++] = {rec.head.data(), rec.head.size()};
    for (const OutFile::Piece& p : body) pieces[n++] = p;
    pieces[n++] = {kZeros, static_cast<size_t>(rec.tail_padding)};
    DRIFTSCOPE_TRY(file.pwritev_all({pieces, n}, offset));
    return after_write(rec.record_length, offset + rec.record_length);
  }

  // Records reach write_now in file order (one thread at a time), so `end` only grows.
  Result<void> after_write(uint64_t n, uint64_t end) {
    if (opt.drop_behind) stream_out(end);
    since_sync += n;
    bool sync = opt.sync == SyncPolicy::every_record ||
                (opt.sync == SyncPolicy::every_bytes && since_sync >= opt.sync_bytes);
    if (sync) {
      DRIFTSCOPE_TRY(file.sync());
      since_sync = 0;
    }
    return {};
  }

  // Drop-behind (WriterOptions::drop_behind): at each window boundary start the writeback of the
  // window just filled, and evict the window kDropLag back, whose writeback was started at least
  // three windows (12 MiB, about one large activation) earlier and has normally finished, so the
  // producer rarely waits for the device. Evicted pages go back to the allocator at once and are
  // reused for the next windows.
  static constexpr uint64_t kDropWindow = 4ull << 20;
  static constexpr uint64_t kDropLag = 4;
  uint64_t writeback_from = 0;  // writeback not yet started from here on
  uint64_t evict_from = 0;      // cached from here on

  void stream_out(uint64_t end) {
    while (end - writeback_from >= kDropWindow) {
      file.start_writeback(writeback_from, kDropWindow);
      writeback_from += kDropWindow;
      if (writeback_from - evict_from >= kDropLag * kDropWindow) {
        file.evict(evict_from, kDropWindow);
        evict_from += kDropWindow;
      }
    }
  }

  void run_worker() {
    std::unique_lock lk(qmu);
    while (true) {
      q_not_empty.wait(lk, [&] { return stopping || !queue.empty(); });
      if (queue.empty()) break;
      Job job = std::move(queue.front());
      queue.pop_front();
      busy = true;
      lk.unlock();
      Result<void> r{};
      if (!io_failure) {
        OutFile::Piece body[2];
        r = write_pieces(job.rec, {body, ring_pieces(job, body)}, job.offset);
      }
      lk.lock();
      busy = false;
      if (!r.ok() && !io_failure) io_failure = r.error();
      queued_bytes -= job.size + job.rec.head.size();
      ring_used -= job.size;
      q_not_full.notify_all();
      if (queue.empty()) q_drained.notify_all();
    }
  }

  // Stages the payload and queues the record; false (nothing queued) when the payload does not
  // fit the ring at all: the caller then writes it itself after drain().
  Result<bool> enqueue(EncodedRecord& rec, std::span<const std::byte> payload, uint64_t offset) {
    const uint64_t bytes = payload.size() + rec.head.size();
    std::unique_lock lk(qmu);
    if (!ring_tried) reserve_ring();
    if (ring_cap == 0 || payload.size() > ring_cap) return false;
    // Block while the queue is over its bound or the ring has no room; an empty queue always
    // has room for a payload the ring can hold, so progress never stops.
    q_not_full.wait(lk, [&] {
      return io_failure || (ring_used + payload.size() <= ring_cap &&
                            (queue.empty() || queued_bytes + bytes <= opt.queue_bytes));
    });
    if (io_failure) return *io_failure;
    if (ring_used == 0) ring_head = 0;
    Job job;
    job.rec = std::move(rec);
    job.ring_at = ring_head;
    job.size = payload.size();
    job.offset = offset;
    ring_head = (ring_head + job.size) % ring_cap;
    ring_used += job.size;  // reserved: the worker never touches it before the job is queued
    queued_bytes += bytes;
    // Copy without the lock, so the worker can finish (and free) earlier records meanwhile;
    // `mu` keeps other producers out until the job is queued.
    lk.unlock();
    OutFile::Piece dst[2];
    size_t n = ring_pieces(job, dst);
    std::memcpy(const_cast<void*>(dst[0].data), payload.data(), dst[0].size);
    if (n == 2) std::memcpy(const_cast<void*>(dst[1].data), payload.data() + dst[0].size, dst[1].size);
    lk.lock();
    queue.push_back(std::move(job));
    q_not_empty.notify_one();
    return true;
  }

  Result<void> drain() {
    if (!worker.joinable()) return {};
    std::unique_lock lk(qmu);
    q_drained.wait(lk, [&] { return queue.empty() && !busy; });
    if (io_failure) return *io_failure;
    return {};
  }

  void stop_worker() {
    if (!worker.joinable()) return;
    {
      std::lock_guard lk(qmu);
      stopping = true;
    }
    q_not_empty.notify_all();
    worker.join();
    ring.reset();
    ring_cap = 0;
  }

  Result<WriteResult> put(uint16_t kind, const TensorInfo& in, std::span<const std::byte> payload,
                          uint64_t tensor_bytes_for_budget) {
    std::lock_guard lk(mu);
    if (closed) return make_error(Errc::closed, fmt::format("write of '{}' after close", in.name));
    WriteResult res;
    // Every offered tensor consumes an execution index and an occurrence, recorded or not, so a
    // filtered run numbers its tensors exactly like an unfiltered one.
    res.exec_index = in.exec_index == kAutoIndex ? next_index : in.exec_index;
    next_index = std::max(next_index, res.exec_index + 1);
    std::string key = identity_key(in);
    auto [it, inserted] = occurrences.try_emplace(key, 0);
    if (in.occurrence == kAutoOccurrence) {
      res.occurrence = it->second;
      it->second += 1;
    } else {
      res.occurrence = in.occurrence;
      it->second = std::max(it->second, in.occurrence + 1);
    }
    if (!filter.empty() && !filter.accepts(in, res.exec_index)) {
      res.status = WriteStatus::filtered;
      return res;
    }
    // Once the budget is exhausted nothing more is recorded, so a budget-limited dump is a
    // prefix of the run in execution order (docs/filters.md).
    if (budget_exhausted || (budget && payload_bytes + tensor_bytes_for_budget > *budget)) {
      budget_exhausted = true;
      res.status = WriteStatus::over_budget;
      return res;
    }
    TensorInfo info = in;
    info.exec_index = res.exec_index;
    info.occurrence = res.occurrence;
    auto meta = encode_tensor_meta(info);
    if (!meta) return std::move(meta).error();
    EncodedRecord rec = encode_record(kind, salt, *meta, payload);
    const uint64_t length = rec.record_length;  // `rec` moves into the queue
    res.offset = pos;
    bool queued = false;
    if (worker.joinable()) {
      auto q = enqueue(rec, payload, pos);
      if (!q) return std::move(q).error();
      queued = *q;
      // Not staged: earlier records must be in the file first (records land in call order).
      if (!queued) DRIFTSCOPE_TRY(drain());
    }
    if (!queued) DRIFTSCOPE_TRY(write_now(rec, payload, pos));
    entries.push_back({pos, fnv1a64(info.name), info.occurrence, kind});
    pos += length;
    payload_bytes += tensor_bytes_for_budget;
    ++records;
    res.status = WriteStatus::written;
    return res;
  }

  Result<void> open_append(const std::string& path) {
    {
      OpenOptions ro;
      ro.use_index = false;
      auto reader = Reader::open(path, ro);
      if (!reader) return std::move(reader).error();
      DRIFTSCOPE_TRY(reader->check_unchanged());
      const Integrity& in = reader->integrity();
      if (in.state == FileState::corrupt)
        return make_error(in.corruption->code,
                          fmt::format("cannot append to a damaged file: {}", in.corruption->message),
                          in.corruption->offset);
      salt = reader->header().salt;
      pos = in.data_end;
      for (const Record& r : reader->records()) {
        entries.push_back({r.offset, fnv1a64(r.info.name), r.info.occurrence, static_cast<uint32_t>(r.kind)});
        auto& occ = occurrences[identity_key(r.info)];
        occ = std::max(occ, r.info.occurrence + 1);
        next_index = std::max(next_index, r.info.exec_index + 1);
        payload_bytes += r.kind == RecordKind::tensor ? r.payload.size() : 0;
        ++records;
      }
    }  // the reader's mapping is gone before the file is truncated
    auto f = OutFile::open_existing(path);
    if (!f) return std::move(f).error();
    file = std::move(*f);
    // Drop a torn tail and the old INDEX/END: they are rewritten on close (§5 Append).
    DRIFTSCOPE_TRY(file.truncate(pos));
    writeback_from = evict_from = pos;
    return {};
  }

  Result<void> open_new(const std::string& path) {
    KeyValues meta = opt.metadata;
    bool has_writer = false;
    for (const auto& kv : meta) has_writer |= kv.first == "writer";
    if (!has_writer) meta.emplace_back("writer", fmt::format("driftscope {} (c++)", DRIFTSCOPE_VERSION));
    salt = opt.fixed_salt ? opt.salt : random_salt();
    auto header = encode_header(meta, salt);
    if (!header) return std::move(header).error();
    auto f = OutFile::create(path, opt.overwrite);
    if (!f) return std::move(f).error();
    file = std::move(*f);
    DRIFTSCOPE_TRY(file.pwrite_all(header->data(), header->size(), 0));
    pos = header->size();
    return after_write(0, pos);
  }

  Result<void> close() {
    std::lock_guard lk(mu);
    if (closed) return {};
    closed = true;
    Result<void> drained = drain();
    stop_worker();
    if (!drained.ok()) {
      (void)file.close();
      return drained;
    }
    uint64_t slots = index_slot_count(entries.size());
    std::string imeta = encode_index_meta(entries.size(), slots);
    std::string ipayload = encode_index_payload(entries, slots);
    std::span<const std::byte> ip{reinterpret_cast<const std::byte*>(ipayload.data()), ipayload.size()};
    EncodedRecord irec = encode_record(kKindIndex, salt, imeta, ip);
    uint64_t index_offset = pos;
    DRIFTSCOPE_TRY(write_now(irec, ip, pos));
    pos += irec.record_length;
    std::string emeta;
    put_le<uint64_t>(emeta, index_offset);
    put_le<uint64_t>(emeta, records);
    EncodedRecord erec = encode_record(kKindEnd, salt, emeta, {});
    DRIFTSCOPE_TRY(write_now(erec, {}, pos));
    pos += erec.record_length;
    DRIFTSCOPE_TRY(file.sync());
    return file.close();
  }
};

Writer::Writer() : impl_(std::make_unique<Impl>()) {}

Writer::~Writer() {
  if (impl_) (void)impl_->close();
}

Result<std::unique_ptr<Writer>> Writer::create(const std::string& path, const WriterOptions& options) {
  std::unique_ptr<Writer> w(new Writer());
  Impl& im = *w->impl_;
  im.opt = options;
  if (options.background && options.queue_bytes == 0)
    return make_error(Errc::invalid_argument, "background writer needs queue_bytes > 0");
  if (options.sync == SyncPolicy::every_bytes && options.sync_bytes == 0)
    return make_error(Errc::invalid_argument, "sync every_bytes needs sync_bytes > 0");
  if (!options.filter.empty()) {
    auto f = Filter::parse(options.filter);
    if (!f) return std::move(f).error();
    im.filter = std::move(*f);
    im.budget = im.filter.byte_budget();
  }
  if (options.append) {
    DRIFTSCOPE_TRY(im.open_append(path));
  } else {
    DRIFTSCOPE_TRY(im.open_new(path));
  }
  if (options.background) im.worker = std::thread([&im] { im.run_worker(); });
  return w;
}

Result<WriteResult> Writer::write(const TensorInfo& info, std::span<const std::byte> payload) {
  DRIFTSCOPE_TRY(validate_tensor_info(info));
  auto expected = tensor_payload_size(info);
  if (!expected) return std::move(expected).error();
  if (payload.size() != *expected)
    return make_error(Errc::length_mismatch,
                      fmt::format("payload of '{}' is {} bytes, but {} {} elements need {}", info.name,
                                  payload.size(), info.numel(), dtype_name(info.dtype), *expected));
  return impl_->put(kKindTensor, info, payload, payload.size());
}

Result<WriteResult> Writer::write_summary(const TensorInfo& info, const Summary& summary) {
  DRIFTSCOPE_TRY(validate_summary(summary, info.numel()));
  std::string p = encode_summary_payload(summary);
  return impl_->put(kKindSummary, info, {reinterpret_cast<const std::byte*>(p.data()), p.size()}, p.size());
}

bool Writer::wants(std::string_view name) const {
  return impl_->filter.empty() || impl_->filter.may_accept_name(name);
}

Result<void> Writer::flush() {
  std::lock_guard lk(impl_->mu);
  if (impl_->closed) return make_error(Errc::closed, "flush after close");
  DRIFTSCOPE_TRY(impl_->drain());
  return impl_->file.sync();
}

Result<void> Writer::close() { return impl_->close(); }

uint64_t Writer::records_written() const {
  std::lock_guard lk(impl_->mu);
  return impl_->records;
}
uint64_t Writer::bytes_written() const {
  std::lock_guard lk(impl_->mu);
  return impl_->pos;
}
uint64_t Writer::salt() const { return impl_->salt; }

}  // namespace driftscope
