#include "crosstune/tuner/space.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

namespace crosstune::tuner {
namespace {

ConfigSpace SmallSpace() {
  ConfigSpace s;
  EXPECT_TRUE(s.AddSplit("tile", 16, 2).ok());               // 5 choices: 16x1, 8x2, 4x4, 2x8, 1x16
  EXPECT_TRUE(s.AddReorder("order", {"i", "j", "k"}).ok());  // 6
  EXPECT_TRUE(s.AddAnnotate("ann", {"i"}, {Annotation::kNone, Annotation::kUnroll}).ok());  // 2
  EXPECT_TRUE(s.AddCategorical("unroll", {1, 2, 4}).ok());                                  // 3
  return s;
}

TEST(ConfigSpaceTest, IndexAndValuesRoundTrip) {
  ConfigSpace s = SmallSpace();
  ASSERT_EQ(s.size(), 5u * 6 * 2 * 3);
  for (uint64_t i = 0; i < s.size(); ++i) {
    Config c = s.Get(i);
    auto back = s.IndexOf(c.choices());
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, i);
    auto from_json = s.FromJson(c.ToJson());
    ASSERT_TRUE(from_json.ok()) << from_json.status().message();
    EXPECT_EQ(from_json->index(), i);
    EXPECT_EQ(s.Features(c).size(), s.feature_length());
  }
  EXPECT_FALSE(s.IndexOf({0, 0, 0}).ok());
  EXPECT_FALSE(s.IndexOf({5, 0, 0, 0}).ok());
}

TEST(ConfigSpaceTest, ConstraintsDecideValidityAndNameTheFailure) {
  ConfigSpace s = SmallSpace();
  s.AddConstraint("inner tile at most 4", [](const Config& c) { return c.Ints("tile")[1] <= 4; });
  int valid = 0;
  for (uint64_t i = 0; i < s.size(); ++i) {
    Config c = s.Get(i);
    bool expect = c.Ints("tile")[1] <= 4;
    EXPECT_EQ(s.IsValid(c), expect);
    valid += expect;
    if (!expect) {
      Status st = s.Check(c);
      EXPECT_NE(st.message().find("inner tile at most 4"), std::string::npos) << st.message();
    }
  }
  EXPECT_EQ(valid, 3 * 6 * 2 * 3);
}

// A knob added to a template after records were made: the earlier points keep their indices
// and text, and a record without the knob means its first choice; any other missing knob is
// still an error.
TEST(ConfigSpaceTest, AKnobAddedLaterKeepsEarlierRecordsAndIndices) {
  const ConfigSpace before = SmallSpace();
  ConfigSpace s = SmallSpace();
  ASSERT_TRUE(s.AddCategorical("fast", {0, 1}).ok());
  EXPECT_EQ(s.MarkAddedLater("tile").code(), ErrorCode::kInvalidArgument);  // not the last
  ASSERT_TRUE(s.MarkAddedLater("fast").ok());
  ASSERT_EQ(s.size(), before.size() * 2);
  for (uint64_t i = 0; i < before.size(); ++i) {
    const nlohmann::json old = before.Get(i).ToJson();
    auto c = s.FromJson(old);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->index(), i);
    EXPECT_EQ(c->Int("fast"), 0);
    EXPECT_EQ(c->ToString(), before.Get(i).ToString());
    EXPECT_NE(s.Get(i + before.size()).ToString().find("fast=1"), std::string::npos);
  }
  nlohmann::json no_tile = before.Get(0).ToJson();
  no_tile.erase("tile");
  EXPECT_EQ(s.FromJson(no_tile).status().code(), ErrorCode::kNotFound);
}

