// Interned (include/driftscope/interned.hpp): the process-wide pool of distinct values.
#include "driftscope/interned.hpp"

#include <mutex>
#include <string_view>
#include <unordered_set>

namespace driftscope {
namespace {

struct Pool {
  std::mutex mutex;
  // Node-based: a value's address never changes while the pool lives (it never shrinks).
  std::unordered_set<std::string> values;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: Interned values may outlive static destructors
  return *p;
}

// The last value this thread interned: op types and criteria sources repeat pair after pair.
thread_local const std::string* t_last = nullptr;

}  // namespace

const std::string& Interned::empty_string() noexcept {
  static const std::string empty;
  return empty;
}

Interned::Interned(std::string_view s) {
  if (s.empty()) return;
  if (t_last && std::string_view(*t_last) == s) {
    bits_ = reinterpret_cast<uintptr_t>(t_last);
    return;
  }
  if (s.size() <= kMaxLength) {
    Pool& p = pool();
    std::lock_guard lock(p.mutex);
    auto it = p.values.find(std::string(s));
    if (it == p.values.end() && p.values.size() < kMaxValues) it = p.values.emplace(s).first;
    if (it != p.values.end()) {
      t_last = &*it;
      bits_ = reinterpret_cast<uintptr_t>(t_last);
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

}  // namespace driftscope
