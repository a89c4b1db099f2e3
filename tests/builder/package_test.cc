#include "crosstune/package.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "crosstune/crypto.h"
#include "crosstune/module_table.h"
#include "crosstune/params.h"
#include "package_helpers.h"

namespace crosstune::pkg {
namespace {

namespace fs = std::filesystem;
using testing::X86Device;

class PackageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("crosstune-package-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    x86_ = (dir_ / "x86.ctpkg").string();
    testing::BuildPackage("x86-64", x86_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string Path(const std::string& name) { return (dir_ / name).string(); }

  static fs::path dir_;
  static std::string x86_;
};
fs::path PackageTest::dir_;
std::string PackageTest::x86_;

TEST_F(PackageTest, WritesManifestWithTargetFunctionsVersionsAndHashes) {
  auto m = VerifyPackage(x86_, X86Device());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->format_version, kFormatVersion);
  EXPECT_EQ(m->kind, "cpu");
  EXPECT_EQ(m->target, "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64");
  EXPECT_EQ(m->triple, "x86_64-linux-gnu");
  EXPECT_EQ(m->arch, "x86_64");
  EXPECT_EQ(m->abi_version, 1u);
  EXPECT_EQ(m->compiler, "clang+lld");
  EXPECT_EQ(m->compiler_version, CT_LLVM_VERSION);
  EXPECT_EQ(m->library, "lib/vadd.so");
  ASSERT_EQ(m->functions.size(), 2u);
  EXPECT_EQ(m->functions[0].name, "vadd");
  ASSERT_EQ(m->files.size(), 1u);
  EXPECT_EQ(m->files[0].sha256, m->build_id);
  EXPECT_EQ(m->files[0].sha256.size(), 64u);
}

TEST_F(PackageTest, ExtractsVerifiedFiles) {
  std::string out = Path("extract");
  auto m = ExtractPackage(x86_, out, X86Device());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto h = Sha256FileHex(out + "/lib/vadd.so");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, m->build_id);
}

TEST_F(PackageTest, RefusesBadHash) {
  std::string bad = Path("badhash.ctpkg");
  std::string bytes = testing::ReadFile(x86_);
  auto members = ListTar(x86_);
  for (const auto& mem : *members) {
    if (mem.path == "lib/vadd.so") bytes[mem.offset + mem.size / 2] ^= 0x5a;
  }
  testing::WriteFile(bad, bytes);
  auto m = VerifyPackage(bad, X86Device());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kBadHash);
  EXPECT_NE(m.status().message().find("lib/vadd.so: SHA-256 mismatch"), std::string::npos);
}

TEST_F(PackageTest, RefusesTruncatedArchive) {
  std::string bytes = testing::ReadFile(x86_);
  for (size_t keep : {bytes.size() / 2, bytes.size() - 512, size_t{100}}) {
    std::string cut = Path("cut.ctpkg");
    testing::WriteFile(cut, bytes.substr(0, keep));
    auto m = VerifyPackage(cut, X86Device());
    ASSERT_FALSE(m.ok()) << keep;
    EXPECT_EQ(m.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find("truncated archive"), std::string::npos)
        << m.status().message();
  }
}

TEST_F(PackageTest, RefusesGarbage) {
  std::string junk = Path("junk.ctpkg");
  testing::WriteFile(junk, std::string(4096, 'x'));
  auto m = VerifyPackage(junk, X86Device());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("corrupt archive"), std::string::npos)
      << m.status().message();
}

