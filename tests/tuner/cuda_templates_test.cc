// The CUDA templates (matmul, conv2d and dense for cuda targets): their tasks and spaces, the
// device-limit checks made from what a device reports (unit); every checked config compiled by
// NVRTC for sm_80 and sm_90, and the generated kernels run on the host under
// cuda_host_emulation.h against the reference (integration). On a GPU, cuda_gpu_test.cc runs
// them for real.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "crosstune/builder/compiler.h"
#include "crosstune/testing/support.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tune.h"
#include "template_checks.h"

namespace crosstune::tuner {
namespace {

namespace fs = std::filesystem;
using crosstune::testing::CommandResult;
using crosstune::testing::MakeTempDir;
using crosstune::testing::RunCommand;

builder::Target Cuda(const std::string& arch) {
  auto t = builder::ParseTarget("cuda -arch=" + arch);
  EXPECT_TRUE(t.ok());
  return *t;
}

std::unique_ptr<Task> Make(const std::string& name, const std::vector<int64_t>& shape,
                           const std::string& arch = "sm_90") {
  auto task = MakeTask(name, shape, Cuda(arch));
  EXPECT_TRUE(task.ok()) << name << ": " << task.status().ToString();
  return task.ok() ? std::move(task).value() : nullptr;
}

// The tasks the tests check: tiles that divide, odd sizes that divide nothing, a ResNet-50
// layer, a 1x1 layer read in place, a strided, padded, batched one with a residual; two without
// activation (negative outputs kept).
std::vector<std::unique_ptr<Task>> TasksToCheck() {
  std::vector<std::unique_ptr<Task>> t;
  t.push_back(Make("matmul", {128, 128, 64}));
  t.push_back(Make("matmul", {67, 45, 33}));
  t.push_back(Make("conv2d", {1, 16, 14, 14, 32, 3, 3, 1, 1}));
  t.push_back(Make("conv2d", {1, 32, 7, 7, 24, 1, 1, 1, 0, 1}));
  t.push_back(Make("conv2d", {2, 3, 9, 7, 5, 3, 3, 2, 1, 1}));
  t.push_back(Make("conv2d", {2, 3, 9, 7, 5, 3, 3, 2, 1, 1, 0}));  // no activation
  t.push_back(Make("conv2d", {1, 8, 6, 6, 12, 1, 1, 1, 0, 0, 0}));
  t.push_back(Make("dense", {3, 92, 37}));
  return t;
}

TEST(CudaTemplatesTest, MatmulConv2dAndDenseMakeCudaTasks) {
  auto mm = Make("matmul", {512, 256, 128});
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->id().Key(), "matmul 512,256,128 float32");
  EXPECT_EQ(mm->function(), "matmul");
  EXPECT_DOUBLE_EQ(mm->flops(), 2.0 * 512 * 256 * 128);
  std::string src = mm->Generate(mm->DefaultConfig());
  EXPECT_NE(src.find("__global__"), std::string::npos);
  auto fns = builder::ParseCudaKernelAnnotations(src);
  ASSERT_TRUE(fns.ok()) << fns.status().ToString();
  ASSERT_EQ(fns->size(), 1u);
  EXPECT_EQ((*fns)[0].name, "matmul");
  EXPECT_EQ((*fns)[0].signature, "ttt");

  auto conv = Make("conv2d", {1, 64, 56, 56, 64, 3, 3, 1, 1, 1});
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->id().Key(), "conv2d 1,64,56,56,64,3,3,1,1,1 float32");
  ASSERT_EQ(conv->args().size(), 5u);
  fns = builder::ParseCudaKernelAnnotations(conv->Generate(conv->DefaultConfig()));
  ASSERT_TRUE(fns.ok());
  EXPECT_EQ((*fns)[0].signature, "ttttt");

  // dense is the same product (out = data·weightᵀ + bias) with the weight as the streamed operand.
  auto dense = Make("dense", {1, 2048, 1000});
  ASSERT_NE(dense, nullptr);
  EXPECT_EQ(dense->id().Key(), "dense 1,2048,1000 float32");
  EXPECT_DOUBLE_EQ(dense->flops(), 2.0 * 2048 * 1000);
  EXPECT_EQ(dense->space().FindKnob("vec_a")->size(), 2u) << "float4 loads along IN";

