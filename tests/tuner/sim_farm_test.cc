// Simulated boards (crosstune-sim-device) under the real tracker and the real tuner: a recorded
// table's costs come back as the measured times, its failures as error records, and the real
// builder builds the replay task's kernels (the marker survives into the library).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "../tracker/farm.h"
#include "crosstune/builder/builder.h"
#include "crosstune/tuner/device_pool.h"
#include "crosstune/tuner/replay.h"
#include "crosstune/tuner/replay_task.h"
#include "crosstune/tuner/tune.h"
#include "crosstune/tuner/tuner.h"

namespace crosstune::tuner {
namespace {

// Five points, far apart in time (ms, as Kernel Tuner keeps them), one recorded as failing.
constexpr const char* kTable = R"({
  "tune_params_keys": ["block"], "tune_params": {"block": [1, 2, 3, 4, 5]},
  "cache": {
    "1": {"block": 1, "time": 40.0},
    "2": {"block": 2, "time": 8.0},
    "3": {"block": 3, "time": "RuntimeFailedConfig"},
    "4": {"block": 4, "time": 20.0},
    "5": {"block": 5, "time": 60.0}
  }})";

std::vector<std::string> SimArgs(const std::string& space, const std::string& tracker) {
  std::vector<std::string> argv = {CT_SIM_DEVICE_BIN, "--host", "127.0.0.1",         "--port", "0",
                                   "--space",         space,    "--exit-with-parent"};
  if (!tracker.empty()) argv.insert(argv.end(), {"--tracker", tracker, "--key", "sim"});
  return argv;
}

TEST(SimFarm, BoardsAnswerTheRecordedCostsAndFailuresThroughTheTrackerAndTheTuner) {
  testing::Farm farm;
  const std::string space = farm.WriteFile("table.json", kTable);
  auto loaded = ReplayTable::Load(space);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  std::shared_ptr<const ReplayTable> table = std::move(loaded).value();

  ASSERT_TRUE(farm.StartTracker());
  std::vector<std::unique_ptr<ServerProcess>> boards;
  for (int i = 0; i < 3; ++i) {
    boards.push_back(std::make_unique<ServerProcess>());
    ASSERT_TRUE(boards.back()
                    ->Start(SimArgs(space, farm.tracker()), std::chrono::seconds(10),
                            farm.Path("board" + std::to_string(i) + ".log"))
                    .ok());
  }
  ASSERT_TRUE(farm.WaitRegistered(3));
  client::TrackerOptions to;
  to.tracker = farm.tracker();
  to.peer_name = "sim-test";
  auto pool =
      DevicePool::FromTracker(to, "sim", 0, std::chrono::seconds(10), "", std::chrono::seconds(30));
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  ASSERT_EQ((*pool)->devices().size(), 3u);
  auto target = ResolveTarget("auto", (*pool)->devices().front());
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  auto task = ReplayTask::Make(table, *target);

  // The real builder: the generated kernel must compile, and its marker reach the board.
  auto b = builder::Builder::Create({.workers = 2});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  TuneOptions o;
  o.tuner = "grid";
  o.trials = 5;
  o.batch = 5;
  o.include_default = false;
  o.log_path = farm.Path("tune.jsonl");
  o.measure.timing = TimingOptions{.number = 1, .repeat = 1, .min_repeat_ms = 0};
  std::map<std::string, int> per_board;
  std::vector<Record> records;
  o.on_record = [&](const Record& r) {
    per_board[r.device.name]++;
    records.push_back(r);
  };
  auto summary = Tune(*task, (*pool)->devices(), **b, o);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  ASSERT_EQ(records.size(), 5u);

  // The best record is the table's best point, at (at least: a sleep never ends early) its
  // recorded time; every point measures no less than its record.
  ASSERT_TRUE(summary->has_best);
  const ReplayPoint* best = table->Find(summary->best.config_index);
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->cost, *table->best());
  EXPECT_GE(summary->best.mean, *best->kernel_s);
  for (const Record& r : records) {
    const ReplayPoint* p = table->Find(r.config_index);
    ASSERT_NE(p, nullptr);
    if (p->ok) {
      EXPECT_EQ(r.error, TrialError::kOk) << r.message;
      EXPECT_GE(r.mean, *p->kernel_s) << r.config_values.dump();
    } else {
      // The recorded failure comes back as the kernel's error, naming what was recorded.
      EXPECT_EQ(r.error, TrialError::kRuntimeError) << TrialErrorName(r.error);
      EXPECT_NE(r.message.find("RuntimeFailedConfig"), std::string::npos) << r.message;
    }
  }
  EXPECT_EQ(summary->errors[TrialError::kRuntimeError], 1);
}

