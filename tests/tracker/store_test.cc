// The tracker's SQLite store and its renderings, without a network.
#include "crosstune/tracker/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "crosstune/crypto.h"
#include "crosstune/tracker/status_page.h"

namespace crosstune::tracker {
namespace {

LeaseRecord Lease(const std::string& token, const std::string& holder) {
  return LeaseRecord{token, "10.0.0.1:9090", "rpi4", holder, 1000, 61'000, 60'000, true};
}

class StoreTest : public ::testing::Test {
 protected:
  void TearDown() override {
    std::error_code ec;
    for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(path_ + s, ec);
  }
  std::string path_ = (std::filesystem::temp_directory_path() /
                       ("crosstune-store-test-" + RandomHex(6) + ".sqlite"))
                          .string();
};

TEST_F(StoreTest, KeepsActiveLeasesAcrossAReopenAndClosesThemInHistory) {
  {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->LeaseStarted(Lease("a", "alice")).ok());
    ASSERT_TRUE((*store)->LeaseStarted(Lease("b", "bob")).ok());
    auto renewed = Lease("a", "alice");
    renewed.expires_unix_ms = 99'000;
    ASSERT_TRUE((*store)->LeaseRenewed(renewed).ok());
    ASSERT_TRUE((*store)->LeaseEnded(Lease("b", "bob"), "released", 5000).ok());
  }
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  auto active = (*store)->ActiveLeases();
  ASSERT_TRUE(active.ok());
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ((*active)[0].token, "a");
  EXPECT_EQ((*active)[0].holder, "alice");
  EXPECT_EQ((*active)[0].expires_unix_ms, 99'000);
  EXPECT_TRUE((*active)[0].multi_session);
  auto history = (*store)->RecentHistory(10);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 2u);
  EXPECT_EQ((*history)[0].holder, "bob");  // newest first
  EXPECT_EQ((*history)[0].outcome, "released");
  EXPECT_EQ((*history)[0].end_unix_ms, 5000);
  EXPECT_EQ((*history)[1].end_unix_ms, 0) << "alice's lease is still running";
}

TEST_F(StoreTest, ReportsAnUnopenableDatabase) {
  auto store = Store::Open("/nonexistent-dir/x/tracker.sqlite");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), ErrorCode::kIoError);
  EXPECT_NE(store.status().message().find("tracker database"), std::string::npos);
}

constexpr int kRecords = 3000;
constexpr int kSessions = 400;

// Record i of FillStore's: a JSON object padded so that the records table spans many pages.
msg::FarmRecord Record(int i) {
  msg::FarmRecord r;
  r.task = "matmul 64,64,64 float32";
  r.target = "llvm";
  r.device_kind = "x86_64/test";
  r.generator = "0123456789abcdef";
  r.config_index = static_cast<uint64_t>(i);
  r.ok = true;
  r.mean = 0.001 + i * 1e-6;
  char tag[16];
  std::snprintf(tag, sizeof(tag), "rec-%06d", i);
  r.json = "{\"config\":{\"index\":" + std::to_string(i) + "},\"tag\":\"" + tag + "\",\"pad\":\"" +
           std::string(200, 'p') + "\"}";
  return r;
}

// kRecords records (ids 1..kRecords, record i with id i + 1) and kSessions ended sessions.
void FillStore(const std::string& path) {
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  for (int i = 0; i < kSessions; ++i) {
    auto l = Lease("t" + std::to_string(i), "holder-" + std::to_string(i) + std::string(64, 'x'));
    ASSERT_TRUE((*store)->LeaseStarted(l).ok());
    ASSERT_TRUE((*store)->LeaseEnded(l, "released", 5000 + i).ok());
  }
  for (int i = 0; i < kRecords; i += 500) {
    std::vector<msg::FarmRecord> batch;
    for (int j = i; j < i + 500; ++j) batch.push_back(Record(j));
    auto put = (*store)->PutRecords("run", "tester", 1000, batch);
    ASSERT_TRUE(put.ok()) << put.status().ToString();
    ASSERT_EQ(put->added, 500u);
  }
}

// The file's bytes.
std::string Bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Overwrites `n` bytes at `offset` of the file with `with`.
void Overwrite(const std::string& path, size_t offset, const std::string& with) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(with.data(), static_cast<std::streamsize>(with.size()));
}

// Garbles the 4 KiB page holding `text` (the one place it is in the file).
void GarblePageHolding(const std::string& path, const std::string& text) {
  const std::string bytes = Bytes(path);
  const size_t at = bytes.find(text);
  ASSERT_NE(at, std::string::npos) << text;
  ASSERT_EQ(bytes.find(text, at + 1), std::string::npos) << text << " is in the file twice";
  Overwrite(path, at / 4096 * 4096, std::string(4096, '\xa5'));
}

