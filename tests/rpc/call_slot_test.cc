#include "crosstune/server/call_slot.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace crosstune::server {
namespace {

// A real wait status for a child that died by `sig` (or exited with `code` when sig is 0).
int WaitStatusOf(int sig, int code = 0) {
  pid_t pid = ::fork();
  if (pid == 0) {
    rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    if (sig != 0) {
      ::signal(sig, SIG_DFL);
      ::raise(sig);
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(CallSlot, NamesTheKernelAndTheSignalOfACrash) {
  CallSlot* slot = MapCallSlot();
  ASSERT_NE(slot, nullptr);
  slot->Begin(7, "vadd", 1000, 1, false);
  Status s = DescribeChildEnd(*slot, WaitStatusOf(SIGSEGV), ParentKill::kNone, 0);
  EXPECT_EQ(s.code(), ErrorCode::kRemoteCrash);
  EXPECT_EQ(s.message(), "kernel 'vadd' died by SIGSEGV (segmentation fault)");
  EXPECT_EQ(slot->request_id, 7u);
  UnmapCallSlot(slot);
}

TEST(CallSlot, NamesTheNodeOfAModelThatCrashesOrHangs) {
  CallSlot* slot = MapCallSlot();
  ASSERT_NE(slot, nullptr);
  slot->Begin(3, "m.ctpkg", 500, 1, false);
  const std::string label = "'conv1' (ct_n1_conv2d)";
  slot->SetNode(label.data(), label.size());
  Status crash = DescribeChildEnd(*slot, WaitStatusOf(SIGSEGV), ParentKill::kNone, 0);
  EXPECT_EQ(crash.message(),
            "node 'conv1' (ct_n1_conv2d) of model 'm.ctpkg' died by SIGSEGV (segmentation fault)");
  Status hang = DescribeChildEnd(*slot, WaitStatusOf(SIGALRM), ParentKill::kNone, 0);
  EXPECT_EQ(hang.code(), ErrorCode::kTimeout);
  EXPECT_EQ(hang.message(), "model 'm.ctpkg' ran past 500 ms, in node 'conv1' (ct_n1_conv2d)");
  slot->Begin(4, "m.ctpkg", 500, 10, true);
  slot->SetNode(label.data(), label.size());
  Status timing = DescribeChildEnd(*slot, WaitStatusOf(SIGALRM), ParentKill::kNone, 0);
  EXPECT_EQ(timing.message(),
            "timing model 'm.ctpkg' ran past 500 ms per call (10 calls in a round), in node "
            "'conv1' (ct_n1_conv2d)");
  // A plain call after a model run names its kernel again: Begin clears the node.
  slot->Begin(5, "vadd", 1000, 1, false);
  EXPECT_EQ(DescribeChildEnd(*slot, WaitStatusOf(SIGSEGV), ParentKill::kNone, 0).message(),
            "kernel 'vadd' died by SIGSEGV (segmentation fault)");
  UnmapCallSlot(slot);
}

TEST(CallSlot, TurnsTheCallTimerIntoATimeout) {
  CallSlot* slot = MapCallSlot();
  ASSERT_NE(slot, nullptr);
  slot->Begin(1, "spin", 2000, 1, false);
  Status s = DescribeChildEnd(*slot, WaitStatusOf(SIGALRM), ParentKill::kNone, 0);
  EXPECT_EQ(s.code(), ErrorCode::kTimeout);
  EXPECT_EQ(s.message(), "call 'spin' ran past 2000 ms");
  slot->Begin(2, "spin", 10, 50, true);
  s = DescribeChildEnd(*slot, WaitStatusOf(SIGKILL), ParentKill::kCallOverdue, 0);
  EXPECT_EQ(s.code(), ErrorCode::kTimeout);
  EXPECT_NE(s.message().find("timing 'spin' ran past 10 ms per call (50 calls"), std::string::npos)
      << s.message();
  UnmapCallSlot(slot);
}

TEST(CallSlot, SaysNothingAboutANormalEndAndReportsTheSessionTimeout) {
  CallSlot* slot = MapCallSlot();
  ASSERT_NE(slot, nullptr);
  EXPECT_TRUE(DescribeChildEnd(*slot, WaitStatusOf(0), ParentKill::kNone, 0).ok());
  Status outside = DescribeChildEnd(*slot, WaitStatusOf(SIGABRT), ParentKill::kNone, 0);
  EXPECT_EQ(outside.code(), ErrorCode::kRemoteCrash);
  EXPECT_NE(outside.message().find("outside a kernel call"), std::string::npos);
  Status session = DescribeChildEnd(*slot, WaitStatusOf(SIGKILL), ParentKill::kSessionTimeout, 30);
  EXPECT_EQ(session.code(), ErrorCode::kTimeout);
  EXPECT_EQ(session.message(), "session ran past its 30 s limit");
  slot->Begin(3, "k", 0, 1, false);
  Status exited = DescribeChildEnd(*slot, WaitStatusOf(0, 4), ParentKill::kNone, 0);
  EXPECT_EQ(exited.message(), "kernel 'k' ended the session process (exit status 4)");
  UnmapCallSlot(slot);
}

TEST(CallSlot, IsOverdueOnlyPastItsDeadlineAndOnlyDuringACall) {
  CallSlot* slot = MapCallSlot();
  ASSERT_NE(slot, nullptr);
  int64_t now = SteadyNowNs();
  EXPECT_FALSE(slot->Overdue(now, 0));
  slot->Begin(1, "f", 100, 2, false);  // 200 ms from now
  EXPECT_FALSE(slot->Overdue(now, 0));
  EXPECT_TRUE(slot->Overdue(now + 300'000'000, 0));
  EXPECT_FALSE(slot->Overdue(now + 300'000'000, 1'000'000'000));
  slot->End();
  EXPECT_FALSE(slot->Overdue(now + 300'000'000, 0));
  slot->Begin(2, "g", 0, 1, false);  // no limit
  EXPECT_FALSE(slot->Overdue(now + 1'000'000'000'000, 0));
  UnmapCallSlot(slot);
}

TEST(CallSlot, DescribesUnusualSignalsToo) {
  EXPECT_EQ(DescribeSignal(SIGILL), "SIGILL (illegal instruction)");
  EXPECT_EQ(DescribeSignal(SIGBUS), "SIGBUS (bus error)");
  EXPECT_EQ(DescribeSignal(SIGFPE), "SIGFPE (arithmetic exception)");
  EXPECT_NE(DescribeSignal(SIGUSR1).find("signal"), std::string::npos);
}

}  // namespace
}  // namespace crosstune::server
