// The farm's tuning records in the tracker (tracker/records.h), without a network: the stores'
// records (the tracker's SQLite database and PostgreSQL, the same tests against each; PostgreSQL
// a real local server, test support's LocalPostgres), the nearest device kind, the checks of what
// clients send, claims and the per-sender throttle.
#include "crosstune/tracker/records.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "crosstune/crypto.h"
#include "crosstune/testing/local_postgres.h"
#include "crosstune/testing/support.h"
#include "crosstune/tracker/pg_records.h"
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

using crosstune::testing::LocalPostgres;

// Each test runs against each store: "sqlite" (a file of its own) and "postgresql".
class RecordsStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() != "postgresql") return;
    conninfo_ = LocalPostgres::NewDatabase("records");
    if (conninfo_.empty()) {
      GTEST_SKIP() << "no PostgreSQL server: " << LocalPostgres::Shared().why();
    }
  }
  void TearDown() override {
    std::error_code ec;
    for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(path_ + s, ec);
  }
  // The store, opened afresh (again: a tracker restarted on the same database).
  Expected<std::unique_ptr<RecordStore>> Open() {
    if (GetParam() == "postgresql") {
      CT_ASSIGN_OR_RETURN(auto pg, PgRecordStore::Open(conninfo_));
      return std::unique_ptr<RecordStore>(std::move(pg));
    }
    CT_ASSIGN_OR_RETURN(auto sqlite, Store::Open(path_));
    return std::unique_ptr<RecordStore>(std::move(sqlite));
  }
  std::string path_ = (std::filesystem::temp_directory_path() /
                       ("crosstune-records-test-" + RandomHex(6) + ".sqlite"))
                          .string();
  std::string conninfo_;
};

INSTANTIATE_TEST_SUITE_P(Stores, RecordsStoreTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

TEST_P(RecordsStoreTest, KeepsEachRecordOnceAcrossRetriesAndReopens) {
  {
    auto store = Open();
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
  auto store = Open();
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

TEST_P(RecordsStoreTest, PagesThroughRecordsAndPicksTheBestPerGenerator) {
  auto store = Open();
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

TEST_P(RecordsStoreTest, AConfigIsMeasuredWhenARecordOfItsGeneratorIsKept) {
  auto store = Open();
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)
                  ->PutRecords("r", "s", 1,
                               {Rec(1, 0.001), Rec(2, 0.002, "x86_64/znver4", "g2"),
                                Rec(3, 0.003, "aarch64/cortex-a72")})
                  .ok());
  msg::RecordsClaim claim;
  claim.run_id = "r2";
  claim.task = "matmul 64,64,64 float32";
  claim.target = "llvm -mcpu=znver4";
  claim.device_kind = "x86_64/znver4";
  claim.configs = {1, 2, 3, 4};
  claim.generators = {"g1", "g1", "g1", "g1"};
  auto measured = (*store)->MeasuredConfigs(claim);
  ASSERT_TRUE(measured.ok()) << measured.status().ToString();
  // 2 has a record of another generator only, 3 of another kind only, 4 none.
  EXPECT_EQ(*measured, std::vector<uint64_t>{1});
  claim.generators = {"g2", "g2", "g2", "g2"};
  EXPECT_EQ(*(*store)->MeasuredConfigs(claim), std::vector<uint64_t>{2});
}

TEST_P(RecordsStoreTest, ListsEachTaskTargetAndKindWithItsBestInPages) {
  auto store = Open();
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto other_task = [](msg::FarmRecord r) {
    r.task = "conv2d 1,64,56,56 float32";
    r.json += " ";  // another record
    return r;
  };
  ASSERT_TRUE((*store)->PutRecords("run-a", "alice", 1, {Rec(1, 0.004), Rec(2, 0.001)}).ok());
  ASSERT_TRUE((*store)
                  ->PutRecords("run-b", "bob", 2,
                               {Rec(3, 0.001), Rec(4, 0.002, "aarch64/cortex-a72"),
                                Rec(5, 0, "riscv64/u74"), other_task(Rec(6, 0.003))})
                  .ok());
  msg::RecordsList list;
  list.limit = 10;
  auto all = (*store)->ListRecords(list);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->rows.size(), 4u);
  EXPECT_FALSE(all->more);
  // Byte order: conv2d first; aarch64 < riscv64 < x86_64.
  EXPECT_EQ(all->rows[0].task, "conv2d 1,64,56,56 float32");
  EXPECT_EQ(all->rows[1].device_kind, "aarch64/cortex-a72");
  EXPECT_EQ(all->rows[2].device_kind, "riscv64/u74");
  EXPECT_EQ(all->rows[2].records, 1u);
  EXPECT_EQ(all->rows[2].best_mean, 0) << "nothing succeeded there";
  EXPECT_EQ(all->rows[2].best_run_id, "");
  const auto& x86 = all->rows[3];
  EXPECT_EQ(x86.device_kind, "x86_64/znver4");
  EXPECT_EQ(x86.records, 3u);
  EXPECT_EQ(x86.best_mean, 0.001);
  EXPECT_EQ(x86.best_config, 2u) << "of two equal bests, the older";
  EXPECT_EQ(x86.best_run_id, "run-a");
  EXPECT_EQ(x86.best_sender, "alice");

  // Pages of one, resumed after the last row; a prefix keeps to its tasks.
  list.limit = 1;
  std::vector<std::string> kinds;
  for (;;) {
    auto page = (*store)->ListRecords(list);
    ASSERT_TRUE(page.ok());
    ASSERT_LE(page->rows.size(), 1u);
    if (page->rows.empty()) break;
    kinds.push_back(page->rows[0].task.substr(0, 6) + page->rows[0].device_kind);
    list.after_task = page->rows[0].task;
    list.after_target = page->rows[0].target;
    list.after_kind = page->rows[0].device_kind;
    if (!page->more) break;
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"conv2dx86_64/znver4", "matmulaarch64/cortex-a72",
                                             "matmulriscv64/u74", "matmulx86_64/znver4"}));
  msg::RecordsList matmul;
  matmul.task_prefix = "matmul";
  matmul.limit = 10;
  auto some = (*store)->ListRecords(matmul);
  ASSERT_TRUE(some.ok());
  EXPECT_EQ(some->rows.size(), 3u);
}

