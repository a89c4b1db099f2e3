// The server under hostile modules, clients and faults: a module that spins while it loads, a
// kernel that forks, a server killed with SIGKILL mid-session, idle sessions, oversize frames
// before the handshake, and flag values that would wrap.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "crosstune/channel.h"
#include "crosstune/client/local_server.h"
#include "crosstune/client/session.h"
#include "crosstune/handshake.h"
#include "crosstune/testing/support.h"
#include "test_util.h"

namespace crosstune::testing {
namespace {

using std::chrono::seconds;

// Whether `pid` is gone (or a zombie nobody reaped yet: it no longer runs).
bool Gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return true;
  auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z';
}

// Calls forker.so's pids(): the session process and the process the kernel forked.
std::pair<pid_t, pid_t> SessionAndForkedPids(client::Session& s) {
  EXPECT_TRUE(s.Upload(CT_FORKER_KERNEL, "forker.so").ok());
  auto m = s.LoadModule("forker.so");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return {0, 0};
  auto t = s.AllocTensor({2}, DLDataType{kDLInt, 64, 1});
  EXPECT_TRUE(t.ok());
  if (!t.ok()) return {0, 0};
  auto r = m->Call("pids", {client::CallArg::Tensor(*t)});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  int64_t pids[2] = {0, 0};
  EXPECT_TRUE(t->CopyTo(pids, sizeof(pids)).ok());
  return {static_cast<pid_t>(pids[0]), static_cast<pid_t>(pids[1])};
}

Channel RawChannel(const ServerProcess& server) {
  auto ch = Channel::Connect("127.0.0.1", server.port(), DeadlineIn(seconds(10)));
  EXPECT_TRUE(ch.ok()) << ch.status().ToString();
  return ch.ok() ? std::move(ch).value() : Channel();
}

TEST(ServerHardeningTest, ModuleThatSpinsWhileLoadingTimesOutAtTheCallLimit) {
  if (ForeignServer()) GTEST_SKIP() << "host-built module";
  auto server = StartServer({"--call-timeout", "1"});
  ASSERT_TRUE(server);
  auto s = Connect(*server);
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->Upload(CT_LOAD_SPIN_KERNEL, "load_spin.so").ok());
  auto m = s->LoadModule("load_spin.so");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kTimeout) << m.status().ToString();
  EXPECT_EQ(m.status().message(), "loading 'load_spin.so' ran past 1000 ms");
  ExpectServerAnswers(*server);
}

TEST(ServerHardeningTest, RefusesAModuleWhoseFunctionNamesAreNotUtf8) {
  if (ForeignServer()) GTEST_SKIP() << "host-built module";
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto s = Connect(*server);
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->Upload(CT_BAD_NAMES_KERNEL, "bad_names.so").ok());
  auto m = s->LoadModule("bad_names.so");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kInvalidArgument) << m.status().ToString();
  EXPECT_TRUE(s->Ping().ok());
}

TEST(ServerHardeningTest, WhatAKernelForksEndsWithItsSession) {
  if (ForeignServer()) GTEST_SKIP() << "host-built module";
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto s = Connect(*server);
  ASSERT_TRUE(s);
  const auto pids = SessionAndForkedPids(*s);
  const pid_t session_pid = pids.first, forked = pids.second;
  ASSERT_GT(forked, 0);
  EXPECT_FALSE(Gone(forked));
  ASSERT_TRUE(s->Close().ok());
  EXPECT_TRUE(Eventually([&] { return Gone(forked); })) << "pid " << forked << " outlived it";
  EXPECT_TRUE(Gone(session_pid));
}

TEST(ServerHardeningTest, SessionsDieWithAServerKilledBySigkillAndTheNextServerSweepsUp) {
  if (ForeignServer()) GTEST_SKIP() << "host-built module";
  std::string work_dir = MakeTempDir();
  auto server = StartServer({"--work-dir", work_dir});
  ASSERT_TRUE(server);
  auto s = Connect(*server);
  ASSERT_TRUE(s);
  const auto pids = SessionAndForkedPids(*s);
  const pid_t session_pid = pids.first, forked = pids.second;
  ASSERT_GT(session_pid, 0);
  ASSERT_GT(forked, 0);
  ASSERT_EQ(server->Workspaces().size(), 1u);
  ASSERT_EQ(::kill(server->pid(), SIGKILL), 0);
  // The orphaned session would otherwise go on serving its client.
  EXPECT_TRUE(Eventually([&] { return Gone(session_pid); })) << "session outlived its server";
  // What the session's kernel forked goes too: the fork server kills the session's process group
  // on its way out, so nothing is left holding the client's socket.
  EXPECT_TRUE(Eventually([&] { return Gone(forked); })) << "a kernel's child outlived the server";
  ::kill(forked, SIGKILL);
  EXPECT_FALSE(s->Ping().ok());
  // SIGKILL left its workspace; the next server on this work dir removes it.
  ASSERT_EQ(std::filesystem::directory_iterator(work_dir)->path().filename().string().rfind(
                "session-", 0),
            0u);
  auto next = StartServer({"--work-dir", work_dir});
  ASSERT_TRUE(next);
  EXPECT_TRUE(next->Workspaces().empty());
  ExpectServerAnswers(*next);
  std::error_code ec;
  std::filesystem::remove_all(work_dir, ec);
}

