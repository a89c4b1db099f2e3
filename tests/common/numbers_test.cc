#include "crosstune/numbers.h"

#include <gtest/gtest.h>

#include "crosstune/flag_checks.h"

namespace crosstune {
namespace {

std::string Error(const Status& s) { return s.message(); }

TEST(Numbers, ParsesIntegersInTheirRange) {
  EXPECT_EQ(*ParseIntegerIn("9090", 0, 65535), 9090);
  EXPECT_EQ(*ParseIntegerIn("+7", 0, 10), 7);
  EXPECT_EQ(*ParseIntegerIn("-1", -1, 10), -1);
  EXPECT_EQ(*ParseUnsignedIn("18446744073709551615", 0, UINT64_MAX), UINT64_MAX);
}

TEST(Numbers, NamesTheValueAndTheRangeOfAnIntegerOutsideIt) {
  EXPECT_EQ(Error(ParseIntegerIn("70000", 0, 65535).status()), "70000 is not in 0..65535");
  EXPECT_EQ(Error(ParseIntegerIn("-1", 0, 65535).status()), "-1 is not in 0..65535");
  // Past int64: refused before anything could wrap.
  EXPECT_EQ(Error(ParseIntegerIn("99999999999999999999", 1, 16).status()),
            "99999999999999999999 is not in 1..16");
  // strtoull would read "-1" as 2^64 - 1.
  EXPECT_EQ(Error(ParseUnsignedIn("-1", 1, 1u << 20).status()), "-1 is not in 1..1048576");
  EXPECT_EQ(Error(ParseUnsignedIn("0", 1, 16).status()), "0 is not in 1..16");
}

TEST(Numbers, RefusesWhatIsNotAWholeInteger) {
  for (const char* text : {"", "1.5", "1e3", "12abc", " 1", "0x10", "nan", "--1", "+"}) {
    auto v = ParseIntegerIn(text, 0, 100);
    ASSERT_FALSE(v.ok()) << text;
    EXPECT_NE(v.status().message().find("is not an integer in 0..100"), std::string::npos)
        << v.status().message();
    EXPECT_FALSE(ParseUnsignedIn(text, 0, 100).ok()) << text;
  }
}

TEST(Numbers, RefusesNanAndInfinitiesWhateverTheRange) {
  for (const char* text : {"nan", "NaN", "-nan", "inf", "-inf", "infinity", "+inf"}) {
    auto v = ParseNumberIn(text, -1e308, 1e308);
    ASSERT_FALSE(v.ok()) << text << " was accepted";
    EXPECT_NE(v.status().message().find("is not a finite number"), std::string::npos)
        << v.status().message();
  }
  EXPECT_EQ(Error(ParseNumberIn("1e999", 0, 10).status()), "1e999 is not in 0..10");
}

TEST(Numbers, NamesTheRangeOfANumberOutsideIt) {
  EXPECT_DOUBLE_EQ(*ParseNumberIn("0.5", 0, 1), 0.5);
  EXPECT_DOUBLE_EQ(*ParseNumberIn("1e-3", 0, 1), 1e-3);
  EXPECT_EQ(Error(ParseNumberIn("1e12", 0, 2592000).status()), "1e12 is not in 0..2592000");
  EXPECT_EQ(Error(ParseNumberIn("0.0001", 0.01, 3600).status()), "0.0001 is not in 0.01..3600");
  EXPECT_EQ(Error(ParseNumberIn("ten", 0, 1).status()), "'ten' is not a finite number in 0..1");
}

TEST(Numbers, SecondsBecomeMillisecondsWithoutTurningIntoNoLimit) {
  EXPECT_EQ(SecondsToMs(1.5).count(), 1500);
  EXPECT_EQ(SecondsToMs(0).count(), 0);
  EXPECT_EQ(SecondsToMs(0.0001).count(), 1);  // not 0, which means "no limit"
}

// What a binary's flag says, through CLI11 as every binary parses it.
std::string ParseError(CLI::Validator check, const std::string& value) {
  CLI::App app;
  std::string v;
  app.add_option("--flag", v)->check(std::move(check));
  try {
    app.parse(std::vector<std::string>{value, "--flag"});  // CLI11 reads the vector backwards
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(FlagChecks, StateTheFlagTheValueAndTheRange) {
  EXPECT_EQ(ParseError(IntegerIn<uint16_t>(0, 65535), "70000"), "--flag: 70000 is not in 0..65535");
  EXPECT_EQ(ParseError(IntegerIn<uint32_t>(1, 4096), "0"), "--flag: 0 is not in 1..4096");
  EXPECT_EQ(ParseError(IntegerIn<int>(-1, 65535), "-2"), "--flag: -2 is not in -1..65535");
  EXPECT_EQ(ParseError(SecondsIn(0, 86400), "nan"),
            "--flag: 'nan' is not a finite number in 0..86400 seconds");
  EXPECT_EQ(ParseError(NumberIn(0.1, 3600), "inf"),
            "--flag: 'inf' is not a finite number in 0.1..3600");
  EXPECT_EQ(ParseError(SecondsIn(0, 86400), "60"), "");
  EXPECT_EQ(ParseError(IntegerIn<uint16_t>(0, 65535), "9090"), "");
}

}  // namespace
}  // namespace crosstune
