// Faults are answers, not hangs: each fault gets a named error or a closed connection, and after
// each the server still serves a new client.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crosstune/channel.h"
#include "crosstune/handshake.h"
#include "crosstune/wire.h"
#include "test_util.h"

namespace crosstune::testing {
namespace {

using client::CallArg;
using std::chrono::seconds;

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer({"--handshake-timeout", "1", "--call-timeout", "30"});
    ASSERT_TRUE(server_);
  }

  // A session with the fault kernels loaded.
  std::unique_ptr<client::Session> SessionWithKernels(client::RemoteModule* module) {
    auto s = Connect(*server_);
    if (!s) return nullptr;
    auto up = s->Upload(TestKernels(), "faults.so");
    EXPECT_TRUE(up.ok()) << up.status().ToString();
    auto m = s->LoadModule("faults.so");
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (m.ok()) *module = *m;
    return s;
  }

  // A raw channel to the server, handshake not done.
  Channel Raw() {
    std::string host;
    uint16_t port = 0;
    EXPECT_TRUE(Channel::ParseHostPort(server_->address(), &host, &port).ok());
    auto ch = Channel::Connect(host, port, DeadlineIn(seconds(10)));
    EXPECT_TRUE(ch.ok()) << ch.status().ToString();
    return ch.ok() ? std::move(ch).value() : Channel();
  }

  // Reads until the server closes; returns the error frames it sent on the way.
  std::vector<Status> ReadUntilClosed(Channel& ch) {
    std::vector<Status> errors;
    for (;;) {
      auto f = ch.ReadFrame(DeadlineIn(seconds(20)));
      if (!f.ok()) {
        EXPECT_EQ(f.status().code(), ErrorCode::kDisconnected)
            << "server did not close: " << f.status().ToString();
        return errors;
      }
      errors.push_back(f->AsStatus());
    }
  }

  void ExpectCrash(const std::string& fn, const std::string& signal_text) {
    client::RemoteModule m;
    auto s = SessionWithKernels(&m);
    ASSERT_TRUE(s);
    auto r = m.Call(fn, {});
    EXPECT_EQ(r.status().code(), ErrorCode::kRemoteCrash) << r.status().ToString();
    EXPECT_EQ(r.status().message(), "kernel '" + fn + "' died by " + signal_text);
    EXPECT_FALSE(s->connected());
    EXPECT_EQ(s->Ping().code(), ErrorCode::kDisconnected);
    ExpectServerAnswers(*server_);
    // The crashed session's workspace is removed as well as the ping's (both sessions ended).
    s.reset();
    EXPECT_TRUE(server_->WaitForNoWorkspaces(20))
        << "workspaces left: " << ::testing::PrintToString(server_->Workspaces());
  }

  std::unique_ptr<ServerProcess> server_;
};

TEST_F(FaultTest, SegfaultingKernelIsARemoteCrash) {
  ExpectCrash("segv", "SIGSEGV (segmentation fault)");
}

TEST_F(FaultTest, IllegalInstructionIsARemoteCrash) {
  // __builtin_trap is ud2 on x86 (SIGILL) and brk on ARM (SIGTRAP); the server may be either
  // (CROSSTUNE_TEST_SERVER under qemu).
  if (ForeignServer()) {
    client::RemoteModule m;
    auto s = SessionWithKernels(&m);
    ASSERT_TRUE(s);
    auto r = m.Call("trap", {});
    EXPECT_EQ(r.status().code(), ErrorCode::kRemoteCrash) << r.status().ToString();
    ExpectServerAnswers(*server_);
    return;
  }
  ExpectCrash("trap", "SIGILL (illegal instruction)");
}

TEST_F(FaultTest, DivisionByZeroIsARemoteCrash) {
  ExpectCrash("fpe", "SIGFPE (arithmetic exception)");
}

TEST_F(FaultTest, BusErrorIsARemoteCrash) { ExpectCrash("bus", "SIGBUS (bus error)"); }

