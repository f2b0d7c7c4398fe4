// Sparse<C> (driftscope/detail/sparse.hpp), CompactOptional<T> (driftscope/compact_optional.hpp),
// Interned (driftscope/detail/interned.hpp), SharedString (driftscope/detail/shared_string.hpp), InlineVector<T, N> (driftscope/detail/inline_vector.hpp) and
// Pooled<T> (driftscope/detail/pooled.hpp):
// the compact members of PairResult, TensorDesc and Criteria behave as the std::vector /
// std::string / std::optional they stand for (value semantics on copy and move, assignment,
// comparison, the sentinel's edges), and they are what makes those structures small (issue 13 §5).
#include <algorithm>
#include <bit>
#include <span>
#include <type_traits>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "driftscope/compact_optional.hpp"
#include "driftscope/compare.hpp"
#include "driftscope/dataflow.hpp"
#include "driftscope/reader.hpp"
#include "driftscope/detail/inline_vector.hpp"
#include "driftscope/detail/interned.hpp"
#include "driftscope/detail/pooled.hpp"
#include "driftscope/detail/shared_string.hpp"
#include "driftscope/detail/sparse.hpp"
#include "compare/report_access.hpp"
#include "format/record_table.hpp"

using driftscope::CompactOptional;
using driftscope::detail::InlineVector;
using driftscope::detail::Interned;
using driftscope::detail::Pooled;
using driftscope::detail::SharedString;
using driftscope::detail::Sparse;

TEST(Sparse, VectorValueSemantics) {
  Sparse<std::vector<int>> a;
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.begin(), a.end());
  EXPECT_TRUE(a.get().empty());
  for (int x : a) ADD_FAILURE() << "an empty Sparse iterates nothing, got " << x;
  EXPECT_TRUE(a == std::vector<int>{});

  a.push_back(1);
  a.emplace_back(2);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0], 1);
  EXPECT_EQ(a.back(), 2);
  EXPECT_EQ(a.front(), 1);
  a[1] = 5;
  EXPECT_EQ(a, (std::vector<int>{1, 5}));

  Sparse<std::vector<int>> b = a;  // a deep copy
  b.push_back(3);
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(b.size(), 3u);
  EXPECT_FALSE(a == b);
  b = a;
  EXPECT_TRUE(a == b);
  const auto& self = b;
  b = self;  // self-assignment keeps the value
  EXPECT_EQ(b, (std::vector<int>{1, 5}));

  Sparse<std::vector<int>> c = std::move(b);
  EXPECT_EQ(c, a);
  const std::vector<int>& view = c;  // converts to the container
  EXPECT_EQ(view, (std::vector<int>{1, 5}));

  std::vector<int> more{7, 8, 9};
  c.append(more.begin(), more.end());
  EXPECT_EQ(c, (std::vector<int>{1, 5, 7, 8, 9}));
  c.assign(more.begin(), more.begin() + 1);
  EXPECT_EQ(c, (std::vector<int>{7}));
  c.clear();
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c.data(), nullptr);
  c = std::vector<int>{4, 4};
  EXPECT_EQ(c.size(), 2u);
  c = std::vector<int>{};  // assigning nothing frees the container
  EXPECT_TRUE(c.empty());
  c = {1, 2, 3};
  c.resize(1);
  EXPECT_EQ(c, (std::vector<int>{1}));
  c.resize(0);
  EXPECT_TRUE(c.empty());
  // Two empties are equal however they became empty.
  EXPECT_EQ(c, Sparse<std::vector<int>>());
}

TEST(Sparse, StringValueSemantics) {
  Sparse<std::string> s;
  EXPECT_TRUE(s.empty());
  EXPECT_STREQ(s.c_str(), "");
  EXPECT_TRUE(s == "");
  EXPECT_EQ(std::string_view(s), "");
  s = "shards";
  EXPECT_TRUE(s == "shards");
  EXPECT_FALSE(s == "shard");
  EXPECT_TRUE(s == std::string("shards"));
  EXPECT_TRUE(s == std::string_view("shards"));
  s += "; more";
  EXPECT_EQ(s.get(), "shards; more");
  std::string copy = s;
  EXPECT_EQ(copy, "shards; more");
  Sparse<std::string> t = std::string(100, 'x');  // longer than any small-string buffer
  Sparse<std::string> u = t;
  t = "";
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(u.size(), 100u);
}

