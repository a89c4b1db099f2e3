// Packages on a real crosstune-server (the binary, on 127.0.0.1 port 0): a built x86_64 package
// runs with checked answers, and every refusal of the package checks arrives over the wire as its
// own named error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "crosstune/builder/builder.h"
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

// A network's link request carries every node's object, and its reply the whole library: both
// go through the pool's worker pipe whole, past the 1 MiB frame of the network protocol (a
// densenet121's request is 4 MiB). Three objects of 6 MiB each (a table of constants) make a
// link request of over 16 MiB and a library of 18 MiB; it is packaged, uploaded, loaded and run.
TEST_F(ServerPackageTest, ALinkRequestOver16MiBBuildsInThePoolAndItsLibraryRuns) {
  auto pool = builder::Builder::Create({.workers = 2, .worker_program = CT_BUILD_WORKER_BIN});
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  const builder::Target target = *builder::ParseTarget("x86-64");
  std::vector<builder::BuildRequest> parts;
  for (int i = 0; i < 3; ++i) {
    builder::BuildRequest r;
    const std::string n = std::to_string(i);
    r.source = "static const unsigned char table[6 << 20] = {" + std::to_string(i + 1) +
               "};\n"
               "unsigned char table_" +
               n + "(long at) { return table[at]; }\n";
    r.target = target;
    r.object_only = true;
    r.source_name = "table_" + n + ".c";
    parts.push_back(std::move(r));
  }
  std::vector<builder::BuildResult> objects = (*pool)->BuildMany(parts);
  builder::BuildRequest link;
  link.target = target;
  link.name = "tables";
  link.source_name = "tables.c";
  link.source = R"(
#include <stdint.h>
#include "kernel_abi.h"
unsigned char table_0(long), table_1(long), table_2(long);
/* out[0..2]: each table's first byte; out[3..5]: its last */
static int32_t firsts_and_lasts(const ct_arg* args, int32_t num_args) {
  if (num_args != 1) return 1;
  float* out = (float*)args[0].value.v_tensor->data;
  const long last = (6L << 20) - 1;
  out[0] = table_0(0); out[1] = table_1(0); out[2] = table_2(0);
  out[3] = table_0(last); out[4] = table_1(last); out[5] = table_2(last);
  return 0;
}
static const ct_function kFns[] = {{"firsts_and_lasts", firsts_and_lasts, "t"}};
CT_DEFINE_MODULE("crosstune large link test", kFns, 0)
)";
  size_t request_bytes = link.source.size();
  for (auto& o : objects) {
    ASSERT_TRUE(o.ok()) << o.status.ToString() << o.diagnostics;
    request_bytes += o.library.size();
    link.link_objects.push_back(std::move(o.library));
  }
  ASSERT_GT(request_bytes, size_t{16} << 20);
  builder::BuildResult lib = (*pool)->Build(link);
  ASSERT_TRUE(lib.ok()) << lib.status.ToString() << lib.diagnostics;
  EXPECT_GT(lib.library.size(), size_t{18} << 20);
  link.link_objects.clear();
  ASSERT_TRUE(builder::WriteBuildPackage(link, lib, Path("tables.ctpkg")).ok());

  auto mod = UploadAndLoad(Path("tables.ctpkg"), "tables.ctpkg");
  ASSERT_TRUE(mod.ok()) << mod.status().ToString();
  auto out = session_->AllocTensor({6}, DLDataType{kDLFloat, 32, 1});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto r = mod->Call("firsts_and_lasts", {CallArg::Tensor(*out)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<float> got(6, -1);
  ASSERT_TRUE(out->CopyTo(got.data(), got.size() * 4).ok());
  EXPECT_EQ(got, (std::vector<float>{1, 2, 3, 0, 0, 0}));
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
