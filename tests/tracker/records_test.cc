// The farm's tuning records in the tracker (tracker/records.h), without a network: the SQLite
// store's records, the nearest device kind, the checks of what clients send, claims and the
// per-sender throttle.
#include "crosstune/tracker/records.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "crosstune/crypto.h"
#include "crosstune/tracker/store.h"

namespace crosstune::tracker {
namespace {

using Clock = std::chrono::steady_clock;

msg::FarmRecord Rec(uint64_t config, double mean, const std::string& kind = "x86_64/znver4",
                    const std::string& generator = "g1") {
  msg::FarmRecord r;
  r.task = "matmul 64,64,64 float32";
  r.target = "llvm -mcpu=znver4";
  r.device_kind = kind;
  r.generator = generator;
  r.config_index = config;
  r.ok = mean > 0;
  r.mean = mean;
  r.json = "{\"config\":{\"index\":" + std::to_string(config) +
           "},\"mean\":" + std::to_string(mean) + ",\"kind\":\"" + kind + "\",\"g\":\"" +
           generator + "\"}";
  return r;
}

class RecordsStoreTest : public ::testing::Test {
 protected:
  void TearDown() override {
    std::error_code ec;
    for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(path_ + s, ec);
  }
  std::string path_ = (std::filesystem::temp_directory_path() /
                       ("crosstune-records-test-" + RandomHex(6) + ".sqlite"))
                          .string();
};

TEST_F(RecordsStoreTest, KeepsEachRecordOnceAcrossRetriesAndReopens) {
  {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto put = (*store)->PutRecords("run1", "alice", 1000, {Rec(1, 0.002), Rec(2, 0.001)});
    ASSERT_TRUE(put.ok()) << put.status().ToString();
    EXPECT_EQ(put->added, 2u);
    EXPECT_EQ(put->duplicates, 0u);
    // A retry of the same message (its reply was lost), and one new record beside it.
    put = (*store)->PutRecords("run1", "alice", 2000, {Rec(2, 0.001), Rec(3, 0.004)});
    ASSERT_TRUE(put.ok());
    EXPECT_EQ(put->added, 1u);
    EXPECT_EQ(put->duplicates, 1u);
  }
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(*(*store)->RecordCount(), 3);
  auto all = (*store)->RecordsOf("matmul 64,64,64 float32", "llvm -mcpu=znver4", "x86_64/znver4",
                                 false, 0, 10);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->records.size(), 3u);
  EXPECT_EQ(all->records[0].config_index, 1u);
  EXPECT_EQ(all->records[0].sender, "alice");
  EXPECT_EQ(all->records[0].received_unix_ms, 1000);
  EXPECT_EQ(all->records[2].config_index, 3u);
  EXPECT_EQ(all->records[2].json, Rec(3, 0.004).json) << "kept as sent";
  EXPECT_FALSE(all->more);
}

TEST_F(RecordsStoreTest, PagesThroughRecordsAndPicksTheBestPerGenerator) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  std::vector<msg::FarmRecord> recs;
  for (uint64_t c = 1; c <= 7; ++c) recs.push_back(Rec(c, 0.001 * static_cast<double>(8 - c)));
  recs.push_back(Rec(8, 0));                              // failed: never a best
  recs.push_back(Rec(9, 0.0001, "x86_64/znver4", "g2"));  // another generator's
  msg::FarmRecord early = Rec(10, 0.00001);
  early.stopped_early = true;  // a lower bound, never a best
  recs.push_back(early);
  recs.push_back(Rec(11, 0.00001, "aarch64/cortex-a72"));  // another kind
  ASSERT_TRUE((*store)->PutRecords("r", "s", 1, recs).ok());