  // Threads are a CPU task's; depthwise_conv2d and conv2d_int8 have no CUDA form yet.
  auto threaded = MakeTask("matmul", {64, 64, 64}, Cuda("sm_90"), TaskOptions{4});
  ASSERT_FALSE(threaded.ok());
  EXPECT_NE(threaded.status().message().find("CUDA"), std::string::npos);
  auto depthwise = MakeTask("depthwise_conv2d", {1, 8, 8, 8, 3, 3, 1, 1}, Cuda("sm_90"));
  ASSERT_FALSE(depthwise.ok());
  EXPECT_NE(depthwise.status().message().find("CPU"), std::string::npos);
  auto int8 = MakeTask("conv2d_int8", {1, 8, 8, 8, 16, 3, 3, 1, 1}, Cuda("sm_90"));
  ASSERT_FALSE(int8.ok());
  EXPECT_NE(int8.status().message().find("conv2d_int8 template is for CPU targets"),
            std::string::npos);
}

TEST(CudaTemplatesTest, SpacesHoldOnlyBlocksTheArchitectureCanRun) {
  for (const auto& task : TasksToCheck()) {
    ASSERT_NE(task, nullptr);
    const ConfigSpace& space = task->space();
    uint64_t valid = 0;
    for (uint64_t i = 0; i < space.size(); ++i) {
      Config c = space.Get(i);
      if (!space.IsValid(c)) continue;
      ++valid;
      const int64_t threads =
          (c.Int("block_m") / c.Int("thread_m")) * (c.Int("block_n") / c.Int("thread_n"));
      ASSERT_EQ(threads % 32, 0) << c.ToString();
      ASSERT_LE(threads, 1024) << c.ToString();
      const int64_t stages = c.Int("double_buffer") ? 2 : 1;
      const int64_t shared =
          stages * c.Int("block_k") * (c.Int("block_m") + c.Int("block_n") + 2 * c.Int("pad")) * 4;
      ASSERT_LE(shared, 48 * 1024) << c.ToString();
      // With no GPU reported, the architecture's limits: every valid config passes them.
      ASSERT_TRUE(task->CheckLimits(c, msg::DeviceInfo{}).ok()) << c.ToString();
    }
    EXPECT_GE(valid, 50u) << task->id().Key();
    EXPECT_TRUE(space.IsValid(task->DefaultConfig())) << task->id().Key();
  }
  // float4 loads only where the layout allows them: K and N multiples of 4, and B read in place.
  auto odd = Make("matmul", {67, 45, 33});
  EXPECT_EQ(odd->space().FindKnob("vec_a")->size(), 1u);
  EXPECT_EQ(odd->space().FindKnob("vec_b")->size(), 1u);
  auto windows = Make("conv2d", {1, 64, 56, 56, 64, 3, 3, 1, 1});
  EXPECT_EQ(windows->space().FindKnob("vec_a")->size(), 2u);
  EXPECT_EQ(windows->space().FindKnob("vec_b")->size(), 1u) << "B is gathered from windows";
  auto planes = Make("conv2d", {1, 64, 56, 56, 256, 1, 1, 1, 0});
  EXPECT_EQ(planes->space().FindKnob("vec_b")->size(), 2u);
}

