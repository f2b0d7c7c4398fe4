// The guard's text and Markdown reports from a model (include/driftscope/report.hpp): long names
// by head, tail and SHA-1 (lengths in code points, as Python counted them), non-finite numbers
// spelled as Python's format() spells them, Markdown escapes, bad models refused.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "driftscope/report.hpp"

namespace {

using driftscope::guard_report_to_markdown;
using driftscope::guard_report_to_text;

std::string model(const std::string& diagnostics, const nlohmann::json& worst) {
  nlohmann::json m = {
      {"summary", "PASS: every available backend matches ort"},
      {"model", "m.onnx"},
      {"family", "onnx"},
      {"reference", "ort"},
      {"samples", 1},
      {"seed", 0},
      {"runs", 3},
      {"inputs_source", "synthetic"},
      {"metric", nullptr},
      {"thresholds",
       {{"min_cosine", 0.99}, {"max_rel_error", 0.2958}, {"max_norm_ratio", 1.25}, {"min_norm", 1e-4},
        {"max_argmax_flip", 0}}},
      {"inputs", {{{"name", "x"}, {"dtype", "float32"}, {"shape", {1, 4}}, {"how", "standard normal"}}}},
      {"backends", {{{"name", "b_\u00e9"}, {"status", "PASS"}, {"diagnostics", diagnostics}}}},
      {"findings", {"b matches ort."}},
      {"render", {{"argmax", "over the last axis of every output"}, {"rows", {{{"worst", worst}}}}}}};
  return m.dump();
}

TEST(GuardText, LongNamesShowHeadTailAndHash) {
  auto text = guard_report_to_text(model("at (" + std::string(81, 'n') + "),", nullptr));
  ASSERT_TRUE(text) << text.error().message;
  // Python: hashlib.sha1(b"n" * 81).hexdigest()[:6]; the brackets and the comma are kept.
  EXPECT_NE(text->find("(" + std::string(32, 'n') + "..." + std::string(32, 'n') + "~8ff0a7),"), std::string::npos)
      << *text;
  std::string e_acute;
  for (int i = 0; i < 100; ++i) e_acute += "\u00e9";  // 100 code points, 200 bytes
  auto uni = guard_report_to_text(model(e_acute, nullptr));
  ASSERT_TRUE(uni);
  EXPECT_NE(uni->find("~d36996"), std::string::npos) << *uni;
  std::string eighty;
  for (int i = 0; i < 80; ++i) eighty += "\u00e9";  // 80 code points: not long
  auto kept = guard_report_to_text(model(eighty, nullptr));
  ASSERT_TRUE(kept);
  EXPECT_NE(kept->find(eighty), std::string::npos);
}

TEST(GuardText, NonFiniteNumbersAsPythonSpellsThem) {
  auto text = guard_report_to_text(
      model("d", {{"cosine", "nan"}, {"norm_ref", "inf"}, {"norm_cand", "-inf"}, {"max_diff", 1.5e-7}}));
  ASSERT_TRUE(text);
  EXPECT_NE(text->find("b_\u00e9      PASS    nan     inf/-inf       1.5e-07   -        d"), std::string::npos)
      << *text;
  EXPECT_NE(text->find("thresholds min cosine 0.99, max relative error 0.296, norm ratio within 1.25x, min norm "
                       "0.0001, max argmax flip 0"),
            std::string::npos);
  EXPECT_NE(text->find("inputs     x float32[1, 4]: standard normal"), std::string::npos);
}

TEST(GuardMarkdown, NamesAreEscapedOnce) {
  auto md = guard_report_to_markdown(model("a*b* [x](//y) N_A \u00e9_\u00e9 _z_", {{"cosine", 1.0}}));
  ASSERT_TRUE(md);
  EXPECT_NE(md->find("| b_\u00e9 | PASS | 1 | - | - | - | a\\*b\\* \\[x\\](/\\/y) N_A \u00e9_\u00e9 \\_z\\_ |"),
            std::string::npos)
      << *md;
  EXPECT_NE(md->find("Model `m.onnx` (onnx), reference `ort`, 1 synthetic sample(s)"), std::string::npos);
}

TEST(GuardText, RefusesWhatIsNotAModel) {
  for (const char* bad : {"", "[]", "{\"summary\": \"x\", \"backends\": []}",
                          "{\"summary\": \"x\", \"backends\": [1], \"render\": {}}"}) {
    EXPECT_FALSE(guard_report_to_text(bad)) << bad;
    EXPECT_FALSE(guard_report_to_markdown(bad)) << bad;
  }
}

}  // namespace