TEST(CompactOptional, BehavesAsOptionalDouble) {
  CompactOptional<double> a;
  EXPECT_FALSE(a.has_value());
  EXPECT_FALSE(a);
  EXPECT_TRUE(a == std::nullopt);
  EXPECT_THROW((void)a.value(), std::bad_optional_access);
  EXPECT_EQ(a.value_or(3), 3.0);
  EXPECT_EQ(std::optional<double>(a), std::nullopt);

  a = 0.25;
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, 0.25);
  EXPECT_EQ(a.value(), 0.25);
  EXPECT_TRUE(a == 0.25);
  EXPECT_EQ(std::optional<double>(a), std::optional<double>(0.25));

  CompactOptional<double> b = a;
  EXPECT_TRUE(b == a);
  b = std::nullopt;
  EXPECT_FALSE(b);
  EXPECT_FALSE(a == b);
  b = std::optional<double>(-0.0);
  ASSERT_TRUE(b);
  EXPECT_TRUE(std::signbit(*b));  // the bits survive
  b.reset();
  EXPECT_FALSE(b);
  b.emplace(1e300);
  EXPECT_EQ(*b, 1e300);

  // Every value but the one reserved bit pattern is a value: ±inf, the ordinary NaN, other NaNs.
  for (double v : {HUGE_VAL, -HUGE_VAL, std::numeric_limits<double>::quiet_NaN(),
                   -std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::denorm_min(),
                   std::numeric_limits<double>::lowest(),
                   std::bit_cast<double>(driftscope::CompactOptionalTraits<double>::kNoneBits + 1)}) {
    CompactOptional<double> c = v;
    EXPECT_TRUE(c.has_value()) << v;
    EXPECT_EQ(std::bit_cast<uint64_t>(*c), std::bit_cast<uint64_t>(v));
  }
  // NaN compares as std::optional's NaN: unequal even to itself.
  CompactOptional<double> nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(nan == nan);
  // The reserved pattern itself reads back as no value (documented).
  CompactOptional<double> reserved = driftscope::CompactOptionalTraits<double>::none();
  EXPECT_FALSE(reserved.has_value());
}

TEST(CompactOptional, BehavesAsOptionalInt64) {
  CompactOptional<int64_t> a;
  EXPECT_FALSE(a);
  a = 0;
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, 0);
  a = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(*a, std::numeric_limits<int64_t>::max());
  a = std::numeric_limits<int64_t>::min() + 1;
  EXPECT_TRUE(a);
  a = std::numeric_limits<int64_t>::min();  // the reserved value
  EXPECT_FALSE(a);
  std::optional<int64_t> o = CompactOptional<int64_t>(7);
  EXPECT_EQ(o, 7);
}

TEST(Interned, ValueSemanticsAndSharing) {
  Interned e;
  EXPECT_TRUE(e.empty());
  EXPECT_STREQ(e.c_str(), "");
  EXPECT_TRUE(e == "");
  Interned a = "Linear", b = std::string("Linear"), c = std::string_view("Softmax");
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a == c);
  EXPECT_EQ(a.data(), b.data());  // one copy in the pool
  EXPECT_TRUE(a == "Linear");
  EXPECT_TRUE(a == std::string("Linear"));
  const std::string& ref = a;
  EXPECT_EQ(ref, "Linear");
  EXPECT_EQ(std::string_view(c), "Softmax");
  a += "; light mode";
  EXPECT_EQ(a.get(), "Linear; light mode");
  EXPECT_EQ(b.get(), "Linear");  // the pooled value is never changed
  Interned moved = std::move(a);
  EXPECT_EQ(moved.get(), "Linear; light mode");
  a = moved;
  EXPECT_TRUE(a == moved);
  a = "";
  EXPECT_TRUE(a.empty());

  // Longer than kMaxLength: a copy of its own, still a value like any other.
  const std::string long_text(Interned::kMaxLength + 1, 'x');
  Interned l1 = long_text, l2 = long_text;
  EXPECT_NE(l1.data(), l2.data());
  EXPECT_TRUE(l1 == l2);
  Interned l3 = l1;  // a deep copy
  EXPECT_NE(l3.data(), l1.data());
  l1 = "short";
  EXPECT_EQ(l3.get(), long_text);
  l2 = std::move(l3);
  EXPECT_EQ(l2.get(), long_text);
  EXPECT_TRUE(l3.empty());
}