  const std::string task = "matmul 64,64,64 float32", target = "llvm -mcpu=znver4";
  auto page = (*store)->RecordsOf(task, target, "x86_64/znver4", false, 0, 4);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->records.size(), 4u);
  EXPECT_TRUE(page->more);
  auto rest =
      (*store)->RecordsOf(task, target, "x86_64/znver4", false, page->records.back().id, 10);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->records.size(), 6u);
  EXPECT_FALSE(rest->more);

  auto best = (*store)->RecordsOf(task, target, "x86_64/znver4", true, 0, 0);
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->records.size(), 2u);
  EXPECT_EQ(best->records[0].config_index, 7u);  // g1's fastest
  EXPECT_EQ(best->records[1].config_index, 9u);  // g2's only one

  auto kinds = (*store)->RecordKinds(task, target);
  ASSERT_TRUE(kinds.ok());
  EXPECT_EQ(kinds->at("x86_64/znver4"), 10);
  EXPECT_EQ(kinds->at("aarch64/cortex-a72"), 1);
}

TEST(NearestKind, ExactThenSameArchByLeadingWordsThenMoreRecords) {
  const std::map<std::string, int64_t> kinds = {{"x86_64/AMD EPYC 9R14", 5},
                                                {"x86_64/AMD EPYC 7B13", 50},
                                                {"x86_64/Intel(R) Xeon(R) Processor", 9},
                                                {"aarch64/cortex-a72", 100}};
  EXPECT_EQ(NearestKind("x86_64/AMD EPYC 9R14", kinds), "x86_64/AMD EPYC 9R14");
  // Two share "AMD EPYC": the one with more records.
  EXPECT_EQ(NearestKind("x86_64/AMD EPYC 9654", kinds), "x86_64/AMD EPYC 7B13");
  EXPECT_EQ(NearestKind("x86_64/Intel(R) Xeon(R) Gold 6348", kinds),
            "x86_64/Intel(R) Xeon(R) Processor");
  EXPECT_EQ(NearestKind("aarch64/cortex-a53", kinds), "aarch64/cortex-a72");
  EXPECT_EQ(NearestKind("riscv64/sifive-u74", kinds), "") << "no kind of another arch";
}

TEST_F(RecordsStoreTest, AQueryFallsBackToTheNearestKindAndSaysSo) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->PutRecords("r", "s", 1, {Rec(1, 0.001, "x86_64/AMD EPYC 7B13")}).ok());
  msg::RecordsQuery q;
  q.task = "matmul 64,64,64 float32";
  q.target = "llvm -mcpu=znver4";
  q.device_kind = "x86_64/AMD EPYC 9R14";
  auto near = QueryRecords(**store, q);
  ASSERT_TRUE(near.ok()) << near.status().ToString();
  EXPECT_FALSE(near->exact);
  EXPECT_EQ(near->device_kind, "x86_64/AMD EPYC 7B13");
  EXPECT_EQ(near->records.size(), 1u);
  q.nearest = false;
  auto exact = QueryRecords(**store, q);
  ASSERT_TRUE(exact.ok());
  EXPECT_TRUE(exact->exact);
  EXPECT_TRUE(exact->records.empty());
}

