// The dense template: shapes and their errors (unit), and generated code for batches 1-16, odd
// widths and many configs on a local crosstune-server against the reference (integration).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crosstune/tuner/task.h"
#include "template_checks.h"

namespace crosstune::tuner {
namespace {

TEST(DenseTaskTest, RefusesWrongShapesWithTheUsage) {
  auto target = builder::ParseTarget("x86-avx2");
  ASSERT_TRUE(target.ok());
  for (std::vector<int64_t> bad : {std::vector<int64_t>{1, 2048},
                                   {1, 2048, 1000, 1},
                                   {0, 2048, 1000},
                                   {1, 2048, -3},
                                   {1048576, 1048576, 16}}) {
    auto task = MakeTask("dense", bad, *target);
    ASSERT_FALSE(task.ok());
    EXPECT_NE(task.status().message().find("dense takes --shape B,IN,OUT"), std::string::npos)
        << task.status().message();
  }
  auto ok = MakeTask("dense", {4, 2048, 1000}, *target);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  const auto args = (*ok)->args();
  EXPECT_EQ(args[1].shape, (std::vector<int64_t>{1000, 2048}));  // [OUT, IN], as stored
  EXPECT_EQ(args[3].shape, (std::vector<int64_t>{4, 1000}));
  EXPECT_DOUBLE_EQ((*ok)->flops(), 2.0 * 4 * 2048 * 1000);
  EXPECT_TRUE((*ok)->space().IsValid((*ok)->DefaultConfig()));
}

// Under ASan only WorkSplitIntoTasksMatchesTheReference and TwoThreadsMatchTheReference run (the
// asan test preset's exclude): the shapes of the others change the generated kernels, which the
// builder's clang compiles at run time uninstrumented, not the host code.
class DenseOnServerTest : public testing::TemplateOnServerTest {};

TEST_F(DenseOnServerTest, OddShapesMatchTheReference) {
  CheckTemplate("dense", {1, 37, 13}, 4);
  CheckTemplate("dense", {3, 301, 29}, 4);
  CheckTemplate("dense", {16, 600, 45}, 4);
  CheckTemplate("dense", {5, 7, 3}, 2);
}

TEST_F(DenseOnServerTest, ClassifierHeadsMatchTheReference) {
  CheckTemplate("dense", {1, 2048, 1000}, 3);
  CheckTemplate("dense", {8, 1280, 1000}, 3);
}

TEST_F(DenseOnServerTest, WorkSplitIntoTasksMatchesTheReference) {
  CheckSplit("dense", {3, 301, 29}, 3);
  CheckSplit("dense", {3, 301, 29}, 64);
}

// Two threads on the server's pool: each with its own items and scratch at the same time.
TEST_F(DenseOnServerTest, TwoThreadsMatchTheReference) {
  if (info_.cores < 2) GTEST_SKIP() << "the device has " << info_.cores << " core(s)";
  CheckThreads("dense", {3, 301, 29}, 2);
}

}  // namespace
}  // namespace crosstune::tuner
