// Names chosen so that their FNV-1a-64 hashes share their low bits put every entry of the footer
// index in one linear-probing cluster (issue 23 item 4). The writer and the index check now build
// the spec's table without walking the probe sequences, and lookups use a keyed in-memory table:
// these tests hold the result to the spec's rule (§3.4: linear probing in entry order, byte for
// byte) and check that such a file round-trips. Their growth is shown by bench/bench_index.cpp.
#include <gtest/gtest.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "common/bytes.hpp"
#include "driftscope/reader.hpp"
#include "driftscope/writer.hpp"
#include "format/layout.hpp"
#include "test_util.hpp"

using namespace driftscope;
using namespace driftscope::detail;

namespace {

constexpr uint64_t kPrime = 0x100000001b3ull;

uint64_t step(uint64_t h, const std::string& s) {
  for (unsigned char c : s) h = (h ^ c) * kPrime;
  return h;
}

std::string block(uint32_t c) {
  static const char a[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string b(4, ' ');
  for (int k = 0; k < 4; ++k, c /= 36) b[k] = a[c % 36];
  return b;
}

// n names whose FNV-1a-64 hashes agree in their low `bits` bits and end there on `home` (a
// Joux multicollision: the low bits of FNV-1a's state depend only on the low bits before, so one
// colliding pair of blocks per stage gives 2^stages names). The last block steers the low 16 bits
// to `home` (< 2^16), e.g. the last slot, so the cluster wraps around the end of the table.
std::vector<std::string> colliding_names(size_t n, int bits, uint64_t home) {
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  uint64_t state = step(0xcbf29ce484222325ull, "adv.");
  size_t stages = 0;
  while ((size_t{1} << stages) < n) ++stages;
  std::vector<std::pair<std::string, std::string>> pairs;
  for (size_t st = 0; st < stages; ++st) {
    std::unordered_map<uint64_t, std::string> seen;
    for (uint32_t c = 0;; ++c) {
      const std::string b = block(c);
      const uint64_t h = step(state, b);
      auto [it, fresh] = seen.emplace(h & mask, b);
      if (!fresh) {
        pairs.emplace_back(it->second, b);
        state = h;
        break;
      }
    }
  }
  std::string tail;
  for (uint32_t c = 0;; ++c)
    if ((step(state, block(c)) & 0xFFFF) == home) {  // 36^4 blocks cover 16 bits
      tail = block(c);
      break;
    }
  std::vector<std::string> names(n, "adv.");
  for (size_t i = 0; i < n; ++i) {
    for (size_t st = 0; st < stages; ++st) names[i] += (i >> st) & 1 ? pairs[st].second : pairs[st].first;
    names[i] += tail;
  }
  return names;
}

// The spec's rule itself (§3.4), as every earlier writer ran it: the oracle for the bytes.
std::vector<uint32_t> probing_loop(const std::vector<uint64_t>& hashes, uint64_t slots) {
  std::vector<uint32_t> t(slots, 0);
  for (size_t i = 0; i < hashes.size(); ++i) {
    uint64_t s = hashes[i] & (slots - 1);
    while (t[s] != 0) s = (s + 1) & (slots - 1);
    t[s] = static_cast<uint32_t>(i + 1);
  }
  return t;
}

struct Written {
  std::vector<std::byte> bytes;
  uint64_t slots_at = 0, n = 0, m = 0;
};

Written write(const std::vector<std::string>& names, const std::vector<uint32_t>& occurrences = {}) {
  const std::string path = dstest::scratch_path("index-collide");
  WriterOptions o;
  o.fixed_salt = true;
  o.salt = 0x1122334455667788ull;
  auto w = Writer::create(path, o);
  EXPECT_TRUE(w.ok());
  const auto v = dstest::ramp(1);
  for (size_t i = 0; i < names.size(); ++i) {
    TensorInfo t = dstest::f32_info(names[i], {1});
    if (!occurrences.empty()) t.occurrence = occurrences[i];
    EXPECT_TRUE((*w)->write(t, dstest::as_bytes(v)).ok());
  }
  EXPECT_TRUE((*w)->close().ok());
  Written x;
  x.bytes = dstest::read_file(path);
  const uint64_t end = x.bytes.size() - 64;
  const uint64_t index = load_le<uint64_t>(x.bytes.data() + end + kFrameSize);
  x.n = load_le<uint64_t>(x.bytes.data() + index + kFrameSize);
  x.m = load_le<uint64_t>(x.bytes.data() + index + kFrameSize + 8);
  x.slots_at = index + payload_start(kIndexMetaSize) + x.n * kIndexEntrySize;
  return x;
}

std::vector<uint32_t> slots_of(const Written& x) {
  std::vector<uint32_t> t(x.m);
  for (uint64_t s = 0; s < x.m; ++s) t[s] = load_le<uint32_t>(x.bytes.data() + x.slots_at + 4 * s);
  return t;
}

void expect_round_trip(const Written& x, const std::vector<std::string>& names,
                       const std::vector<uint32_t>& occurrences = {}) {
  for (bool use_index : {true, false}) {
    for (Verify v : {Verify::full, Verify::frames}) {
      auto r = Reader::from_memory(x.bytes, {v, use_index, false});
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->integrity().state, FileState::clean);
      EXPECT_FALSE(r->integrity().corruption.has_value());
      EXPECT_TRUE(r->integrity().warnings.empty());
      EXPECT_EQ(r->integrity().index_used, use_index);
      for (size_t i = 0; i < names.size(); ++i) {
        const uint32_t occ = occurrences.empty() ? 0 : occurrences[i];
        const Record* hit = r->find(names[i], occ);
        ASSERT_NE(hit, nullptr) << names[i];
        EXPECT_EQ(hit->info.name, names[i]);
        EXPECT_EQ(hit->info.occurrence, occ);
        EXPECT_EQ(hit, &r->records()[i]);
      }
      EXPECT_EQ(r->find(names[0], 1u << 30), nullptr);
      EXPECT_EQ(r->find(names[0] + "x"), nullptr);
      EXPECT_EQ(r->find(""), nullptr);
    }
  }
}

TEST(IndexCollision, TheGeneratorMakesOneCluster) {
  const auto names = colliding_names(1000, 20, 0xBCDE);
  for (const auto& n : names) {
    EXPECT_EQ(fnv1a64(n) & 0xFFFF, 0xBCDEu) << n;
    EXPECT_EQ(fnv1a64(n) & 0xFFFFF, fnv1a64(names[0]) & 0xFFFFF) << n;
  }
  std::unordered_map<std::string, int> distinct;
  for (const auto& n : names) ++distinct[n];
  EXPECT_EQ(distinct.size(), names.size());
}

// 5000 names with one home slot, the last one: the cluster wraps around to slot 0. The table is
// the one the spec's probing loop builds, byte for byte, and every name is found in every mode.
TEST(IndexCollision, OneClusterThatWrapsRoundTrips) {
  const size_t n = 5000;
  const uint64_t m = 16384;  // smallest power of two >= 2n
  const auto names = colliding_names(n, 24, m - 1);
  const Written x = write(names);
  ASSERT_EQ(x.n, n);
  ASSERT_EQ(x.m, m);
  std::vector<uint64_t> hashes;
  for (const auto& s : names) hashes.push_back(fnv1a64(s));
  const auto want = probing_loop(hashes, m);
  EXPECT_EQ(slots_of(x), want);
  EXPECT_NE(want[0], 0u);  // the cluster did wrap
  expect_round_trip(x, names);
}

// Colliding names mixed with ordinary ones, in interleaved order: several clusters that merge.
TEST(IndexCollision, MixedNamesMatchTheProbingLoop) {
  auto names = colliding_names(1500, 24, 100);
  const auto more = colliding_names(1500, 24, 4000);
  for (size_t i = 0; i < more.size(); ++i) {
    names.push_back("b." + more[i]);  // a prefix changes the hash: another cluster somewhere
    names.push_back(more[i]);
    names.push_back("layer." + std::to_string(i));
  }
  const Written x = write(names);
  std::vector<uint64_t> hashes;
  for (const auto& s : names) hashes.push_back(fnv1a64(s));
  EXPECT_EQ(slots_of(x), probing_loop(hashes, x.m));
  expect_round_trip(x, names);
}

// One name, 3000 occurrences: every FNV-1a hash equal, so the index is one cluster; each
// occurrence is still found (and is its own record).
TEST(IndexCollision, OneNameManyOccurrences) {
  std::vector<std::string> names(3000, "encoder.block");
  std::vector<uint32_t> occ(names.size());
  for (size_t i = 0; i < occ.size(); ++i) occ[i] = static_cast<uint32_t>(i);
  const Written x = write(names, occ);
  std::vector<uint64_t> hashes(names.size(), fnv1a64("encoder.block"));
  EXPECT_EQ(slots_of(x), probing_loop(hashes, x.m));
  expect_round_trip(x, names, occ);
}

// A slot table that differs from the probing loop's inside the cluster is bad_index at the
// first slot that differs, as before: swapping two neighbours of the cluster.
TEST(IndexCollision, SwappedSlotsInTheClusterAreBadIndexAtTheFirst) {
  const auto names = colliding_names(2000, 24, 77);
  Written x = write(names);
  const uint64_t s = 77 + 500;
  const uint32_t a = load_le<uint32_t>(x.bytes.data() + x.slots_at + 4 * s);
  const uint32_t b = load_le<uint32_t>(x.bytes.data() + x.slots_at + 4 * (s + 1));
  store_le<uint32_t>(x.bytes.data() + x.slots_at + 4 * s, b);
  store_le<uint32_t>(x.bytes.data() + x.slots_at + 4 * (s + 1), a);
  const uint64_t end = x.bytes.size() - 64;
  dstest::refresh_record_crcs(x.bytes, load_le<uint64_t>(x.bytes.data() + end + kFrameSize));
  auto r = Reader::from_memory(x.bytes, {Verify::full, true, false});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->integrity().state, FileState::corrupt);
  ASSERT_TRUE(r->integrity().corruption.has_value());
  EXPECT_EQ(r->integrity().corruption->code, Errc::bad_index);
  EXPECT_EQ(r->integrity().corruption->offset, x.slots_at + 4 * s);
  EXPECT_FALSE(r->integrity().index_used);
  for (const auto& nm : names) EXPECT_NE(r->find(nm), nullptr);  // the scan still answers
}

}  // namespace