TEST_F(FaultTest, KernelThatExitsTheProcessIsARemoteCrash) {
  client::RemoteModule m;
  auto s = SessionWithKernels(&m);
  ASSERT_TRUE(s);
  auto r = m.Call("quit", {});
  EXPECT_EQ(r.status().code(), ErrorCode::kRemoteCrash) << r.status().ToString();
  EXPECT_EQ(r.status().message(), "kernel 'quit' ended the session process (exit status 3)");
  ExpectServerAnswers(*server_);
}

TEST_F(FaultTest, CrashWhileTimingIsARemoteCrash) {
  client::RemoteModule m;
  auto s = SessionWithKernels(&m);
  ASSERT_TRUE(s);
  client::TimeOptions opt;
  opt.timing.repeat = 3;
  auto r = m.Time("segv", {}, opt);
  EXPECT_EQ(r.status().code(), ErrorCode::kRemoteCrash) << r.status().ToString();
  ExpectServerAnswers(*server_);
}

TEST_F(FaultTest, SpinningKernelTimesOutAtTheCallLimit) {
  client::RemoteModule m;
  auto s = SessionWithKernels(&m);
  ASSERT_TRUE(s);
  auto r = m.Call("spin", {}, /*timeout_ms=*/300);
  EXPECT_EQ(r.status().code(), ErrorCode::kTimeout) << r.status().ToString();
  EXPECT_EQ(r.status().message(), "call 'spin' ran past 300 ms");
  EXPECT_FALSE(s->connected());
  ExpectServerAnswers(*server_);
}

