// The conv2d, depthwise_conv2d, dense and conv2d_int8 templates' NEON (aarch64's int8 products:
// sdot where the board has the dot product; riscv64: generic vector) code on the
// emulated boards: crosstune-server cross-built for aarch64 / armhf / riscv64 under qemu-user, the
// target asked from the board (auto), configs (the default, the extremes of each knob, random
// samples) built in-process for it and checked against the reference there. Skips with a message
// when qemu or a cross server is absent. qemu's timings are emulation speed, so only answers are
// checked.
#include <gtest/gtest.h>

#include "crosstune/builder/builder.h"
#include "crosstune/testing/qemu_board_test.h"
#include "crosstune/testing/support.h"
#include "crosstune/tuner/measure.h"
#include "crosstune/tuner/task.h"
#include "template_checks.h"

namespace crosstune::tuner {
namespace {

class QemuTemplatesTest : public crosstune::testing::QemuBoardTest {};

TEST_P(QemuTemplatesTest, GeneratedCodeMatchesTheReferenceOnTheBoard) {
  auto builder = builder::Builder::Create(
      {.workers = 2, .cache_dir = crosstune::testing::SharedTestBuildCache()});
  ASSERT_TRUE(builder.ok());
  DeviceSpec device{.name = board().name, .server = address()};
  device.request_timeout = kRequestTimeout;
  auto info = session().Info();
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
           {"conv2d_int8", {1, 7, 9, 10, 11, 3, 3, 1, 1, 17, 3, 1}},
           {"conv2d_int8", {1, 16, 7, 7, 20, 1, 1, 2, 0, 0, 128, 0}},
       }) {
    auto task = MakeTask(c.name, c.shape, *target);
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    testing::ExpectConfigsMatchReference(**builder, **task, device, *info,
                                         testing::ConfigsToCheck(**task, 2, 5));
  }
}

CT_INSTANTIATE_QEMU_BOARDS(QemuTemplatesTest);

}  // namespace
}  // namespace crosstune::tuner
