// driftscope::printable (include/driftscope/text.hpp): the one rule by which every driftscope
// tool shows text from a file (issue 7, bug 6).
#include <gtest/gtest.h>

#include <string>

#include "driftscope/error.hpp"
#include "driftscope/text.hpp"

using driftscope::printable;

TEST(Printable, PlainTextAndUtf8PassUnchanged) {
  EXPECT_EQ(printable("encoder.layers.0/attn:0 [x] 'q' \\n"), "encoder.layers.0/attn:0 [x] 'q' \\n");
  EXPECT_EQ(printable("µ-Übersicht 注意 \xF0\x9F\x98\x80"), "µ-Übersicht 注意 \xF0\x9F\x98\x80");
  EXPECT_EQ(printable(""), "");
}

TEST(Printable, ControlCharactersAreSpelledOut) {
  EXPECT_EQ(printable("a\x1b]0;t\x07" "b"), "a\\x1b]0;t\\x07b");
  EXPECT_EQ(printable("x\ry\nz\t"), "x\\x0dy\\x0az\\x09");
  EXPECT_EQ(printable(std::string("a\0b\x7f", 4)), "a\\x00b\\x7f");
  EXPECT_EQ(printable("\xC2\x9B" "31m"), "\\u009b31m");          // C1 CSI
  EXPECT_EQ(printable("abc\xE2\x80\xAE" "def"), "abc\\u202edef");  // RIGHT-TO-LEFT OVERRIDE
  EXPECT_EQ(printable("\xE2\x81\xA6\xE2\x80\x8F\xD8\x9C\xE2\x80\xA8"), "\\u2066\\u200f\\u061c\\u2028");
}

TEST(Printable, InvalidUtf8IsSpelledOutByteByByte) {
  EXPECT_EQ(printable("\xC0\xAF"), "\\xc0\\xaf");              // overlong '/'
  EXPECT_EQ(printable("\xED\xA0\x80"), "\\xed\\xa0\\x80");     // surrogate
  EXPECT_EQ(printable("a\xE2\x80"), "a\\xe2\\x80");            // cut sequence
  EXPECT_EQ(printable("\xF4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
}

TEST(Printable, LibraryErrorMessagesAreEscapedWhenMade) {
  driftscope::Error e = driftscope::make_error(driftscope::Errc::bad_value,
                                               "tensor 'a\x1b]0;x\x07\xE2\x80\xAE' is bad", 64);
  EXPECT_EQ(e.message, "tensor 'a\\x1b]0;x\\x07\\u202e' is bad (at offset 64)");
}

TEST(Printable, IsIdempotent) {
  for (std::string s : {"a\x1b[2Jb", "\xC2\x9B\xE2\x80\xAE\xFF", "plain", "back\\slash\r"}) {
    std::string once = printable(s);
    EXPECT_EQ(printable(once), once) << once;
  }
}
