// The farm's tuning records against a real tracker (tracker/records.h): two runs claiming the
// same configs, a retry kept once, a flooding sender throttled alone, a tracker killed in the
// middle of a flood that loses no record it acknowledged (records in its SQLite database, or in
// PostgreSQL), and two trackers sharing one PostgreSQL database (a real local server,
// test support's LocalPostgres).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <set>
#include <thread>

#include "crosstune/crypto.h"
#include "crosstune/testing/local_postgres.h"
#include "farm.h"

namespace crosstune::testing {
namespace {

using namespace std::chrono_literals;

const char* kTask = "matmul 64,64,64 float32";
const char* kTarget = "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4";
const char* kKind = "x86_64/AMD EPYC 9R14";

msg::FarmRecord Rec(uint64_t config, double mean, const std::string& tag = "") {
  msg::FarmRecord r;
  r.task = kTask;
  r.target = kTarget;
  r.device_kind = kKind;
  r.generator = "0123456789abcdef";
  r.config_index = config;
  r.ok = true;
  r.mean = mean;
  r.json = "{\"config\":{\"index\":" + std::to_string(config) + "},\"tag\":\"" + tag + "\"}";
  return r;
}

msg::RecordsClaim Claim(const std::string& run, std::vector<uint64_t> configs) {
  msg::RecordsClaim c;
  c.run_id = run;
  c.task = kTask;
  c.target = kTarget;
  c.device_kind = kKind;
  c.generators.assign(configs.size(), "0123456789abcdef");
  c.configs = std::move(configs);
  return c;
}

std::vector<msg::FarmRecord> AllRecords(client::TrackerClient& c) {
  std::vector<msg::FarmRecord> out;
  msg::RecordsQuery q;
  q.task = kTask;
  q.target = kTarget;
  q.device_kind = kKind;
  q.nearest = false;
  for (;;) {
    auto r = c.QueryRecords(q);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) break;
    out.insert(out.end(), r->records.begin(), r->records.end());
    if (!r->more || r->records.empty()) break;
    q.after_id = r->records.back().id;
  }
  return out;
}

TEST(TrackerRecordsTest, TwoRunsNeverGetTheSameConfigAndARetryIsKeptOnce) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker());
  auto alice = farm.Client("alice");
  auto bob = farm.Client("bob");
  ASSERT_TRUE(alice && bob);

  auto a = alice->ClaimRecords(Claim("run-a", {1, 2, 3, 4}));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = bob->ClaimRecords(Claim("run-b", {3, 4, 5, 6}));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->granted, (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(b->granted, (std::vector<uint64_t>{5, 6})) << "3 and 4 are alice's run's";

  // Alice's records arrive: their configs are measured for everyone from then on.
  auto put = alice->PutRecords("run-a", {Rec(1, 0.004), Rec(2, 0.003), Rec(3, 0.002)});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->added, 3u);
  auto again = alice->PutRecords("run-a", {Rec(3, 0.002)});  // a retry after a lost reply
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->added, 0u);
  EXPECT_EQ(again->duplicates, 1u);
  auto b2 = bob->ClaimRecords(Claim("run-b", {1, 2, 3, 4, 7}));
  ASSERT_TRUE(b2.ok());
  EXPECT_EQ(b2->measured, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(b2->granted, (std::vector<uint64_t>{7})) << "4 is still alice's";

  auto records = AllRecords(*bob);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].sender, "alice");
  msg::RecordsQuery best;
  best.task = kTask;
  best.target = kTarget;
  best.device_kind = "x86_64/AMD EPYC 7B13";  // none of these: the nearest kind's, said
  best.best_only = true;
  auto got = bob->QueryRecords(best);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->exact);
  EXPECT_EQ(got->device_kind, kKind);
  ASSERT_EQ(got->records.size(), 1u);
  EXPECT_EQ(got->records[0].config_index, 3u);

  // What a client sends is checked: the tracker answers with the reason and keeps serving.
  msg::FarmRecord bad = Rec(9, 0.001);
  bad.json = std::string(5000, '[') + std::string(5000, ']');
  auto refused = alice->PutRecords("run-a", {bad});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("deeper"), std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(alice->PutRecords("run-a", {Rec(9, 0.001)}).ok());
}

