// base/utf8.h and base/strings.h.
#include "base/utf8.h"

#include <gtest/gtest.h>

#include "base/strings.h"

namespace kvs {
namespace {

size_t NextLen(std::string_view s) {
  uint32_t cp = 0;
  return Utf8Next(s, 0, &cp);
}

TEST(Utf8Test, NextDecodesWellFormedSequences) {
  uint32_t cp = 0;
  EXPECT_EQ(Utf8Next("a", 0, &cp), 1u);
  EXPECT_EQ(cp, 'a');
  EXPECT_EQ(Utf8Next("\xc3\xa9", 0, &cp), 2u);
  EXPECT_EQ(cp, 0xE9u);
  EXPECT_EQ(Utf8Next("\xe2\x82\xac", 0, &cp), 3u);
  EXPECT_EQ(cp, 0x20ACu);
  EXPECT_EQ(Utf8Next("\xf0\x9f\x98\x80", 0, &cp), 4u);
  EXPECT_EQ(cp, 0x1F600u);
  EXPECT_EQ(Utf8Next("\xf4\x8f\xbf\xbf", 0, &cp), 4u);
  EXPECT_EQ(cp, 0x10FFFFu);
  EXPECT_EQ(Utf8Next("ab", 2, &cp), 0u);  // past the end
}

TEST(Utf8Test, NextRefusesMalformedSequences) {
  for (std::string_view bad : {"\x80", "\xc0\xaf", "\xc1\xbf", "\xe0\x9f\xbf", "\xf0\x8f\xbf\xbf", "\xed\xa0\x80",
                               "\xed\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff", "\xe2\x82", "\xe2\x82z",
                               "\xf0\x9f\x98"}) {
    EXPECT_EQ(NextLen(bad), 0u) << ::testing::PrintToString(bad);
    EXPECT_FALSE(IsValidUtf8(bad));
  }
  EXPECT_TRUE(IsValidUtf8(std::string_view("a\0b", 3)));
  EXPECT_EQ(Utf8ValidPrefix("ab\xe2\x82\xac" "c\xff" "d"), 6u);
}

TEST(Utf8Test, LenientDecoderTakesBadBytesOneAtATime) {
  const std::string_view s = "\xe2\x82\xac\xff\xe2\x82z";
  size_t i = 0;
  EXPECT_EQ(NextCodePointLenient(s, &i), 0x20ACu);
  EXPECT_EQ(i, 3u);
  EXPECT_EQ(NextCodePointLenient(s, &i), 0xFFu);
  EXPECT_EQ(i, 4u);
  EXPECT_EQ(NextCodePointLenient(s, &i), 0xE2u);  // truncated: the lead byte alone
  EXPECT_EQ(i, 5u);
  EXPECT_EQ(NextCodePointLenient(s, &i), 0x82u);
  EXPECT_EQ(NextCodePointLenient(s, &i), uint32_t{'z'});
  EXPECT_EQ(i, s.size());
}

TEST(Utf8Test, CompletePrefixHoldsBackOnlyWhatCanStillComplete) {
  EXPECT_EQ(Utf8CompletePrefix("abc"), 3u);
  EXPECT_EQ(Utf8CompletePrefix("ab\xe2"), 2u);
  EXPECT_EQ(Utf8CompletePrefix("ab\xe2\x82"), 2u);
  EXPECT_EQ(Utf8CompletePrefix("ab\xe2\x82\xac"), 5u);
  EXPECT_EQ(Utf8CompletePrefix("\xf0\x9f\x98"), 0u);
  EXPECT_EQ(Utf8CompletePrefix("a\xe0\x80"), 3u);  // E0 80 can never be well-formed
  EXPECT_EQ(Utf8CompletePrefix("a\xed\xa0"), 3u);  // a surrogate, never well-formed
  EXPECT_EQ(Utf8CompletePrefix("a\xff"), 2u);
  EXPECT_EQ(Utf8CompletePrefix("\x80\x80\x80"), 3u);
}

TEST(Utf8Test, EncodeRoundTripsThroughDecode) {
  for (uint32_t cp : {0x0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    std::string s;
    AppendUtf8(cp, &s);
    uint32_t back = 0;
    ASSERT_EQ(Utf8Next(s, 0, &back), s.size());
    EXPECT_EQ(back, cp);
  }
}

TEST(Utf8Test, SanitizeReplacesEachBadPart) {
  EXPECT_EQ(SanitizeUtf8("ok \xc3\xa9"), "ok \xc3\xa9");
  EXPECT_EQ(SanitizeUtf8("a\xff" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(SanitizeUtf8("a\xe2\x82" "b"), "a\xEF\xBF\xBD" "b");
}

TEST(StringsTest, AsciiHelpers) {
  EXPECT_EQ(AsciiLower("Q8_0 \xc3\x89T\xc3\xa9"), "q8_0 \xc3\x89t\xc3\xa9");
  EXPECT_TRUE(EqualsIgnoreAsciiCase("Bearer", "bEARER"));
  EXPECT_FALSE(EqualsIgnoreAsciiCase("Bearer", "Bearer "));
  EXPECT_EQ(TrimAsciiSpace(" \t x y\r\n"), "x y");
  EXPECT_EQ(TrimAsciiSpace(" \t "), "");
  EXPECT_EQ(ReplaceAll("a.b.c", ".", "::"), "a::b::c");
  EXPECT_EQ(ReplaceAll("aaa", "aa", "b"), "ba");
  EXPECT_EQ(ReplaceAll("abc", "", "x"), "abc");
}

}  // namespace
}  // namespace kvs