// The folders in `base` named crosstune-server-<pid>-*.
std::vector<std::filesystem::path> ServerDirsOf(const std::string& base, pid_t pid) {
  std::vector<std::filesystem::path> out;
  const std::string prefix = "crosstune-server-" + std::to_string(pid) + "-";
  for (const auto& e : std::filesystem::directory_iterator(base)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  }
  return out;
}

TEST(ServerHardeningTest, AServerWithoutAWorkDirRemovesThoseOfServersKilledBeforeIt) {
  if (ForeignServer()) GTEST_SKIP() << "starts the host's server with its own TMPDIR";
  const std::string base = MakeTempDir();
  const char* old = std::getenv("TMPDIR");
  const std::string old_tmpdir = old ? old : "";
  ::setenv("TMPDIR", base.c_str(), 1);  // the servers below make their work dirs in `base`
  const std::vector<std::string> argv = {CT_SERVER_BIN, "--host", "127.0.0.1",
                                         "--port",      "0",      "--exit-with-parent"};
  client::LocalServer first;
  Status started = first.Start(argv, seconds(30));
  ASSERT_TRUE(started.ok()) << started.ToString();
  {
    auto s = client::Session::Connect({.server = first.address(), .peer_name = "rpc-test"});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE((*s)->Ping().ok());
  }
  const pid_t first_pid = first.pid();
  ASSERT_EQ(ServerDirsOf(base, first_pid).size(), 1u) << "its work dir, made with the session";
  const std::filesystem::path left = ServerDirsOf(base, first_pid).front();
  first.Kill(SIGKILL);
  ASSERT_TRUE(std::filesystem::exists(left)) << "SIGKILL skips the cleanup";

  // Beside it: the folder of a process that runs (this test), and a symlink named for a process
  // that is gone, pointing at a folder of ours.
  const std::filesystem::path live =
      std::filesystem::path(base) / ("crosstune-server-" + std::to_string(::getpid()) + "-beef");
  std::filesystem::create_directories(live);
  std::ofstream(live / "upload.so") << "x";
  const std::filesystem::path keep = std::filesystem::path(base) / "keep";
  std::filesystem::create_directories(keep);
  std::ofstream(keep / "data") << "x";
  const std::filesystem::path link =
      std::filesystem::path(base) / ("crosstune-server-" + std::to_string(first_pid) + "-cafe");
  std::filesystem::create_directory_symlink(keep, link);

  client::LocalServer second;
  started = second.Start(argv, seconds(30));
  if (old) {
    ::setenv("TMPDIR", old_tmpdir.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  ASSERT_TRUE(started.ok()) << started.ToString();
  // The sweep runs before the server listens.
  EXPECT_FALSE(std::filesystem::exists(left)) << "the killed server's work dir is still there";
  EXPECT_TRUE(std::filesystem::exists(live / "upload.so")) << "a live pid's folder was removed";
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_TRUE(std::filesystem::exists(keep / "data")) << "the sweep followed a symlink";
  second.Stop();
  std::error_code ec;
  std::filesystem::remove_all(base, ec);
}

TEST(ServerHardeningTest, IdleSessionEndsAfterTheIdleTimeout) {
  auto server = StartServer({"--idle-timeout", "1"});
  ASSERT_TRUE(server);
  Channel ch = RawChannel(*server);
  msg::Hello hello;
  hello.peer_name = "idle";
  ASSERT_TRUE(ClientHandshake(ch, hello, "", DeadlineIn(seconds(10))).ok());
  auto f = ch.ReadFrame(DeadlineIn(seconds(30)));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  Status s = f->AsStatus();
  EXPECT_EQ(s.code(), ErrorCode::kTimeout) << s.ToString();
  EXPECT_NE(s.message().find("idle"), std::string::npos) << s.ToString();
  ExpectServerAnswers(*server);
}

TEST(ServerHardeningTest, RefusesALargeFrameBeforeTheHandshake) {
  auto server = StartServer({"--handshake-timeout", "5"});
  ASSERT_TRUE(server);
  Channel ch = RawChannel(*server);
  const unsigned char header[4] = {0x00, 0x00, 0x10, 0x00};  // claims 1 MiB
  ASSERT_TRUE(ch.WriteBytes(header, 4, DeadlineIn(seconds(5))).ok());
  auto f = ch.ReadFrame(DeadlineIn(seconds(30)));
  ASSERT_TRUE(f.ok()) << "no answer: " << f.status().ToString();
  EXPECT_EQ(f->AsStatus().code(), ErrorCode::kLimitExceeded) << f->AsStatus().ToString();
  ExpectServerAnswers(*server);
}

// A TCP connection to the server from loopback address `source` (127.0.0.2: another peer than
// the test's own clients) that sends nothing; -1 when it cannot connect.
int SilentConnection(const char* source, uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Each connection became a session that waited for its Hello until the handshake timeout, so
// --max-sessions (16) of them from one address made every other client Busy.
TEST(ServerHardeningTest, IdleConnectionsFromOneAddressDoNotMakeEveryClientBusy) {
  auto server = StartServer({"--handshake-timeout", "120"});  // --max-handshakes-per-peer 4
  ASSERT_TRUE(server);
  std::vector<Channel> silent;
  for (int i = 0; i < 16; ++i) {
    int fd = SilentConnection("127.0.0.2", server->port());
    ASSERT_GE(fd, 0) << "cannot connect from 127.0.0.2: " << std::strerror(errno);
    silent.emplace_back(fd);
  }
  // Past the first four, each is answered Busy at once (the four wait for their handshake).
  auto answered = [&] {
    std::vector<pollfd> fds;
    for (auto& ch : silent) fds.push_back(pollfd{ch.fd(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), 0);
    return std::count_if(fds.begin(), fds.end(), [](const pollfd& p) { return p.revents != 0; });
  };
  EXPECT_TRUE(Eventually([&] { return answered() == 12; })) << answered() << " answered";
  size_t busy = 0;
  for (auto& ch : silent) {
    pollfd p{ch.fd(), POLLIN, 0};
    if (::poll(&p, 1, 0) != 1) continue;
    auto f = ch.ReadFrame(DeadlineIn(seconds(10)));
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    Status st = f->AsStatus();
    EXPECT_EQ(st.code(), ErrorCode::kBusy) << st.ToString();
    EXPECT_NE(st.message().find("--max-handshakes-per-peer 4"), std::string::npos) << st.ToString();
    ++busy;
  }
  EXPECT_EQ(busy, 12u);
  // A client from another address is served meanwhile.
  ExpectServerAnswers(*server);
}

// A path of about 900 bytes, the i-th of a workspace's files (they sort in i's order).
std::string LongPath(int i) {
  char tail[16];
  std::snprintf(tail, sizeof(tail), "%05d", i);
  return std::string(250, 'a') + "/" + std::string(250, 'b') + "/" + std::string(250, 'c') + "/" +
         std::string(150, 'd') + tail;
}
constexpr int kManyFiles = 1100;  // their list is about 1.2 MB, over the 1 MiB frame limit

// The list of a workspace's files used to go in one reply whatever its size: past the frame
// limit, the client refused it and the session was lost.
TEST(ServerHardeningTest, ListsMoreFilesThanOneFrameHoldsPageByPage) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto s = Connect(*server);
  ASSERT_TRUE(s);
  for (int i = kManyFiles - 1; i >= 0; --i) ASSERT_TRUE(s->UploadBytes("", LongPath(i)).ok()) << i;
  auto files = s->ListFiles();
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  ASSERT_EQ(files->size(), static_cast<size_t>(kManyFiles));
  for (int i = 0; i < kManyFiles; ++i) ASSERT_EQ((*files)[i].path, LongPath(i));
  EXPECT_TRUE(s->Ping().ok());
}

// A client that does not page (it sends no payload) gets a named error, not a frame it would
// refuse, and its session goes on.
TEST(ServerHardeningTest, AReplyOverTheFrameLimitIsRefusedWithANamedError) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  Channel ch = RawChannel(*server);
  msg::Hello hello;
  hello.peer_name = "old-client";
  ASSERT_TRUE(ClientHandshake(ch, hello, "", DeadlineIn(seconds(10))).ok());
  for (int i = 0; i < kManyFiles; ++i) {
    auto up = ch.Call<msg::FileEntry>(Opcode::kUpload, msg::UploadRequest{LongPath(i), 0, ""},
                                      DeadlineIn(seconds(30)));
    ASSERT_TRUE(up.ok()) << up.status().ToString();
  }
  auto list = ch.Call<msg::FileList>(Opcode::kListFiles, msg::Empty{}, DeadlineIn(seconds(30)));
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), ErrorCode::kLimitExceeded) << list.status().ToString();
  EXPECT_NE(list.status().message().find("frame limit"), std::string::npos)
      << list.status().ToString();
  EXPECT_TRUE(ch.Call<msg::Empty>(Opcode::kPing, msg::Empty{}, DeadlineIn(seconds(10))).ok());
}