TEST(TrackerRecordsTest, AFloodingSenderIsThrottledWhileOthersAreServed) {
  Farm farm;
  // A low rate, so that a sender outpaces it however slowly this build runs (a sanitizer's).
  ASSERT_TRUE(farm.StartTracker({"--records-per-second", "100", "--records-burst", "1000"}));
  client::TrackerOptions o;
  o.tracker = farm.tracker();
  o.peer_name = "flood";
  o.request_timeout = 2s;  // PutRecords waits out Busy this long at most
  auto flood = client::TrackerClient::Connect(o);
  ASSERT_TRUE(flood.ok());
  auto quiet = farm.Client("quiet");
  ASSERT_TRUE(quiet);
  // Far over the burst at once: refused as Busy before the end.
  std::vector<msg::FarmRecord> many;
  for (uint64_t i = 0; i < 5'000; ++i) many.push_back(Rec(1000 + i, 0.001));
  auto put = (*flood)->PutRecords("flood-run", many);
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.status().code(), ErrorCode::kBusy) << put.status().ToString();
  EXPECT_NE(put.status().message().find("flood"), std::string::npos) << put.status().message();
  auto fine = quiet->PutRecords("quiet-run", {Rec(1, 0.001, "quiet")});
  ASSERT_TRUE(fine.ok()) << fine.status().ToString();
  EXPECT_EQ(fine->added, 1u);
}

// The number of records the tracker's last start said it holds.
uint64_t LoggedRecordCount(const std::string& log) {
  static const std::regex re(R"((\d+) (?:tuning )?record\(s\))");
  uint64_t n = 0;
  bool found = false;
  for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it) {
    n = std::stoull((*it)[1]);
    found = true;
  }
  EXPECT_TRUE(found) << "the tracker's log says nothing of its records:\n" << log;
  return n;
}

void KillDuringAFlood(const std::vector<std::string>& store_flags) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker(store_flags, /*held_port=*/true));
  std::atomic<uint64_t> acked{0};  // configs [0, acked) were acknowledged
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    client::TrackerOptions o;
    o.tracker = farm.tracker();
    o.peer_name = "writer";
    auto c = client::TrackerClient::Connect(o);
    if (!c.ok()) return;
    for (uint64_t next = 0; !stop.load();) {
      std::vector<msg::FarmRecord> batch;
      for (int i = 0; i < 50; ++i) batch.push_back(Rec(next + i, 0.001));
      if (!(*c)->PutRecords("flood", batch).ok()) return;  // the tracker went away
      next += 50;
      acked.store(next);
    }
  });
  ASSERT_TRUE(Eventually([&] { return acked.load() >= 2000; }, 30s));
  farm.KillTracker(SIGKILL);
  stop.store(true);
  writer.join();
  const uint64_t acknowledged = acked.load();
  ASSERT_TRUE(farm.StartTracker(store_flags, /*held_port=*/true));
  // The restarted tracker says how many records it found (the last such line: the log may hold
  // the first start's too).
  const std::string log = ReadFile(farm.Path("tracker.log"));
  EXPECT_GE(LoggedRecordCount(log), acknowledged) << log;
  auto reader = farm.Client("reader");
  ASSERT_TRUE(reader);
  std::set<uint64_t> kept;
  for (const auto& r : AllRecords(*reader)) kept.insert(r.config_index);
  for (uint64_t i = 0; i < acknowledged; ++i) {
    ASSERT_TRUE(kept.count(i)) << "acknowledged record " << i << " of " << acknowledged
                               << " is gone after kill -9";
  }
  std::printf("%llu records acknowledged before kill -9, %zu kept\n",
              static_cast<unsigned long long>(acknowledged), kept.size());
}

TEST(TrackerRecordsTest, ATrackerKilledDuringAFloodLosesNoRecordItAcknowledged) {
  Farm farm;
  KillDuringAFlood({"--db", farm.Path("tracker.sqlite")});
}