// The function table read from a library's image, without loading it, is the one the builder
// recorded in the manifest, for every architecture the builder targets (ELF64 and ELF32, RELA and
// REL relocations).
TEST_F(PackageTest, ReadsTheLibrarysFunctionTableFromItsImageForEveryArchitecture) {
  for (const std::string target : {"x86-64", "aarch64", "armv7-neon", "riscv64"}) {
    const std::string path = Path("table-" + target + ".ctpkg");
    const Manifest built = testing::BuildPackage(target, path);
    auto members = ListTar(path);
    ASSERT_TRUE(members.ok()) << members.status().ToString();
    const std::string bytes = testing::ReadFile(path);
    std::string image;
    for (const auto& m : *members) {
      if (m.path == built.library) image = bytes.substr(m.offset, m.size);
    }
    ASSERT_FALSE(image.empty()) << target;
    auto table = ReadModuleTable(image);
    ASSERT_TRUE(table.ok()) << target << ": " << table.status().ToString();
    ASSERT_EQ(table->size(), built.functions.size()) << target;
    for (size_t i = 0; i < table->size(); ++i) {
      EXPECT_EQ((*table)[i].name, built.functions[i].name) << target;
      EXPECT_EQ((*table)[i].signature, built.functions[i].signature) << target;
    }
    EXPECT_TRUE(CheckLibraryFunctions(built, *table).ok()) << target;
    // A manifest that names other functions than the library holds: the server's check.
    Manifest other = built;
    other.functions[0].signature += "t";
    Status s = CheckLibraryFunctions(other, *table);
    EXPECT_EQ(s.code(), ErrorCode::kBadHash);
    EXPECT_EQ(s.message(),
              "the library's functions differ from the manifest's: function 0 is 'vadd' (ttti) in "
              "the library, 'vadd' (tttit) in the manifest");
    other.functions.pop_back();
    EXPECT_EQ(CheckLibraryFunctions(other, *table).message(),
              "the library's functions differ from the manifest's: the library has 2 functions, "
              "the manifest lists 1");
  }
  // What it cannot follow is NotFound, saying why; nothing is run.
  EXPECT_EQ(ReadModuleTable("not an elf").status().code(), ErrorCode::kNotFound);
  // fuzz_module_table's find: an x86-64 module whose function name points into a loadable
  // segment whose file offset lies past the end of the image. string_view::substr threw
  // std::out_of_range there, and `crosstune inspect` died.
  auto past_end = ReadModuleTable(testing::ReadFile(std::string(CT_FUZZ_CORPUS) +
                                                    "/fuzz_module_table/regression-load-past-end"));
  EXPECT_EQ(past_end.status().code(), ErrorCode::kNotFound) << past_end.status().ToString();
  std::string truncated =
      "\x7f"
      "ELF\x02\x01\x01";
  truncated.resize(64, '\0');
  EXPECT_EQ(ReadModuleTable(truncated).status().code(), ErrorCode::kNotFound);
}

TEST_F(PackageTest, RefusesWrongArchitecture) {
  std::string arm = Path("arm.ctpkg");
  testing::BuildPackage("aarch64", arm);
  auto m = VerifyPackage(arm, X86Device());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kWrongArch);
  EXPECT_EQ(m.status().message(), "built for aarch64, device is x86_64");
  msg::DeviceInfo board;
  board.arch = "aarch64";
  EXPECT_TRUE(VerifyPackage(arm, board).ok());
  board.arch = "armv7l";
  EXPECT_EQ(VerifyPackage(arm, board).status().code(), ErrorCode::kWrongArch);
}

TEST_F(PackageTest, RefusesCpuFeatureTheDeviceLacks) {
  std::string avx512 = Path("avx512.ctpkg");
  testing::BuildPackage("x86-avx512", avx512);
  auto m = VerifyPackage(avx512, X86Device({"sse4.2", "avx", "avx2", "fma", "bmi2"}));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kWrongArch);
  EXPECT_NE(m.status().message().find("avx512"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("lacks"), std::string::npos);
}

TEST_F(PackageTest, RefusesUnknownFormatAndAbiVersion) {
  std::string fmt = Path("fmt.ctpkg");
  testing::RewritePackage(x86_, fmt, [](Manifest* m, std::vector<PackageInput>* files) {
    files->insert(files->begin(),
                  {"manifest.json", testing::SetManifestField(*m, "format_version", 99), ""});
  });
  auto a = VerifyPackage(fmt, X86Device());
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), ErrorCode::kVersionMismatch);
  EXPECT_NE(a.status().message().find("format version 99"), std::string::npos);

  std::string abi = Path("abi.ctpkg");
  testing::RewritePackage(x86_, abi,
                          [](Manifest* m, std::vector<PackageInput>*) { m->abi_version = 7; });
  auto b = VerifyPackage(abi, X86Device());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), ErrorCode::kVersionMismatch);
  EXPECT_NE(b.status().message().find("ABI version 7"), std::string::npos);
}