TEST(ServerHardeningTest, RefusesTimingRequestsOverTheProtocolsLimits) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto s = Connect(*server);
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->Upload(TestKernels(), "k.so").ok());
  auto m = s->LoadModule("k.so");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (uint32_t repeat : {4294967295u, 200000u, 0u}) {
    client::TimeOptions opt;
    opt.timing.repeat = repeat;
    auto r = m->Time("empty", {}, opt);
    ASSERT_FALSE(r.ok()) << "repeat " << repeat;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << r.status().ToString();
  }
  client::TimeOptions cool;
  cool.timing.cooldown_ms = 4294967295u;
  EXPECT_EQ(m->Time("empty", {}, cool).status().code(), ErrorCode::kInvalidArgument);
  // The session goes on.
  client::TimeOptions ok;
  ok.timing.repeat = 3;
  auto r = m->Time("empty", {}, ok);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seconds_per_call.size(), 3u);
}

// Hidden extraction directories (.ct-tmp-pkg-*) under the session workspaces.
size_t HiddenPackageCopies(const std::string& work_dir) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(work_dir, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename().string().rfind(".ct-tmp-pkg-", 0) == 0) ++n;
  }
  return n;
}

TEST(ServerHardeningTest, PackageLoadsLeaveNoHiddenCopiesBehind) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto s = Connect(*server);
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->UploadBytes("manifest.json is not a tar archive", "bad.ctpkg").ok());
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(s->LoadModule("bad.ctpkg").ok());
  EXPECT_EQ(HiddenPackageCopies(server->work_dir()), 0u);
  EXPECT_TRUE(s->Ping().ok());
}

