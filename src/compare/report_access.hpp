// The comparison engine's write access to the report model (include/driftscope/compare.hpp).
//
// A client reads a TensorDesc, a PairResult or a Reason through const accessors that give plain
// types (std::string_view, const std::string&, std::span, a pointer for an optional box); the
// storage behind them (include/driftscope/detail/) is private, so it can change without changing
// the API. The code that builds reports (the engine, dump sets, the parts API's blobs, the tests)
// writes it through these functions, as format/ reads records through detail::ReaderAccess.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "driftscope/compare.hpp"

namespace driftscope::detail {

struct ReportAccess {
  // TensorDesc
  static SharedString& name(TensorDesc& d) noexcept { return d.name_; }
  static const SharedString& name(const TensorDesc& d) noexcept { return d.name_; }
  static Interned& op_type(TensorDesc& d) noexcept { return d.op_type_; }
  static InlineVector<uint64_t, 2>& shape(TensorDesc& d) noexcept { return d.shape_; }
  // The data-flow box, made when there is none, and copied first when another description shares
  // it (an edit is never seen through the other side).
  static TensorDesc::Rare& edit(TensorDesc& d) { return d.rare_.edit(); }
  // `d` holds `o`'s box instead of an equal one of its own: a pair's two descriptions with the
  // recorder's data flow almost always have equal inputs and source, and sharing takes 46 MiB off
  // a million pairs (issue 30 item 4). True when the two now share.
  static bool share_rare(TensorDesc& d, const TensorDesc& o) {
    if (!d.rare_.shares_with(o.rare_) && d.rare_ && o.rare_ && *d.rare_ == *o.rare_) d.rare_ = o.rare_;
    return d.rare_.shares_with(o.rare_);
  }
  static TensorRefs& inputs(TensorDesc& d) { return edit(d).inputs; }
  // TensorRef: its name's block, shared with the described tensor's name (align.cpp).
  static SharedString& name(TensorRef& r) noexcept { return r.name_; }
  static const SharedString& name(const TensorRef& r) noexcept { return r.name_; }
  using DescRare = TensorDesc::Rare;

  // PairResult
  static Sparse<std::vector<Reason>>& reasons(PairResult& p) noexcept { return p.reasons_; }
  static Sparse<std::vector<std::string>>& notes(PairResult& p) noexcept { return p.notes_; }
  static Pooled<Criteria>& criteria(PairResult& p) noexcept { return p.criteria_; }
  static Interned& criteria_source(PairResult& p) noexcept { return p.criteria_source_; }
  static Interned& basis(PairResult& p) noexcept { return p.basis_; }
  static InlineVector<size_t, 2>& basis_pairs(PairResult& p) noexcept { return p.basis_pairs_; }
  // The box of the rarely set members, made when there is none; drop_rare_if_default() gives it
  // back when nothing in it differs from the defaults.
  static PairRare& edit(PairResult& p) { return p.rare_ ? *p.rare_ : p.rare_.emplace(); }
  static void drop_rare_if_default(PairResult& p) noexcept {
    if (p.rare_ && p.rare_->is_default()) p.rare_.reset();
  }

  // Reason
  static Interned& code(Reason& r) noexcept { return r.code_; }
};

}  // namespace driftscope::detail
