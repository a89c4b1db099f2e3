#include "crosstune/server/time_evaluator.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <numeric>

namespace crosstune::server {
namespace {

// A fake clock: each call costs `per_call` seconds of fake time; sleeps and flushes are counted.
struct FakeDevice {
  double now = 0;
  double per_call = 0.001;
  uint64_t calls = 0;
  std::vector<uint64_t> batches;
  std::vector<uint32_t> sleeps;
  int flushes = 0;

  TimeEvaluatorHooks Hooks() {
    TimeEvaluatorHooks h;
    h.now_seconds = [this] { return now; };
    h.sleep_ms = [this](uint32_t ms) {
      sleeps.push_back(ms);
      now += ms / 1000.0;
    };
    h.flush_cache = [this] { ++flushes; };
    return h;
  }
  std::function<Status(uint64_t)> Run() {
    return [this](uint64_t n) {
      batches.push_back(n);
      calls += n;
      now += per_call * static_cast<double>(n);
      return Status::Ok();
    };
  }
};

TEST(TimeEvaluator, WarmsUpOnceThenMeasuresEachRound) {
  FakeDevice dev;
  TimingOptions opt;
  opt.number = 5;
  opt.repeat = 3;
  auto r = RunTimeEvaluator(opt, dev.Hooks(), dev.Run());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(dev.batches, (std::vector<uint64_t>{1, 5, 5, 5}));
  ASSERT_EQ(r->seconds_per_call.size(), 3u);
  for (double s : r->seconds_per_call) EXPECT_DOUBLE_EQ(s, 0.001);
  EXPECT_EQ(r->number, 5u);
  EXPECT_TRUE(dev.sleeps.empty());
  EXPECT_EQ(dev.flushes, 0);
}

TEST(TimeEvaluator, ArmsTheWatchdogOutsideTheTimedWindow) {
  // Arming and disarming cost fake time; none of it may show in the per-call seconds.
  FakeDevice dev;
  TimeEvaluatorHooks hooks = dev.Hooks();
  int armed = 0, disarmed = 0;
  hooks.before_batch = [&](uint64_t) {
    ++armed;
    dev.now += 0.5;
  };
  hooks.after_batch = [&] {
    ++disarmed;
    dev.now += 0.5;
  };
  TimingOptions opt;
  opt.number = 4;
  opt.repeat = 3;
  auto r = RunTimeEvaluator(opt, hooks, dev.Run());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(armed, 4);  // warm-up + one per round
  EXPECT_EQ(disarmed, 4);
  for (double s : r->seconds_per_call) EXPECT_DOUBLE_EQ(s, 0.001);
}

TEST(TimeEvaluator, GrowsNumberUntilARoundLastsMinRepeatMs) {
  FakeDevice dev;
  dev.per_call = 0.0001;  // 100 us
  TimingOptions opt;
  opt.number = 1;
  opt.repeat = 2;
  opt.min_repeat_ms = 10;  // needs 100 calls
  auto r = RunTimeEvaluator(opt, dev.Hooks(), dev.Run());
  ASSERT_TRUE(r.ok());
  EXPECT_GE(r->number, 100u);
  ASSERT_EQ(r->seconds_per_call.size(), 2u);
  EXPECT_NEAR(r->seconds_per_call[0], 0.0001, 1e-12);
  // Warm-up, the short first attempt, its re-measure with the grown number, then round two.
  ASSERT_GE(dev.batches.size(), 4u);
  EXPECT_EQ(dev.batches[0], 1u);
  EXPECT_EQ(dev.batches[1], 1u);
  EXPECT_EQ(dev.batches.back(), r->number);
  // Every growth step is at least x1.618.
  for (size_t i = 2; i + 1 < dev.batches.size(); ++i) {
    EXPECT_GE(static_cast<double>(dev.batches[i]), dev.batches[i - 1] * 1.618 - 1e-9);
  }
}

TEST(TimeEvaluator, GrowthIsAtLeastGoldenRatioEvenWhenTheClockBarelyMoves) {
  // Elapsed just under the target would suggest x1.01; the rule still grows by 1.618.
  EXPECT_EQ(GrowNumber(100, 0.0099, 10), 162u);
  // Elapsed far under the target jumps straight to the estimate.
  EXPECT_GE(GrowNumber(10, 0.001, 100), 1000u);
  EXPECT_LE(GrowNumber(10, 0.001, 100), 1001u);
  // A clock that did not move at all still grows, and the bound holds.
  EXPECT_GT(GrowNumber(1, 0.0, 10), 1u);
  EXPECT_EQ(GrowNumber(kMaxNumber - 1, 0.0, 10), kMaxNumber);
  EXPECT_GE(GrowNumber(1, 0.1, 10000), 100u);
  EXPECT_LE(GrowNumber(1, 0.1, 10000), 101u);
  EXPECT_EQ(GrowNumber(1, 1.0, 1), 2u);  // at least number + 1
}

TEST(TimeEvaluator, StopsGrowingAtTheBound) {
  FakeDevice dev;
  dev.per_call = 0;  // a clock that never moves
  TimingOptions opt;
  opt.min_repeat_ms = 1;
  auto run = [&](uint64_t n) {
    dev.batches.push_back(n);
    return Status::Ok();
  };
  auto r = RunTimeEvaluator(opt, dev.Hooks(), run);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->number, kMaxNumber);
  EXPECT_EQ(r->seconds_per_call.size(), 1u);
}

TEST(TimeEvaluator, CoolsDownBetweenRoundsAndFlushesBeforeEach) {
  FakeDevice dev;
  TimingOptions opt;
  opt.repeat = 3;
  opt.cooldown_ms = 7;
  opt.flush_cache = true;
  auto r = RunTimeEvaluator(opt, dev.Hooks(), dev.Run());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(dev.sleeps, (std::vector<uint32_t>{7, 7}));
  EXPECT_EQ(dev.flushes, 3);
  // The cooldown is not part of any measured round.
  for (double s : r->seconds_per_call) EXPECT_DOUBLE_EQ(s, 0.001);
}

TEST(TimeEvaluator, StopsAtTheFirstError) {
  FakeDevice dev;
  TimingOptions opt;
  opt.repeat = 3;
  int batches = 0;
  auto run = [&](uint64_t) {
    return ++batches == 2 ? Status(ErrorCode::kKernelError, "boom") : Status::Ok();
  };
  auto r = RunTimeEvaluator(opt, dev.Hooks(), run);
  EXPECT_EQ(r.status().code(), ErrorCode::kKernelError);
  EXPECT_EQ(batches, 2);
  opt.repeat = 0;
  EXPECT_EQ(RunTimeEvaluator(opt, dev.Hooks(), dev.Run()).status().code(),
            ErrorCode::kInvalidArgument);
}

// stop_above_s: a candidate slower than it in every round so far stops after that round; one
// faster in any round, or one whose rounds are all used, runs them all.
TEST(TimeEvaluator, StopsAfterARoundSlowerThanStopAbove) {
  FakeDevice dev;
  dev.per_call = 0.003;
  TimingOptions opt;
  opt.number = 2;
  opt.repeat = 4;
  auto r = RunTimeEvaluator(opt, dev.Hooks(), dev.Run(), /*stop_above_s=*/0.002);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->stopped_early);
  EXPECT_EQ(dev.batches, (std::vector<uint64_t>{1, 2}));  // warm-up and one round
  ASSERT_EQ(r->seconds_per_call.size(), 1u);
  EXPECT_DOUBLE_EQ(r->seconds_per_call[0], 0.003);

