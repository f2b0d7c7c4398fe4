// Boxed<T> (driftscope/detail/boxed.hpp) behaves as std::optional<T> where PairResult::detail/layout and
// Record::summary use it: value semantics on copy, assignment from T and from std::optional<T>,
// reset, emplace, comparison; and it is what makes those members cost a pointer (issue 13 §5).
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "driftscope/detail/boxed.hpp"
#include "driftscope/compare.hpp"
#include "driftscope/reader.hpp"

using driftscope::detail::Boxed;

TEST(Boxed, BehavesAsOptional) {
  Boxed<std::vector<int>> a;
  EXPECT_FALSE(a.has_value());
  EXPECT_FALSE(a);
  EXPECT_TRUE(a == std::nullopt);
  EXPECT_THROW((void)a.value(), std::bad_optional_access);
  EXPECT_EQ(a.value_or(std::vector<int>{7}), std::vector<int>{7});

  a = std::vector<int>{1, 2};
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->size(), 2u);
  EXPECT_EQ((*a)[1], 2);

  Boxed<std::vector<int>> b = a;  // a deep copy, as std::optional's
  b->push_back(3);
  EXPECT_EQ(a->size(), 2u);
  EXPECT_EQ(b->size(), 3u);
  EXPECT_FALSE(a == b);
  b->pop_back();
  EXPECT_TRUE(a == b);

  Boxed<std::vector<int>> c = std::move(b);
  EXPECT_TRUE(c == a);

  std::optional<std::vector<int>> none;
  c = none;
  EXPECT_FALSE(c.has_value());
  c = std::optional<std::vector<int>>(std::vector<int>{4});
  EXPECT_EQ(c.value(), std::vector<int>{4});
  c.emplace(3u, 9);
  EXPECT_EQ(*c, (std::vector<int>{9, 9, 9}));
  c.reset();
  EXPECT_FALSE(c);
  c = a;
  a = std::nullopt;
  EXPECT_FALSE(a);
  EXPECT_EQ(c->size(), 2u);
}

// The reason it exists: an empty member costs a pointer, not the value.
TEST(Boxed, RarelySetMembersCostAPointer) {
  EXPECT_EQ(sizeof(Boxed<driftscope::PairDetail>), sizeof(void*));
  EXPECT_EQ(sizeof(driftscope::detail::PairRare::layout), sizeof(void*));
  EXPECT_EQ(sizeof(Boxed<driftscope::Summary>), sizeof(void*));  // Record::summary()'s storage
}