// Every record of the store by config index, checking each is one FillStore put, unchanged.
std::map<uint64_t, msg::FarmRecord> AllRecords(Store& store) {
  std::map<uint64_t, msg::FarmRecord> out;
  uint64_t after = 0;
  for (;;) {
    auto page =
        store.RecordsOf("matmul 64,64,64 float32", "llvm", "x86_64/test", false, after, 500);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    if (!page.ok()) break;
    for (const auto& r : page->records) {
      EXPECT_LT(r.config_index, uint64_t{kRecords} + 10);
      EXPECT_EQ(r.json, Record(static_cast<int>(r.config_index)).json)
          << "a record that was never put";
      EXPECT_EQ(r.id, r.config_index + 1) << "a recovered record kept its id";
      out[r.config_index] = r;
    }
    if (!page->more || page->records.empty()) break;
    after = page->records.back().id;
  }
  return out;
}

class DamagedStoreTest : public StoreTest {
 protected:
  void TearDown() override {
    StoreTest::TearDown();
    std::error_code ec;
    if (!copy_.empty()) {
      for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(copy_ + s, ec);
    }
  }
  // Opens the damaged file: it must open, with a report whose copy is beside path_.
  std::unique_ptr<Store> OpenDamaged() {
    auto store = Store::Open(path_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return nullptr;
    EXPECT_TRUE((*store)->recovery().has_value()) << "a damaged file opened as if it were whole";
    if (!(*store)->recovery()) return nullptr;
    copy_ = (*store)->recovery()->damaged_copy;
    EXPECT_EQ(copy_.rfind(path_ + ".corrupt-", 0), 0u) << copy_;
    std::printf("%s\n", (*store)->recovery()->Summary(path_).c_str());
    return std::move(store).value();
  }
  // Reopening the fresh file finds it whole, with the same records.
  void ExpectWholeOnReopen(int64_t records) {
    auto again = Store::Open(path_);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_FALSE((*again)->recovery().has_value()) << (*again)->recovery()->Summary(path_);
    auto count = (*again)->RecordCount();
    ASSERT_TRUE(count.ok());
    EXPECT_EQ(*count, records);
  }
  std::string copy_;
};

// A page in the middle garbled: the file is moved aside as it is, and what can be read of it
// comes back into a fresh one, said in the report.
TEST_F(DamagedStoreTest, MovesADamagedDatabaseAsideAndRecoversWhatItCanRead) {
  FillStore(path_);
  // The last connection closed: the WAL is folded into the file. Garble a page of a table in the
  // middle (the first from the middle on: an index page lost loses no row, the tables are read
  // without their indexes).
  const auto size = std::filesystem::file_size(path_);
  ASSERT_GT(size, 100u * 4096);
  size_t page = size / 2 / 4096;
  for (const std::string bytes = Bytes(path_); bytes[page * 4096] != '\x0d'; ++page) {
    ASSERT_LT((page + 1) * 4096, size) << "no table page in the second half";
  }
  Overwrite(path_, page * 4096, std::string(4096, '\xa5'));
  const std::string damaged = Bytes(path_);

  auto store = OpenDamaged();
  ASSERT_TRUE(store);
  const StoreRecovery r = *store->recovery();  // a copy: it outlives the store
  EXPECT_NE(r.verdict, "ok");
  EXPECT_FALSE(r.verdict.empty());
  // The damaged file is kept, as it was.
  ASSERT_TRUE(std::filesystem::exists(r.damaged_copy));
  EXPECT_EQ(std::filesystem::file_size(r.damaged_copy), size);
  EXPECT_TRUE(Bytes(r.damaged_copy) == damaged) << "the damaged copy was changed";
  EXPECT_FALSE(std::filesystem::exists(r.damaged_copy + "-wal")) << "the original had no WAL";
  EXPECT_FALSE(std::filesystem::exists(r.damaged_copy + "-shm"));
  // Some records are lost with the page, the rest are back, each one that was put.
  EXPECT_GT(r.records.recovered, 0);
  EXPECT_LT(r.records.recovered, kRecords);
  EXPECT_FALSE(r.records.unreadable.empty());
  const auto records = AllRecords(*store);
  EXPECT_EQ(static_cast<int64_t>(records.size()), r.records.recovered);
  auto count = store->RecordCount();
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, r.records.recovered);
  EXPECT_EQ(r.sessions.recovered, kSessions);
  auto history = store->RecentHistory(kSessions + 10);
  ASSERT_TRUE(history.ok());
  EXPECT_EQ(static_cast<int64_t>(history->size()), r.sessions.recovered);
  const std::string summary = r.Summary(path_);
  EXPECT_NE(summary.find(r.damaged_copy), std::string::npos) << summary;
  EXPECT_NE(summary.find("recovered " + std::to_string(r.records.recovered) + " records"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("unreadable: records ids "), std::string::npos) << summary;
  store.reset();
  ExpectWholeOnReopen(r.records.recovered);
}

// A page of the records table garbled in the middle of its ids, and one record's JSON changed in
// place on another page: the records on both sides of the lost page come back (the scan skips
// past it), the changed one does not (its digest disagrees).
TEST_F(DamagedStoreTest, SkipsPastAnUnreadablePageAndDropsARecordThatIsNotItsDigest) {
  FillStore(path_);
  GarblePageHolding(path_, "rec-001500");
  {
    const std::string bytes = Bytes(path_);
    const size_t at = bytes.find("rec-000100");
    ASSERT_NE(at, std::string::npos);
    Overwrite(path_, at, "rec-000!00");
  }
  auto store = OpenDamaged();
  ASSERT_TRUE(store);
  const StoreRecovery r = *store->recovery();  // a copy: it outlives the store
  ASSERT_EQ(r.records.unreadable.size(), 1u);
  const auto [first, last] = r.records.unreadable[0];
  EXPECT_LE(first, 1501);  // record 1500's id
  EXPECT_GE(last, 1501);
  EXPECT_LT(last - first, 20) << "one page holds a dozen records";
  EXPECT_EQ(r.records.dropped, 1);
  EXPECT_EQ(r.records.recovered, kRecords - (last - first + 1) - 1);
  const auto records = AllRecords(*store);
  EXPECT_EQ(static_cast<int64_t>(records.size()), r.records.recovered);
  for (int i = 0; i < kRecords; ++i) {
    const int64_t id = i + 1;
    const bool lost = (id >= first && id <= last) || i == 100;
    EXPECT_EQ(records.count(i), lost ? 0u : 1u) << "record " << i;
  }
  EXPECT_TRUE(r.sessions.unreadable.empty());
  EXPECT_EQ(r.sessions.recovered, kSessions);
  const std::string summary = r.Summary(path_);
  EXPECT_NE(summary.find("records ids " + std::to_string(first) + "-" + std::to_string(last)),
            std::string::npos)
      << summary;
  // New records get new ids, past those of the lost ones.
  auto put = store->PutRecords("run", "tester", 2000, {Record(kRecords)});
  ASSERT_TRUE(put.ok());
  const auto after = AllRecords(*store);
  ASSERT_EQ(after.count(kRecords), 1u);
  EXPECT_EQ(after.at(kRecords).id, uint64_t{kRecords} + 1);
  store.reset();
  ExpectWholeOnReopen(r.records.recovered + 1);
}

// A tracker killed mid-write leaves committed transactions in the WAL: they move aside with the
// file and come back from there.
TEST_F(DamagedStoreTest, RecoversTheCommittedTransactionsOfTheWal) {
  FillStore(path_);
  {
    // Records committed to the WAL and never checkpointed, as a tracker killed with kill -9 leaves
    // them.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
    for (int i = kRecords; i < kRecords + 10; ++i) {
      const msg::FarmRecord rec = Record(i);
      const std::string sql =
          "INSERT INTO records(digest, task, target, kind, generator, config, ok, mean, "
          "stopped_early, run_id, sender, received_ms, json) VALUES('" +
          Sha256Hex(rec.json) + "', '" + rec.task + "', '" + rec.target + "', '" + rec.device_kind +
          "', '" + rec.generator + "', " + std::to_string(i) + ", 1, 0.001, 0, " +
          "'run', 'tester', 1000, '" + rec.json + "')";
      ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
          << sqlite3_errmsg(db);
    }
    sqlite3_close(db);
  }
  ASSERT_TRUE(std::filesystem::exists(path_ + "-wal"));
  const std::string wal = Bytes(path_ + "-wal");
  GarblePageHolding(path_, "rec-001500");
  auto store = OpenDamaged();
  ASSERT_TRUE(store);
  const StoreRecovery& r = *store->recovery();
  ASSERT_TRUE(std::filesystem::exists(r.damaged_copy + "-wal"));
  EXPECT_TRUE(Bytes(r.damaged_copy + "-wal") == wal) << "the damaged copy's WAL was changed";
  const auto records = AllRecords(*store);
  for (int i = kRecords; i < kRecords + 10; ++i) {
    EXPECT_EQ(records.count(i), 1u) << "record " << i << ", committed in the WAL, is gone";
  }
  ASSERT_EQ(r.records.unreadable.size(), 1u);
  EXPECT_EQ(r.records.recovered,
            kRecords + 10 - (r.records.unreadable[0].second - r.records.unreadable[0].first + 1));
}

// A file that is not a database at all: the tracker starts empty, the file is kept.
TEST_F(DamagedStoreTest, KeepsAFileThatIsNotADatabaseAndStartsEmpty) {
  std::string junk;
  for (int i = 0; i < 1000; ++i) junk += "this is not a database " + std::to_string(i) + "\n";
  {
    std::ofstream f(path_, std::ios::binary);
    f << junk;
  }
  auto store = OpenDamaged();
  ASSERT_TRUE(store);
  const StoreRecovery r = *store->recovery();  // a copy: it outlives the store
  EXPECT_NE(r.verdict.find("not a database"), std::string::npos) << r.verdict;
  EXPECT_TRUE(Bytes(r.damaged_copy) == junk);
  EXPECT_EQ(r.records.recovered + r.sessions.recovered + r.leases.recovered, 0);
  EXPECT_NE(r.Summary(path_).find("unreadable: the whole file"), std::string::npos)
      << r.Summary(path_);
  auto count = store->RecordCount();
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 0);
  ASSERT_TRUE(store->LeaseStarted(Lease("a", "alice")).ok()) << "the fresh file takes writes";
  store.reset();
  ExpectWholeOnReopen(0);
}

