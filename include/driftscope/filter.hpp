// driftscope — which tensors a producer records. One parser and one matcher serve the C++ API,
// the C ABI, Python and the CLI, so a filter string means the same everywhere (docs/filters.md).
//
// Syntax: clauses separated by whitespace or ';'.
//   PATTERN  or +PATTERN   include tensors whose name matches the glob (* ? [abc] [!a-z])
//   -PATTERN or !PATTERN   exclude matching names (excludes win over includes)
//   op=GLOB[,GLOB]         op type matches one of the globs
//   role=output[,input]    role is one of these
//   dtype=f32[,f16]        dtype is one of these (names or aliases of parse_dtype)
//   rank=N  rank<=N  rank>=N  rank<N  rank>N  rank!=N
//   numel=N numel<=N ...   element count (N accepts k/M/G suffixes, decimal)
//   dim=N                  some dim equals N;  dim[I]=N: dim I (negative counts from the end)
//   every=N                keep every N-th offered tensor (exec_index % N == 0)
//   budget=BYTES           stop recording once this many payload bytes were written
//                          (suffixes k, M, G, KiB, MiB, GiB)
// With no include clause every name is included. All other clauses must all hold.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "driftscope/api.h"
#include "driftscope/error.hpp"
#include "driftscope/tensor.hpp"

namespace driftscope {

class DS_API Filter {
 public:
  // An empty filter accepts everything.
  Filter();
  ~Filter();
  Filter(const Filter&);
  Filter& operator=(const Filter&);
  Filter(Filter&&) noexcept;
  Filter& operator=(Filter&&) noexcept;

  // Parses the syntax above; errors are Errc::filter_syntax naming the clause and its position.
  static Result<Filter> parse(std::string_view text);

  // Does the tensor pass every clause except the byte budget? `exec_index` is the index the
  // writer assigned (used by every=N); info.exec_index is ignored.
  bool accepts(const TensorInfo& info, uint64_t exec_index) const;
  // Name-only pre-check for producers that want to skip work (a copy from GPU, a flatten)
  // before they know shape or dtype: false means no tensor of that name can pass.
  bool may_accept_name(std::string_view name) const;

  // Byte budget in payload bytes; nullopt when unlimited.
  std::optional<uint64_t> byte_budget() const;
  // The canonical text of the filter (round-trips through parse).
  std::string to_string() const;
  bool empty() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Glob matching as used by filters and compare policies: '*' any run of characters (dots
// included), '?' one character, '[...]' a class with ranges and '!' or '^' negation.
DS_API bool glob_match(std::string_view pattern, std::string_view text) noexcept;

}  // namespace driftscope
