// libFuzzer target for compare(): two crafted dumps through pairing, measuring, judging, data-flow
// localisation (ds.inputs references that loop, fan in or point anywhere), layout diagnosis and
// every text report. Any crash, hang, leak or sanitizer report is a bug; errors are fine.
//
// Input: byte 0 picks options (bits below), bytes 1..4 the reference's length L (little endian),
// then the reference dump (L bytes) and the candidate dump (the rest; empty: the reference again).
// CRCs are made to match first, so mutations reach the checks behind them.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "driftscope/compare.hpp"
#include "driftscope/reader.hpp"
#include "driftscope/report.hpp"
#include "tdump_crcs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace driftscope;
  if (size < 5) return 0;
  const uint8_t flags = data[0];
  size_t ref_len = 0;
  for (int i = 0; i < 4; ++i) ref_len |= static_cast<size_t>(data[1 + i]) << (8 * i);
  const auto* body = reinterpret_cast<const std::byte*>(data + 5);
  const size_t body_len = size - 5;
  if (ref_len > body_len) ref_len = body_len;
  const std::vector<std::byte> ref = ds_fuzz::with_crcs_fixed({body, ref_len});
  const std::vector<std::byte> cand =
      ref_len == body_len ? ref : ds_fuzz::with_crcs_fixed({body + ref_len, body_len - ref_len});

  auto a = Reader::from_memory(ref);
  auto b = Reader::from_memory(cand);
  if (!a.ok() || !b.ok()) return 0;
  CompareOptions o;
  o.threads = 1;
  o.max_layout_elements = 1 << 12;  // bounded cost per input; the diagnosis itself still runs
  if (flags & 1) o.filter = "-*.1* -*b*";
  o.details = flags & 2;
  o.stop_at_first = flags & 4;
  o.reshape = flags & 8;
  o.nan_equal = flags & 16;
  if (flags & 32) o.pairing = Pairing::positional;
  if (flags & 64) {
    Criteria c;
    c.atol = 1e-3;
    c.min_cosine = 0.99;
    o.policy.global = c;
  }
  o.allow_unpaired = flags & 128;
  auto rep = compare(*a, *b, o);
  if (!rep.ok()) return 0;
  volatile size_t sink = report_to_json(*rep).size() + report_to_text(*rep).size() + report_to_markdown(*rep).size();
  (void)sink;
  return 0;
}
