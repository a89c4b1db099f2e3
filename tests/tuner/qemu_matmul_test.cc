// The matmul template's NEON code on the emulated ARM boards: crosstune-server cross-built for
// aarch64 / armhf under qemu-user, the target asked from the board (auto), configs built
// in-process for it and checked against the reference there. Skips with a message when qemu or a
// cross server is absent. qemu's timings are emulation speed, so only answers are checked.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "crosstune/builder/builder.h"
#include "crosstune/testing/server_process.h"
#include "crosstune/tuner/measure.h"
#include "crosstune/tuner/task.h"

namespace crosstune::tuner {
namespace {

struct Board {
  const char* name;
  const char* qemu;
  const char* sysroot;
  const char* server;
};

class QemuMatmulTest : public ::testing::TestWithParam<Board> {};

TEST_P(QemuMatmulTest, GeneratedCodeMatchesTheReferenceOnTheBoard) {
  const Board& b = GetParam();
  if (std::string(b.qemu).empty() || ::access(b.qemu, X_OK) != 0) {
    GTEST_SKIP() << "qemu-user for " << b.name
                 << " is missing; scripts/install-deps.sh installs it";
  }
  if (std::string(b.server).empty() || ::access(b.server, X_OK) != 0) {
    GTEST_SKIP() << "no cross-built crosstune-server for " << b.name << " at '" << b.server
                 << "' (CROSSTUNE_CROSS_SERVERS builds it)";
  }
  auto builder = builder::Builder::Create({.workers = 2});
  ASSERT_TRUE(builder.ok());
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() /
                 ("crosstune-qemu-mm-" + std::string(b.name) + "-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ServerProcess server;
  Status st = server.Start({b.qemu, "-L", b.sysroot, b.server, "--host", "127.0.0.1", "--port", "0",
                            "--work-dir", dir.string()},
                           std::chrono::seconds(30));
  ASSERT_TRUE(st.ok()) << st.ToString();
  DeviceSpec device{.name = b.name, .server = server.address()};
  device.request_timeout = std::chrono::seconds(120);
  client::ConnectOptions co;
  co.server = server.address();
  co.request_timeout = device.request_timeout;
  auto session = client::Session::Connect(co);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  auto info = (*session)->Info();
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
    options.repeat = 1;
    options.min_repeat_ms = 0;
    options.run_timeout_ms = 60'000;
    auto cands = BuildCandidates(**builder, **task, indices, *info, options);
    ReferenceData ref = ReferenceData::Make(**task, 3);
    auto runner = DeviceRunner::Open(device, **task, ref, options);
    ASSERT_TRUE(runner.ok()) << runner.status().ToString();
    for (const auto& c : cands) {
      Measurement m = (*runner)->Measure(c);
      EXPECT_EQ(m.error, TrialError::kOk)
          << b.name << " " << (*task)->id().Key() << " " << (*task)->space().Get(c.index).ToString()
          << ": " << m.message;
    }
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Boards, QemuMatmulTest,
    ::testing::Values(Board{"aarch64", CT_QEMU_AARCH64, "/usr/aarch64-linux-gnu",
                            CT_SERVER_AARCH64},
                      Board{"armhf", CT_QEMU_ARM, "/usr/arm-linux-gnueabihf", CT_SERVER_ARMHF}),
    [](const ::testing::TestParamInfo<Board>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace crosstune::tuner
