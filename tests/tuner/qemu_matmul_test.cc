// The matmul template's NEON (riscv64: generic vector) code on the emulated boards:
// crosstune-server cross-built for aarch64 / armhf / riscv64 under qemu-user, the target asked from
// the board (auto), configs built in-process for it and checked against the reference there. Skips
// with a message when qemu or a cross server is absent. qemu's timings are emulation speed, so only
// answers are checked.
#include <gtest/gtest.h>

#include "crosstune/builder/builder.h"
#include "crosstune/testing/qemu_board_test.h"
#include "crosstune/testing/support.h"
#include "crosstune/tuner/measure.h"
#include "crosstune/tuner/task.h"

namespace crosstune::tuner {
namespace {

class QemuMatmulTest : public crosstune::testing::QemuBoardTest {};

TEST_P(QemuMatmulTest, GeneratedCodeMatchesTheReferenceOnTheBoard) {
  auto builder = builder::Builder::Create(
      {.workers = 2, .cache_dir = crosstune::testing::SharedTestBuildCache()});
  ASSERT_TRUE(builder.ok());
  DeviceSpec device{.name = board().name, .server = address()};
  device.request_timeout = kRequestTimeout;
  auto info = session().Info();
  ASSERT_TRUE(info.ok());
  auto target = builder::TargetFromDevice(*info);
  ASSERT_TRUE(target.ok()) << target.status().ToString();

  // (shape, threads): the threaded kernel runs on the server's thread pool under qemu too.
  std::vector<std::pair<std::vector<int64_t>, int>> cases = {{{33, 21, 17}, 1}, {{48, 64, 40}, 1}};
  if (info->cores >= 2) cases.push_back({{37, 24, 16}, 2});
  for (const auto& [shape, threads] : cases) {
    auto task = MakeTask("matmul", shape, *target, {.threads = threads});
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    std::vector<uint64_t> indices = {(*task)->DefaultConfig().index()};
    UniqueSampler sampler((*task)->space(), 5);
    for (int i = 0; i < 3; ++i) indices.push_back(sampler.Next().value());
    MeasureOptions options;
    options.timing.repeat = 1;
    options.timing.min_repeat_ms = 0;
    options.run_timeout_ms = 60'000;
    auto cands = BuildCandidates(**builder, **task, indices, *info, options);
    ReferenceData ref = ReferenceData::Make(**task, 3);
    auto runner = DeviceRunner::Open(device, **task, ref, options);
    ASSERT_TRUE(runner.ok()) << runner.status().ToString();
    for (const auto& c : cands) {
      Measurement m = (*runner)->Measure(c);
      EXPECT_EQ(m.error, TrialError::kOk)
          << board().name << " " << (*task)->id().Key() << " "
          << (*task)->space().Get(c.index).ToString() << ": " << m.message;
    }
  }
}

CT_INSTANTIATE_QEMU_BOARDS(QemuMatmulTest);

}  // namespace
}  // namespace crosstune::tuner