TEST(SharedString, ValueSemanticsAndSharing) {
  SharedString e;
  EXPECT_TRUE(e.empty());
  EXPECT_EQ(e.size(), 0u);
  EXPECT_STREQ(e.c_str(), "");
  EXPECT_TRUE(e == "");
  EXPECT_TRUE(e == SharedString(""));
  const std::string long_name = "model.layers.31.self_attn.q_proj.output";
  SharedString a = long_name, b = std::string_view(long_name), c = "Softmax";
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a.shares_with(b));  // made twice: two blocks, equal values
  EXPECT_FALSE(a == c);
  EXPECT_STREQ(a.c_str(), long_name.c_str());  // NUL-terminated
  EXPECT_EQ(a.str(), long_name);
  EXPECT_EQ(std::string(a), long_name);
  EXPECT_EQ(std::string_view(a), long_name);
  EXPECT_EQ(a.size(), long_name.size());
  EXPECT_TRUE(a.starts_with("model.") && a.ends_with(".output"));
  EXPECT_EQ(a.substr(6, 6), "layers");
  EXPECT_EQ(a.find("q_proj"), long_name.find("q_proj"));
  EXPECT_TRUE(c < a);  // ordered as the text is ("S" < "m")
  EXPECT_EQ("x." + c, "x.Softmax");
  EXPECT_EQ(fmt::format("[{}]", c), "[Softmax]");
  std::ostringstream os;
  os << c;
  EXPECT_EQ(os.str(), "Softmax");

  // Copies share the block; each owner lets go of it independently.
  SharedString copy = a;
  EXPECT_TRUE(copy.shares_with(a));
  EXPECT_EQ(copy.data(), a.data());
  a = "other";
  EXPECT_EQ(copy.str(), long_name);
  EXPECT_EQ(a.str(), "other");
  SharedString moved = std::move(copy);
  EXPECT_TRUE(copy.empty());
  EXPECT_EQ(moved.str(), long_name);
  moved = moved;  // self-assignment keeps the value
  EXPECT_EQ(moved.str(), long_name);
  b = moved;
  EXPECT_TRUE(b.shares_with(moved));
  b = "";
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(moved.str(), long_name);
  EXPECT_EQ(std::hash<SharedString>()(moved), std::hash<std::string_view>()(long_name));
}

// The count is atomic: copies made and dropped on several threads at once leave the value intact
// (and ASan sees no double free or leak when the last one goes).
TEST(SharedString, CopiesOnManyThreads) {
  SharedString shared = std::string(100, 'n');
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&shared] {
      for (int i = 0; i < 20000; ++i) {
        SharedString c = shared;
        SharedString d = std::move(c);
        if (d.size() != 100) std::abort();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(shared.str(), std::string(100, 'n'));
}

// Each thread remembers the values it made lately (no lock for a repeat), but the copy is the
// pool's: made on any thread, in any rotation wider than that memory, a value is one copy.
TEST(Interned, RepeatsOnEveryThreadShareThePoolsCopy) {
  std::vector<std::string> values;
  for (int i = 0; i < 200; ++i) values.push_back("Linear  model.py:" + std::to_string(i));
  std::vector<const char*> first;
  for (const auto& v : values) first.push_back(Interned(v).data());
  ASSERT_EQ(first.back(), Interned(values.back()).data()) << "the pool is full: run this test on its own";
  std::vector<std::thread> threads;
  std::vector<int> wrong(3, 0);
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round)
        for (size_t i = 0; i < values.size(); ++i) {
          Interned x = values[(i * 7 + t) % values.size()];
          if (x.data() != first[(i * 7 + t) % values.size()] || x.get() != values[(i * 7 + t) % values.size()])
            ++wrong[t];
        }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, std::vector<int>(3, 0));
}

