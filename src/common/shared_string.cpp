// SharedString (driftscope/detail/shared_string.hpp): one block per distinct value made, shared by copies.
#include "driftscope/detail/shared_string.hpp"

#include <atomic>
#include <cstring>
#include <limits>
#include <new>
#include <ostream>
#include <stdexcept>

namespace driftscope::detail {

// The count is updated in place through std::atomic_ref (the block is raw storage).
static_assert(alignof(uint32_t) >= std::atomic_ref<uint32_t>::required_alignment);
static_assert(std::atomic_ref<uint32_t>::is_always_lock_free);

SharedString::SharedString(std::string_view s) {
  if (s.empty()) return;
  if (s.size() > std::numeric_limits<uint32_t>::max()) throw std::length_error("SharedString: over 4 GiB");
  void* mem = ::operator new(sizeof(Block) + s.size() + 1);
  block_ = new (mem) Block{1, static_cast<uint32_t>(s.size())};
  char* c = static_cast<char*>(mem) + sizeof(Block);
  std::memcpy(c, s.data(), s.size());
  c[s.size()] = '\0';
}

const char* SharedString::chars() const noexcept { return reinterpret_cast<const char*>(block_) + sizeof(Block); }

void SharedString::retain() const noexcept {
  if (block_) std::atomic_ref<uint32_t>(block_->refs).fetch_add(1, std::memory_order_relaxed);
}

void SharedString::release() noexcept {
  if (!block_) return;
  // The last owner frees it; acq_rel orders every other owner's reads before the free.
  if (std::atomic_ref<uint32_t>(block_->refs).fetch_sub(1, std::memory_order_acq_rel) == 1) {
    block_->~Block();
    ::operator delete(block_);
  }
  block_ = nullptr;
}

SharedString& SharedString::operator=(const SharedString& o) noexcept {
  if (block_ != o.block_) {
    o.retain();
    release();
    block_ = o.block_;
  }
  return *this;
}

SharedString& SharedString::operator=(SharedString&& o) noexcept {
  if (this != &o) {
    release();
    block_ = o.block_;
    o.block_ = nullptr;
  }
  return *this;
}

std::ostream& operator<<(std::ostream& os, const SharedString& s) { return os << s.view(); }

}  // namespace driftscope::detail
