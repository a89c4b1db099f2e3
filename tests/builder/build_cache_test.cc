// The build cache (build_cache.h): hits are the same bytes, damaged entries are rebuilt with a
// warning, concurrent writers and readers never see half an entry, and the budget holds.
#include "crosstune/builder/build_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "crosstune/builder/builder.h"
#include "test_kernels.h"

namespace crosstune::builder {
namespace {

namespace fs = std::filesystem;

BuildRequest Request(const std::string& target) {
  BuildRequest r;
  r.source = testing::kVaddSource;
  r.target = *ParseTarget(target);
  return r;
}

std::string ReadBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

void WriteBytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Entries and leftovers (temporary files) under dir.
std::vector<fs::path> FilesUnder(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file()) out.push_back(it->path());
  }
  return out;
}

BuildResult Fake(char fill, size_t bytes) {
  BuildResult r;
  r.library.assign(bytes, fill);
  r.functions.push_back({"f", "t", "f", {}, {}, 0});
  return r;
}

class BuildCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("crosstune-cache-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::unique_ptr<Builder> Make(uint64_t max_bytes = 0) {
    auto b =
        Builder::Create({.workers = 1, .cache_dir = dir_.string(), .cache_max_bytes = max_bytes});
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return std::move(*b);
  }
  fs::path dir_;
};

TEST_F(BuildCacheTest, AHitGivesTheSamePackageByteForByte) {
  const BuildRequest req = Request("aarch64");
  BuildResult fresh = Make()->Build(req);
  ASSERT_TRUE(fresh.ok()) << fresh.status.ToString();
  ASSERT_FALSE(fresh.cache_hit);
  BuildResult hit = Make()->Build(req);  // another builder, as another run would have
  ASSERT_TRUE(hit.ok());
  ASSERT_TRUE(hit.cache_hit);
  EXPECT_TRUE(hit.cache_warning.empty()) << hit.cache_warning;
  ASSERT_TRUE(WriteBuildPackage(req, fresh, (dir_ / "fresh.ctpkg").string()).ok());
  ASSERT_TRUE(WriteBuildPackage(req, hit, (dir_ / "hit.ctpkg").string()).ok());
  EXPECT_TRUE(ReadBytes(dir_ / "hit.ctpkg") == ReadBytes(dir_ / "fresh.ctpkg"));
  // And a build with no cache at all makes those bytes too: the cache serves what a build would.
  auto uncached = Builder::Create({.workers = 1});
  ASSERT_TRUE(uncached.ok());
  BuildResult again = (*uncached)->Build(req);
  ASSERT_TRUE(WriteBuildPackage(req, again, (dir_ / "again.ctpkg").string()).ok());
  EXPECT_TRUE(ReadBytes(dir_ / "again.ctpkg") == ReadBytes(dir_ / "fresh.ctpkg"));
}

TEST_F(BuildCacheTest, TheKeyCoversTargetCpuFeaturesFlagsAndSource) {
  const BuildRequest a = Request("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64");
  auto other = [&](auto change) {
    BuildRequest b = a;
    change(b);
    return BuildCacheKey(b) != BuildCacheKey(a);
  };
  EXPECT_TRUE(other([](BuildRequest& b) { b.target = *ParseTarget("aarch64"); }));
  EXPECT_TRUE(other([](BuildRequest& b) {
    b.target = *ParseTarget("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake");
  }));
  EXPECT_TRUE(other([](BuildRequest& b) {
    b.target = *ParseTarget("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64 -mattr=+avx2");
  }));
  EXPECT_TRUE(other([](BuildRequest& b) { b.flags = {"-DN=4"}; }));
  EXPECT_TRUE(other([](BuildRequest& b) { b.source += "\n"; }));
  EXPECT_FALSE(other([](BuildRequest& b) { b.timeout = std::chrono::milliseconds(5); }));
}

TEST_F(BuildCacheTest, ADamagedEntryIsAMissWithAWarningAndIsRebuilt) {
  const BuildRequest req = Request("x86-64");
  auto builder = Make();
  BuildResult fresh = builder->Build(req);
  ASSERT_TRUE(fresh.ok()) << fresh.status.ToString();
  const fs::path entry = BuildCacheEntryPath(dir_.string(), fresh.cache_key);
  const std::string good = ReadBytes(entry);
  ASSERT_GT(good.size(), 1000u);
  // An entry of another key, moved into this one's place.
  BuildRequest other_req = Request("aarch64");
  BuildResult other = builder->Build(other_req);
  ASSERT_TRUE(other.ok());
  const std::string foreign = ReadBytes(BuildCacheEntryPath(dir_.string(), other.cache_key));

  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x01;  // inside the library's bytes
  const std::vector<std::pair<std::string, std::string>> damages = {
      {"a flipped bit", flipped},
      {"truncated", good.substr(0, good.size() / 2)},
      {"empty", ""},
      {"another key's entry", foreign},
  };
  uint64_t damaged = 0;
  for (const auto& [what, bytes] : damages) {
    SCOPED_TRACE(what);
    WriteBytes(entry, bytes);
    BuildResult r = builder->Build(req);
    ASSERT_TRUE(r.ok()) << r.status.ToString();
    EXPECT_FALSE(r.cache_hit);
    EXPECT_NE(r.cache_warning.find(entry.string()), std::string::npos) << r.cache_warning;
    EXPECT_NE(r.cache_warning.find("rebuilt"), std::string::npos) << r.cache_warning;
    EXPECT_TRUE(r.library == fresh.library);
    EXPECT_EQ(builder->stats().cache_damaged, ++damaged);
    // The rebuild replaced the entry (the same bytes: an entry keeps no build time), and the next
    // build is a clean hit.
    EXPECT_TRUE(ReadBytes(entry) == good);
    BuildResult hit = builder->Build(req);
    EXPECT_TRUE(hit.cache_hit);
    EXPECT_TRUE(hit.cache_warning.empty()) << hit.cache_warning;
    EXPECT_TRUE(hit.library == fresh.library);
  }
}