// Text from a file cannot grow the pool without bound: past kMaxValues distinct values, each
// new one is a copy of its own and still reads back exactly.
TEST(Interned, PoolIsBounded) {
  std::vector<Interned> many;
  for (size_t i = 0; i < Interned::kMaxValues + 10; ++i) many.emplace_back("interned-test-" + std::to_string(i));
  for (size_t i = 0; i < many.size(); ++i) ASSERT_EQ(many[i].get(), "interned-test-" + std::to_string(i));
  Interned again = "interned-test-" + std::to_string(Interned::kMaxValues + 9);
  EXPECT_NE(again.data(), many.back().data());  // not pooled: the pool was full
  EXPECT_TRUE(again == many.back());
}

// The reason they exist: rarely set members cost 8 bytes, and the structures held once per pair
// of a report stay at the sizes measured for issue 13 §5 (a million pairs).
TEST(Compact, StructuresHeldByTheMillionStaySmall) {
  EXPECT_EQ(sizeof(Sparse<std::vector<uint32_t>>), 8u);
  EXPECT_EQ(sizeof(Sparse<std::string>), 8u);
  EXPECT_EQ(sizeof(CompactOptional<double>), 8u);
  EXPECT_EQ(sizeof(CompactOptional<int64_t>), 8u);
  EXPECT_EQ(sizeof(driftscope::Criteria), 72u);
  EXPECT_EQ(sizeof(Interned), 8u);
  EXPECT_EQ(sizeof(SharedString), 8u);
  EXPECT_EQ(sizeof(InlineVector<uint64_t, 2>), sizeof(std::vector<uint64_t>));
  EXPECT_EQ(sizeof(Pooled<driftscope::Criteria>), 8u);
  EXPECT_LE(sizeof(driftscope::TensorDesc), 72u);
  // 184 (was 232): the coordinates of the first mismatch and of the largest difference are
  // computed from their indexes when asked (issue 30 §4). The first mismatch's index and values
  // (24 bytes) stay inline, not in Metrics::Rare: a failing comparison sets them on nearly every
  // pair, where a box would cost 144 bytes each.
  EXPECT_LE(sizeof(driftscope::Metrics), 184u);
  // 440 (was 576, with r64_rms and r64_u of issue 26 §5): the members set for a minority of pairs
  // (permutation, parameter pairs, detail, layout, the float64 rule's six numbers, the shard
  // check) sit in one box, PairRare, and Metrics shrank by 72 (issue 30 item 4: 160 MB less for a
  // million pairs).
  EXPECT_LE(sizeof(driftscope::PairResult), 440u);
  EXPECT_LE(sizeof(driftscope::detail::PairRare), 96u);
  // Data flow (issue 30 item 4): an input's name is one pointer that a comparison shares with the
  // named tensor's (was a std::string: 40 bytes a reference), and the box of a description with
  // data flow is 56 bytes (was 72, 80 with the allocator's: ranks, set by dump sets only, are Sparse).
  EXPECT_EQ(sizeof(driftscope::TensorRef), 16u);
  EXPECT_LE(sizeof(driftscope::detail::ReportAccess::DescRare), 56u);
}