TEST_F(FaultTest, TheCallTimerKeptArmedAcrossCallsEndsOnlyACallPastItsOwnLimit) {
  // The session keeps one timer armed across calls: an expiry meant for an earlier call that
  // fires during a later one must move on to the later call's deadline, not end it.
  client::RemoteModule m;
  auto s = SessionWithKernels(&m);
  ASSERT_TRUE(s);
  // Eight 150 ms calls under a 500 ms limit: the first call's expiry comes during the fourth.
  for (int i = 0; i < 8; ++i) {
    auto r = m.Call("busy_us", {client::CallArg::Int(150'000)}, /*timeout_ms=*/500);
    ASSERT_TRUE(r.ok()) << "call " << i << ": " << r.status().ToString();
  }
  // A short limit after a long one: the timer armed for 60 s must not hold the short call.
  ASSERT_TRUE(m.Call("empty", {}, /*timeout_ms=*/60'000).ok());
  auto start = std::chrono::steady_clock::now();
  auto r = m.Call("spin", {}, /*timeout_ms=*/300);
  EXPECT_EQ(r.status().code(), ErrorCode::kTimeout) << r.status().ToString();
  EXPECT_EQ(r.status().message(), "call 'spin' ran past 300 ms");
  // Not a performance bound: the 60 s expiry (or the parent's backstop) would come far later.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  ExpectServerAnswers(*server_);
}

TEST_F(FaultTest, KernelThatBlocksTheTimerSignalStillTimesOut) {
  client::RemoteModule m;
  auto s = SessionWithKernels(&m);
  ASSERT_TRUE(s);
  auto r = m.Call("spin_masked", {}, /*timeout_ms=*/300);
  EXPECT_EQ(r.status().code(), ErrorCode::kTimeout) << r.status().ToString();
  EXPECT_EQ(r.status().message(), "call 'spin_masked' ran past 300 ms");
  ExpectServerAnswers(*server_);
}

TEST_F(FaultTest, SpinningKernelTimesOutWhileTiming) {
  client::RemoteModule m;
  auto s = SessionWithKernels(&m);
  ASSERT_TRUE(s);
  client::TimeOptions opt;
  opt.timeout_ms = 300;
  auto r = m.Time("spin", {}, opt);
  EXPECT_EQ(r.status().code(), ErrorCode::kTimeout) << r.status().ToString();
  ExpectServerAnswers(*server_);
}

TEST_F(FaultTest, ServerCallTimeoutAppliesWhenTheRequestGivesNone) {
  server_ = StartServer({"--call-timeout", "0.3"});
  ASSERT_TRUE(server_);
  client::RemoteModule m;
  auto s = SessionWithKernels(&m);
  ASSERT_TRUE(s);
  auto r = m.Call("spin", {});
  EXPECT_EQ(r.status().code(), ErrorCode::kTimeout) << r.status().ToString();
  EXPECT_EQ(r.status().message(), "call 'spin' ran past 300 ms");
  ExpectServerAnswers(*server_);
}

TEST_F(FaultTest, UploadsPastTheWorkspaceQuotaAreRefusedAndTheSessionGoesOn) {
  server_ = StartServer({"--max-workspace-bytes", "3000"});
  ASSERT_TRUE(server_);
  auto s = Connect(*server_);
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->UploadBytes(std::string(2000, 'a'), "a.bin").ok());
  auto over = s->UploadBytes(std::string(2000, 'b'), "b.bin");
  EXPECT_EQ(over.status().code(), ErrorCode::kLimitExceeded) << over.status().ToString();
  EXPECT_NE(over.status().message().find("--max-workspace-bytes"), std::string::npos)
      << over.status().message();
  // Replacing a file counts it once: a.bin at 2500 bytes fits where a.bin + b.bin did not.
  EXPECT_TRUE(s->UploadBytes(std::string(2500, 'c'), "a.bin").ok());
  ASSERT_TRUE(s->RemoveFile("a.bin").ok());
  EXPECT_TRUE(s->UploadBytes(std::string(2000, 'b'), "b.bin").ok());
  auto files = s->ListFiles();
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), 1u);  // the refused upload left nothing behind
  EXPECT_EQ((*files)[0].path, "b.bin");
  EXPECT_TRUE(s->Ping().ok());
}

TEST_F(FaultTest, SessionTimeoutEndsALongCall) {
  server_ = StartServer({"--session-timeout", "1"});
  ASSERT_TRUE(server_);
  client::RemoteModule m;
  auto s = SessionWithKernels(&m);
  ASSERT_TRUE(s);
  auto r = m.Call("spin", {}, /*timeout_ms=*/60'000);
  EXPECT_EQ(r.status().code(), ErrorCode::kTimeout) << r.status().ToString();
  EXPECT_NE(r.status().message().find("session ran past its 1 s limit"), std::string::npos)
      << r.status().message();
  ExpectServerAnswers(*server_);
}

TEST_F(FaultTest, GarbageBytesGetAnErrorAndAClose) {
  Channel ch = Raw();
  std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_TRUE(ch.WriteBytes(junk.data(), junk.size(), DeadlineIn(seconds(5))).ok());
  auto errors = ReadUntilClosed(ch);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(errors[0].code() == ErrorCode::kLimitExceeded ||
              errors[0].code() == ErrorCode::kProtocolError)
      << errors[0].ToString();
  ExpectServerAnswers(*server_);
}

TEST_F(FaultTest, MalformedMsgpackGetsAProtocolError) {
  Channel ch = Raw();
  // Length 4, then bytes that are not a msgpack [op, id, payload] array.
  const unsigned char bad[] = {4, 0, 0, 0, 0xc1, 0xc1, 0xc1, 0xc1};
  ASSERT_TRUE(ch.WriteBytes(bad, sizeof(bad), DeadlineIn(seconds(5))).ok());
  auto errors = ReadUntilClosed(ch);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code(), ErrorCode::kProtocolError) << errors[0].ToString();
  ExpectServerAnswers(*server_);
}

TEST_F(FaultTest, WrongMagicIsRefused) {
  Channel ch = Raw();
  msg::Hello hello;
  hello.magic = 0xdeadbeef;
  auto r = ClientHandshake(ch, hello, "", DeadlineIn(seconds(10)));
  EXPECT_EQ(r.status().code(), ErrorCode::kProtocolError) << r.status().ToString();
  EXPECT_NE(r.status().message().find("bad magic"), std::string::npos);
  auto rest = ReadUntilClosed(ch);
  EXPECT_TRUE(rest.empty());
  ExpectServerAnswers(*server_);
}

TEST_F(FaultTest, WrongMajorVersionIsRefused) {
  Channel ch = Raw();
  msg::Hello hello;
  hello.major = kProtocolMajor + 1;
  auto r = ClientHandshake(ch, hello, "", DeadlineIn(seconds(10)));
  EXPECT_EQ(r.status().code(), ErrorCode::kVersionMismatch) << r.status().ToString();
  ExpectServerAnswers(*server_);
}

TEST_F(FaultTest, OversizeFrameLengthIsRefusedBeforeReadingIt) {
  Channel ch = Raw();
  const unsigned char huge[] = {0xff, 0xff, 0xff, 0x7f};
  ASSERT_TRUE(ch.WriteBytes(huge, sizeof(huge), DeadlineIn(seconds(5))).ok());
  auto errors = ReadUntilClosed(ch);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code(), ErrorCode::kLimitExceeded) << errors[0].ToString();
  ExpectServerAnswers(*server_);
}

TEST_F(FaultTest, OversizeFrameMidSessionEndsOnlyThatSession) {
  auto other = Connect(*server_);
  ASSERT_TRUE(other);
  Channel ch = Raw();
  ASSERT_TRUE(ClientHandshake(ch, msg::Hello{}, "", DeadlineIn(seconds(10))).ok());
  const unsigned char huge[] = {0x00, 0x00, 0x00, 0x10};
  ASSERT_TRUE(ch.WriteBytes(huge, sizeof(huge), DeadlineIn(seconds(5))).ok());
  auto errors = ReadUntilClosed(ch);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code(), ErrorCode::kLimitExceeded);
  EXPECT_TRUE(other->Ping().ok());
  ExpectServerAnswers(*server_);
}