TEST(ValidateRecord, RefusesWhatIsNotABoundedJsonObjectByName) {
  EXPECT_TRUE(ValidateRecord(Rec(1, 0.001)).ok());
  msg::FarmRecord r = Rec(1, 0.001);
  r.json = std::string(100'000, '[') + std::string(100'000, ']');  // deep: no stack overflow
  Status s = ValidateRecord(r);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  r.json = std::string(2000, '[') + std::string(2000, ']');
  s = ValidateRecord(r);
  EXPECT_NE(s.message().find("deeper"), std::string::npos) << s.message();
  r.json = "[1, 2]";
  EXPECT_NE(ValidateRecord(r).message().find("not a JSON object"), std::string::npos);
  r = Rec(1, 0.001);
  r.mean = std::nan("");
  EXPECT_NE(ValidateRecord(r).message().find("mean"), std::string::npos);
  r = Rec(1, 0.001);
  r.device_kind = "";
  EXPECT_NE(ValidateRecord(r).message().find("device kind is empty"), std::string::npos);
  r = Rec(1, 0.001);
  r.task = "\xff\xfe";
  EXPECT_NE(ValidateRecord(r).message().find("UTF-8"), std::string::npos);

  msg::RecordsClaim c;
  c.run_id = "r";
  c.task = "t";
  c.target = "x";
  c.device_kind = "k";
  c.configs = {1, 2};
  c.generators = {"g"};
  EXPECT_NE(ValidateRecordsClaim(c).message().find("2 configs and 1 generators"),
            std::string::npos);
  c.generators.clear();
  c.ttl_ms = 3'600'000;
  EXPECT_NE(ValidateRecordsClaim(c).message().find("at most 600 s"), std::string::npos);
}

msg::RecordsClaim Claim(const std::string& run, std::vector<uint64_t> configs,
                        uint32_t ttl_ms = 0) {
  msg::RecordsClaim c;
  c.run_id = run;
  c.task = "matmul 64,64,64 float32";
  c.target = "llvm -mcpu=znver4";
  c.device_kind = "x86_64/znver4";
  c.configs = std::move(configs);
  c.generators.assign(c.configs.size(), "g1");
  c.ttl_ms = ttl_ms;
  return c;
}

TEST(RecordClaims, AConfigIsTheClaimOfOneRunUntilItsRecordComesOrItsClaimLapses) {
  RecordClaims claims;
  const auto t0 = Clock::now();
  auto a = claims.Claim(t0, Claim("A", {1, 2, 3}, 1000), {});
  EXPECT_EQ(a.granted, (std::vector<uint64_t>{1, 2, 3}));
  // B gets only what A does not hold, and nothing the farm has measured.
  auto b = claims.Claim(t0, Claim("B", {2, 3, 4, 5}), {5});
  EXPECT_EQ(b.granted, (std::vector<uint64_t>{4}));
  EXPECT_EQ(b.measured, (std::vector<uint64_t>{5}));
  // A's own claims are renewed, not refused.
  EXPECT_EQ(claims.Claim(t0, Claim("A", {1}), {}).granted, (std::vector<uint64_t>{1}));
  // A's record of 2 ends its claim.
  claims.Measured(Rec(2, 0.001));
  EXPECT_EQ(claims.Claim(t0, Claim("B", {2}), {}).granted, (std::vector<uint64_t>{2}));
  // Another generator's config is another config.
  msg::RecordsClaim other = Claim("B", {3});
  other.generators = {"g2"};
  EXPECT_EQ(claims.Claim(t0, other, {}).granted, (std::vector<uint64_t>{3}));
  // A's claim of 3 lapses after its second.
  EXPECT_TRUE(
      claims.Claim(t0 + std::chrono::milliseconds(999), Claim("B", {3}), {}).granted.empty());
  EXPECT_EQ(claims.Claim(t0 + std::chrono::milliseconds(1001), Claim("B", {3}), {}).granted,
            (std::vector<uint64_t>{3}));
  claims.Expire(t0 + std::chrono::hours(1));
  EXPECT_EQ(claims.size(), 0u);
}

TEST(RecordsThrottle, ASenderOverItsRateIsRefusedAndTheOthersAreNot) {
  RecordsThrottle t(100, 1000);
  const auto t0 = Clock::now();
  EXPECT_TRUE(t.Take(t0, "flood", 1000));
  EXPECT_FALSE(t.Take(t0, "flood", 1));
  EXPECT_TRUE(t.Take(t0, "quiet", 10)) << "another sender's bucket is its own";
  EXPECT_FALSE(t.Take(t0 + std::chrono::milliseconds(50), "flood", 10));
  EXPECT_TRUE(t.Take(t0 + std::chrono::milliseconds(110), "flood", 10));
}

}  // namespace
}  // namespace crosstune::tracker
