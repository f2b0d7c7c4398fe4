// Interned (include/driftscope/detail/interned.hpp): the process-wide pool of distinct values.
#include "driftscope/detail/interned.hpp"

#include <array>
#include <functional>
#include <mutex>
#include <string_view>
#include <unordered_set>

namespace driftscope::detail {
namespace {

struct InternHash {
  using is_transparent = void;  // find() takes a string_view: no std::string made to look one up
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>()(s); }
};

struct InternPool {
  std::mutex mutex;
  // Node-based: a value's address never changes while the pool lives (it never shrinks).
  std::unordered_set<std::string, InternHash, std::equal_to<>> values;
};

InternPool& intern_pool() {
  static InternPool* p = new InternPool;  // never destroyed: Interned values may outlive static destructors
  return *p;
}

// Values this thread interned lately, by hash: op types, ds.source, paths and criteria sources
// repeat record after record, a few distinct values each, so making one rarely takes the lock
// (a million records from threads that each took it: issue 13 §5).
constexpr size_t kRecent = 64;
thread_local std::array<const std::string*, kRecent> t_recent{};

}  // namespace

const std::string& Interned::empty_string() noexcept {
  static const std::string empty;
  return empty;
}

Interned::Interned(std::string_view s) {
  if (s.empty()) return;
  if (s.size() <= kMaxLength) {
    const size_t h = InternHash()(s);
    const std::string*& recent = t_recent[h % kRecent];
    if (recent && std::string_view(*recent) == s) {
      bits_ = reinterpret_cast<uintptr_t>(recent);
      return;
    }
    InternPool& p = intern_pool();
    std::lock_guard lock(p.mutex);
    auto it = p.values.find(s);
    if (it == p.values.end() && p.values.size() < kMaxValues) it = p.values.emplace(s).first;
    if (it != p.values.end()) {
      recent = &*it;
      bits_ = reinterpret_cast<uintptr_t>(recent);
      return;
    }
  }
  bits_ = reinterpret_cast<uintptr_t>(new std::string(s)) | 1;
}

Interned::Interned(const Interned& o) : bits_(o.bits_) {
  if (bits_ & 1) bits_ = reinterpret_cast<uintptr_t>(new std::string(o.get())) | 1;
}

Interned& Interned::operator=(const Interned& o) {
  if (this != &o) *this = Interned(o);
  return *this;
}

Interned& Interned::operator=(Interned&& o) noexcept {
  if (this != &o) {
    release();
    bits_ = o.bits_;
    o.bits_ = 0;
  }
  return *this;
}

Interned& Interned::operator+=(std::string_view s) {
  if (!s.empty()) *this = Interned(get() + std::string(s));
  return *this;
}

void Interned::release() noexcept {
  if (bits_ & 1) delete reinterpret_cast<std::string*>(bits_ & ~uintptr_t{1});
  bits_ = 0;
}

}  // namespace driftscope::detail
