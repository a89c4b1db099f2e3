#include "compiled_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "crosstune/client/remote_model.h"
#include "crosstune/client/session.h"
#include "crosstune/model/onnx_import.h"
#include "crosstune/testing/support.h"

namespace crosstune::model::testing {

builder::Builder& Pool() {
  static auto b = builder::Builder::Create(
      {.workers = 2, .cache_dir = crosstune::testing::SharedTestBuildCache()});
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return **b;
}

Compiled CompileFile(const std::string& onnx, const builder::Target& target,
                     const std::vector<Pass>& passes, const std::string& suffix,
                     const CompileOptions& base) {
  Compiled c;
  auto g = ImportOnnx(onnx);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return c;
  Status st = RunPasses(*g, passes);
  EXPECT_TRUE(st.ok()) << st.ToString();
  CompileOptions o = base;
  o.target = target;
  auto r = CompileModel(std::move(*g), o, Pool());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return c;
  c.result = std::move(*r);
  c.package = onnx + suffix + ".ctpkg";
  auto m = WriteModelPackage(c.result, c.package);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  c.ok = m.ok();
  return c;
}

namespace {

client::ConnectOptions Options(const std::string& address) {
  client::ConnectOptions o;
  o.server = address;
  // Under qemu a model's upload, load and run take seconds.
  o.request_timeout = std::chrono::seconds(600);
  return o;
}

}  // namespace

builder::Target TargetOf(const std::string& address) {
  auto s = client::Session::Connect(Options(address));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return {};
  auto info = (*s)->Info();
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  if (!info.ok()) return {};
  auto t = builder::TargetFromDevice(*info);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : builder::Target{};
}

std::vector<float> RunOnServer(const std::string& address, const std::string& package,
                               const std::vector<float>& input) {
  auto s = client::Session::Connect(Options(address));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return {};
  const std::string remote = std::filesystem::path(package).filename().string();
  auto up = (*s)->Upload(package, remote);
  EXPECT_TRUE(up.ok()) << up.status().ToString();
  auto m = client::RemoteModel::Load(s->get(), remote);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return {};
  const auto& info = m->info();
  EXPECT_EQ(info.inputs.size(), 1u);
  EXPECT_FALSE(info.outputs.empty());
  if (info.inputs.size() != 1 || info.outputs.empty()) return {};
  Status st = m->SetInput(info.inputs[0].name, input.data(), input.size() * sizeof(float));
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto run = m->Run(/*timeout_ms=*/600'000);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  if (!run.ok()) return {};
  std::vector<float> out(info.outputs[0].nbytes / sizeof(float));
  st = m->GetOutput(0, out.data(), out.size() * sizeof(float));
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_FALSE(want.empty()) << what;
  double abs_err = 0, rel_err = 0;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want[i];
    const double d = std::fabs(static_cast<double>(got[i]) - w);
    abs_err = std::max(abs_err, d);
    rel_err = std::max(rel_err, d / std::max(1e-6, std::fabs(w)));
    if (!(d <= 1e-4 + 1e-3 * std::fabs(w))) ++bad;  // also counts NaN
  }
  std::printf("%s: max abs error %.3g, max rel error %.3g (%zu values)\n", what, abs_err, rel_err,
              got.size());
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size()
                     << " values outside fp32 tolerance (1e-4 + 1e-3 |want|)";
}

}  // namespace crosstune::model::testing