TEST(ServerHardeningTest, RefusesFlagValuesThatWouldWrapOrMeanNoLimit) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--call-timeout", "4294968"},
                                        {"--handshake-timeout", "0.0001"},
                                        {"--session-timeout", "-1"},
                                        {"--idle-timeout", "1e12"}}) {
    std::string error;
    auto server = ServerProcess::Start(args, &error);
    EXPECT_FALSE(server) << args[0] << " " << args[1] << " was accepted";
  }
}

// Each refused at start, with the flag, the value and the range in one line. NaN passes every
// comparison, so a range check alone took it (and casting it to an integer is undefined); an
// integer flag's text is checked before CLI11 converts it to a 16-bit port.
TEST(ServerHardeningTest, FlagErrorsNameTheFlagTheValueAndTheRange) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--handshake-timeout nan",
       "--handshake-timeout: 'nan' is not a finite number in 0.01..3600"},
      {"--call-timeout nan", "--call-timeout: 'nan' is not a finite number in 0..86400"},
      {"--idle-timeout inf", "--idle-timeout: 'inf' is not a finite number in 0..2592000"},
      {"--session-timeout -nan", "--session-timeout: '-nan' is not a finite number"},
      {"--port 70000", "--port: 70000 is not in 0..65535"},
      {"--max-sessions 0", "--max-sessions: 0 is not in 1..65536"},
      {"--max-upload-bytes -1", "--max-upload-bytes: -1 is not in 1..1152921504606846976"},
      {"--threads 1.5", "--threads: '1.5' is not an integer in 0..4096"},
  };
  for (const auto& [flags, want] : cases) {
    // `timeout`: a server that took the value would serve until killed.
    auto r = RunCommand("timeout 20 " + std::string(CT_SERVER_BIN) + " --port 0 " + flags);
    EXPECT_NE(r.exit_code, 0) << flags << " was accepted";
    EXPECT_NE(r.exit_code, 124) << flags << " was accepted";
    EXPECT_NE(r.err.find(want), std::string::npos) << flags << ": " << r.err;
  }
}

}  // namespace
}  // namespace crosstune::testing