TEST_F(PackageTest, RefusesParamsAndGraphFromAnotherBuild) {
  ParamsWriter w;
  float data[4] = {1, 2, 3, 4};
  ASSERT_TRUE(w.Add("weight", {kDLFloat, 32, 1}, {4}, data, sizeof(data)).ok());
  std::string with = Path("with_params.ctpkg");
  testing::BuildPackage("x86-64", with, R"({"nodes": []})", w.Serialize());
  ASSERT_TRUE(VerifyPackage(with, X86Device()).ok());
  // Swap in params stamped for another library, with the manifest hash updated to match: only the
  // build id tells them apart.
  std::string foreign = Path("foreign_params.ctpkg");
  testing::RewritePackage(with, foreign, [&](Manifest* m, std::vector<PackageInput>* files) {
    for (auto& f : *files) {
      if (f.path != "params.bin") continue;
      f.data = *RestampParams(f.data, std::string(64, 'b'));
      for (auto& h : m->files) {
        if (h.path == f.path) h.sha256 = Sha256Hex(f.data);
      }
    }
  });
  auto p = VerifyPackage(foreign, X86Device());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::kBadHash);
  EXPECT_NE(p.status().message().find("params.bin belongs to build bbbbbbbbbbbb"),
            std::string::npos)
      << p.status().message();

  // The build id where graph.h's version 2 keeps it (under "metadata"), and at the top level,
  // where version 1 kept it.
  for (const char* text : {R"({"nodes": [], "metadata": {"build_id": "cccccccccccccccc"}})",
                           R"({"build_id": "cccccccccccccccc", "nodes": []})"}) {
    std::string graph = Path("foreign_graph.ctpkg");
    testing::RewritePackage(with, graph, [&](Manifest* m, std::vector<PackageInput>* files) {
      for (auto& f : *files) {
        if (f.path != "graph.json") continue;
        f.data = text;
        for (auto& h : m->files) {
          if (h.path == f.path) {
            h.sha256 = Sha256Hex(f.data);
            h.size = f.data.size();
          }
        }
      }
    });
    auto g = VerifyPackage(graph, X86Device());
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_EQ(g.status().code(), ErrorCode::kBadHash);
    EXPECT_NE(g.status().message().find("graph.json belongs to build cccccccccccc"),
              std::string::npos)
        << g.status().message();
  }
}

// A graph.json of the right build, hashed right, nested 100,000 levels deep: the old check read
// only its build_id and passed it on (to an executor that copies it).
TEST_F(PackageTest, RefusesADeeplyNestedGraph) {
  std::string with = Path("graph_ok.ctpkg");
  testing::BuildPackage("x86-64", with, R"({"nodes": []})");
  std::string deep = Path("deep_graph.ctpkg");
  testing::RewritePackage(with, deep, [&](Manifest* m, std::vector<PackageInput>* files) {
    for (auto& f : *files) {
      if (f.path != "graph.json") continue;
      const std::string levels(100'000, '[');
      f.data = R"({"build_id": ")" + m->build_id + R"(", "nodes": )" + levels +
               std::string(levels.size(), ']') + "}";
      for (auto& h : m->files) {
        if (h.path == f.path) {
          h.sha256 = Sha256Hex(f.data);
          h.size = f.data.size();
        }
      }
    }
  });
  auto g = VerifyPackage(deep, X86Device());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("graph.json: JSON nested deeper than 64 levels at byte"),
            std::string::npos)
      << g.status().message();
}

TEST_F(PackageTest, RefusesUnlistedMembersAndUnsafeNames) {
  std::string extra = Path("extra.ctpkg");
  testing::RewritePackage(x86_, extra, [](Manifest*, std::vector<PackageInput>* files) {
    files->push_back({"lib/evil.so", "x", ""});
  });
  auto e = VerifyPackage(extra, X86Device());
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::kBadHash);
  EXPECT_NE(e.status().message().find("lib/evil.so: not listed"), std::string::npos);
  EXPECT_FALSE(WriteTar(Path("dotdot.tar"), {{"../escape", "x", ""}}).ok());
}