TEST_F(BuildCacheTest, FailedBuildsAreNeitherStoredNorServed) {
  BuildResult failed;
  failed.status = Status(ErrorCode::kBuildError, "kernel.c:1: error");
  EXPECT_EQ(StoreCachedBuild(dir_.string(), std::string(64, 'a'), failed).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_TRUE(FilesUnder(dir_).empty());
}

TEST_F(BuildCacheTest, ConcurrentWritersAndReadersNeverSeeAPartialEntry) {
  // Entries of a few MB keep each write long enough for a reader to land inside it.
  const std::string key(64, 'c');
  const size_t kBytes = 4u << 20;
  const std::set<char> fills = {'a', 'b', 'c'};
  std::atomic<int> writers_left{static_cast<int>(fills.size())};
  std::atomic<int> hits{0}, damaged{0}, wrong{0}, store_errors{0};
  std::string first_damage;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (char fill : fills) {
    threads.emplace_back([&, fill] {
      const BuildResult r = Fake(fill, kBytes);
      for (int i = 0; i < 15; ++i) {
        if (!StoreCachedBuild(dir_.string(), key, r).ok()) ++store_errors;
      }
      --writers_left;
    });
  }
  for (int reader = 0; reader < 2; ++reader) {
    threads.emplace_back([&] {
      // Until every writer is done, and once more after.
      for (bool last = false; !last;) {
        last = writers_left.load() == 0;
        BuildResult got;
        std::string why;
        switch (LoadCachedBuild(dir_.string(), key, &got, &why)) {
          case CacheRead::kHit:
            ++hits;
            if (got.library.size() != kBytes || !fills.count(got.library[0]) ||
                got.library.find_first_not_of(got.library[0]) != std::string::npos) {
              ++wrong;
            }
            break;
          case CacheRead::kDamaged: {
            ++damaged;
            std::lock_guard<std::mutex> lock(mu);
            if (first_damage.empty()) first_damage = why;
            break;
          }
          case CacheRead::kMiss:
            break;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store_errors.load(), 0);
  EXPECT_EQ(damaged.load(), 0) << first_damage;
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(hits.load(), 0);
  // One entry, no temporary file left behind.
  const auto files = FilesUnder(dir_);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0], fs::path(BuildCacheEntryPath(dir_.string(), key)));
}

TEST_F(BuildCacheTest, TrimRemovesTheLeastRecentlyUsedEntriesAndStaleTemporaries) {
  const std::string dir = dir_.string();
  const std::string old_key(64, '1'), used_key(64, '2'), new_key(64, '3');
  for (const auto& key : {old_key, used_key, new_key}) {
    ASSERT_TRUE(StoreCachedBuild(dir, key, Fake('x', 1000)).ok());
  }
  // Ages: old_key and used_key two hours, new_key now; then used_key is read (a hit touches it).
  const auto two_hours_ago = fs::file_time_type::clock::now() - std::chrono::hours(2);
  fs::last_write_time(BuildCacheEntryPath(dir, old_key), two_hours_ago);
  fs::last_write_time(BuildCacheEntryPath(dir, used_key), two_hours_ago);
  BuildResult got;
  ASSERT_EQ(LoadCachedBuild(dir, used_key, &got, nullptr), CacheRead::kHit);
  // A writer that died before its rename left this; one still writing would be younger.
  const fs::path stale = BuildCacheEntryPath(dir, old_key) + ".tmp-dead";
  WriteBytes(stale, "half");
  fs::last_write_time(stale, two_hours_ago);
  const fs::path writing = BuildCacheEntryPath(dir, new_key) + ".tmp-live";
  WriteBytes(writing, "half");

  const BuildCacheUsage before = ReadBuildCacheUsage(dir);
  EXPECT_EQ(before.entries, 3u);
  const uint64_t entry = before.bytes / 3;
  const BuildCacheUsage after = TrimBuildCache(dir, 2 * entry);
  EXPECT_EQ(after.entries, 2u);
  EXPECT_EQ(after.bytes, 2 * entry);
  EXPECT_FALSE(fs::exists(BuildCacheEntryPath(dir, old_key)));
  EXPECT_TRUE(fs::exists(BuildCacheEntryPath(dir, used_key)));
  EXPECT_TRUE(fs::exists(BuildCacheEntryPath(dir, new_key)));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(writing));
}

TEST_F(BuildCacheTest, ABuilderKeepsItsCacheWithinItsBudget) {
  auto builder = Make();
  BuildResult one = builder->Build(Request("x86-64"));
  ASSERT_TRUE(one.ok());
  const uint64_t entry = ReadBuildCacheUsage(dir_.string()).bytes;
  // Room for about two entries: five different builds leave at most two.
  auto bounded = Make(entry * 2 + entry / 2);
  for (int i = 0; i < 5; ++i) {
    BuildRequest r = Request("x86-64");
    r.flags = {"-DV=" + std::to_string(i)};
    ASSERT_TRUE(bounded->Build(r).ok());
    EXPECT_LE(ReadBuildCacheUsage(dir_.string()).bytes, entry * 2 + entry / 2) << i;
  }
  EXPECT_GE(ReadBuildCacheUsage(dir_.string()).entries, 1u);
}

}  // namespace
}  // namespace crosstune::builder
