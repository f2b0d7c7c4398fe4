// The reserved attribute ds.inputs (docs/format.md §3.3.3): grammar, escapes, errors, and the
// golden vector valid/dataflow.tdump read through the public Reader.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "driftscope/dataflow.hpp"
#include "driftscope/reader.hpp"

using namespace driftscope;

TEST(DataFlow, RoundTripWithEscapes) {
  std::vector<TensorRef> refs = {{"encoder.layer.0", Role::output, 0, 0},
                                 {"a,b\\c", Role::input, 65535, 4294967295u},
                                 {"x:/y", Role::parameter, 2, 7}};
  std::string text = format_inputs(refs);
  EXPECT_EQ(text, "output/0/0:encoder.layer.0,input/65535/4294967295:a\\,b\\\\c,parameter/2/7:x:/y");
  auto back = parse_inputs(text);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, refs);
  EXPECT_TRUE(parse_inputs("")->empty());
}

TEST(DataFlow, RejectsWhatTheGrammarDoesNot) {
  for (std::string_view bad : {"output/0/0:", "output/0:x", "outp/0/0:x", "output/01/0:x",
                               "output/65536/0:x", "output/0/4294967296:x", "output/0/0:a\\b",
                               "output/0/0:a\\", "output/0/0:x,", ",output/0/0:x",
                               "output/-1/0:x", "output/0/0x"}) {
    auto r = parse_inputs(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.error().code, Errc::bad_value) << bad;
      EXPECT_NE(r.error().to_string().find("at byte"), std::string::npos) << bad;
    }
  }
}

TEST(DataFlow, Kinds) {
  for (auto k : {TensorKind::value, TensorKind::index, TensorKind::shape, TensorKind::mask})
    EXPECT_EQ(parse_tensor_kind(tensor_kind_name(k)), k);
  EXPECT_FALSE(parse_tensor_kind("Float").has_value());
}

TEST(DataFlow, GoldenVector) {
  const std::string dir = std::string(DS_SOURCE_DIR) + "/tests/vectors";
  auto reader = Reader::open(dir + "/valid/dataflow.tdump");
  ASSERT_TRUE(reader.ok()) << reader.error().to_string();
  std::ifstream f(dir + "/valid/dataflow.json");
  auto side = nlohmann::json::parse(f);
  const auto& recs = reader->records();
  ASSERT_EQ(recs.size(), side["records"].size());
  for (size_t i = 0; i < recs.size(); ++i) {
    const auto& want = side["records"][i]["dataflow"];
    std::optional<std::string> inputs, kind;
    for (const auto& [k, v] : recs[i].info.attrs) {
      if (k == kInputsAttr) inputs = v;
      if (k == kKindAttr) kind = v;
    }
    EXPECT_EQ(kind.value_or(""), want["kind"].get<std::string>());
    if (want["inputs"].is_null()) {
      EXPECT_FALSE(inputs.has_value());
      continue;
    }
    ASSERT_TRUE(inputs.has_value());
    auto refs = parse_inputs(*inputs);
    ASSERT_TRUE(refs.ok()) << refs.error().to_string();
    ASSERT_EQ(refs->size(), want["inputs"].size());
    for (size_t j = 0; j < refs->size(); ++j) {
      const auto& w = want["inputs"][j];
      EXPECT_EQ((*refs)[j].name(), w[0].get<std::string>());
      EXPECT_EQ(role_name((*refs)[j].role), w[1].get<std::string>());
      EXPECT_EQ((*refs)[j].role_index, w[2].get<int>());
      EXPECT_EQ((*refs)[j].occurrence, w[3].get<uint32_t>());
    }
  }
}
