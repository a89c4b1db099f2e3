#include "crosstune/json_reader.h"

#include <gtest/gtest.h>

#include <string>

namespace crosstune {
namespace {

using json = nlohmann::json;

std::string Nested(int levels, char open = '[', char close = ']') {
  return std::string(levels, open) + std::string(levels, close);
}

// {"a":{"a":...{}...}}: `levels` objects.
std::string NestedObjects(int levels) {
  std::string s;
  for (int i = 1; i < levels; ++i) s += "{\"a\":";
  return s + "{}" + std::string(levels - 1, '}');
}

TEST(JsonReader, ReadsOrdinaryValues) {
  auto j = ParseJson(R"({"k": [1, 2.5, "x\u00fc", null, true], "o": {}})");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["k"][2], "x\xc3\xbc");
  EXPECT_TRUE((*j)["o"].is_object());
}

TEST(JsonReader, KeepsNestingUpToTheLimit) {
  auto arrays = ParseJson(Nested(kMaxJsonDepth));
  ASSERT_TRUE(arrays.ok()) << arrays.status().ToString();
  EXPECT_EQ(arrays->dump(), Nested(kMaxJsonDepth));
  EXPECT_TRUE(ParseJson(NestedObjects(kMaxJsonDepth)).ok());
}

// The case that crashed the tracker: 200 KB, 100,000 levels, under every size limit. A copy or
// dump() of such a value overflows the stack; it must never be built.
TEST(JsonReader, RefusesDeepNestingWhileParsing) {
  std::string deep = Nested(100'000);
  ASSERT_LT(deep.size(), JsonLimits{}.max_bytes);
  auto j = ParseJson(deep);
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(j.status().message(), "JSON nested deeper than 64 levels at byte 65");

  auto objects = ParseJson(NestedObjects(100'000));
  ASSERT_FALSE(objects.ok());
  EXPECT_NE(objects.status().message().find("nested deeper than 64 levels"), std::string::npos);

  // One level past the limit, after other content: the byte is the bracket's.
  auto one_more = ParseJson("[1, " + Nested(kMaxJsonDepth) + "]");
  ASSERT_FALSE(one_more.ok());
  EXPECT_EQ(one_more.status().message(), "JSON nested deeper than 64 levels at byte 68");
}

TEST(JsonReader, TakesItsDepthFromTheLimits) {
  EXPECT_TRUE(ParseJson("[[1]]", {.max_bytes = 100, .max_depth = 2}).ok());
  auto j = ParseJson("[[[1]]]", {.max_bytes = 100, .max_depth = 2});
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().message(), "JSON nested deeper than 2 levels at byte 3");
}

TEST(JsonReader, RefusesTextsOverTheSizeLimitBeforeParsing) {
  auto j = ParseJson(std::string(2000, ' ') + "1", {.max_bytes = 1000});
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().message(), "JSON text of 2001 bytes is over the limit of 1000");
}

TEST(JsonReader, SaysWhereTheSyntaxIsWrongAndEscapesWhatItQuotes) {
  auto j = ParseJson("[1, 2");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().message().rfind("not JSON: syntax error at byte 6: ", 0), 0u)
      << j.status().message();
  EXPECT_EQ(j.status().message().find("json.exception"), std::string::npos);

  auto forged = ParseJson("[\"a\nb\"]");
  ASSERT_FALSE(forged.ok());
  EXPECT_EQ(forged.status().message().find('\n'), std::string::npos) << forged.status().message();

  EXPECT_FALSE(ParseJson("\"B\xfcro\"").ok());  // strings must be UTF-8
  EXPECT_FALSE(ParseJson("1 2").ok());          // one value, nothing after it
  EXPECT_FALSE(ParseJson("").ok());
}

// The parser throws out_of_range (not parse_error) for a number past a double's range; the
// fuzzers found that the first reader let it escape (std::terminate in the tracker).
TEST(JsonReader, RefusesNumbersPastADoublesRange) {
  for (const char* text : {"1e309", "[1, -1e400]", "{\"a\": 88888e30988}"}) {
    auto j = ParseJson(text);
    ASSERT_FALSE(j.ok()) << text;
    EXPECT_EQ(j.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(j.status().message().find("not JSON: number overflow parsing"), std::string::npos)
        << j.status().message();
    EXPECT_EQ(j.status().message().find("json.exception"), std::string::npos);
  }
  auto where = ParseJson("[1, 1e309]");
  EXPECT_NE(where.status().message().find(" near byte 10"), std::string::npos)
      << where.status().message();
}

TEST(JsonExcerpt, QuotesShortValuesWhole) {
  EXPECT_EQ(JsonExcerpt(json::parse(R"({"a":[1,"x"]})")), R"({"a":[1,"x"]})");
  EXPECT_EQ(JsonExcerpt(json("line\nbreak")), "\"line\\nbreak\"");
  EXPECT_EQ(JsonExcerpt(json("del\x7f nel\xc2\x85")), "\"del\\u007f nel\\u0085\"");
}

TEST(JsonExcerpt, CutsLongValues) {
  json big = json::array();
  for (int i = 0; i < 100'000; ++i) big.push_back(i);
  std::string e = JsonExcerpt(big, 20);
  EXPECT_EQ(e, "[0,1,2,3,4,5,6,7,8,9...");
}

TEST(JsonExcerpt, StopsBeforeDeepValuesRecurseFar) {
  // Built with nlohmann's own parser (its parse does not recurse; copy and dump do).
  json deep = json::parse(Nested(100'000));
  EXPECT_EQ(JsonExcerpt(deep, 8), "[[[[[[[[...");
}

TEST(JsonExcerpt, EscapesBytesThatAreNotUtf8) {
  std::string e = JsonExcerpt(json(std::string("B\xfcro")));
  EXPECT_EQ(e.find('\xfc'), std::string::npos) << e;
  EXPECT_NE(e.find("..."), std::string::npos);
}

}  // namespace
}  // namespace crosstune