// A tracker given a damaged database starts anyway: it moves the file aside, says in its log what
// was damaged, where the file is kept and what came back, and serves the records it recovered.
TEST(TrackerRecordsTest, ATrackerGivenADamagedDatabaseSaysWhatItRecoveredAndServesIt) {
  Farm farm;
  const std::string db = farm.Path("tracker.sqlite");
  ASSERT_TRUE(farm.StartTracker({"--db", db}));
  constexpr uint64_t kPut = 2000;
  {
    auto writer = farm.Client("writer");
    ASSERT_TRUE(writer);
    for (uint64_t i = 0; i < kPut; i += 250) {
      std::vector<msg::FarmRecord> batch;
      for (uint64_t j = i; j < i + 250; ++j) {
        char tag[16];
        std::snprintf(tag, sizeof(tag), "rec-%06llu", static_cast<unsigned long long>(j));
        batch.push_back(Rec(j, 0.001, tag + std::string(200, 'p')));  // many pages
      }
      auto put = writer->PutRecords("run", batch);
      ASSERT_TRUE(put.ok()) << put.status().ToString();
    }
  }
  farm.KillTracker(SIGTERM);
  ASSERT_FALSE(std::filesystem::exists(db + "-wal")) << "a clean stop folds the WAL into the file";
  // Garble the page that holds record 1000.
  std::string bytes = ReadFile(db);
  const size_t at = bytes.find("rec-001000");
  ASSERT_NE(at, std::string::npos);
  std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(at / 4096 * 4096), 4096, '\xa5');
  WriteFile(db, bytes);

  ASSERT_TRUE(farm.StartTracker({"--db", db}));
  static const std::regex re(
      R"(database (\S+) was damaged \(.+\): kept as (\S+), recovered (\d+) records, (\d+) )"
      R"(sessions, (\d+) active leases; unreadable: records ids (\d+)-(\d+))");
  std::smatch m;
  std::string log;
  ASSERT_TRUE(Eventually([&] {
    log = ReadFile(farm.Path("tracker.log"));
    return std::regex_search(log, m, re);
  })) << log;
  EXPECT_EQ(m[1], db);
  EXPECT_EQ(ReadFile(m[2]), bytes) << "the damaged file is kept as it was";
  EXPECT_FALSE(std::filesystem::exists(m[2].str() + "-wal")) << "the original had no WAL";
  const uint64_t recovered = std::stoull(m[3]);
  const uint64_t first = std::stoull(m[6]), last = std::stoull(m[7]);
  EXPECT_EQ(LoggedRecordCount(log), recovered);
  EXPECT_EQ(recovered, kPut - (last - first + 1)) << "one page lost, every other record back";
  // Served: the records on both sides of the lost page (ids from 1: record i has id i + 1).
  auto reader = farm.Client("reader");
  ASSERT_TRUE(reader);
  const auto served = AllRecords(*reader);
  EXPECT_EQ(served.size(), recovered);
  std::set<uint64_t> configs;
  for (const auto& r : served) {
    EXPECT_EQ(r.id, r.config_index + 1);
    configs.insert(r.config_index);
  }
  EXPECT_EQ(configs.count(1000), 0u);
  EXPECT_EQ(configs.count(first - 2), 1u);
  EXPECT_EQ(configs.count(last), 1u);
  EXPECT_EQ(configs.count(kPut - 1), 1u);
}

TEST(TrackerRecordsTest, ATrackerKilledDuringAFloodLosesNoRecordItAcknowledgedToPostgres) {
  const std::string db = LocalPostgres::NewDatabase("flood");
  if (db.empty()) GTEST_SKIP() << "no PostgreSQL server: " << LocalPostgres::Shared().why();
  KillDuringAFlood({"--records-db", db});
}

// Two trackers, one PostgreSQL database: what a client of one sends, a client of the other reads,
// and its configs are measured for the other's claims too; each tracker's log names the database.
TEST(TrackerRecordsTest, TwoTrackersShareTheirRecordsThroughOnePostgresDatabase) {
  const std::string db = LocalPostgres::NewDatabase("farm");
  if (db.empty()) GTEST_SKIP() << "no PostgreSQL server: " << LocalPostgres::Shared().why();
  Farm east, west;
  ASSERT_TRUE(east.StartTracker({"--records-db", db}));
  ASSERT_TRUE(west.StartTracker({"--records-db", db}));
  auto alice = east.Client("alice");
  auto bob = west.Client("bob");
  ASSERT_TRUE(alice && bob);
  auto put = alice->PutRecords("run-a", {Rec(1, 0.004), Rec(2, 0.003)});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->added, 2u);
  const auto seen = AllRecords(*bob);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].sender, "alice");
  auto claimed = bob->ClaimRecords(Claim("run-b", {1, 2, 3}));
  ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
  EXPECT_EQ(claimed->granted, std::vector<uint64_t>{3}) << "1 and 2 were measured through east";
  // Sent again through the other tracker: the same records, kept once.
  auto again = bob->PutRecords("run-a", {Rec(1, 0.004)});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->duplicates, 1u);
  EXPECT_NE(ReadFile(west.Path("tracker.log")).find("the farm's tuning records are in PostgreSQL"),
            std::string::npos);

  // A database that is not there: the tracker does not start, and says why.
  Farm nowhere;
  EXPECT_FALSE(
      nowhere.StartTracker({"--records-db", "host=/nonexistent-crosstune port=1 dbname=x"}));
  EXPECT_NE(ReadFile(nowhere.Path("tracker.log")).find("records database"), std::string::npos)
      << ReadFile(nowhere.Path("tracker.log"));
}

}  // namespace
}  // namespace crosstune::testing
