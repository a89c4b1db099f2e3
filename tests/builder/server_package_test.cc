// Packages on a real crosstune-server (the binary, on 127.0.0.1 port 0): a built x86_64 package
// runs with checked answers, and every refusal of the package checks arrives over the wire as its
// own named error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "crosstune/builder/compiler.h"
#include "crosstune/client/session.h"
#include "crosstune/crypto.h"
#include "crosstune/params.h"
#include "crosstune/testing/server_process.h"
#include "package_helpers.h"

namespace crosstune {
namespace {

namespace fs = std::filesystem;
using client::CallArg;
using client::Session;

class ServerPackageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("crosstune-server-pkg-" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "work");
    server_ = new ServerProcess();
    Status st = server_->Start({CT_SERVER_BIN, "--host", "127.0.0.1", "--port", "0", "--work-dir",
                                (dir_ / "work").string()},
                               std::chrono::seconds(20));
    ASSERT_TRUE(st.ok()) << st.ToString();
    x86_ = Path("vadd.ctpkg");
    testing::BuildPackage("x86-64", x86_);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    fs::remove_all(dir_);
  }
  void SetUp() override {
    client::ConnectOptions o;
    o.server = server_->address();
    auto s = Session::Connect(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    session_ = std::move(*s);
  }
  static std::string Path(const std::string& name) { return (dir_ / name).string(); }

  // Uploads a package and loads it; the load's error, or Ok.
  Expected<client::RemoteModule> UploadAndLoad(const std::string& local,
                                               const std::string& remote) {
    auto up = session_->Upload(local, remote);
    if (!up.ok()) return up.status();
    return session_->LoadModule(remote);
  }

  static fs::path dir_;
  static ServerProcess* server_;
  static std::string x86_;
  std::unique_ptr<Session> session_;
};
fs::path ServerPackageTest::dir_;
ServerProcess* ServerPackageTest::server_ = nullptr;
std::string ServerPackageTest::x86_;

TEST_F(ServerPackageTest, RunsBuiltPackageWithCheckedAnswers) {
  auto mod = UploadAndLoad(x86_, "vadd.ctpkg");
  ASSERT_TRUE(mod.ok()) << mod.status().ToString();
  EXPECT_EQ(mod->info().kind, "cpu");
  ASSERT_EQ(mod->info().functions.size(), 2u);
  const int64_t n = 1000;
  std::vector<float> a(n), b(n), c(n, 0);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = 0.5f * static_cast<float>(i);
  }
  DLDataType f32{kDLFloat, 32, 1};
  auto ta = session_->AllocTensor({n}, f32);
  auto tb = session_->AllocTensor({n}, f32);
  auto tc = session_->AllocTensor({n}, f32);
  ASSERT_TRUE(ta.ok() && tb.ok() && tc.ok());
  ASSERT_TRUE(ta->CopyFrom(a.data(), n * 4).ok());
  ASSERT_TRUE(tb->CopyFrom(b.data(), n * 4).ok());
  auto r = mod->Call(
      "vadd", {CallArg::Tensor(*ta), CallArg::Tensor(*tb), CallArg::Tensor(*tc), CallArg::Int(n)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ret, 0);
  ASSERT_TRUE(tc->CopyTo(c.data(), n * 4).ok());
  for (int64_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(c[i], 1.5f * static_cast<float>(i)) << i;
  ASSERT_TRUE(
      mod->Call("scale", {CallArg::Tensor(*tc), CallArg::Int(n), CallArg::Float(2.0)}).ok());
  ASSERT_TRUE(tc->CopyTo(c.data(), n * 4).ok());
  EXPECT_FLOAT_EQ(c[10], 30.0f);
}

TEST_F(ServerPackageTest, RefusesPackageWithBadHash) {
  std::string bytes = testing::ReadFile(x86_);
  auto members = pkg::ListTar(x86_);
  ASSERT_TRUE(members.ok());
  for (const auto& m : *members) {
    if (m.path == "lib/vadd.so") bytes[m.offset + 100] ^= 1;
  }
  testing::WriteFile(Path("badhash.ctpkg"), bytes);
  auto mod = UploadAndLoad(Path("badhash.ctpkg"), "badhash.ctpkg");
  ASSERT_FALSE(mod.ok());
  EXPECT_EQ(mod.status().code(), ErrorCode::kBadHash);
  EXPECT_NE(mod.status().message().find("badhash.ctpkg: lib/vadd.so: SHA-256 mismatch"),
            std::string::npos)
      << mod.status().message();
}

TEST_F(ServerPackageTest, RefusesTruncatedPackage) {
  std::string bytes = testing::ReadFile(x86_);
  testing::WriteFile(Path("cut.ctpkg"), bytes.substr(0, bytes.size() / 2));
  auto mod = UploadAndLoad(Path("cut.ctpkg"), "cut.ctpkg");
  ASSERT_FALSE(mod.ok());
  EXPECT_EQ(mod.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(mod.status().message().find("truncated archive"), std::string::npos)
      << mod.status().message();
}

TEST_F(ServerPackageTest, RefusesPackageForAnotherArchitecture) {
  testing::BuildPackage("cortex-a72", Path("arm.ctpkg"));
  auto mod = UploadAndLoad(Path("arm.ctpkg"), "arm.ctpkg");
  ASSERT_FALSE(mod.ok());
  EXPECT_EQ(mod.status().code(), ErrorCode::kWrongArch);
  EXPECT_EQ(mod.status().message(), "arm.ctpkg: built for aarch64, device is x86_64");
}

TEST_F(ServerPackageTest, RefusesPackageNeedingACpuFeatureTheDeviceLacks) {
  auto info = session_->Info();
  ASSERT_TRUE(info.ok());
  // A feature this device does not report, chosen at run time (AVX-512ER, of Xeon Phi only, is
  // the last resort: hosts with AMX have the others).
  const auto& f = info->cpu_features;
  std::string missing;
  for (const char* c : {"amx-tile", "avx512fp16", "avx512bf16", "avxvnni", "avx512vnni", "avx512f",
                        "sha", "avx2", "avx512er"}) {
    if (std::find(f.begin(), f.end(), c) == f.end()) {
      missing = c;
      break;
    }
  }
  ASSERT_FALSE(missing.empty()) << "the device reports every candidate feature";
  testing::BuildPackage("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64 -mattr=+" + missing,
                        Path("lacking.ctpkg"));
  auto mod = UploadAndLoad(Path("lacking.ctpkg"), "lacking.ctpkg");
  ASSERT_FALSE(mod.ok());
  EXPECT_EQ(mod.status().code(), ErrorCode::kWrongArch);
  // It names a feature the device lacks (the package needs `missing` and what it implies).
  const std::string msg = mod.status().message();
  const std::string kPrefix = "built for cpu feature ";
  size_t at = msg.find(kPrefix);
  ASSERT_NE(at, std::string::npos) << msg;
  at += kPrefix.size();
  std::string named = msg.substr(at, msg.find(' ', at) - at);
  EXPECT_EQ(std::find(f.begin(), f.end(), named), f.end()) << named << " is reported: " << msg;
  EXPECT_NE(msg.find("lacks"), std::string::npos) << msg;
}

TEST_F(ServerPackageTest, RefusesUnknownFormatAndAbiVersions) {
  testing::RewritePackage(
      x86_, Path("v99.ctpkg"), [](pkg::Manifest* m, std::vector<pkg::PackageInput>* files) {
        files->insert(files->begin(),
                      {"manifest.json", testing::SetManifestField(*m, "format_version", 99), ""});
      });
  auto fmt = UploadAndLoad(Path("v99.ctpkg"), "v99.ctpkg");
  ASSERT_FALSE(fmt.ok());
  EXPECT_EQ(fmt.status().code(), ErrorCode::kVersionMismatch);
  EXPECT_NE(fmt.status().message().find("format version 99 is unknown"), std::string::npos);
  testing::RewritePackage(
      x86_, Path("abi9.ctpkg"),
      [](pkg::Manifest* m, std::vector<pkg::PackageInput>*) { m->abi_version = 9; });
  auto abi = UploadAndLoad(Path("abi9.ctpkg"), "abi9.ctpkg");
  ASSERT_FALSE(abi.ok());
  EXPECT_EQ(abi.status().code(), ErrorCode::kVersionMismatch);
  EXPECT_NE(abi.status().message().find("ABI version 9"), std::string::npos);
}

TEST_F(ServerPackageTest, RefusesParamsFromAnotherBuild) {
  pkg::ParamsWriter w;
  float data[8] = {};
  ASSERT_TRUE(w.Add("w", {kDLFloat, 32, 1}, {8}, data, sizeof(data)).ok());
  testing::BuildPackage("x86-64", Path("p.ctpkg"), "", w.Serialize());
  ASSERT_TRUE(UploadAndLoad(Path("p.ctpkg"), "p.ctpkg").ok());
  testing::RewritePackage(Path("p.ctpkg"), Path("mixed.ctpkg"),
                          [](pkg::Manifest* m, std::vector<pkg::PackageInput>* files) {
                            for (auto& f : *files) {
                              if (f.path != "params.bin") continue;
                              f.data = *pkg::RestampParams(f.data, std::string(64, 'e'));
                              for (auto& h : m->files) {
                                if (h.path == f.path) h.sha256 = Sha256Hex(f.data);
                              }
                            }
                          });
  auto mod = UploadAndLoad(Path("mixed.ctpkg"), "mixed.ctpkg");
  ASSERT_FALSE(mod.ok());
  EXPECT_EQ(mod.status().code(), ErrorCode::kBadHash);
  EXPECT_NE(mod.status().message().find("params.bin belongs to build eeeeeeeeeeee"),
            std::string::npos)
      << mod.status().message();
}

// A manifest and a params index nested 100,000 levels deep (200 KB), every hash right: the old
// loader overflowed the session process's stack quoting the value in its error (the server lived,
// the session died). Each is now a named error, and the same session goes on serving.
TEST_F(ServerPackageTest, RefusesDeeplyNestedManifestAndParamsIndexOnALiveSession) {
  const std::string levels(100'000, '[');
  const std::string deep = levels + std::string(levels.size(), ']');
  testing::RewritePackage(
      x86_, Path("deep_manifest.ctpkg"),
      [&](pkg::Manifest* m, std::vector<pkg::PackageInput>* files) {
        std::string text = pkg::ManifestToJson(*m);
        const std::string needle = "\"format_version\": 1";
        text.replace(text.find(needle), needle.size(), "\"format_version\": " + deep);
        files->insert(files->begin(), {std::string(pkg::kManifestPath), text, ""});
      });
  auto manifest = UploadAndLoad(Path("deep_manifest.ctpkg"), "deep_manifest.ctpkg");
  ASSERT_FALSE(manifest.ok());
  EXPECT_EQ(manifest.status().code(), ErrorCode::kInvalidArgument) << manifest.status().ToString();
  EXPECT_NE(manifest.status().message().find("manifest.json: JSON nested deeper than 64 levels"),
            std::string::npos)
      << manifest.status().message();
  ASSERT_TRUE(UploadAndLoad(x86_, "vadd.ctpkg").ok());

  pkg::ParamsWriter w;
  float data[8] = {};
  ASSERT_TRUE(w.Add("w", {kDLFloat, 32, 1}, {8}, data, sizeof(data)).ok());
  testing::BuildPackage("x86-64", Path("params_ok.ctpkg"), "", w.Serialize());
  testing::RewritePackage(
      Path("params_ok.ctpkg"), Path("deep_params.ctpkg"),
      [&](pkg::Manifest* m, std::vector<pkg::PackageInput>* files) {
        for (auto& f : *files) {
          if (f.path != "params.bin") continue;
          const std::string index =
              R"({"tensors":[{"name":"w","dtype":"float32","offset":128,"nbytes":32,"shape":)" +
              deep + "}]}";
          f.data = f.data.substr(0, 80);  // magic, version, build id
          for (int i = 0; i < 8; ++i) f.data.push_back(static_cast<char>(index.size() >> (8 * i)));
          f.data += index;
          for (auto& h : m->files) {
            if (h.path == f.path) {
              h.sha256 = Sha256Hex(f.data);
              h.size = f.data.size();
            }
          }
        }
      });
  auto params = UploadAndLoad(Path("deep_params.ctpkg"), "deep_params.ctpkg");
  ASSERT_FALSE(params.ok());
  EXPECT_EQ(params.status().code(), ErrorCode::kInvalidArgument) << params.status().ToString();
  EXPECT_NE(params.status().message().find("params.bin: index: JSON nested deeper than 64 levels"),
            std::string::npos)
      << params.status().message();
  EXPECT_TRUE(UploadAndLoad(x86_, "vadd2.ctpkg").ok());
}

TEST_F(ServerPackageTest, RefusesCudaPackageWithoutAGpu) {
  if (!builder::HasNvrtc()) GTEST_SKIP() << "built without NVRTC";
  auto info = session_->Info();
  ASSERT_TRUE(info.ok());
  if (!info->gpus.empty())
    GTEST_SKIP() << "this device has a GPU (see the gpu-labelled launch test)";
  builder::BuildRequest r;
  r.source = testing::kCudaVaddSource;
  r.target = *builder::ParseTarget("sm_90");
  r.name = "vadd";
  auto res = builder::BuildInProcess(r);
  ASSERT_TRUE(res.ok()) << res.status.ToString();
  ASSERT_TRUE(builder::WriteBuildPackage(r, res, Path("gpu.ctpkg")).ok());
  auto mod = UploadAndLoad(Path("gpu.ctpkg"), "gpu.ctpkg");
  ASSERT_FALSE(mod.ok());
  EXPECT_EQ(mod.status().code(), ErrorCode::kNoDevice);
  EXPECT_NE(mod.status().message().find("no usable GPU"), std::string::npos)
      << mod.status().message();
}

}  // namespace
}  // namespace crosstune
