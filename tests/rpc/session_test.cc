// Loopback integration tests: the real crosstune-server binary and the client library.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <vector>

#include "crosstune/channel.h"
#include "crosstune/cpus.h"
#include "crosstune/crypto.h"
#include "crosstune/handshake.h"
#include "test_util.h"

namespace crosstune::testing {
namespace {

using client::CallArg;
using client::Session;

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer(ServerArgs());
    ASSERT_TRUE(server_);
    session_ = Connect(*server_);
    ASSERT_TRUE(session_);
    local_dir_ = MakeTempDir();
  }
  void TearDown() override {
    session_.reset();
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(local_dir_, ec);
  }
  virtual std::vector<std::string> ServerArgs() { return {}; }

  client::RemoteModule LoadTestKernels() {
    auto up = session_->Upload(TestKernels(), "test_kernels.so");
    EXPECT_TRUE(up.ok()) << up.status().ToString();
    auto m = session_->LoadModule("test_kernels.so");
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : client::RemoteModule();
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<Session> session_;
  std::string local_dir_;
};

TEST_F(SessionTest, ReportsDeviceInfo) {
  if (ForeignServer()) GTEST_SKIP() << "host-architecture expectations";
  auto info = session_->Info();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
#if defined(__x86_64__)
  EXPECT_EQ(info->arch, "x86_64");
  EXPECT_EQ(info->triple, "x86_64-linux-gnu");
  EXPECT_FALSE(info->cpu_features.empty());
#endif
  EXPECT_GT(info->cores, 0u);
  EXPECT_GT(info->memory_bytes, 0u);
  EXPECT_FALSE(info->os.empty());
  EXPECT_EQ(info->version, std::string(kCrosstuneVersion));
  if (info->gpus.empty()) {
    EXPECT_FALSE(info->gpu_status.empty());
  }
}

TEST_F(SessionTest, UploadsDownloadsListsAndRemovesFiles) {
  std::string data(3 * 1024 * 1024 + 17, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + (i >> 9));
  std::string local = WriteFile(local_dir_ + "/data.bin", data);
  auto up = session_->Upload(local, "dir/sub/data.bin");
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  EXPECT_EQ(up->path, "dir/sub/data.bin");
  EXPECT_EQ(up->size, data.size());
  EXPECT_EQ(up->sha256_hex, Sha256Hex(data));

  auto small = session_->UploadBytes("hello", "hello.txt");
  ASSERT_TRUE(small.ok()) << small.status().ToString();

  auto list = session_->ListFiles();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].path, "dir/sub/data.bin");
  EXPECT_EQ((*list)[0].sha256_hex, Sha256Hex(data));
  EXPECT_EQ((*list)[1].path, "hello.txt");
  EXPECT_EQ((*list)[1].size, 5u);

  auto down = session_->Download("dir/sub/data.bin", local_dir_ + "/back.bin");
  ASSERT_TRUE(down.ok()) << down.status().ToString();
  EXPECT_EQ(ReadFile(local_dir_ + "/back.bin"), data);

  ASSERT_TRUE(session_->RemoveFile("dir/sub/data.bin").ok());
  auto missing = session_->Download("dir/sub/data.bin", local_dir_ + "/gone.bin");
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound) << missing.status().ToString();
  EXPECT_EQ(session_->RemoveFile("nope").code(), ErrorCode::kNotFound);
  list = session_->ListFiles();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 1u);
}

TEST_F(SessionTest, StreamsALargeUploadWhileHashingOnBothSides) {
  // Over the size where both ends pipeline hashing with the transfer.
  std::string data(9 * 1024 * 1024 + 5, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 7919) >> 3);
  std::string local = WriteFile(local_dir_ + "/large.bin", data);
  auto up = session_->Upload(local, "large.bin");
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  EXPECT_EQ(up->sha256_hex, Sha256Hex(data));
  EXPECT_EQ(up->size, data.size());
  auto down = session_->Download("large.bin", local_dir_ + "/large.back");
  ASSERT_TRUE(down.ok()) << down.status().ToString();
  EXPECT_EQ(ReadFile(local_dir_ + "/large.back"), data);
}