TEST(InlineVector, ValueSemanticsInlineAndOnTheHeap) {
  using V = InlineVector<uint64_t, 2>;
  V a;
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.begin(), a.end());
  EXPECT_TRUE(a == std::vector<uint64_t>{});
  a.push_back(1);
  a.emplace_back(2);
  EXPECT_TRUE(a.is_inline());  // two elements: no heap block
  EXPECT_EQ(a, (std::vector<uint64_t>{1, 2}));
  a.push_back(3);              // grows onto the heap, keeping the elements
  EXPECT_FALSE(a.is_inline());
  EXPECT_EQ(a, (std::vector<uint64_t>{1, 2, 3}));
  a.push_back(a[0]);           // an element of its own, read before growing
  EXPECT_EQ(a, (std::vector<uint64_t>{1, 2, 3, 1}));
  EXPECT_EQ(a.front(), 1u);
  EXPECT_EQ(a.back(), 1u);

  V b = a;  // deep copies, inline and heap
  b[0] = 9;
  EXPECT_EQ(a[0], 1u);
  V small{4, 5};
  V c = small;
  c[1] = 6;
  EXPECT_EQ(small, (std::vector<uint64_t>{4, 5}));
  EXPECT_EQ(c, (std::vector<uint64_t>{4, 6}));
  b = small;  // heap -> fewer elements: the values, not the storage, are copied
  EXPECT_EQ(b, small);
  const V& self = a;
  a = self;
  EXPECT_EQ(a, (std::vector<uint64_t>{1, 2, 3, 1}));

  V moved = std::move(a);  // heap: the block moves, the source is left empty
  EXPECT_EQ(moved, (std::vector<uint64_t>{1, 2, 3, 1}));
  EXPECT_TRUE(a.empty());
  a = std::move(small);    // inline: copied over
  EXPECT_EQ(a, (std::vector<uint64_t>{4, 5}));
  EXPECT_TRUE(small.empty());
  a.push_back(7);          // a moved-from vector is usable
  EXPECT_EQ(a, (std::vector<uint64_t>{4, 5, 7}));

  const std::vector<uint64_t> v = a;  // converts to std::vector and std::span
  EXPECT_EQ(v, (std::vector<uint64_t>{4, 5, 7}));
  std::span<const uint64_t> s = a;
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(s[2], 7u);
  V from_vector = std::vector<uint64_t>{};
  EXPECT_TRUE(from_vector.empty());
  from_vector = std::vector<uint64_t>{1, 2, 3, 4, 5};
  EXPECT_EQ(from_vector.size(), 5u);
  EXPECT_TRUE(from_vector < a);  // lexicographic, as std::vector ({1,2,3,4,5} < {4,5,7})
  EXPECT_FALSE(a < from_vector);
  EXPECT_FALSE(from_vector == a);
}

TEST(InlineVector, ResizeEraseAssignEdges) {
  InlineVector<uint64_t, 2> a(3, 7);
  EXPECT_EQ(a, (std::vector<uint64_t>{7, 7, 7}));
  a.resize(1);
  EXPECT_EQ(a, (std::vector<uint64_t>{7}));
  a.resize(4, 2);
  EXPECT_EQ(a, (std::vector<uint64_t>{7, 2, 2, 2}));
  a = {3, 1, 3, 2, 1};
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());  // the sort-unique idiom of origins.cpp
  EXPECT_EQ(a, (std::vector<uint64_t>{1, 2, 3}));
  a.erase(a.begin(), a.begin() + 1);
  EXPECT_EQ(a, (std::vector<uint64_t>{2, 3}));
  a.pop_back();
  EXPECT_EQ(a, (std::vector<uint64_t>{2}));
  a.clear();
  EXPECT_TRUE(a.empty());
  const std::vector<uint64_t> big(1000, 5);
  a.assign(big.begin(), big.end());
  EXPECT_EQ(a, big);
  a.reserve(10);  // never shrinks
  EXPECT_GE(a.capacity(), 1000u);
  EXPECT_EQ(a, big);
}

struct PoolTestValue {
  double x = 0;
  int64_t n = 0;
};