TEST(CudaTemplatesTest, LimitsComeFromWhatTheDeviceReports) {
  auto task = Make("matmul", {1024, 1024, 1024});
  ASSERT_NE(task, nullptr);
  const ConfigSpace& space = task->space();
  auto config = [&](nlohmann::json values) {
    auto c = space.FromJson(values);
    EXPECT_TRUE(c.ok()) << values.dump();
    EXPECT_TRUE(space.IsValid(*c)) << values.dump();
    return *c;
  };
  // 256 threads, 2 x 8 x (64 + 64 + 8) x 4 = 8704 bytes of shared memory.
  Config big = config({{"block_m", 64},
                       {"block_n", 64},
                       {"block_k", 8},
                       {"thread_m", 4},
                       {"thread_n", 4},
                       {"vec_a", 4},
                       {"vec_b", 4},
                       {"unroll_k", 8},
                       {"double_buffer", 1},
                       {"pad", 4}});
  msg::DeviceInfo device;
  device.gpus.push_back(msg::GpuInfo{});
  msg::GpuInfo& gpu = device.gpus[0];
  gpu.name = "Small GPU";
  gpu.arch = "sm_90";
  EXPECT_TRUE(task->CheckLimits(big, device).ok()) << "no limits reported: the architecture's";

  gpu.max_threads_per_block = 128;
  Status s = task->CheckLimits(big, device);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("256 threads; device Small GPU allows 128"), std::string::npos)
      << s.message();

  gpu.max_threads_per_block = 1024;
  gpu.max_shared_per_block = 8192;
  s = task->CheckLimits(big, device);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("8704 bytes of shared memory; device Small GPU allows 8192"),
            std::string::npos)
      << s.message();

  gpu.max_shared_per_block = 48 * 1024;
  gpu.max_registers_per_block = 8192;
  s = task->CheckLimits(big, device);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("registers"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("allows 8192"), std::string::npos) << s.message();

  // The pipeline refuses such a config before compiling it.
  gpu.max_registers_per_block = 65536;
  gpu.max_threads_per_block = 128;
  MeasureOptions options;
  auto builder = builder::Builder::Create({.workers = 1});
  ASSERT_TRUE(builder.ok());
  auto cands = BuildCandidates(**builder, *task, {big.index()}, device, options);
  ASSERT_EQ(cands.size(), 1u);
  EXPECT_EQ(cands[0].error, TrialError::kInvalidConfig);
  EXPECT_EQ((*builder)->stats().builds, 0u);
}

// What ptxas reports for a kernel's PTX on `arch`: registers a thread and bytes spilled.
struct PtxasUsage {
  int registers = -1;
  int spill_bytes = -1;
};
PtxasUsage RunPtxas(const std::string& ptx, const std::string& arch) {
  const fs::path dir = MakeTempDir("crosstune-ptxas");
  std::ofstream(dir / "k.ptx") << ptx;
  const CommandResult r =
      RunCommand(std::string(CT_PTXAS) + " -arch=" + arch + " -v " + (dir / "k.ptx").string() +
                 " -o " + (dir / "k.cubin").string());
  PtxasUsage u;
  const std::string log = r.out + r.err;  // ptxas -v reports on stderr
  std::smatch m;
  if (r.exit_code == 0 && std::regex_search(log, m, std::regex(R"(Used (\d+) registers)"))) {
    u.registers = std::stoi(m[1]);
  }
  if (r.exit_code == 0 && std::regex_search(log, m, std::regex(R"((\d+) bytes spill stores)"))) {
    u.spill_bytes = std::stoi(m[1]);
  }
  fs::remove_all(dir);
  return u;
}

// The valid config that needs the most registers: the largest thread tile, then the most
// values staged a thread per slice.
uint64_t HeaviestConfig(const Task& task) {
  uint64_t best = 0;
  std::pair<int64_t, int64_t> most{-1, -1};
  for (uint64_t i = 0; i < task.space().size(); ++i) {
    Config c = task.space().Get(i);
    if (!task.space().IsValid(c)) continue;
    const int64_t threads =
        (c.Int("block_m") / c.Int("thread_m")) * (c.Int("block_n") / c.Int("thread_n"));
    const int64_t staged = c.Int("block_k") * (c.Int("block_m") + c.Int("block_n")) / threads;
    std::pair<int64_t, int64_t> need{c.Int("thread_m") * c.Int("thread_n"), staged};
    if (need > most) {
      most = need;
      best = i;
    }
  }
  return best;
}

// The configs checked on `arch`: sm_90 gets every knob's extremes and the heaviest config;
// sm_80 the default.
std::vector<uint64_t> ConfigsFor(const Task& task, const std::string& arch) {
  if (arch != "sm_90") return {task.DefaultConfig().index()};
  std::vector<uint64_t> configs = testing::ConfigsToCheck(task, 2, 7);
  configs.push_back(HeaviestConfig(task));
  return configs;
}