TEST_F(FaultTest, AHandshakeThatNeverCompletesIsClosed) {
  Channel silent = Raw();
  // Meanwhile other clients are served: the silent one does not block the server.
  ExpectServerAnswers(*server_);
  auto errors = ReadUntilClosed(silent);  // --handshake-timeout 1
  EXPECT_TRUE(errors.empty());
  ExpectServerAnswers(*server_);
}

TEST_F(FaultTest, UnknownOpcodeIsAnErrorAndTheSessionGoesOn) {
  Channel ch = Raw();
  ASSERT_TRUE(ClientHandshake(ch, msg::Hello{}, "", DeadlineIn(seconds(10))).ok());
  auto r = ch.Call<msg::Empty>(static_cast<Opcode>(999), msg::Empty{}, DeadlineIn(seconds(10)));
  EXPECT_EQ(r.status().code(), ErrorCode::kProtocolError) << r.status().ToString();
  EXPECT_NE(r.status().message().find("unknown opcode 999"), std::string::npos);
  auto tracker_op = ch.Call<msg::Empty>(Opcode::kRegister, msg::Empty{}, DeadlineIn(seconds(10)));
  EXPECT_EQ(tracker_op.status().code(), ErrorCode::kProtocolError);
  // A known opcode with a payload of the wrong shape is refused too, and the session goes on.
  auto bad =
      ch.Call<msg::CallReply>(Opcode::kCall, std::string("not a call"), DeadlineIn(seconds(10)));
  EXPECT_EQ(bad.status().code(), ErrorCode::kProtocolError) << bad.status().ToString();
  EXPECT_TRUE(ch.Call<msg::Empty>(Opcode::kPing, msg::Empty{}, DeadlineIn(seconds(10))).ok());
  ExpectServerAnswers(*server_);
}

TEST_F(FaultTest, ClientVanishingMidUploadDoesNotHurtTheServer) {
  {
    Channel ch = Raw();
    ASSERT_TRUE(ClientHandshake(ch, msg::Hello{}, "", DeadlineIn(seconds(10))).ok());
    ASSERT_TRUE(ch.Send(Opcode::kUpload, 1, msg::UploadRequest{"x.bin", 1 << 20, ""},
                        DeadlineIn(seconds(5)))
                    .ok());
    std::string part(1000, 'x');
    ASSERT_TRUE(ch.WriteBytes(part.data(), part.size(), DeadlineIn(seconds(5))).ok());
  }  // closed mid-stream
  ExpectServerAnswers(*server_);
  EXPECT_TRUE(server_->WaitForNoWorkspaces(20));
}

}  // namespace
}  // namespace crosstune::testing