TEST_F(SessionTest, RefusesPathsOutsideTheWorkspace) {
  for (std::string path :
       std::vector<std::string>{"/etc/passwd", "../escape.txt", "a/../../escape.txt", "", "a/.."}) {
    auto up = session_->UploadBytes("x", path);
    EXPECT_EQ(up.status().code(), ErrorCode::kInvalidArgument)
        << path << ": " << up.status().ToString();
    EXPECT_NE(up.status().message().find("refusing path"), std::string::npos);
  }
  auto down = session_->Download("/etc/passwd", local_dir_ + "/passwd");
  EXPECT_EQ(down.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(session_->LoadModule("../../lib/libc.so.6").status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(session_->RemoveFile("..").code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(server_->work_dir() + "/escape.txt"));
  EXPECT_TRUE(session_->Ping().ok());
}

TEST_F(SessionTest, RefusesUploadWithBadHashAndKeepsNothing) {
  std::string host;
  uint16_t port = 0;
  ASSERT_TRUE(Channel::ParseHostPort(server_->address(), &host, &port).ok());
  auto ch = Channel::Connect(host, port, DeadlineIn(std::chrono::seconds(10)));
  ASSERT_TRUE(ch.ok());
  auto hello = ClientHandshake(*ch, msg::Hello{}, "", DeadlineIn(std::chrono::seconds(10)));
  ASSERT_TRUE(hello.ok()) << hello.status().ToString();
  std::string body = "these are not the bytes you hashed";
  uint32_t id = ch->NextRequestId();
  ASSERT_TRUE(ch->Send(Opcode::kUpload, id,
                       msg::UploadRequest{"k.so", body.size(), Sha256Hex("other")}, NoDeadline())
                  .ok());
  ASSERT_TRUE(ch->WriteBytes(body.data(), body.size(), NoDeadline()).ok());
  auto reply = ch->ReadReply<msg::FileEntry>(id, DeadlineIn(std::chrono::seconds(10)));
  EXPECT_EQ(reply.status().code(), ErrorCode::kBadHash) << reply.status().ToString();
  auto list = ch->Call<msg::FileList>(Opcode::kListFiles, msg::Empty{},
                                      DeadlineIn(std::chrono::seconds(10)));
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_TRUE(list->files.empty());
}

TEST_F(SessionTest, LoadsAModuleAndRunsVaddOnRemoteTensors) {
  auto m = LoadTestKernels();
  ASSERT_NE(m.id(), 0u);
  EXPECT_EQ(m.info().kind, "cpu");
  bool has_vadd = false;
  for (const auto& f : m.info().functions) has_vadd |= (f.name == "vadd" && f.signature == "ttt");
  EXPECT_TRUE(has_vadd);

  const int n = 1000;
  DLDataType f32{kDLFloat, 32, 1};
  auto a = session_->AllocTensor({n}, f32);
  auto b = session_->AllocTensor({n}, f32);
  auto c = session_->AllocTensor({n}, f32);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status().ToString();
  EXPECT_EQ(a->nbytes(), n * 4u);
  std::vector<float> ha(n), hb(n), hc(n, -1);
  std::iota(ha.begin(), ha.end(), 0.0f);
  std::iota(hb.begin(), hb.end(), 100.0f);
  ASSERT_TRUE(a->CopyFrom(ha.data(), ha.size() * 4).ok());
  ASSERT_TRUE(b->CopyFrom(hb.data(), hb.size() * 4).ok());
  auto r = m.Call("vadd", {CallArg::Tensor(*a), CallArg::Tensor(*b), CallArg::Tensor(*c)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ret, 0);
  ASSERT_TRUE(c->CopyTo(hc.data(), hc.size() * 4).ok());
  for (int i = 0; i < n; ++i) ASSERT_EQ(hc[i], ha[i] + hb[i]) << i;

  // Partial copies at an offset.
  float four[4];
  ASSERT_TRUE(c->CopyTo(four, 8 * 4, sizeof(four)).ok());
  EXPECT_EQ(four[0], ha[8] + hb[8]);
  float ones[2] = {1, 1};
  ASSERT_TRUE(a->CopyFrom(ones, 4 * 4, sizeof(ones)).ok());
  ASSERT_TRUE(a->CopyTo(four, 4 * 4, sizeof(four)).ok());
  EXPECT_EQ(four[0], 1.0f);
  EXPECT_EQ(four[2], ha[6]);

  auto x = session_->AllocTensor({2, 3}, f32);
  ASSERT_TRUE(x.ok());
  std::vector<float> hx = {1, 2, 3, 4, 5, 6}, back(6);
  ASSERT_TRUE(x->CopyFrom(hx.data(), 24).ok());
  ASSERT_TRUE(m.Call("axpb", {CallArg::Tensor(*x), CallArg::Float(2.5), CallArg::Int(-1)}).ok());
  ASSERT_TRUE(x->CopyTo(back.data(), 24).ok());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(back[i], hx[i] * 2.5f - 1);

  EXPECT_TRUE(x->Free().ok());
  EXPECT_TRUE(m.Unload().ok());
}

TEST_F(SessionTest, RefusesCallsThatDoNotMatchTheSignature) {
  auto m = LoadTestKernels();
  auto a = session_->AllocTensor({4}, DLDataType{kDLFloat, 32, 1});
  ASSERT_TRUE(a.ok());
  auto few = m.Call("vadd", {CallArg::Tensor(*a)});
  EXPECT_EQ(few.status().code(), ErrorCode::kInvalidArgument) << few.status().ToString();
  auto kind = m.Call("vadd", {CallArg::Tensor(*a), CallArg::Int(1), CallArg::Tensor(*a)});
  EXPECT_EQ(kind.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(kind.status().message().find("argument 1 must be a tensor"), std::string::npos)
      << kind.status().message();
  auto missing_fn = m.Call("nope", {});
  EXPECT_EQ(missing_fn.status().code(), ErrorCode::kNotFound);
  client::RemoteTensor ghost;
  auto ghost_call =
      m.Call("vadd", {CallArg::Tensor(*a), CallArg::Tensor(*a), CallArg::Tensor(ghost)});
  EXPECT_EQ(ghost_call.status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(session_->Ping().ok());
}

TEST_F(SessionTest, ReloadingAReuploadedFileRunsTheNewCode) {
  // Same remote name, different library: the second load must not get the first one back.
  ASSERT_TRUE(session_->Upload(TestKernels(), "k.so").ok());
  auto first = session_->LoadModule("k.so");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(session_->Upload(CT_BAD_ABI_KERNEL, "k.so").ok());
  auto second = session_->LoadModule("k.so");
  if (ForeignServer()) GTEST_SKIP() << "the bad-ABI kernel is built for this host only";
  EXPECT_EQ(second.status().code(), ErrorCode::kVersionMismatch) << second.status().ToString();
  // The first module still works, and loading the same file twice gives two modules.
  EXPECT_TRUE(first->Call("empty", {}).ok());
  ASSERT_TRUE(session_->Upload(TestKernels(), "k.so").ok());
  auto third = session_->LoadModule("k.so");
  auto fourth = session_->LoadModule("k.so");
  ASSERT_TRUE(third.ok() && fourth.ok());
  EXPECT_NE(third->id(), fourth->id());
  EXPECT_TRUE(fourth->Call("empty", {}).ok());
  auto list = session_->ListFiles();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 1u);  // no leftovers of the loads
}

TEST_F(SessionTest, ReportsKernelErrorsWithTheModulesText) {
  auto m = LoadTestKernels();
  auto r = m.Call("fail", {});
  EXPECT_EQ(r.status().code(), ErrorCode::kKernelError);
  EXPECT_NE(r.status().message().find("asked to fail"), std::string::npos) << r.status().message();
  EXPECT_TRUE(m.Call("empty", {}).ok());
}

// Copies many times larger than one receive or send (32 KiB, 1 MiB): every byte lands
// at its offset, and a partial copy touches only its range.
TEST_F(SessionTest, CopiesALargeTensorInAndOutByteForByte) {
  const int64_t n = (3 << 20) / 4 + 3;
  auto t = session_->AllocTensor({n}, DLDataType{kDLInt, 32, 1});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  std::vector<uint32_t> in(static_cast<size_t>(n));
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint32_t>(i * 2654435761u);
  ASSERT_TRUE(t->CopyFrom(in.data(), in.size() * 4).ok());
  std::vector<uint32_t> out(in.size(), 0);
  ASSERT_TRUE(t->CopyTo(out.data(), out.size() * 4).ok());
  EXPECT_TRUE(out == in);
  // 1 MiB at an odd element offset, then the whole tensor back.
  const size_t at = 12345, count = (1 << 20) / 4;
  std::vector<uint32_t> patch(count, 0xfeedf00d);
  ASSERT_TRUE(t->CopyFrom(patch.data(), at * 4, count * 4).ok());
  std::copy(patch.begin(), patch.end(), in.begin() + static_cast<ptrdiff_t>(at));
  ASSERT_TRUE(t->CopyTo(out.data(), out.size() * 4).ok());
  EXPECT_TRUE(out == in);
  EXPECT_TRUE(session_->Ping().ok());
}

// A new tensor never shows what the session's memory held before, large (fresh pages) or small
// (from the heap, where a freed tensor's bytes may still be).
TEST_F(SessionTest, NewTensorsAreZeroEvenWhereAFreedOneWas) {
  for (int64_t n : {int64_t{256}, int64_t{4096}, int64_t{1} << 20}) {
    auto first = session_->AllocTensor({n}, DLDataType{kDLUInt, 8, 1});
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    std::vector<uint8_t> secret(static_cast<size_t>(n), 0xa5);
    ASSERT_TRUE(first->CopyFrom(secret.data(), secret.size()).ok());
    ASSERT_TRUE(first->Free().ok());
    auto second = session_->AllocTensor({n}, DLDataType{kDLUInt, 8, 1});
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    std::vector<uint8_t> seen(secret.size(), 1);
    ASSERT_TRUE(second->CopyTo(seen.data(), seen.size()).ok());
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 0), n) << "tensor of " << n << " bytes";
  }
}

TEST_F(SessionTest, ChecksTensorCopyBounds) {
  auto a = session_->AllocTensor({16}, DLDataType{kDLFloat, 32, 1});
  ASSERT_TRUE(a.ok());
  std::vector<char> buf(128);
  EXPECT_EQ(a->CopyFrom(buf.data(), 60, 8).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(a->CopyTo(buf.data(), 0, 65).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(a->CopyFrom(buf.data(), 100).code(), ErrorCode::kInvalidArgument);  // local size check
  EXPECT_TRUE(a->CopyFrom(buf.data(), 56, 8).ok());
  EXPECT_TRUE(session_->Ping().ok());
  auto huge = session_->AllocTensor({int64_t{1} << 40}, DLDataType{kDLFloat, 32, 1});
  EXPECT_EQ(huge.status().code(), ErrorCode::kLimitExceeded) << huge.status().ToString();
}

TEST_F(SessionTest, RefusesTensorsOnDevicesItDoesNotHave) {
  DLDataType f32{kDLFloat, 32, 1};
  auto odd = session_->AllocTensor({4}, f32, DLDevice{kDLVulkan, 0});
  EXPECT_EQ(odd.status().code(), ErrorCode::kNoDevice) << odd.status().ToString();
  auto info = session_->Info();
  ASSERT_TRUE(info.ok());
  auto gpu = session_->AllocTensor({4}, f32, DLDevice{kDLCUDA, 0});
  if (info->gpus.empty()) {
    EXPECT_EQ(gpu.status().code(), ErrorCode::kNoDevice) << gpu.status().ToString();
  } else {
    // With a GPU: a device tensor round-trips through host staging.
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    float in[4] = {1, 2, 3, 4}, out[4] = {};
    ASSERT_TRUE(gpu->CopyFrom(in, sizeof(in)).ok());
    ASSERT_TRUE(gpu->CopyTo(out, sizeof(out)).ok());
    EXPECT_EQ(out[3], 4.0f);
  }
  EXPECT_TRUE(session_->Ping().ok());
}

TEST_F(SessionTest, TimesAFunctionAndGrowsNumberToMinRepeat) {
  auto m = LoadTestKernels();
  client::TimeOptions opt;
  opt.timing.number = 2;
  opt.timing.repeat = 3;
  auto t = m.Time("busy_us", {CallArg::Int(300)}, opt);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->seconds_per_call.size(), 3u);
  EXPECT_EQ(t->number, 2u);
  for (double s : t->seconds_per_call) EXPECT_GE(s, 300e-6);

  opt.timing.number = 1;
  opt.timing.repeat = 2;
  opt.timing.min_repeat_ms = 20;
  opt.timing.cooldown_ms = 5;
  opt.timing.flush_cache = true;
  t = m.Time("busy_us", {CallArg::Int(1000)}, opt);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_GT(t->number, 1u);
  ASSERT_EQ(t->seconds_per_call.size(), 2u);
  // Each measured round lasted at least min_repeat_ms.
  for (double s : t->seconds_per_call) EXPECT_GE(s * t->number, 0.020);

  auto err = m.Time("fail", {}, opt);
  EXPECT_EQ(err.status().code(), ErrorCode::kKernelError);
}

TEST_F(SessionTest, DoesNotBusyPollWhileTheDeviceTimesAKernel) {
  if (UsableCpus() < 2) GTEST_SKIP() << "busy polling is off on one CPU";
  // A session whose polls outlast any reply: every read it polls for is a hit, whatever the
  // machine's load, so the counts say exactly which reads polled.
  client::ConnectOptions o = Options(*server_);
  o.busy_poll = std::chrono::seconds(20);
  auto polling = client::Session::Connect(o);
  ASSERT_TRUE(polling.ok()) << polling.status().ToString();
  auto& session = **polling;
  ASSERT_TRUE(session.Ping().ok());
  ASSERT_EQ(session.busy_poll_stats().hits, 1u);
  ASSERT_TRUE(session.Upload(TestKernels(), "test_kernels.so").ok());
  auto mod = session.LoadModule("test_kernels.so");
  ASSERT_TRUE(mod.ok()) << mod.status().ToString();
  const auto before = session.busy_poll_stats();
  // The reply waits for the rounds: the client sleeps for it rather than polling while the
  // kernel runs (on a local device, polling would take a CPU from it).
  client::TimeOptions opt;
  opt.timing.repeat = 2;
  auto t = mod->Time("busy_us", {CallArg::Int(2000)}, opt);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(session.busy_poll_stats().hits, before.hits);
  EXPECT_EQ(session.busy_poll_stats().misses, 0u);
  // The next request polls again.
  ASSERT_TRUE(session.Ping().ok());
  EXPECT_EQ(session.busy_poll_stats().hits, before.hits + 1);
}

TEST_F(SessionTest, RefusesAModuleBuiltForAnotherArchitectureBeforeLoadingIt) {
  if (ForeignServer()) GTEST_SKIP() << "host-architecture expectations";
#if defined(__x86_64__)
  ASSERT_TRUE(session_->Upload(CT_AARCH64_KERNEL, "kernel.so").ok());
  auto m = session_->LoadModule("kernel.so");
  EXPECT_EQ(m.status().code(), ErrorCode::kWrongArch) << m.status().ToString();
  EXPECT_EQ(m.status().message(), "kernel.so: built for aarch64, device is x86_64");
#else
  GTEST_SKIP() << "the wrong-arch kernel is aarch64";
#endif
}

TEST_F(SessionTest, RefusesFilesThatAreNotModules) {
  if (ForeignServer()) GTEST_SKIP() << "host-architecture expectations";
  ASSERT_TRUE(session_->UploadBytes("#!/bin/sh\necho hi\n", "script.sh").ok());
  auto m = session_->LoadModule("script.sh");
  EXPECT_EQ(m.status().code(), ErrorCode::kInvalidArgument) << m.status().ToString();
  EXPECT_NE(m.status().message().find("not an ELF file"), std::string::npos);

  ASSERT_TRUE(session_->Upload(CT_BAD_ABI_KERNEL, "bad_abi.so").ok());
  auto bad = session_->LoadModule("bad_abi.so");
  EXPECT_EQ(bad.status().code(), ErrorCode::kVersionMismatch) << bad.status().ToString();
  EXPECT_EQ(session_->LoadModule("missing.so").status().code(), ErrorCode::kNotFound);

  // A library without the module entry point: named by the client's own name for it, with no
  // path of the server's (its workspace, the loader's temporary link) in the message.
  ASSERT_TRUE(session_->Upload(CT_NO_ENTRY_KERNEL, "plain.so").ok());
  auto plain = session_->LoadModule("plain.so");
  EXPECT_EQ(plain.status().code(), ErrorCode::kInvalidArgument) << plain.status().ToString();
  const std::string why = plain.status().message();
  EXPECT_EQ(why.rfind("plain.so: not a crosstune module", 0), 0u) << why;
  EXPECT_EQ(why.find('/'), std::string::npos) << why;
  EXPECT_EQ(why.find(".ct-tmp"), std::string::npos) << why;
  EXPECT_TRUE(session_->Ping().ok());
}

TEST_F(SessionTest, RemovesTheWorkspaceWhenTheSessionEnds) {
  ASSERT_TRUE(session_->UploadBytes("bytes", "f.txt").ok());
  EXPECT_EQ(server_->Workspaces().size(), 1u);
  EXPECT_TRUE(session_->Close().ok());
  EXPECT_FALSE(session_->connected());
  EXPECT_EQ(session_->Ping().code(), ErrorCode::kDisconnected);
  EXPECT_TRUE(server_->WaitForNoWorkspaces(20));
}

class LimitsTest : public SessionTest {
  std::vector<std::string> ServerArgs() override {
    return {"--max-upload-bytes", "1048576", "--max-tensor-bytes", "4096", "--max-sessions", "1"};
  }
};

TEST_F(LimitsTest, RefusesAnOversizeUploadAndGoesOn) {
  std::string big(2 * 1024 * 1024, 'x');
  auto up = session_->UploadBytes(big, "big.bin");
  EXPECT_EQ(up.status().code(), ErrorCode::kLimitExceeded) << up.status().ToString();
  EXPECT_NE(up.status().message().find("--max-upload-bytes"), std::string::npos);
  EXPECT_TRUE(session_->Ping().ok());
  auto list = session_->ListFiles();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
  EXPECT_TRUE(session_->UploadBytes(std::string(1024, 'y'), "ok.bin").ok());
}

TEST_F(LimitsTest, LimitsTensorMemoryPerSession) {
  DLDataType f32{kDLFloat, 32, 1};
  auto a = session_->AllocTensor({600}, f32);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = session_->AllocTensor({600}, f32);
  EXPECT_EQ(b.status().code(), ErrorCode::kLimitExceeded) << b.status().ToString();
  ASSERT_TRUE(a->Free().ok());
  EXPECT_TRUE(session_->AllocTensor({1024}, f32).ok());
}

TEST_F(LimitsTest, RefusesSessionsPastTheLimitWithBusy) {
  auto second = Session::Connect(Options(*server_));
  EXPECT_EQ(second.status().code(), ErrorCode::kBusy) << second.status().ToString();
  ASSERT_TRUE(session_->Close().ok());
  ASSERT_TRUE(server_->WaitForNoWorkspaces(20));
  // The slot frees once the parent has reaped the first session.
  auto third = Session::Connect(Options(*server_));
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_TRUE((*third)->Ping().ok());
}

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    WriteFile(dir_ + "/secret", "s3cret\n");
    server_ = StartServer({"--auth-token-file", dir_ + "/secret"});
    ASSERT_TRUE(server_);
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(AuthTest, RefusesClientsWithoutTheSecret) {
  // The texts the README documents for each case.
  auto none = Session::Connect(Options(*server_));
  EXPECT_EQ(none.status().code(), ErrorCode::kUnauthorized) << none.status().ToString();
  EXPECT_NE(none.status().message().find("peer requires authentication"), std::string::npos)
      << none.status().ToString();
  auto wrong = Session::Connect(Options(*server_, "guess"));
  EXPECT_EQ(wrong.status().code(), ErrorCode::kUnauthorized) << wrong.status().ToString();
  EXPECT_NE(wrong.status().message().find("authentication failed"), std::string::npos)
      << wrong.status().ToString();
  auto right = Session::Connect(Options(*server_, "s3cret"));
  ASSERT_TRUE(right.ok()) << right.status().ToString();
  EXPECT_TRUE((*right)->Ping().ok());
}

TEST(ServerLifecycle, EndsSessionsAndRemovesWorkspacesOnSigterm) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto a = Connect(*server);
  auto b = Connect(*server);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->UploadBytes("x", "a.txt").ok());
  ASSERT_TRUE(b->UploadBytes("y", "b.txt").ok());
  EXPECT_EQ(server->Workspaces().size(), 2u);
  int status = server->Terminate();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(server->Workspaces().empty());
  EXPECT_EQ(a->Ping().code(), ErrorCode::kDisconnected);
  EXPECT_FALSE(a->connected());
}

TEST(ServerLifecycle, AFailedWriteFailsTheUploadNotTheSession) {
  // The server inherits a 1 MiB file size limit: writes past it fail like a full disk.
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small{1 << 20, old.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  auto server = StartServer();
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  ASSERT_TRUE(server);
  auto s = Connect(*server);
  ASSERT_TRUE(s);
  auto up = s->UploadBytes(std::string(2 << 20, 'x'), "big.bin");
  EXPECT_EQ(up.status().code(), ErrorCode::kIoError) << up.status().ToString();
  EXPECT_TRUE(s->Ping().ok());
  std::string dir = MakeTempDir();
  std::string local = WriteFile(dir + "/large.bin", std::string(9 << 20, 'y'));
  auto large = s->Upload(local, "large.bin");  // the pipelined path
  EXPECT_EQ(large.status().code(), ErrorCode::kIoError) << large.status().ToString();
  EXPECT_TRUE(s->Ping().ok());
  auto list = s->ListFiles();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
  std::filesystem::remove_all(dir);
}

TEST(ServerLifecycle, ServesSessionsInProcessWithNoFork) {
  auto server = StartServer({"--no-fork"});
  ASSERT_TRUE(server);
  for (int round = 0; round < 2; ++round) {
    auto s = Connect(*server);
    ASSERT_TRUE(s);
    ASSERT_TRUE(s->Upload(TestKernels(), "k.so").ok());
    auto m = s->LoadModule("k.so");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto t = s->AllocTensor({3}, DLDataType{kDLFloat, 32, 1});
    ASSERT_TRUE(t.ok());
    float x[3] = {1, 2, 3};
    ASSERT_TRUE(t->CopyFrom(x, sizeof(x)).ok());
    ASSERT_TRUE(m->Call("axpb", {CallArg::Tensor(*t), CallArg::Float(2), CallArg::Int(1)}).ok());
    ASSERT_TRUE(t->CopyTo(x, sizeof(x)).ok());
    EXPECT_EQ(x[2], 7.0f);
    EXPECT_TRUE(s->Close().ok());
  }
  EXPECT_TRUE(server->WaitForNoWorkspaces(20));
}

TEST(ServerLifecycle, RefusesToStartOnABusyPort) {
  auto first = StartServer();
  ASSERT_TRUE(first);
  std::string error;
  auto second = ServerProcess::Start({"--port", std::to_string(first->port())}, &error);
  EXPECT_FALSE(second);
  EXPECT_NE(error.find("exited before listening"), std::string::npos) << error;
  ExpectServerAnswers(*first);
}

TEST(ServerLifecycle, TriesThePortRangeUntilOneIsFree) {
  auto first = StartServer();
  ASSERT_TRUE(first);
  std::string from = std::to_string(first->port());
  std::string to = std::to_string(first->port() + 20);
  auto second = StartServer({"--port", from, "--port-end", to});
  ASSERT_TRUE(second);
  EXPECT_GT(second->port(), first->port());
  ExpectServerAnswers(*second);
}

}  // namespace
}  // namespace crosstune::testing
