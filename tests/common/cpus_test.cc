#include "crosstune/cpus.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

namespace crosstune {
namespace {

TEST(CpuListTest, ParsesLinuxCpuListsAndFormatsThemBack) {
  EXPECT_EQ(*ParseCpuList("0"), (std::vector<int>{0}));
  EXPECT_EQ(*ParseCpuList("0-3,6"), (std::vector<int>{0, 1, 2, 3, 6}));
  EXPECT_EQ(*ParseCpuList("6,0-2,1"), (std::vector<int>{0, 1, 2, 6}));  // sorted, no repeats
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 6}), "0-3,6");
  EXPECT_EQ(FormatCpuList({1, 3, 4}), "1,3-4");
  EXPECT_EQ(FormatCpuList({}), "");
  for (const char* bad : {"", "a", "1-", "-1", "3-1", "1,,2", "99999", "0-99999", "1 "}) {
    auto r = ParseCpuList(bad);
    ASSERT_FALSE(r.ok()) << "'" << bad << "'";
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("CPU list '" + std::string(bad) + "'"), std::string::npos)
        << r.status().message();
  }
}

TEST(PinToCpusTest, PinsTheCallingThreadAndRefusesACpuItMayNotUse) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  ASSERT_EQ(static_cast<int>(allowed.size()), UsableCpus());
  // On a thread of its own, so the test process keeps its CPUs.
  std::thread([&] {
    ASSERT_TRUE(PinToCpus({allowed.back()}).ok());
    EXPECT_EQ(AllowedCpus(), std::vector<int>{allowed.back()});
    EXPECT_EQ(UsableCpus(), 1);
    // Now only that CPU is this thread's to give.
    if (allowed.size() > 1) {
      Status st = PinToCpus({allowed.front()});
      EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.ToString();
      EXPECT_NE(st.message().find("is not one this process may use (allowed: " +
                                  std::to_string(allowed.back()) + ")"),
                std::string::npos)
          << st.ToString();
    }
    EXPECT_EQ(PinToCpus({}).code(), ErrorCode::kInvalidArgument);
    // What it had before, given back (a tuning setup's end): wider than the mask it has now.
    ASSERT_TRUE(RestoreCpus(allowed).ok());
    EXPECT_EQ(AllowedCpus(), allowed);
    EXPECT_EQ(RestoreCpus({}).code(), ErrorCode::kInvalidArgument);
  }).join();
  EXPECT_EQ(AllowedCpus(), allowed);
}

}  // namespace
}  // namespace crosstune
