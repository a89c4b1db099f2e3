// BuildDispatcher (build_dispatch.h) over fake build services: builds go where in-flight / slots
// is lowest, a lost service's builds run again elsewhere (none lost), and a build that failed on
// a service that is still there is its answer, not a reason to run it again.
#include "crosstune/tuner/build_dispatch.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace crosstune::tuner {
namespace {

using builder::BuildRequest;
using builder::BuildResult;

class FakeService : public builder::BuildService {
 public:
  FakeService(int slots, std::function<BuildResult(const BuildRequest&)> fn)
      : slots_(slots), fn_(std::move(fn)) {}
  BuildResult Build(const BuildRequest& r) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++calls_;
    }
    return fn_(r);
  }
  std::vector<BuildResult> BuildMany(const std::vector<BuildRequest>& rs) override {
    std::vector<BuildResult> out;
    for (const auto& r : rs) out.push_back(Build(r));
    return out;
  }
  int slots() const override { return slots_; }
  int calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  int slots_;
  std::function<BuildResult(const BuildRequest&)> fn_;
  mutable std::mutex mu_;
  int calls_ = 0;
};

BuildResult Ok(const BuildRequest& r) {
  BuildResult b;
  b.library = r.source;
  return b;
}

std::vector<BuildRequest> Requests(int n) {
  std::vector<BuildRequest> rs(n);
  for (int i = 0; i < n; ++i) rs[i].source = "k" + std::to_string(i);
  return rs;
}

// Holds every build until `n` are in flight at once, so the choices are all made against the
// same loads whatever order the threads run in.
class Gate {
 public:
  explicit Gate(int n) : n_(n) {}
  BuildResult Pass(const BuildRequest& r) {
    std::unique_lock<std::mutex> lock(mu_);
    ++in_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return in_ >= n_; });
    return Ok(r);
  }

 private:
  int n_;
  int in_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
};

TEST(BuildDispatch, SendsEachBuildWhereInFlightPerSlotIsLowest) {
  Gate gate(8);
  auto pass = [&](const BuildRequest& r) { return gate.Pass(r); };
  FakeService local(2, pass), wide(4, pass), narrow(2, pass);
  BuildDispatcher d({{"local", &local}, {"wide", &wide}, {"narrow", &narrow}});
  EXPECT_EQ(d.slots(), 8);
  auto results = d.BuildMany(Requests(8));
  ASSERT_EQ(results.size(), 8u);
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].ok());
    EXPECT_EQ(results[i].library, "k" + std::to_string(i)) << "results answer their requests";
  }
  // Eight at once over 2 + 4 + 2 slots: each service full, none over.
  EXPECT_EQ(local.calls(), 2);
  EXPECT_EQ(wide.calls(), 4);
  EXPECT_EQ(narrow.calls(), 2);
  auto stats = d.stats();
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_EQ(stats[1].name, "wide");
  EXPECT_EQ(stats[1].builds, 4u);
}

TEST(BuildDispatch, ALostWorkersBuildsRunAgainElsewhereAndNoneIsLost) {
  // The local pool's first build is held until released, so the next build finds it full and
  // goes to the worker, which is gone.
  std::mutex mu;
  std::condition_variable cv;
  bool first_in = false, release = false;
  int local_calls = 0;
  FakeService local(1, [&](const BuildRequest& r) {
    std::unique_lock<std::mutex> lock(mu);
    if (local_calls++ == 0) {
      first_in = true;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
    }
    return Ok(r);
  });
  FakeService dead(4, [](const BuildRequest&) {
    BuildResult b;
    b.status = Status(ErrorCode::kDisconnected, "build worker w1 lost: connection reset");
    return b;
  });
  std::vector<size_t> lost;
  BuildDispatcher d({{"local", &local}, {"w1", &dead}}, [&](size_t i, const Status& why) {
    lost.push_back(i);
    EXPECT_EQ(why.code(), ErrorCode::kDisconnected);
  });
  auto requests = Requests(10);
  BuildResult held;
  std::thread first([&] { held = d.Build(requests[0]); });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return first_in; });
  }
  BuildResult second = d.Build(requests[1]);
  EXPECT_EQ(dead.calls(), 1) << "the worker was tried";
  EXPECT_TRUE(second.ok()) << second.status.ToString();
  EXPECT_EQ(second.library, "k1") << "and its build ran again on the local pool";
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  first.join();
  ASSERT_TRUE(held.ok());

  EXPECT_EQ(lost, std::vector<size_t>{1}) << "told once";
  auto stats = d.stats();
  EXPECT_TRUE(stats[1].lost);
  EXPECT_NE(stats[1].lost_reason.find("connection reset"), std::string::npos);
  EXPECT_EQ(stats[1].builds, 0u);
  EXPECT_EQ(d.rerun_builds(), 1u);
  EXPECT_EQ(d.slots(), 1) << "a lost worker's slots are gone";

  // Later builds go to the local pool only, every one answered.
  auto results = d.BuildMany(requests);
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status.ToString();
    EXPECT_EQ(results[i].library, "k" + std::to_string(i));
  }
  EXPECT_EQ(dead.calls(), 1);
  EXPECT_EQ(d.stats()[0].builds, 12u);
}

TEST(BuildDispatch, ABuildErrorOnALiveWorkerIsItsAnswer) {
  // Two builds at once over one slot each: one on each service.
  Gate gate(2);
  FakeService held(1, [&](const BuildRequest& r) { return gate.Pass(r); });
  FakeService held_failing(1, [&](const BuildRequest& r) {
    gate.Pass(r);
    BuildResult b;
    b.status = Status(ErrorCode::kBuildError, "kernel.c:1: error");
    return b;
  });
  BuildDispatcher d2({{"local", &held}, {"w1", &held_failing}});
  auto results = d2.BuildMany(Requests(2));
  int errors = 0;
  for (const auto& r : results) errors += r.status.code() == ErrorCode::kBuildError;
  EXPECT_EQ(errors, 1) << "not run again elsewhere";
  EXPECT_EQ(held.calls(), 1);
  EXPECT_FALSE(d2.stats()[1].lost);
  EXPECT_EQ(d2.rerun_builds(), 0u);
}

}  // namespace
}  // namespace crosstune::tuner