// One test for both checks, so each sm_90 config is compiled once (NVRTC takes about a second a
// config): every checked config compiles for sm_80 and sm_90 into one kernel of the block size
// its config says, and on sm_90, where the CUDA toolkit has ptxas, it fits the register file
// without spilling.
TEST(CudaTemplatesTest, CheckedConfigsCompileForSm80AndSm90AndFitTheRegisterFile) {
  if (!builder::HasNvrtc()) GTEST_SKIP() << "built without NVRTC";
  const bool have_ptxas = !std::string(CT_PTXAS).empty();
  int compiled = 0;
  int measured = 0;
  for (const char* arch : {"sm_80", "sm_90"}) {
    for (const auto& generic : TasksToCheck()) {
      auto task = Make(generic->id().template_name, generic->id().shape, arch);
      ASSERT_NE(task, nullptr);
      for (uint64_t index : ConfigsFor(*task, arch)) {
        Config c = task->space().Get(index);
        auto out = builder::CompileCuda(task->Generate(c), task->target(), {});
        ASSERT_TRUE(out.ok()) << arch << " " << task->id().Key() << " " << c.ToString() << ":\n"
                              << out.status().ToString();
        EXPECT_EQ(out->library.substr(1, 3), "ELF");
        EXPECT_FALSE(out->ptx.empty());
        ASSERT_EQ(out->functions.size(), 1u);
        const pkg::Function& f = out->functions[0];
        EXPECT_EQ(f.name, task->function());
        const int64_t threads =
            (c.Int("block_m") / c.Int("thread_m")) * (c.Int("block_n") / c.Int("thread_n"));
        EXPECT_EQ(f.block[0], std::to_string(threads)) << c.ToString();
        ++compiled;
        if (std::string(arch) != "sm_90" || !have_ptxas) continue;
        // The register model keeps the space clear of configs that spill: ptxas may still spill
        // a few bytes where it trades registers for occupancy, never more.
        PtxasUsage u = RunPtxas(out->ptx, "sm_90");
        ASSERT_GE(u.registers, 0) << "ptxas failed on " << c.ToString();
        EXPECT_LE(u.registers * threads, 65536) << c.ToString();
        EXPECT_LE(u.spill_bytes, 16)
            << task->id().Key() << " " << c.ToString() << " uses " << u.registers << " registers";
        ++measured;
      }
    }
  }
  EXPECT_GE(compiled, 40);
  if (have_ptxas) {
    EXPECT_GT(measured, 30);
  } else {
    std::printf("no ptxas in the CUDA toolkit: register use and spills not checked\n");
  }
}

TEST(CudaTemplatesTest, ADeviceWithoutAGpuIsRefusedByNameAndKeepsServing) {
  ServerProcess server;
  ASSERT_TRUE(
      server
          .Start({CT_SERVER_BIN, "--host", "127.0.0.1", "--port", "0", "--exit-with-parent"},
                 std::chrono::seconds(20))
          .ok());
  client::ConnectOptions co;
  co.server = server.address();
  auto session = client::Session::Connect(co);
  ASSERT_TRUE(session.ok());
  auto info = (*session)->Info();
  ASSERT_TRUE(info.ok());
  if (!info->gpus.empty()) GTEST_SKIP() << "this machine has a GPU (cuda_gpu_test runs there)";
  auto task = Make("matmul", {64, 64, 64});
  ASSERT_NE(task, nullptr);
  auto builder = builder::Builder::Create({.workers = 1});
  ASSERT_TRUE(builder.ok());
  TuneOptions o;
  o.trials = 2;
  DeviceSpec device;
  device.name = "local";
  device.server = server.address();
  auto sum = Tune(*task, {device}, **builder, o);
  ASSERT_FALSE(sum.ok());
  EXPECT_EQ(sum.status().code(), ErrorCode::kNoDevice);
  EXPECT_NE(sum.status().message().find(info->gpu_status), std::string::npos)
      << sum.status().message();
  EXPECT_TRUE((*session)->Info().ok()) << "the server goes on serving";
}

// --- Host emulation ---------------------------------------------------------------------------