// No fresh file can be written (here: a file-size limit the salvaged rows do not fit under): the
// tracker does not start, says why naming the file, and the damaged file is back where it was,
// to be salvaged at the next start.
TEST_F(DamagedStoreTest, PutsTheDamagedFileBackWhenNoFreshOneCanBeWritten) {
  FillStore(path_);
  GarblePageHolding(path_, "rec-001500");
  const std::string damaged = Bytes(path_);
  {
    rlimit old{};
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    rlimit small = old;
    small.rlim_cur = 64 * 1024;
    std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG instead
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
    auto store = Store::Open(path_);
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, SIG_DFL);
    ASSERT_FALSE(store.ok()) << "salvaged into a file past the size limit";
    EXPECT_EQ(store.status().code(), ErrorCode::kIoError);
    EXPECT_NE(store.status().message().find(path_), std::string::npos) << store.status().message();
    EXPECT_NE(store.status().message().find("put back"), std::string::npos)
        << store.status().message();
  }
  EXPECT_TRUE(Bytes(path_) == damaged) << "the damaged file is not back as it was";
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(path_).parent_path())) {
    EXPECT_EQ(e.path().string().rfind(path_ + ".corrupt-", 0), std::string::npos) << e.path();
  }
  auto store = OpenDamaged();
  ASSERT_TRUE(store);
  EXPECT_EQ(store->recovery()->records.unreadable.size(), 1u);
}