  FakeDevice fast;
  fast.per_call = 0.001;
  auto all = RunTimeEvaluator(opt, fast.Hooks(), fast.Run(), 0.002);
  ASSERT_TRUE(all.ok());
  EXPECT_FALSE(all->stopped_early);
  EXPECT_EQ(all->seconds_per_call.size(), 4u);

  // Without a limit, or with one round asked for, nothing is stopped.
  FakeDevice slow;
  slow.per_call = 0.003;
  auto unlimited = RunTimeEvaluator(opt, slow.Hooks(), slow.Run());
  ASSERT_TRUE(unlimited.ok());
  EXPECT_FALSE(unlimited->stopped_early);
  EXPECT_EQ(unlimited->seconds_per_call.size(), 4u);
  opt.repeat = 1;
  auto one = RunTimeEvaluator(opt, slow.Hooks(), slow.Run(), 0.002);
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->stopped_early);
}

TEST(TimeEvaluator, AFastRoundAmongSlowOnesKeepsTheCandidateTimed) {
  // The rule looks at the fastest round so far: one slow round after a fast one does not stop.
  FakeDevice dev;
  TimeEvaluatorHooks hooks = dev.Hooks();
  std::vector<double> per_round = {0.001, 0.005, 0.005};
  size_t round = 0;
  bool warm = true;
  auto run = [&](uint64_t n) {
    dev.now += (warm ? 0.001 : per_round[round++]) * static_cast<double>(n);
    warm = false;
    return Status::Ok();
  };
  TimingOptions opt;
  opt.repeat = 3;
  auto r = RunTimeEvaluator(opt, hooks, run, 0.002);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->stopped_early);
  EXPECT_EQ(r->seconds_per_call.size(), 3u);
}

// The cache flush of a cold timing evicts the call's own data line by line where the CPU allows
// it: ranges of any alignment and length, and read-only mappings (a package's params), keep their
// bytes. (That the lines leave the caches is a timing and not asserted here.)
TEST(EvictLines, KeepsTheBytesOfAnyRangeAndReadsReadOnlyMemoryWithoutWriting) {
#if defined(__x86_64__) || defined(__aarch64__)
  EXPECT_TRUE(CanEvictLines());
#endif
  std::vector<char> bytes(10'000);
  std::iota(bytes.begin(), bytes.end(), 0);
  const std::vector<char> before = bytes;
  for (size_t start : {0, 1, 63, 64, 65}) {
    for (size_t len : {0, 1, 63, 64, 129, 4096}) {
      EvictLines({bytes.data() + start, len});
    }
  }
  EXPECT_EQ(bytes, before);

  const size_t page = 4096 * 3;
  void* map = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  std::memset(map, 0x5a, page);
  ASSERT_EQ(::mprotect(map, page, PROT_READ), 0);
  EvictLines({static_cast<const char*>(map) + 7, page - 7});  // a write would fault here
  EXPECT_EQ(static_cast<const unsigned char*>(map)[page - 1], 0x5a);
  ::munmap(map, page);
}

}  // namespace
}  // namespace crosstune::server
