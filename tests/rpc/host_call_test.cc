// RemoteModule::CallHost / TimeHost: calls whose tensors live in the caller's memory, against the
// real crosstune-server.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "crosstune/client/time_stats.h"
#include "test_util.h"

namespace crosstune::testing {
namespace {

using client::HostArg;

DLTensor HostTensor(std::vector<float>& data, std::vector<int64_t>& shape) {
  DLTensor t{};
  t.data = data.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape.data();
  return t;
}

class HostCallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer();
    ASSERT_TRUE(server_);
    session_ = Connect(*server_);
    ASSERT_TRUE(session_);
    ASSERT_TRUE(session_->Upload(TestKernels(), "test_kernels.so").ok());
    auto m = session_->LoadModule("test_kernels.so");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    module_ = *m;
  }
  // Tensors the server holds for this session: an allocation the host call left behind shows
  // here as a smaller limit for the next one.
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<client::Session> session_;
  client::RemoteModule module_;
};

TEST_F(HostCallTest, CopiesHostTensorsInAndBackInPlace) {
  std::vector<int64_t> shape = {4, 250};
  std::vector<float> a(1000), b(1000), c(1000, -1);
  std::iota(a.begin(), a.end(), 0.0f);
  std::iota(b.begin(), b.end(), 100.0f);
  auto r = module_.CallHost(
      "vadd", {HostArg::Host(HostTensor(a, shape), false),
               HostArg::Host(HostTensor(b, shape), false), HostArg::Host(HostTensor(c, shape))});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << i;
  // Sent from and received into the caller's own buffers: the last copy in was c's, the only
  // copy out went into c, and the inputs were not copied back.
  const auto& stats = session_->copy_stats();
  EXPECT_EQ(stats.copies_in, 3u);
  EXPECT_EQ(stats.copies_out, 1u);
  EXPECT_EQ(stats.bytes_out, 4000u);
  EXPECT_EQ(stats.last_in_source, c.data());
  EXPECT_EQ(stats.last_out_destination, c.data());
}

