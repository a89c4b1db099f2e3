// The conv2d, depthwise_conv2d and dense templates' NEON code on the emulated ARM boards:
// crosstune-server cross-built for aarch64 / armhf under qemu-user, the target asked from the
// board (auto), configs (the default, the extremes of each knob, random samples) built in-process
// for it and checked against the reference there. Skips with a message when qemu or a cross
// server is absent. qemu's timings are emulation speed, so only answers are checked.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "crosstune/builder/builder.h"
#include "crosstune/testing/server_process.h"
#include "crosstune/tuner/measure.h"
#include "crosstune/tuner/task.h"
#include "template_checks.h"

namespace crosstune::tuner {
namespace {

struct Board {
  const char* name;
  const char* qemu;
  const char* sysroot;
  const char* server;
};

class QemuTemplatesTest : public ::testing::TestWithParam<Board> {};

TEST_P(QemuTemplatesTest, GeneratedCodeMatchesTheReferenceOnTheBoard) {
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
                 ("crosstune-qemu-tpl-" + std::string(b.name) + "-" + std::to_string(::getpid()));
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

  struct Case {
    const char* name;
    std::vector<int64_t> shape;
  };
  for (const Case& c : std::vector<Case>{
           {"conv2d", {1, 3, 13, 11, 5, 3, 3, 2, 1}},
           {"conv2d", {1, 8, 9, 7, 12, 3, 3, 1, 1, 1}},
           {"conv2d", {1, 16, 9, 7, 20, 1, 1, 1, 0}},
           {"conv2d", {1, 12, 10, 10, 8, 1, 1, 2, 0, 1}},
           {"depthwise_conv2d", {1, 5, 11, 13, 3, 3, 1, 1}},
           {"depthwise_conv2d", {1, 4, 12, 9, 3, 3, 2, 1}},
           {"dense", {3, 301, 29}},
       }) {
    auto task = MakeTask(c.name, c.shape, *target);
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    testing::ExpectConfigsMatchReference(**builder, **task, device, *info,
                                         testing::ConfigsToCheck(**task, 2, 5));
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Boards, QemuTemplatesTest,
    ::testing::Values(Board{"aarch64", CT_QEMU_AARCH64, "/usr/aarch64-linux-gnu",
                            CT_SERVER_AARCH64},
                      Board{"armhf", CT_QEMU_ARM, "/usr/arm-linux-gnueabihf", CT_SERVER_ARMHF}),
    [](const ::testing::TestParamInfo<Board>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace crosstune::tuner
