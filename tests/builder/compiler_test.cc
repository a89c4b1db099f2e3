#include "crosstune/builder/compiler.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "crosstune/kernel_abi.h"
#include "crosstune/testing/support.h"
#include "test_kernels.h"

namespace crosstune::builder {
namespace {

struct ElfId {
  int elf_class = 0;  // 1: 32-bit, 2: 64-bit
  uint16_t machine = 0;
  uint32_t flags = 0;
  uint16_t type = 0;
};

ElfId ReadElf(const std::string& b) {
  ElfId id;
  if (b.size() < 52 || std::memcmp(b.data(),
                                   "\x7f"
                                   "ELF",
                                   4) != 0)
    return id;
  id.elf_class = static_cast<unsigned char>(b[4]);
  std::memcpy(&id.type, b.data() + 16, 2);
  std::memcpy(&id.machine, b.data() + 18, 2);
  std::memcpy(&id.flags, b.data() + (id.elf_class == 2 ? 48 : 36), 4);
  return id;
}

Target T(const std::string& s) {
  auto t = ParseTarget(s);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

struct TripleCase {
  const char* target;
  int elf_class;
  uint16_t machine;
};

std::string TripleName(const ::testing::TestParamInfo<TripleCase>& info) {
  static const char* kNames[] = {"x86_64", "aarch64", "armv7", "riscv64"};
  return kNames[info.index];
}

class CpuCompileTest : public ::testing::TestWithParam<TripleCase> {};

TEST_P(CpuCompileTest, CompilesSharedObjectForTheTriple) {
  const TripleCase& c = GetParam();
  auto out = CompileCpu(testing::kVaddSource, T(c.target), {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ElfId elf = ReadElf(out->library);
  EXPECT_EQ(elf.elf_class, c.elf_class);
  EXPECT_EQ(elf.machine, c.machine);
  EXPECT_EQ(elf.type, 3) << "ET_DYN: a shared object";
  if (c.machine == 40) {
    EXPECT_NE(elf.flags & 0x400, 0u) << "armv7 must be hard-float (EF_ARM_ABI_FLOAT_HARD)";
  }
  ASSERT_EQ(out->functions.size(), 2u);
  EXPECT_EQ(out->functions[0].name, "vadd");
  EXPECT_EQ(out->functions[0].signature, "ttti");
  EXPECT_EQ(out->functions[1].name, "scale");
  EXPECT_EQ(out->functions[1].signature, "tif");
}

INSTANTIATE_TEST_SUITE_P(
    Triples, CpuCompileTest,
    ::testing::Values(TripleCase{"llvm -mtriple=x86_64-linux-gnu", 2, 62},
                      TripleCase{"llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", 2, 183},
                      TripleCase{"armv7-neon", 1, 40}, TripleCase{"riscv64", 2, 243}),
    TripleName);

TEST(CompilerTest, ReturnsClangDiagnosticsAsBuildError) {
  auto out = CompileCpu("int f(void) { return undeclared_thing; }\n", T("aarch64"), {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::kBuildError);
  EXPECT_NE(out.status().message().find("kernel.c:1:"), std::string::npos)
      << out.status().message();
  EXPECT_NE(out.status().message().find("undeclared_thing"), std::string::npos);
}

TEST(CompilerTest, KernelsDoNotSeeHostHeaders) {
  auto out = CompileCpu("#include <stdio.h>\n", T("x86-64"), {});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("stdio.h"), std::string::npos);
}

TEST(CompilerTest, FindsTheAbiHeaderUnderItsInstalledName) {
  // Kernels written against the installed header spell it "crosstune/kernel_abi.h".
  const char* src =
      "#include \"crosstune/kernel_abi.h\"\n"
      "static int32_t Nop(const ct_arg* a, int32_t n) { (void)a; (void)n; return 0; }\n"
      "static const ct_function kFns[] = {{\"nop\", Nop, \"\"}};\n"
      "CT_DEFINE_MODULE(\"llvm\", kFns, 0)\n";
  auto out = CompileCpu(src, T("x86-64"), {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
}

TEST(CompilerTest, RefusesSourceWithoutModuleTable) {
  auto out = CompileCpu("int f(int x) { return x; }\n", T("x86-64"), {});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("CT_DEFINE_MODULE"), std::string::npos);
}

TEST(CompilerTest, AcceptsDefinesAndRefusesUnknownFlags) {
  std::string src = std::string("#ifndef N\n#error N missing\n#endif\n") + testing::kVaddSource;
  EXPECT_TRUE(CompileCpu(src, T("x86-64"), {"-DN=4", "-ffast-math", "-O2"}).ok());
  auto bad = CompileCpu(testing::kVaddSource, T("x86-64"), {"-fplugin=evil.so"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
}

TEST(CompilerTest, RecordsRequiredFeatures) {
  auto out = CompileCpu(testing::kVaddSource, T("x86-avx512"), {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_NE(std::find(out->required_features.begin(), out->required_features.end(), "avx512f"),
            out->required_features.end());
}

class CudaCompileTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaCompileTest, CompilesCubinAndPtxWithNvrtc) {
  if (!HasNvrtc()) GTEST_SKIP() << "built without the CUDA toolkit (NVRTC)";
  std::string arch = GetParam();
  auto out = CompileCuda(testing::kCudaVaddSource, T("cuda -arch=" + arch), {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->library.substr(0, 4),
            "\x7f"
            "ELF")
      << "a cubin is an ELF file";
  EXPECT_NE(out->ptx.find(".target " + arch), std::string::npos);
  ASSERT_EQ(out->functions.size(), 1u);
  const pkg::Function& f = out->functions[0];
  EXPECT_EQ(f.name, "vadd");
  EXPECT_EQ(f.symbol, "vadd");
  EXPECT_EQ(f.signature, "ttti");
  EXPECT_EQ(f.grid, (std::vector<std::string>{"a3/256", "1", "1"}));
  EXPECT_EQ(f.block, (std::vector<std::string>{"256", "1", "1"}));
}

INSTANTIATE_TEST_SUITE_P(Arches, CudaCompileTest, ::testing::Values("sm_80", "sm_90"));

TEST(CudaCompilerTest, ReturnsNvrtcLogAsBuildError) {
  if (!HasNvrtc()) GTEST_SKIP() << "built without the CUDA toolkit (NVRTC)";
  auto out = CompileCuda(
      "// crosstune: kernel k(t) block=32\nextern \"C\" __global__ void k(float* x) { x[0] = nope; "
      "}\n",
      T("sm_90"), {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::kBuildError);
  EXPECT_NE(out.status().message().find("nope"), std::string::npos) << out.status().message();
}

TEST(CudaCompilerTest, ParsesAndRefusesAnnotations) {
  auto ok = ParseCudaKernelAnnotations(
      "// crosstune: kernel mm(ttti) grid=a3/16,a3/16 block=16,16 shared=1024\n");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0].grid, (std::vector<std::string>{"a3/16", "a3/16", "1"}));
  EXPECT_EQ((*ok)[0].shared_mem_bytes, 1024u);
  EXPECT_FALSE(ParseCudaKernelAnnotations("__global__ void k() {}").ok());  // none declared
  EXPECT_FALSE(ParseCudaKernelAnnotations("// crosstune: kernel k(t) grid=a0/2 block=1\n")
                   .ok());  // a0 is a tensor
  EXPECT_FALSE(ParseCudaKernelAnnotations("// crosstune: kernel k(ti) grid=a5 block=1\n").ok());
  EXPECT_FALSE(ParseCudaKernelAnnotations("// crosstune: kernel k(ti) grid=1\n").ok());  // no block
}

// A library made of several translation units (a network's nodes): each node renames its entry
// point, the main source's table wraps the nodes' functions, and every object sees the one
// runtime variable the server sets.
namespace multi {

// A node: doubles a tensor, in parallel through the runtime when there is one.
std::string NodeSource(const std::string& entry, int factor) {
  return "#define crosstune_module_v1 " + entry +
         "\n"
         "#define CT_USE_RUNTIME 1\n"
         "#include \"crosstune/kernel_abi.h\"\n"
         "static float* g_data; static long g_n;\n"
         "static int32_t body(int32_t t, int32_t nt, void* c) { (void)c;\n"
         "  for (long i = g_n * t / nt; i < g_n * (t + 1) / nt; ++i) g_data[i] *= " +
         std::to_string(factor) +
         ";\n  return 0; }\n"
         "static int32_t scale(const ct_arg* a, int32_t n) { (void)n;\n"
         "  const DLTensor* t = a[0].value.v_tensor; g_data = (float*)t->data; g_n = t->shape[0];\n"
         "  return ct_parallel_for(body, 0, ct_num_threads()); }\n"
         "static const ct_function kFns[] = {{\"scale\", scale, \"t\"}};\n"
         "CT_DEFINE_MODULE(\"node\", kFns, 0)\n";
}

const char* const kMainSource = R"C(
#include "crosstune/kernel_abi.h"
const ct_module* node_a(void);
const ct_module* node_b(void);
static int32_t a(const ct_arg* args, int32_t n) { return node_a()->functions[0].fn(args, n); }
static int32_t b(const ct_arg* args, int32_t n) { return node_b()->functions[0].fn(args, n); }
static const ct_function kFns[] = {{"ct_n0_scale", a, "t"}, {"ct_n1_scale", b, "t"}};
CT_DEFINE_MODULE("net", kFns, 0)
)C";

int g_launches = 0;
int32_t Threads(const ct_runtime*) { return 2; }
int32_t Launch(const ct_runtime*, ct_parallel_body body, void* closure, int32_t tasks) {
  ++g_launches;
  for (int32_t t = 0; t < tasks; ++t) body(t, tasks, closure);
  return 0;
}

}  // namespace multi

TEST(CompilerTest, LinksTheObjectsOfSeveralSourcesIntoOneLibrary) {
  const Target host = T("llvm -mtriple=x86_64-linux-gnu");
  auto a = CompileCpuObject(multi::NodeSource("node_a", 2), host, {}, "node_a.c");
  auto b = CompileCpuObject(multi::NodeSource("node_b", 3), host, {}, "node_b.c");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(ReadElf(a->library).type, 1) << "ET_REL: an object";
  auto lib = CompileCpu(multi::kMainSource, host, {}, "net.c", {a->library, b->library});
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  ASSERT_EQ(lib->functions.size(), 2u);
  EXPECT_EQ(lib->functions[1].name, "ct_n1_scale");

  char path[] = "/tmp/crosstune-multi-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, lib->library.data(), lib->library.size()),
            static_cast<ssize_t>(lib->library.size()));
  ::close(fd);
  void* h = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  ::unlink(path);
  ASSERT_NE(h, nullptr) << ::dlerror();
  static const ct_runtime rt = {CT_RUNTIME_VERSION, multi::Threads, multi::Launch};
  *static_cast<const ct_runtime**>(::dlsym(h, CT_RUNTIME_SYMBOL)) = &rt;
  auto entry = reinterpret_cast<ct_module_entry>(::dlsym(h, CT_MODULE_SYMBOL));
  ASSERT_NE(entry, nullptr);
  const ct_module* m = entry();
  ASSERT_EQ(m->num_functions, 2u);
  float data[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  DLTensor t{};
  t.data = data;
  t.ndim = 1;
  t.shape = shape;
  t.dtype = {kDLFloat, 32, 1};
  ct_arg arg{};
  arg.kind = CT_ARG_TENSOR;
  arg.value.v_tensor = &t;
  EXPECT_EQ(m->functions[0].fn(&arg, 1), 0);
  EXPECT_EQ(m->functions[1].fn(&arg, 1), 0);
  EXPECT_EQ(data[3], 24.0f);
  EXPECT_EQ(multi::g_launches, 2) << "both nodes must see the runtime the server set";
  ::dlclose(h);
}

// --- what a source can make the compiler and the linker read ------------------------------------

// A host file that a kernel source must not reach: its one line is an identifier clang would
// quote back ("unknown type name '...'") if it were ever read as C.
struct HostSecret {
  testing::TempDir dir{"crosstune-secret"};
  std::string path = testing::WriteFile(dir.path() + "/token", "tracker_token_5ec12e7\n");
  static constexpr const char* kText = "tracker_token_5ec12e7";
};

std::string NopModule(const std::string& before) {
  return before +
         "#include \"kernel_abi.h\"\n"
         "static int32_t Nop(const ct_arg* a, int32_t n) { (void)a; (void)n; return 0; }\n"
         "static const ct_function kFns[] = {{\"nop\", Nop, \"\"}};\n"
         "CT_DEFINE_MODULE(\"llvm\", kFns, 0)\n";
}

TEST(CompilerFileAccessTest, AnIncludeOfAHostFileIsNotFoundAndQuotesNothingOfIt) {
  HostSecret secret;
  for (const std::string& spelling : {secret.path, "../../../../../../../../.." + secret.path,
                                      "kernel_abi.h/../../../../../../../../.." + secret.path}) {
    auto out = CompileCpu(NopModule("#include \"" + spelling + "\"\n"), T("x86-64"), {});
    ASSERT_FALSE(out.ok()) << spelling;
    EXPECT_EQ(out.status().code(), ErrorCode::kBuildError);
    EXPECT_NE(out.status().message().find("file not found"), std::string::npos)
        << out.status().message();
    EXPECT_EQ(out.status().message().find(HostSecret::kText), std::string::npos)
        << "the file's text came back: " << out.status().message();
  }
}

TEST(CompilerFileAccessTest, HasIncludeCannotProbeWhichHostFilesExist) {
  HostSecret secret;
  auto out = CompileCpu(NopModule("#if __has_include(\"" + secret.path + "\") || __has_include(<" +
                                  secret.path + ">)\n#error the host file is visible\n#endif\n"),
                        T("x86-64"), {});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  // The kernel include tree is still there.
  auto abi =
      CompileCpu(NopModule("#if !__has_include(\"dlpack/dlpack.h\")\n#error no dlpack\n#endif\n"),
                 T("x86-64"), {});
  EXPECT_TRUE(abi.ok()) << abi.status().ToString();
}

TEST(CompilerFileAccessTest, ALinkInputThatIsNoElfObjectIsRefusedByName) {
  HostSecret secret;
  const Target host = T("llvm -mtriple=x86_64-linux-gnu");
  auto script = CompileCpu(NopModule(""), host, {}, "net.c", {"INPUT(" + secret.path + ")\n"});
  ASSERT_FALSE(script.ok());
  EXPECT_EQ(script.status().code(), ErrorCode::kBuildError);
  EXPECT_NE(script.status().message().find(
                "link input 1 is not an ELF object (linker scripts are not accepted)"),
            std::string::npos)
      << script.status().message();
  EXPECT_EQ(script.status().message().find(HostSecret::kText), std::string::npos);

  // A shared library (ET_DYN) and an object of the other ELF class are refused too.
  auto lib = CompileCpu(NopModule(""), host, {});
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  auto dyn = CompileCpu(NopModule(""), host, {}, "net.c", {lib->library});
  ASSERT_FALSE(dyn.ok());
  EXPECT_NE(dyn.status().message().find("link input 1 is an ELF file of type 3"), std::string::npos)
      << dyn.status().message();
  auto arm = CompileCpuObject("int x;\n", T("llvm -mtriple=armv7a-linux-gnueabihf"), {});
  ASSERT_TRUE(arm.ok()) << arm.status().ToString();
  auto obj = CompileCpuObject("int y;\n", host, {});
  ASSERT_TRUE(obj.ok()) << obj.status().ToString();
  auto mixed = CompileCpu(NopModule(""), host, {}, "net.c", {obj->library, arm->library});
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("link input 2 is a 32-bit ELF object"), std::string::npos)
      << mixed.status().message();
  EXPECT_TRUE(CompileCpu(NopModule(""), host, {}, "net.c", {obj->library}).ok());
}

TEST(CompilerFileAccessTest, TheLinkerOpensNoLibraryASourceNames) {
  // `#pragma comment(lib, ...)` puts the name in the object's .deplibs, which lld would open (and
  // read as a linker script).
  HostSecret secret;
  auto out = CompileCpu(NopModule("#pragma comment(lib, \"" + secret.path + "\")\n"),
                        T("llvm -mtriple=x86_64-linux-gnu"), {});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) {
    EXPECT_EQ(out.status().message().find(HostSecret::kText), std::string::npos);
  }
}

}  // namespace
}  // namespace crosstune::builder
