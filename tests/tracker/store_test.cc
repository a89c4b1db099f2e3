// The tracker's SQLite store and its renderings, without a network.
#include "crosstune/tracker/store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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

TEST_F(StoreTest, RefusesACorruptDatabaseAndLeavesItAsItIs) {
  {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    // Enough history to fill several pages.
    for (int i = 0; i < 400; ++i) {
      auto l = Lease("t" + std::to_string(i), "holder-" + std::to_string(i) + std::string(64, 'x'));
      ASSERT_TRUE((*store)->LeaseStarted(l).ok());
      ASSERT_TRUE((*store)->LeaseEnded(l, "released", 5000 + i).ok());
    }
  }
  // The last connection closed: the WAL is folded into the file. Garble a page in the middle.
  const auto size = std::filesystem::file_size(path_);
  ASSERT_GT(size, 4u * 4096);
  {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2 / 4096 * 4096));
    std::string junk(4096, '\xa5');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto store = Store::Open(path_);
  ASSERT_FALSE(store.ok()) << "a corrupt database opened as if it were whole";
  EXPECT_EQ(store.status().code(), ErrorCode::kIoError);
  EXPECT_NE(store.status().message().find(path_), std::string::npos) << store.status().message();
  EXPECT_NE(store.status().message().find("corrupt"), std::string::npos)
      << store.status().message();
  // Nothing is lost: the file is left for whoever wants to look at it or move it aside.
  EXPECT_EQ(std::filesystem::file_size(path_), size);
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