TEST(ConfigSpaceTest, PinsKeepOnlyTheirValueAndTheNumbering) {
  ConfigSpace s = SmallSpace();
  const ConfigSpace whole = s;
  ASSERT_TRUE(s.Pin("unroll", 4).ok());
  ASSERT_TRUE(s.Pin("order", nlohmann::json::array({"k", "i", "j"})).ok());
  int valid = 0;
  for (uint64_t i = 0; i < s.size(); ++i) {
    Config c = s.Get(i);
    EXPECT_EQ(c.ToJson(), whole.Get(i).ToJson());  // the same point under the same index
    const bool expect =
        c.Int("unroll") == 4 && c.Value("order") == nlohmann::json::array({"k", "i", "j"});
    EXPECT_EQ(s.IsValid(c), expect) << c.ToString();
    valid += expect;
    if (!expect) {
      EXPECT_NE(s.Check(c).message().find("pin "), std::string::npos);
    }
  }
  EXPECT_EQ(valid, 5 * 2);  // tile and ann stay free

  Status unknown = s.Pin("unrol", 4);
  EXPECT_EQ(unknown.code(), ErrorCode::kNotFound);
  EXPECT_NE(unknown.message().find("no knob 'unrol' (knobs: tile, order, ann, unroll)"),
            std::string::npos)
      << unknown.message();
  Status no_choice = s.Pin("unroll", 3);
  EXPECT_EQ(no_choice.code(), ErrorCode::kNotFound);
  EXPECT_NE(no_choice.message().find("has no choice 3 (choices: 1, 2, 4)"), std::string::npos)
      << no_choice.message();
  EXPECT_EQ(s.Pin("unroll", "4").code(), ErrorCode::kNotFound);  // a string is not the number
}

TEST(UniqueSamplerTest, DrawsEveryValidPointExactlyOnce) {
  ConfigSpace s = SmallSpace();
  s.AddConstraint("odd", [](const Config& c) { return c.index() % 3 != 1; });
  std::set<uint64_t> expected;
  for (uint64_t i = 0; i < s.size(); ++i) {
    if (s.IsValid(s.Get(i))) expected.insert(i);
  }
  UniqueSampler sampler(s, 7);
  sampler.Exclude(*expected.begin());
  std::set<uint64_t> drawn;
  while (auto next = sampler.Next()) {
    EXPECT_TRUE(drawn.insert(*next).second) << "drew " << *next << " twice";
    EXPECT_TRUE(s.IsValid(s.Get(*next)));
  }
  expected.erase(expected.begin());  // excluded before the first draw
  EXPECT_EQ(drawn, expected);
}

TEST(ConfigSpaceTest, NeighboursAreValidAndDifferent) {
  ConfigSpace s = SmallSpace();
  s.AddConstraint("unroll 4 wants no annotation",
                  [](const Config& c) { return c.Int("unroll") != 4 || c.Int("ann") == 0; });
  std::mt19937_64 rng(3);
  for (uint64_t i = 0; i < s.size(); ++i) {
    Config c = s.Get(i);
    if (!s.IsValid(c)) continue;
    auto n = s.Neighbour(c, rng);
    ASSERT_TRUE(n.has_value());
    EXPECT_NE(*n, i);
    EXPECT_TRUE(s.IsValid(s.Get(*n)));
  }
}

long RssKib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

TEST(ConfigSpaceTest, ASpaceOfBillionsSamplesWithoutMemoryForItsSize) {
  ConfigSpace s;
  for (int k = 0; k < 5; ++k) {
    std::vector<int64_t> values;
    for (int v = 0; v < 100; ++v) values.push_back(v);
    ASSERT_TRUE(s.AddCategorical("k" + std::to_string(k), values).ok());
  }
  ASSERT_EQ(s.size(), 10'000'000'000ULL);
  s.AddConstraint("sum even", [](const Config& c) {
    int64_t sum = 0;
    for (int k = 0; k < 5; ++k) sum += c.Int("k" + std::to_string(k));
    return sum % 2 == 0;
  });
  long before = RssKib();
  UniqueSampler sampler(s, 1);
  std::set<uint64_t> drawn;
  std::mt19937_64 rng(1);
  for (int i = 0; i < 2000; ++i) {
    auto next = sampler.Next();
    ASSERT_TRUE(next.has_value());
    EXPECT_TRUE(drawn.insert(*next).second);
    EXPECT_TRUE(s.IsValid(s.Get(*next)));
    auto n = s.Neighbour(s.Get(*next), rng);
    ASSERT_TRUE(n.has_value());
    EXPECT_TRUE(s.IsValid(s.Get(*n)));
  }
  // A bitmap over the space alone would be 1.25 GB.
  EXPECT_LT(RssKib() - before, 64 * 1024);
}

}  // namespace
}  // namespace crosstune::tuner