// PostgreSQL only: a second tracker on the same database sees the first one's records at once,
// and a store whose connection the server dropped connects again for the next call.
TEST(PgRecordStoreTest, TwoTrackersShareOneDatabaseAndALostConnectionComesBack) {
  const std::string db = LocalPostgres::NewDatabase("shared");
  if (db.empty()) GTEST_SKIP() << "no PostgreSQL server: " << LocalPostgres::Shared().why();
  auto one = PgRecordStore::Open(db);
  auto two = PgRecordStore::Open(db);
  ASSERT_TRUE(one.ok() && two.ok()) << one.status().ToString() << two.status().ToString();
  EXPECT_NE((*one)->name().find("/shared_"), std::string::npos) << (*one)->name();
  ASSERT_TRUE((*one)->PutRecords("r", "alice", 1, {Rec(1, 0.001)}).ok());
  auto put = (*two)->PutRecords("r", "bob", 2, {Rec(1, 0.001), Rec(2, 0.002)});
  ASSERT_TRUE(put.ok());
  EXPECT_EQ(put->added, 1u);
  EXPECT_EQ(put->duplicates, 1u) << "the other tracker's record is the same record";
  EXPECT_EQ(*(*one)->RecordCount(), 2);

  // The server ends every other session of this database (as a restart of it would).
  auto r = crosstune::testing::RunCommand(
      "psql -q -At '" + db +
      "' -c 'SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = "
      "current_database() AND pid <> pg_backend_pid()'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out, "2\n");
  auto count = (*one)->RecordCount();
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  EXPECT_EQ(*count, 2);
  auto again = (*two)->PutRecords("r", "bob", 3, {Rec(3, 0.003)});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->added, 1u);

  auto nowhere = PgRecordStore::Open("host=/nonexistent-crosstune-dir port=5432 dbname=x");
  ASSERT_FALSE(nowhere.ok());
  EXPECT_EQ(nowhere.status().code(), ErrorCode::kDisconnected);
  EXPECT_NE(nowhere.status().message().find("records database"), std::string::npos)
      << nowhere.status().message();
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

TEST_P(RecordsStoreTest, AQueryFallsBackToTheNearestKindAndSaysSo) {
  auto store = Open();
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

// Where no kind has records of the task for the target asked, a query with any_target takes the
// nearest kind's for another target (of the same architecture), and says which.
TEST_P(RecordsStoreTest, AQueryForAnyTargetTakesTheNearestKindOfAnotherTarget) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  auto on = [](const std::string& target, uint64_t config, const std::string& kind) {
    msg::FarmRecord r = Rec(config, 0.001 * static_cast<double>(config), kind);
    r.target = target;
    r.json.insert(1, "\"t\":\"" + target + "\",");
    return r;
  };
  ASSERT_TRUE((*store)
                  ->PutRecords("r", "s", 1,
                               {on("llvm -mattr=+avx512f", 1, "x86_64/Intel Xeon"),
                                on("llvm -mattr=+avx2", 2, "x86_64/Intel Xeon"),
                                on("llvm -mattr=+avx2", 3, "x86_64/Intel Xeon"),
                                on("llvm -mattr=+neon", 4, "aarch64/cortex-a72")})
                  .ok());
  msg::RecordsQuery q;
  q.task = "matmul 64,64,64 float32";
  q.target = "llvm -mattr=+avx512f,+avx512vnni";
  q.device_kind = "x86_64/AMD EPYC";
  auto same = QueryRecords(**store, q);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_TRUE(same->records.empty()) << "without any_target: this target's records only";
  EXPECT_EQ(same->target, q.target);
  q.any_target = true;
  auto other = QueryRecords(**store, q);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_FALSE(other->exact);
  EXPECT_EQ(other->device_kind, "x86_64/Intel Xeon");
  EXPECT_EQ(other->target, "llvm -mattr=+avx2") << "the kind's target with most records";
  ASSERT_EQ(other->records.size(), 2u);
  EXPECT_EQ(other->records[0].config_index, 2u);
  // None of another architecture.
  q.device_kind = "riscv64/sifive-u74";
  auto none = QueryRecords(**store, q);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->records.empty());
  // The target asked has records of another kind: that kind first, as before.
  ASSERT_TRUE((*store)->PutRecords("r", "s", 1, {on(q.target, 5, "x86_64/AMD EPYC 7B13")}).ok());
  q.device_kind = "x86_64/AMD EPYC";
  auto near = QueryRecords(**store, q);
  ASSERT_TRUE(near.ok());
  EXPECT_EQ(near->device_kind, "x86_64/AMD EPYC 7B13");
  EXPECT_EQ(near->target, q.target);
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