TEST_F(PackageTest, CudaPackagesNeedAMatchingGpu) {
  Manifest m;
  m.kind = "cuda";
  m.arch = "sm_90";
  msg::DeviceInfo d = X86Device();
  d.gpu_status = "no CUDA driver";
  Status none = CheckDevice(m, d);
  EXPECT_EQ(none.code(), ErrorCode::kNoDevice);
  EXPECT_NE(none.message().find("no CUDA driver"), std::string::npos);
  d.gpus.push_back({"A100", "sm_80", 0});
  EXPECT_EQ(CheckDevice(m, d).code(), ErrorCode::kWrongArch);
  d.gpus.push_back({"H100", "sm_90", 0});
  EXPECT_TRUE(CheckDevice(m, d).ok());
  m.arch = "sm_80";
  d.gpus = {{"H100", "sm_90", 0}};
  EXPECT_EQ(CheckDevice(m, d).code(), ErrorCode::kWrongArch);  // sm_80 cubin, no PTX
  m.ptx = "lib/k.ptx";
  EXPECT_TRUE(CheckDevice(m, d).ok());  // PTX is JIT-compiled for the newer GPU
}

TEST(ManifestTest, NumbersThatAreNotIntegersInRangeAreNamedErrors) {
  // A float where an integer belongs converted with undefined behaviour (the package fuzzer found
  // format_version 8.9e81); a negative size wrapped. Each is now a named kInvalidArgument.
  const std::string base =
      R"("kind":"cpu","target":"t","triple":"x86_64-linux-gnu","arch":"x86_64",)"
      R"("library":"kernel.so","functions":[],)";
  struct Case {
    std::string json;
    std::string field;
  };
  for (
      const Case& c : std::vector<Case>{
          {"{" + base + R"("format_version":8.88889e81,"abi_version":1,"files":[]})",
           "format_version"},
          {"{" + base + R"("format_version":1,"abi_version":-1,"files":[]})", "abi_version"},
          {"{" + base +
               R"("format_version":1,"abi_version":1,"files":[{"path":"a","size":-5,"sha256":""}]})",
           "size"},
      }) {
    auto m = pkg::ManifestFromJson(c.json);
    ASSERT_FALSE(m.ok()) << c.json;
    EXPECT_EQ(m.status().code(), ErrorCode::kInvalidArgument) << m.status().ToString();
    EXPECT_NE(m.status().message().find(c.field + " must be an integer"), std::string::npos)
        << m.status().message();
  }
}

// 100,000 levels (200 KB, under every size limit): the old reader parsed them and then overflowed
// the stack quoting the value in its error text, which ended a server's session. Each case runs
// in a forked child first (gtest's death-test machinery), so such a crash fails this test only.
std::string Deep(int levels = 100'000) {
  return std::string(levels, '[') + std::string(levels, ']');
}

TEST(ManifestTest, RefusesDeepNestingWithANamedError) {
  const std::string text = R"({"format_version":)" + Deep() + "}";
  EXPECT_EXIT(
      {
        (void)ManifestFromJson(text);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  auto m = ManifestFromJson(text);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(), "manifest.json: JSON nested deeper than 64 levels at byte 82");
}

TEST(ManifestTest, ErrorTextsQuoteAValueCutShort) {
  std::string many = "[";
  for (int i = 0; i < 100'000; ++i) many += "1,";
  many += "1]";
  auto m = ManifestFromJson(R"({"format_version":)" + many + "}");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("format_version must be an integer in [0, 4294967295], got "
                                      "[1,1,1,"),
            std::string::npos)
      << m.status().message();
  EXPECT_LT(m.status().message().size(), 200u);
}

// A params.bin header (magic, version, build id) followed by `index` as its JSON index.
std::string ParamsWithIndex(const std::string& index) {
  std::string bytes = ParamsWriter().Serialize().substr(0, 80);
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((index.size() >> (8 * i)) & 0xff));
  return bytes + index;
}