// A tuner that notes the size of every batch it is asked for and how many results it had been
// told of by then.
class CountingTuner final : public Tuner {
 public:
  CountingTuner(std::unique_ptr<Tuner> inner, std::vector<int>* asked,
                std::vector<int>* heard = nullptr)
      : inner_(std::move(inner)), asked_(asked), heard_(heard) {}
  std::string name() const override { return inner_->name(); }
  std::vector<uint64_t> NextBatch(int n) override {
    asked_->push_back(n);
    if (heard_) heard_->push_back(told_);
    return inner_->NextBatch(n);
  }
  void Update(const std::vector<TrialResult>& results) override {
    told_ += static_cast<int>(results.size());
    inner_->Update(results);
  }

 private:
  std::unique_ptr<Tuner> inner_;
  std::vector<int>* asked_;
  std::vector<int>* heard_;
  int told_ = 0;  // results given to Update
};

// Sixteen devices (sessions on one board) make ChooseBatch's batch 32; with no batch given the
// run starts as one device's would and grows (RampBatch); a batch that is given is kept.
TEST(SimFarm, ManyDevicesRampTheBatchUpFromOneDevicesUnlessOneIsGiven) {
  EXPECT_EQ(RampBatch(128, 0), 8);
  EXPECT_EQ(RampBatch(128, 8), 8);
  EXPECT_EQ(RampBatch(128, 16), 16);
  EXPECT_EQ(RampBatch(128, 63), 32);
  EXPECT_EQ(RampBatch(128, 64), 64);
  EXPECT_EQ(RampBatch(128, 1000), 128);
  EXPECT_EQ(RampBatch(9, 0), 9) << "under two default batches: never ramped";
  EXPECT_EQ(RampBatch(130, 0), 9) << "halved rounding up: 130, 65, 33, 17, 9";

  testing::TempDir dir;
  nlohmann::json table_json = {{"tune_params_keys", {"b"}}, {"cache", nlohmann::json::object()}};
  for (int b = 0; b < 64; ++b) {
    table_json["tune_params"]["b"].push_back(b);
    table_json["cache"][std::to_string(b)] = {{"b", b}, {"time", 0.1 + b * 0.01}};
  }
  const std::string space = testing::WriteFile(dir.path() + "/table.json", table_json.dump());
  auto loaded = ReplayTable::Load(space);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  std::shared_ptr<const ReplayTable> table = std::move(loaded).value();
  std::vector<std::string> argv = SimArgs(space, "");
  argv.insert(argv.end(), {"--max-sessions", "32"});
  ServerProcess board;
  ASSERT_TRUE(board.Start(argv, std::chrono::seconds(10)).ok());
  std::vector<DeviceSpec> devices(16);
  for (size_t i = 0; i < devices.size(); ++i) {
    devices[i].name = "board-session" + std::to_string(i);
    devices[i].server = board.address();
  }
  auto target = ResolveTarget("auto", devices.front());
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  auto task = ReplayTask::Make(table, *target);
  auto b = builder::Builder::Create({.workers = 2});
  ASSERT_TRUE(b.ok()) << b.status().ToString();

  auto run = [&](int batch, std::vector<int>* asked) {
    TuneOptions o;
    o.trials = 64;
    o.batch = batch;
    o.include_default = false;
    o.measure.timing = TimingOptions{.number = 1, .repeat = 1, .min_repeat_ms = 0};
    o.make_tuner = [asked](const ConfigSpace& s,
                           const TunerOptions& topt) -> Expected<std::unique_ptr<Tuner>> {
      CT_ASSIGN_OR_RETURN(std::unique_ptr<Tuner> inner, MakeTuner("random", s, topt));
      return std::unique_ptr<Tuner>(new CountingTuner(std::move(inner), asked));
    };
    return Tune(*task, devices, **b, o);
  };
  std::vector<int> ramped;
  auto r = run(0, &ramped);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->batch, 32);
  EXPECT_EQ(r->measured, 64);
  EXPECT_EQ(ramped, (std::vector<int>{8, 8, 16, 32}));
  std::vector<int> given;
  auto g = run(32, &given);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(given, (std::vector<int>{32, 32}));
}

