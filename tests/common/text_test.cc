#include "crosstune/text.h"

#include <gtest/gtest.h>

namespace crosstune {
namespace {

TEST(Text, AcceptsWellFormedUtf8) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("room=B\xc3\xbcro"));
  EXPECT_TRUE(IsValidUtf8("\xe2\x82\xac \xf0\x9f\x98\x80"));
}

TEST(Text, RefusesLatin1OverlongSurrogatesAndTruncation) {
  EXPECT_FALSE(IsValidUtf8("room=B\xfcro"));      // Latin-1
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // over U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // cut short
  EXPECT_FALSE(IsValidUtf8(std::string("a\xff", 2)));
}

TEST(Text, RepairsInvalidBytesWithReplacementCharacter) {
  EXPECT_EQ(ToValidUtf8("B\xfcro"), "B\xef\xbf\xbdro");
  EXPECT_EQ(ToValidUtf8("B\xc3\xbcro"), "B\xc3\xbcro");
  EXPECT_TRUE(IsValidUtf8(ToValidUtf8("\xe2\x82\xc3")));
}

TEST(Text, EscapesControlCharactersForOneLogLine) {
  EXPECT_EQ(EscapeForLog("alice\n[info] forged"), "alice\\n[info] forged");
  EXPECT_EQ(EscapeForLog("a\rb\x1b[31mc\x7f"), "a\\rb\\x1b[31mc\\x7f");
  EXPECT_EQ(EscapeForLog("back\\slash"), "back\\\\slash");
  EXPECT_EQ(EscapeForLog("B\xfcro"), "B\\xfcro");
  EXPECT_EQ(EscapeForLog("B\xc3\xbcro"), "B\xc3\xbcro");
  EXPECT_EQ(EscapeForLog("nel\xc2\x85"), "nel\\xc2\\x85");
  EXPECT_EQ(EscapeForLog(std::string(1000, 'x'), 10), std::string(10, 'x') + "...");
}

}  // namespace
}  // namespace crosstune