TEST(Pooled, SharesEqualValuesAndKeepsValueSemantics) {
  Pooled<PoolTestValue> none;
  EXPECT_EQ(none->x, 0.0);  // T{}
  Pooled<PoolTestValue> a = PoolTestValue{1.5, 2};
  Pooled<PoolTestValue> b = PoolTestValue{1.5, 2};
  EXPECT_EQ(&a.get(), &b.get());  // one copy of equal values
  EXPECT_TRUE(a == b);
  Pooled<PoolTestValue> c = PoolTestValue{1.5, 3};
  EXPECT_NE(&a.get(), &c.get());
  EXPECT_FALSE(a == c);
  c = a;
  EXPECT_TRUE(c == a);
  EXPECT_EQ(c->n, 2);
  Pooled<PoolTestValue> d = std::move(c);
  EXPECT_EQ(d->n, 2);
  const PoolTestValue& view = d;
  EXPECT_EQ(view.x, 1.5);
  d = PoolTestValue{};  // back to the default, which needs no pool entry
  EXPECT_TRUE(d == PoolTestValue{});
  // NaN is a value like any other: compared by its bytes, it is pooled too.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Pooled<PoolTestValue> n1 = PoolTestValue{nan, 0}, n2 = PoolTestValue{nan, 0};
  EXPECT_EQ(&n1.get(), &n2.get());
}

TEST(Pooled, BoundedPoolGivesOwnCopiesWhenFull) {
  std::vector<Pooled<PoolTestValue>> many;
  for (size_t i = 0; i < Pooled<PoolTestValue>::kMaxValues + 10; ++i)
    many.emplace_back(PoolTestValue{0.25, static_cast<int64_t>(i) + 1000});
  for (size_t i = 0; i < many.size(); ++i) ASSERT_EQ(many[i]->n, static_cast<int64_t>(i) + 1000);
  Pooled<PoolTestValue> again = PoolTestValue{0.25, static_cast<int64_t>(many.size()) + 999};
  EXPECT_NE(&again.get(), &many.back().get());  // not pooled: the pool was full
  EXPECT_TRUE(again == many.back());
  Pooled<PoolTestValue> copy = again;           // an own copy is copied deeply
  EXPECT_NE(&copy.get(), &again.get());
  EXPECT_TRUE(copy == again);
}

TEST(PairCriteria, ReadsAsTheCriteriaItHolds) {
  driftscope::PairResult p;
  EXPECT_TRUE(p.criteria().empty());
  EXPECT_EQ(p.criteria().to_string(), driftscope::Criteria{}.to_string());
  driftscope::Criteria c;
  c.atol = 1e-3;
  c.min_cosine = 0.99;
  driftscope::detail::ReportAccess::criteria(p) = c;
  EXPECT_TRUE(p.criteria().uses_allclose());
  EXPECT_EQ(*p.criteria().atol, 1e-3);
  EXPECT_EQ(p.criteria().to_string(), c.to_string());
  const driftscope::PairResult copy = p;  // the copy shares the pooled value
  EXPECT_EQ(&copy.criteria(), &p.criteria());
  EXPECT_EQ(*copy.criteria().min_cosine, 0.99);
}