TEST(StatusPageTest, RendersSummaryAndMetricsFromASnapshot) {
  Snapshot snap;
  Snapshot::DeviceView d;
  d.name = "10.0.0.1:9090";
  d.key = "rpi4";
  d.state = "leased";
  d.holder = "ci";
  d.utilisation = 0.5;
  d.infra_failures = 2;
  snap.devices.push_back(d);
  Snapshot::KeyView k;
  k.key = "rpi4";
  k.queue.push_back({"bob", 3, 4, 2500});
  k.grants = 7;
  k.wait_seconds_sum = 3.5;
  snap.keys.push_back(k);
  auto j = SummaryJson(snap, {{"ci", "rpi4", "10.0.0.1:9090", "released", 1, 2}});
  EXPECT_EQ(j["devices"][0]["holder"], "ci");
  EXPECT_EQ(j["keys"][0]["queue"][0]["holder"], "bob");
  EXPECT_EQ(j["history"][0]["outcome"], "released");
  std::string m = MetricsText(snap);
  EXPECT_NE(m.find("crosstune_queue_depth{key=\"rpi4\"} 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("crosstune_queue_oldest_wait_seconds{key=\"rpi4\"} 2.5\n"), std::string::npos);
  EXPECT_NE(m.find("crosstune_queue_wait_seconds_count{key=\"rpi4\"} 7\n"), std::string::npos);
  EXPECT_NE(m.find("crosstune_device_utilisation{device=\"10.0.0.1:9090\",key=\"rpi4\"} 0.5\n"),
            std::string::npos);
  EXPECT_NE(
      m.find("crosstune_device_infra_failures_total{device=\"10.0.0.1:9090\",key=\"rpi4\"} 2\n"),
      std::string::npos);
  EXPECT_NE(m.find("crosstune_device_quarantined{device=\"10.0.0.1:9090\",key=\"rpi4\"} 0\n"),
            std::string::npos);
  EXPECT_NE(StatusPageHtml().find("/api/summary"), std::string::npos);
}

}  // namespace
}  // namespace crosstune::tracker