// The generated kernel compiled with the host C++ compiler under cuda_host_emulation.h, run on
// `inputs`; the outputs in place.
class EmulatedKernel {
  static constexpr const char* kFlags = " -std=c++20 -O1 -w -fPIC -pthread";

 public:
  static Expected<EmulatedKernel> Build(const Task& task, const Config& config,
                                        const fs::path& dir) {
    const std::string src = task.Generate(config);
    auto fns = builder::ParseCudaKernelAnnotations(src);
    if (!fns.ok()) return fns.status();
    const pkg::Function& f = fns->front();
    std::ostringstream o;
    o << "#include \"" << (dir / "emulation.h").string() << "\"\n"
      << src << "\nextern \"C\" void ct_run(float** a) {\n  ct_launch(ct_dim3{" << f.grid[0] << ", "
      << f.grid[1] << ", " << f.grid[2] << "}, " << f.block[0] << ", [&] { " << f.name << "(";
    for (size_t i = 0; i < task.args().size(); ++i) o << (i ? ", " : "") << "a[" << i << "]";
    o << "); });\n}\n";
    // A new name for every build: dlopen of a path it has loaded returns the old library.
    static int builds = 0;
    const std::string stem = "k" + std::to_string(++builds);
    const fs::path cc = dir / (stem + ".cc");
    const fs::path so = dir / (stem + ".so");
    std::ofstream(cc) << o.str();
    const CommandResult cxx = RunCommand(std::string(CT_HOST_CXX) + kFlags + " -shared -o " +
                                         so.string() + " " + cc.string());
    if (cxx.exit_code != 0) return Status(ErrorCode::kBuildError, cxx.err);
    void* lib = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) return Status(ErrorCode::kIoError, ::dlerror());
    EmulatedKernel k;
    k.run_ = reinterpret_cast<void (*)(float**)>(::dlsym(lib, "ct_run"));
    return k;
  }
  // Copies the emulation header into `dir` and precompiles it there (a second per kernel saved);
  // without the precompiled header the kernels still build, only slower.
  static void Prepare(const fs::path& dir) {
    fs::copy_file(CT_CUDA_EMULATION_H, dir / "emulation.h", fs::copy_options::overwrite_existing);
    const CommandResult pch =
        RunCommand(std::string(CT_HOST_CXX) + kFlags + " -x c++-header " +
                   (dir / "emulation.h").string() + " -o " + (dir / "emulation.h.gch").string());
    if (pch.exit_code != 0) fs::remove(dir / "emulation.h.gch");
  }
  void Run(HostArgs& args) const {
    std::vector<float*> ptrs;
    for (auto& a : args) ptrs.push_back(a.data());
    run_(ptrs.data());
  }

 private:
  void (*run_)(float**) = nullptr;
};

TEST(CudaTemplatesTest, GeneratedKernelsMatchTheReferenceUnderHostEmulation) {
  const fs::path dir =
      fs::temp_directory_path() / ("crosstune-cuda-emulation-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  EmulatedKernel::Prepare(dir);
  int checked = 0;
  for (const auto& task : TasksToCheck()) {
    ASSERT_NE(task, nullptr);
    const ReferenceData ref = ReferenceData::Make(*task, 5);
    for (uint64_t index : testing::ConfigsToCheck(*task, 1, 11)) {
      Config c = task->space().Get(index);
      auto kernel = EmulatedKernel::Build(*task, c, dir);
      ASSERT_TRUE(kernel.ok()) << task->id().Key() << " " << c.ToString() << ": "
                               << kernel.status().ToString();
      HostArgs args = ref.inputs;
      for (size_t a = 0; a < args.size(); ++a) {
        if (task->args()[a].output) std::fill(args[a].begin(), args[a].end(), NAN);
      }
      kernel->Run(args);
      Status same = CompareOutputs(*task, args, ref.expected);
      EXPECT_TRUE(same.ok()) << task->id().Key() << " " << c.ToString() << ": " << same.message();
      ++checked;
    }
  }
  std::printf("%d configs of %zu tasks ran under the host emulation\n", checked,
              TasksToCheck().size());
  EXPECT_GE(checked, 40);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace crosstune::tuner