// The report model reads as plain types (issue 25 item 5): the containers above are storage in
// namespace detail, held in private members; a client sees views, references and pointers.
template <class T, class U>
constexpr bool returns = std::is_same_v<T, U>;
TEST(PublicApi, ReportReadsAsPlainTypes) {
  using driftscope::PairResult;
  using driftscope::TensorDesc;
  const PairResult p{};
  static_assert(returns<decltype(p.ref.name()), std::string_view>);
  static_assert(returns<decltype(p.ref.op_type()), const std::string&>);
  static_assert(returns<decltype(p.ref.shape()), std::span<const uint64_t>>);
  static_assert(returns<decltype(p.ref.inputs()), std::span<const driftscope::TensorRef>>);
  static_assert(returns<decltype(p.reasons()), const std::vector<driftscope::Reason>&>);
  static_assert(returns<decltype(p.notes()), const std::vector<std::string>&>);
  static_assert(returns<decltype(p.criteria()), const driftscope::Criteria&>);
  static_assert(returns<decltype(p.criteria_source()), const std::string&>);
  static_assert(returns<decltype(p.basis()), const std::string&>);
  static_assert(returns<decltype(p.basis_pairs()), std::span<const size_t>>);
  static_assert(returns<decltype(p.detail()), const driftscope::PairDetail*>);
  static_assert(returns<decltype(p.layout()), const driftscope::LayoutDiagnosis*>);
  static_assert(returns<decltype(p.max_abs_coords()), std::vector<uint64_t>>);
  static_assert(returns<decltype(driftscope::Reason{}.code()), const std::string&>);
  static_assert(returns<decltype(p.ref.inputs()[0].name()), std::string_view>);
  static_assert(returns<decltype(driftscope::Record{}.summary()), const driftscope::Summary*>);
  // The defaults read as empty values without a box or a container behind them.
  EXPECT_TRUE(p.ref.name().empty());
  EXPECT_TRUE(p.ref.shape().empty());
  EXPECT_TRUE(p.ref.inputs().empty());
  EXPECT_TRUE(p.reasons().empty());
  EXPECT_TRUE(p.basis_pairs().empty());
  EXPECT_EQ(p.detail(), nullptr);
  EXPECT_EQ(p.layout(), nullptr);
  // The engine's writes show through the accessors.
  PairResult q;
  driftscope::detail::ReportAccess::reasons(q).push_back({"allclose", "over tolerance"});
  driftscope::detail::ReportAccess::shape(q.ref) = {2, 3};
  driftscope::detail::ReportAccess::edit(q).layout = driftscope::LayoutDiagnosis{};
  ASSERT_EQ(q.reasons().size(), 1u);
  EXPECT_EQ(q.reasons()[0].code(), "allclose");
  EXPECT_TRUE(std::ranges::equal(q.ref.shape(), std::vector<uint64_t>{2, 3}));
  ASSERT_NE(q.layout(), nullptr);
  EXPECT_EQ(q.layout()->hypothesis, "none");
}

// The two public structs that held detail types in public members (issue 25 item 5): a recorded
// input's name and a record's decoded summary read as a view and a pointer; the members are gone
// (before, TensorRef::name was a detail::SharedString and Record::summary a detail::Boxed<Summary>).
template <class T>
concept NameIsAPublicMember = requires(const T& t) { t.name.view(); };
template <class T>
concept SummaryIsAPublicMember = requires(const T& t) { t.summary.has_value(); };
TEST(PublicApi, InputsAndRecordsReadAsPlainTypes) {
  using driftscope::Record;
  using driftscope::Role;
  using driftscope::TensorRef;
  static_assert(!NameIsAPublicMember<TensorRef>);
  static_assert(!SummaryIsAPublicMember<Record>);
  static_assert(returns<decltype(TensorRef{}.role), Role>);
  static_assert(returns<decltype(TensorRef{}.role_index), uint16_t>);
  static_assert(returns<decltype(TensorRef{}.occurrence), uint32_t>);

  const TensorRef t{"encoder.layers.0.out", Role::input, 2, 7};
  EXPECT_EQ(t.name(), "encoder.layers.0.out");
  EXPECT_EQ(t.role, Role::input);
  EXPECT_EQ(t.role_index, 2);
  EXPECT_EQ(t.occurrence, 7u);
  TensorRef u = t;
  EXPECT_TRUE(u == t);
  EXPECT_TRUE(driftscope::detail::ReportAccess::name(u).shares_with(driftscope::detail::ReportAccess::name(t)));
  u.occurrence = 8;
  EXPECT_FALSE(u == t);
  EXPECT_FALSE((TensorRef{"encoder.layers.0.ou", Role::input, 2, 7} == t));
  EXPECT_TRUE(TensorRef{}.name().empty());

  Record rec;
  EXPECT_EQ(rec.summary(), nullptr);  // a TENSOR record
  driftscope::Summary s;
  s.projection_seed = 42;
  s.projection = {1.5f, -2.0f};
  driftscope::detail::ReaderAccess::set_summary(rec, std::move(s));
  ASSERT_NE(rec.summary(), nullptr);
  EXPECT_EQ(rec.summary()->projection_seed, 42u);
  const Record copy = rec;  // copies the summary, as the std::optional it was
  ASSERT_NE(copy.summary(), nullptr);
  EXPECT_NE(copy.summary(), rec.summary());
  EXPECT_EQ(copy.summary()->projection, (std::vector<float>{1.5f, -2.0f}));
}