TEST(ParamsTest, RefusesADeeplyNestedIndexWithANamedError) {
  const std::string bytes =
      ParamsWithIndex(R"({"tensors":[{"name":"w","dtype":"float32","shape":)" + Deep() + "}]}");
  auto parse = [&bytes] {
    std::unique_ptr<char, decltype(&std::free)> buf(
        static_cast<char*>(std::aligned_alloc(64, (bytes.size() + 63) / 64 * 64)), &std::free);
    std::copy(bytes.begin(), bytes.end(), buf.get());
    return ParamsFile::FromBuffer(buf.get(), bytes.size()).status();
  };
  EXPECT_EXIT(
      {
        (void)parse();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  Status s = parse();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "params.bin: index: JSON nested deeper than 64 levels at byte 112");
}

TEST(ParamsTest, RoundTripsAlignedTensorsThroughMmap) {
  ParamsWriter w;
  std::vector<float> a(100, 1.5f);
  std::vector<int32_t> b = {1, 2, 3};
  ASSERT_TRUE(w.Add("a", {kDLFloat, 32, 1}, {10, 10}, a.data(), a.size() * 4).ok());
  ASSERT_TRUE(w.Add("b", {kDLInt, 32, 1}, {3}, b.data(), b.size() * 4).ok());
  w.set_build_id(std::string(64, 'a'));
  std::string path = fs::temp_directory_path() / ("params-" + std::to_string(::getpid()) + ".bin");
  ASSERT_TRUE(w.Write(path).ok());
  auto p = ParamsFile::Open(path);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)->build_id(), std::string(64, 'a'));
  ASSERT_EQ((*p)->tensors().size(), 2u);
  const ParamTensor* t = (*p)->Find("b");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->offset % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*p)->data(*t)) % 64, 0u);
  EXPECT_EQ(static_cast<const int32_t*>((*p)->data(*t))[2], 3);
  EXPECT_EQ(static_cast<const float*>((*p)->data(*(*p)->Find("a")))[99], 1.5f);
  fs::remove(path);
}

TEST(ParamsTest, RefusesTruncatedMisalignedAndGarbage) {
  ParamsWriter w;
  std::vector<float> a(64, 2.0f);
  ASSERT_TRUE(w.Add("a", {kDLFloat, 32, 1}, {64}, a.data(), a.size() * 4).ok());
  std::string good = w.Serialize();
  alignas(64) static char buf[1 << 16];
  auto check = [&](const std::string& bytes, const std::string& want) {
    std::copy(bytes.begin(), bytes.end(), buf);  // bytes, not a C string
    auto p = ParamsFile::FromBuffer(buf, bytes.size());
    ASSERT_FALSE(p.ok()) << want;
    EXPECT_NE(p.status().message().find(want), std::string::npos) << p.status().message();
  };
  check(good.substr(0, good.size() - 10), "truncated");
  check(good.substr(0, 40), "truncated");
  check(std::string(200, 'z'), "bad magic");
  std::string garbage_index = good;
  garbage_index[88] = 'x';
  check(garbage_index, "not JSON");
  std::string misaligned = good;
  size_t at = misaligned.find("\"offset\":");
  misaligned[at + 9] = misaligned[at + 9] == '9' ? '8' : static_cast<char>(misaligned[at + 9] + 1);
  std::copy(misaligned.begin(), misaligned.end(), buf);
  auto p = ParamsFile::FromBuffer(buf, misaligned.size());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("aligned"), std::string::npos) << p.status().message();
  // A size that does not match the shape.
  ParamsWriter bad;
  EXPECT_FALSE(bad.Add("x", {kDLFloat, 32, 1}, {4}, a.data(), 12).ok());
}

}  // namespace
}  // namespace crosstune::pkg