// The replay makes the batches Tune() makes and, with `lag`, tells the tuner of each batch only
// after it has proposed the next, as the overlapped pipeline does.
TEST(SimFarm, TheReplayRampsAndLagsAsThePipelineDoes) {
  testing::TempDir dir;
  nlohmann::json table_json = {{"tune_params_keys", {"b"}}, {"cache", nlohmann::json::object()}};
  for (int b = 0; b < 256; ++b) {
    table_json["tune_params"]["b"].push_back(b);
    // Grid order reaches the points within 95% of the best (b >= 216) only in the last batch.
    table_json["cache"][std::to_string(b)] = {{"b", b}, {"time", 1000.0 - b}};
  }
  const std::string space = testing::WriteFile(dir.path() + "/table.json", table_json.dump());
  auto table = ReplayTable::Load(space);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  auto replay = [&](bool ramp, bool lag, std::vector<int>* asked, std::vector<int>* heard) {
    ReplayOptions o;
    o.batch = 128;
    o.ramp = ramp;
    o.lag = lag;
    o.make_tuner = [asked, heard](const ConfigSpace& s,
                                  const TunerOptions& topt) -> Expected<std::unique_ptr<Tuner>> {
      CT_ASSIGN_OR_RETURN(std::unique_ptr<Tuner> inner, MakeTuner("grid", s, topt));
      return std::unique_ptr<Tuner>(new CountingTuner(std::move(inner), asked, heard));
    };
    auto r = RunReplay(**table, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->trials, 256u);
  };
  std::vector<int> asked, heard;
  replay(true, true, &asked, &heard);
  EXPECT_EQ(asked, (std::vector<int>{8, 8, 16, 32, 64, 128}));
  EXPECT_EQ(heard, (std::vector<int>{0, 0, 8, 16, 32, 64})) << "one batch late";
  asked.clear();
  heard.clear();
  replay(false, false, &asked, &heard);
  EXPECT_EQ(asked, (std::vector<int>{128, 128}));
  EXPECT_EQ(heard, (std::vector<int>{0, 128}));
}

// A file that is no simulated kernel is refused by name, and the board goes on serving.
TEST(SimFarm, ABoardRefusesAFileWithoutAMarkerAndGoesOnServing) {
  testing::TempDir dir;
  const std::string space = testing::WriteFile(dir.path() + "/table.json", kTable);
  ServerProcess board;
  ASSERT_TRUE(board.Start(SimArgs(space, ""), std::chrono::seconds(10)).ok());
  client::ConnectOptions co;
  co.server = board.address();
  auto session = client::Session::Connect(co);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ASSERT_TRUE((*session)
                  ->UploadBytes("\x7f"
                                "ELF and nothing else",
                                "junk.so")
                  .ok());
  auto junk = (*session)->LoadModule("junk.so");
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("not a simulated kernel"), std::string::npos)
      << junk.status().ToString();
  ASSERT_TRUE((*session)->UploadBytes(SimMarker(999), "missing.so").ok());
  auto missing = (*session)->LoadModule("missing.so");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("not in"), std::string::npos)
      << missing.status().ToString();

  // The same session still loads and calls a point the table has.
  auto table = ReplayTable::Load(space);
  ASSERT_TRUE(table.ok());
  uint64_t index = 0;
  while (!(*table)->Find(index) || !(*table)->Find(index)->ok) ++index;
  ASSERT_TRUE((*session)->UploadBytes(SimMarker(index), "ok.so").ok());
  auto module = (*session)->LoadModule("ok.so");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  auto out = (*session)->AllocTensor({1}, DLDataType{kDLFloat, 32, 1});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  float nan = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(out->CopyFrom(&nan, sizeof nan).ok());
  auto call = module->Call("sim", {client::CallArg::Tensor(*out)}, 10'000, 1);
  ASSERT_TRUE(call.ok()) << call.status().ToString();
  float got = 1;
  ASSERT_TRUE(out->CopyTo(&got, sizeof got).ok());
  EXPECT_EQ(got, 0.0f) << "the board zeroes its outputs";
}

}  // namespace
}  // namespace crosstune::tuner
