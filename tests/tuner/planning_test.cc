// When the tuner plans against the devices' measuring, on real local servers: beside the
// measurement when builds overlap it (the devices never wait for a refit), never beside a timed
// kernel when they take turns; the batch that follows the devices; and the planning time in
// `crosstune tune`'s reports.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/client/session.h"
#include "crosstune/testing/server_process.h"
#include "crosstune/testing/support.h"
#include "crosstune/tuner/records.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tune.h"
#include "crosstune/tuner/tuner.h"

namespace crosstune::tuner {
namespace {

// What a WatchingTuner and the run's on_record share; the test keeps it past the run.
//
// Thread-safety: every member under mu.
struct Watch {
  std::mutex mu;
  std::condition_variable cv;
  int records = 0;  // of this run, seen by on_record
  int heard = 0;    // results given to Update
  bool updating = false;
  int records_while_updating = 0;
  // The first `blocking` Updates wait until a record the tuner has not heard of arrives (one of a
  // batch measured while it plans), or `guard` passes.
  int blocking = 1;
  std::chrono::milliseconds guard{60'000};
  int ended_by_record = 0;
  int ended_by_guard = 0;
  std::vector<int> heard_at_proposal;  // `heard` at each NextBatch

  void OnRecord() {
    std::lock_guard<std::mutex> lock(mu);
    ++records;
    if (updating) ++records_while_updating;
    cv.notify_all();
  }
};

// A tuner (random inside) whose Update waits for the run's records as Watch says.
class WatchingTuner final : public Tuner {
 public:
  WatchingTuner(std::unique_ptr<Tuner> inner, std::shared_ptr<Watch> watch)
      : inner_(std::move(inner)), watch_(std::move(watch)) {}
  std::string name() const override { return inner_->name(); }
  std::vector<uint64_t> NextBatch(int n) override {
    {
      std::lock_guard<std::mutex> lock(watch_->mu);
      watch_->heard_at_proposal.push_back(watch_->heard);
    }
    return inner_->NextBatch(n);
  }
  void Update(const std::vector<TrialResult>& results) override {
    {
      Watch& w = *watch_;
      std::unique_lock<std::mutex> lock(w.mu);
      w.heard += static_cast<int>(results.size());
      w.updating = true;
      if (w.blocking > 0) {
        --w.blocking;
        if (w.cv.wait_for(lock, w.guard, [&] { return w.records > w.heard; })) {
          ++w.ended_by_record;
        } else {
          ++w.ended_by_guard;
        }
      }
      w.updating = false;
    }
    inner_->Update(results);
  }

 private:
  std::unique_ptr<Tuner> inner_;
  std::shared_ptr<Watch> watch_;
};

// `count` local servers and a builder; the target is the first server's CPU.
class TunePlanningTest : public ::testing::Test {
 protected:
  void StartServers(int count) {
    for (int i = 0; i < count; ++i) {
      auto& server = servers_.emplace_back(std::make_unique<ServerProcess>());
      Status s =
          server->Start({CT_SERVER_BIN, "--host", "127.0.0.1", "--port", "0", "--exit-with-parent"},
                        std::chrono::seconds(20));
      ASSERT_TRUE(s.ok()) << s.ToString();
      DeviceSpec d;
      d.name = "local" + std::to_string(i);
      d.server = server->address();
      devices_.push_back(d);
    }
    auto b = builder::Builder::Create({.workers = 2});
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    builder_ = std::move(b).value();
    client::ConnectOptions co;
    co.server = devices_.front().server;
    auto session = client::Session::Connect(co);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    auto info = (*session)->Info();
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    auto target = builder::TargetFromDevice(*info);
    ASSERT_TRUE(target.ok()) << target.status().ToString();
    auto task = MakeTask("matmul", {16, 16, 16}, *target);
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    task_ = std::move(task).value();
  }

  // A quick run of `trials` in batches of `batch` (0: the devices decide).
  static TuneOptions Quick(int trials, int batch) {
    TuneOptions o;
    o.tuner = "random";
    o.trials = trials;
    o.batch = batch;
    o.measure.timing.repeat = 1;
    o.measure.timing.min_repeat_ms = 0;
    return o;
  }

  // Tunes with a WatchingTuner over `watch`.
  Expected<TuneSummary> TuneWatched(TuneOptions o, const std::shared_ptr<Watch>& watch) {
    o.make_tuner = [watch](const ConfigSpace& space,
                           const TunerOptions& topt) -> Expected<std::unique_ptr<Tuner>> {
      CT_ASSIGN_OR_RETURN(std::unique_ptr<Tuner> inner, MakeTuner("random", space, topt));
      return std::unique_ptr<Tuner>(new WatchingTuner(std::move(inner), watch));
    };
    o.on_record = [watch](const Record&) { watch->OnRecord(); };
    return Tune(*task_, devices_, *builder_, o);
  }