TEST_F(HostCallTest, MixesScalarsAndRemoteTensors) {
  std::vector<int64_t> shape = {2, 3};
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  auto r = module_.CallHost(
      "axpb", {HostArg::Host(HostTensor(x, shape)), HostArg::Float(2.5), HostArg::Int(-1)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(x[5], 6 * 2.5f - 1);

  auto remote = session_->AllocTensor({2, 3}, DLDataType{kDLFloat, 32, 1});
  ASSERT_TRUE(remote.ok());
  std::vector<float> ones(6, 1.0f), back(6);
  ASSERT_TRUE(remote->CopyFrom(ones.data(), 24).ok());
  ASSERT_TRUE(
      module_.CallHost("axpb", {HostArg::Remote(*remote), HostArg::Float(3), HostArg::Int(1)})
          .ok());
  ASSERT_TRUE(remote->CopyTo(back.data(), 24).ok());
  EXPECT_EQ(back[0], 4.0f);
}

TEST_F(HostCallTest, FreesItsDeviceTensorsAfterEveryCall) {
  // A session may hold 64 KiB of tensors: 200 calls with 40 KiB each fit only when every call
  // frees what it allocated, failed calls included.
  server_ = StartServer({"--max-tensor-bytes", "65536"});
  ASSERT_TRUE(server_);
  session_ = Connect(*server_);
  ASSERT_TRUE(session_->Upload(TestKernels(), "k.so").ok());
  auto m = session_->LoadModule("k.so");
  ASSERT_TRUE(m.ok());
  std::vector<int64_t> shape = {10000};
  std::vector<float> x(10000, 1.0f);
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(m->CallHost("axpb", {HostArg::Host(HostTensor(x, shape)), HostArg::Float(1),
                                     HostArg::Int(0)})
                    .ok())
        << i;
    auto bad = m->CallHost("vadd", {HostArg::Host(HostTensor(x, shape))});  // wrong arity
    ASSERT_FALSE(bad.ok());
  }
}

TEST_F(HostCallTest, RefusesATensorNotInCOrderBeforeSendingAnything) {
  std::vector<int64_t> shape = {4, 250};
  std::vector<int64_t> strides = {1, 4};  // a transpose's
  std::vector<float> x(1000);
  DLTensor t = HostTensor(x, shape);
  t.strides = strides.data();
  auto r = module_.CallHost("axpb", {HostArg::Host(t), HostArg::Float(1), HostArg::Int(0)});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not contiguous"), std::string::npos);
  EXPECT_EQ(session_->copy_stats().copies_in, 0u);
  // C-order strides given explicitly are fine.
  strides = {250, 1};
  EXPECT_TRUE(
      module_.CallHost("axpb", {HostArg::Host(t), HostArg::Float(1), HostArg::Int(0)}).ok());
}

TEST_F(HostCallTest, TimesWithHostTensorsAndCopiesTheResultBack) {
  std::vector<int64_t> shape = {1000};
  std::vector<float> a(1000, 1.0f), b(1000, 2.0f), c(1000, 0.0f);
  client::TimeOptions o;
  o.timing.number = 3;
  o.timing.repeat = 2;
  auto r = module_.TimeHost(
      "vadd",
      {HostArg::Host(HostTensor(a, shape), false), HostArg::Host(HostTensor(b, shape), false),
       HostArg::Host(HostTensor(c, shape))},
      o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seconds_per_call.size(), 2u);
  EXPECT_EQ(c[999], 3.0f);
}

TEST_F(HostCallTest, CopiesHostTensorsInAndOutOfATensorInPlace) {
  std::vector<int64_t> shape = {2, 500}, flat = {1000};
  std::vector<float> x(1000), y(1000, 0.0f);
  std::iota(x.begin(), x.end(), 1.0f);
  auto t = session_->AllocTensor({1000}, DLDataType{kDLFloat, 32, 1});
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(t->CopyFromHost(HostTensor(x, shape)).ok());  // another shape, the same count
  EXPECT_EQ(session_->copy_stats().last_in_source, x.data());
  ASSERT_TRUE(t->CopyToHost(HostTensor(y, flat)).ok());
  EXPECT_EQ(session_->copy_stats().last_out_destination, y.data());
  EXPECT_EQ(y, x);

  // Refused before anything is sent: another element count, another dtype, a transpose.
  const auto before = session_->copy_stats();
  std::vector<int64_t> small = {999};
  Status s = t->CopyFromHost(HostTensor(x, small));
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("999xf32"), std::string::npos) << s.ToString();
  DLTensor ints = HostTensor(x, flat);
  ints.dtype = {kDLInt, 32, 1};
  EXPECT_EQ(t->CopyToHost(ints).code(), ErrorCode::kInvalidArgument);
  std::vector<int64_t> strides = {1, 2};
  DLTensor transposed = HostTensor(x, shape);
  transposed.strides = strides.data();
  s = t->CopyFromHost(transposed);
  EXPECT_NE(s.message().find("not contiguous"), std::string::npos) << s.ToString();
  EXPECT_EQ(session_->copy_stats().copies_in, before.copies_in);
  EXPECT_EQ(session_->copy_stats().copies_out, before.copies_out);
}

TEST(TimeStatsTest, SummarisesTheRounds) {
  msg::TimeReply r;
  r.seconds_per_call = {4, 1, 3, 2};
  r.number = 7;
  client::TimeStats t = client::SummarizeTimes(r);
  EXPECT_EQ(t.median, 2.5);
  EXPECT_EQ(t.mean, 2.5);
  EXPECT_EQ(t.min, 1);
  EXPECT_EQ(t.max, 4);
  EXPECT_DOUBLE_EQ(t.std, std::sqrt(1.25));
  EXPECT_EQ(t.number, 7u);
  EXPECT_EQ(t.seconds_per_call, r.seconds_per_call);  // as measured, not sorted
  EXPECT_DOUBLE_EQ(t.Gflops(5e9), 2.0);
  r.seconds_per_call = {3, 1, 2};
  EXPECT_EQ(client::SummarizeTimes(r).median, 2);
  EXPECT_EQ(client::SummarizeTimes(msg::TimeReply{}).median, 0);
}

}  // namespace
}  // namespace crosstune::testing