  std::vector<std::unique_ptr<ServerProcess>> servers_;
  std::vector<DeviceSpec> devices_;
  std::unique_ptr<builder::Builder> builder_;
  std::unique_ptr<Task> task_;
};

TEST_F(TunePlanningTest, OverlappedTheTunerHearsOfABatchWhileTheDevicesMeasureTheNext) {
  StartServers(1);
  // Batches of 2 (the default config and a proposal, then two proposals twice): the tuner hears
  // of the first batch while the second is measured, and its Update ends only when a record of
  // that batch arrives. Were it told between the batches, nothing would be measured while it
  // waits, and only the guard would end the wait.
  auto watch = std::make_shared<Watch>();
  TuneOptions o = Quick(6, 2);
  o.overlap = true;
  auto result = TuneWatched(o, watch);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->measured, 6);
  std::lock_guard<std::mutex> lock(watch->mu);
  EXPECT_EQ(watch->ended_by_guard, 0) << "the tuner planned while no batch was measured";
  EXPECT_EQ(watch->ended_by_record, 1);
  EXPECT_EQ(watch->records, 6);
  // No staler than taking turns: the third batch was proposed knowing the first.
  ASSERT_FALSE(watch->heard_at_proposal.empty());
  EXPECT_EQ(watch->heard_at_proposal.back(), 2);
  EXPECT_EQ(result->planning.proposed, 5);
  EXPECT_LE(result->planning.waited_s, result->planning.seconds());
}

TEST_F(TunePlanningTest, TakingTurnsTheTunerNeverPlansWhileAKernelIsTimed) {
  StartServers(1);
  // The same run, builds and measurements taking turns: the tuner's Update waits for a record
  // (3 s at most) that must not come, since nothing is measured while it plans.
  auto watch = std::make_shared<Watch>();
  watch->guard = std::chrono::milliseconds(3000);
  TuneOptions o = Quick(6, 2);
  o.overlap = false;
  auto result = TuneWatched(o, watch);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->measured, 6);
  std::lock_guard<std::mutex> lock(watch->mu);
  EXPECT_GT(watch->heard, 0) << "the tuner heard of no batch during the run";
  EXPECT_EQ(watch->records_while_updating, 0);
  EXPECT_EQ(watch->ended_by_record, 0);
  EXPECT_EQ(watch->records, 6);
  // Every planning moment was one the devices waited for.
  EXPECT_DOUBLE_EQ(result->planning.waited_s, result->planning.seconds());
}

TEST_F(TunePlanningTest, TheBatchGrowsWithTheDevices) {
  StartServers(3);
  // Three devices: batches of 9 (twice the devices, at least 8, a whole number each), not 8.
  TuneOptions o = Quick(18, 0);
  std::vector<int> batch_ends;
  o.on_progress = [&](const TuneProgress& p) {
    if (p.batch_end) batch_ends.push_back(p.measured);
  };
  auto result = Tune(*task_, devices_, *builder_, o);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->devices, 3);
  EXPECT_EQ(result->batch, 9);
  EXPECT_EQ(batch_ends, (std::vector<int>{9, 18}));
  EXPECT_EQ(ChooseBatch(0, 1), kDefaultBatch);
  EXPECT_EQ(ChooseBatch(0, 5), 10);
  EXPECT_EQ(ChooseBatch(2, 5), 2) << "a batch that is given is kept";
}

// `crosstune ARGS` with its stdout and stderr.
testing::CommandResult Crosstune(const std::string& args) {
  return testing::RunCommand(std::string(CT_CLI_BIN) + " " + args);
}

TEST_F(TunePlanningTest, TheCliReportsThePlanningAndTheBatchAndWarnsOfABatchBelowTheDevices) {
  StartServers(3);
  const testing::TempDir dir;
  std::string common =
      "tune matmul --shape 16,16,16 --tuner xgb --trials 18 --repeat 1 --min-repeat-ms 0 "
      "--target auto --quiet";
  for (const auto& d : devices_) common += " -s " + d.server;

  auto json_run = Crosstune(common + " --overlap --json --log " + dir.path() + "/a.jsonl");
  ASSERT_EQ(json_run.exit_code, 0) << json_run.err;
  EXPECT_EQ(json_run.err.find("--batch"), std::string::npos) << json_run.err;
  auto j = nlohmann::json::parse(json_run.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json_run.out;
  EXPECT_EQ(j["batch"], 9) << j.dump(2);
  EXPECT_EQ(j["measured"], 18) << j.dump(2);
  const nlohmann::json& p = j["planning"];
  ASSERT_TRUE(p.is_object()) << j.dump(2);
  EXPECT_EQ(p["proposed"], 17) << p.dump();  // and the default config
  const double refit = p["refit_s"].get<double>(), propose = p["propose_s"].get<double>();
  const double seconds = p["seconds"].get<double>(), wall = j["wall_s"].get<double>();
  EXPECT_GE(refit, 0) << p.dump();
  EXPECT_GT(propose, 0) << p.dump();
  EXPECT_NEAR(seconds, refit + propose, 1e-9) << p.dump();
  EXPECT_LE(seconds, wall) << p.dump();
  EXPECT_NEAR(p["ms_per_proposal"].get<double>(), seconds * 1e3 / 17, 1e-6) << p.dump();
  EXPECT_NEAR(p["wall_fraction"].get<double>(), seconds / wall, 1e-9) << p.dump();
  EXPECT_GE(p["waited_s"].get<double>(), 0) << p.dump();
  EXPECT_LE(p["waited_s"].get<double>(), seconds) << p.dump();

  // A batch below the devices is kept, said once; the text report has the planning line.
  auto text_run = Crosstune(common + " --batch 2 --log " + dir.path() + "/b.jsonl");
  ASSERT_EQ(text_run.exit_code, 0) << text_run.err;
  const std::string warning = "batch 2 is smaller than the 3 devices";
  const size_t at = text_run.err.find(warning);
  EXPECT_NE(at, std::string::npos) << text_run.err;
  EXPECT_EQ(text_run.err.find(warning, at + 1), std::string::npos) << text_run.err;
  EXPECT_NE(text_run.out.find("planning: "), std::string::npos) << text_run.out;
  EXPECT_NE(text_run.out.find(" ms per proposal (17 proposed; refit "), std::string::npos)
      << text_run.out;
  auto log = ReadLog(dir.path() + "/b.jsonl");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(log->records.size(), 18u);
}

}  // namespace
}  // namespace crosstune::tuner
