// crosstune-bench-kernels: tuned templates against the vendor libraries, side by side in one run.
// Matmul against OpenBLAS; ResNet-50's convolutions against oneDNN, in fp32 (conv2d, the blocked
// layout the model compiler runs) and in int8 (conv2d_int8 against oneDNN's u8 x s8 conv).
//
// For matmul (default 1024^3 fp32) at 1 and 2 threads: the task is tuned on this machine's
// crosstune-server (serially: build, then measure, so compiling never shares the CPUs with a
// measurement), then the tuned and the default (untuned) kernels are loaded into this process
// and timed with the same loop, the same buffers and the same thread count as OpenBLAS's
// cblas_sgemm, at two placements: A, B and C at the same offset modulo 4 KiB (as separate large
// allocations land) and staggered by 1 KiB + 64 B steps. Prints one JSON object.
//
// OpenBLAS is opened with dlopen after OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are removed from
// the environment, so it picks its best kernel for this CPU (the JSON names it; --openblas-core
// names one instead, as the smoke test does to compare on every x86 CPU with AVX2's), and with
// OPENBLAS_THREAD_TIMEOUT at its minimum, so its idle threads stop spinning before our kernel
// runs. Our threaded kernels run on the same ParallelPool the server gives a session.
//
//   crosstune-bench-kernels [--shape 1024,1024,1024] [--trials 40] [--log kernels.jsonl]
//       --log: records are appended, and a second run with the same log reuses them (no new
//       trials unless --trials asks for more).
#include <dlfcn.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/client/local_server.h"
#include "crosstune/client/session.h"
#include "crosstune/guarded_main.h"
#include "crosstune/kernel_abi.h"
#include "crosstune/server/parallel_pool.h"
#include "crosstune/tuner/conv_layout.h"
#include "crosstune/tuner/measure.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tune.h"
#include "dnnl.hpp"

using namespace crosstune;
using nlohmann::json;

namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "crosstune-bench-kernels: %s\n", what.c_str());
  std::exit(1);
}

std::vector<int64_t> ShapeOrDie(const std::string& text) {
  auto shape = tuner::ParseShape(text);
  if (!shape.ok()) Die(shape.status().message());
  return *shape;
}

// Median seconds per call: a warm-up, then `rounds` rounds of calls lasting at least min_s each.
// Round length and count for every timing (options; the smoke test makes them short).
double g_min_round_s = 0.2;
int g_rounds = 7;

double TimeCalls(const std::function<void()>& call, int rounds = 0, double min_s = 0) {
  if (rounds <= 0) rounds = g_rounds;
  if (min_s <= 0) min_s = g_min_round_s;
  using Clock = std::chrono::steady_clock;
  call();
  int number = 1;
  std::vector<double> per_call;
  while (static_cast<int>(per_call.size()) < rounds) {
    auto t0 = Clock::now();
    for (int i = 0; i < number; ++i) call();
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s < min_s) {
      number = std::max(number + 1, static_cast<int>(number * min_s / std::max(s, 1e-9) * 1.1));
      continue;
    }
    per_call.push_back(s / number);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

// OpenBLAS, opened after its environment is cleaned.
struct Blas {
  using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
  void* handle = nullptr;
  Sgemm sgemm = nullptr;
  void (*set_threads)(int) = nullptr;
  char* (*corename)() = nullptr;
  char* (*config)() = nullptr;

  // core: an OpenBLAS kernel family to use ("Haswell": AVX2) instead of the best for this CPU.
  static Blas Open(const std::string& core) {
    ::unsetenv("OPENBLAS_CORETYPE");
    if (!core.empty()) ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
    ::unsetenv("OPENBLAS_L2_SIZE");
    ::setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);  // the minimum: idle threads sleep at once
    Blas b;
    for (const char* name : {"libopenblas.so.0", "libopenblas.so"}) {
      if ((b.handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    }
    if (!b.handle) Die("cannot open OpenBLAS (libopenblas0): " + std::string(::dlerror()));
    b.sgemm = reinterpret_cast<Sgemm>(::dlsym(b.handle, "cblas_sgemm"));
    b.set_threads = reinterpret_cast<void (*)(int)>(::dlsym(b.handle, "openblas_set_num_threads"));
    b.corename = reinterpret_cast<char* (*)()>(::dlsym(b.handle, "openblas_get_corename"));
    b.config = reinterpret_cast<char* (*)()>(::dlsym(b.handle, "openblas_get_config"));
    if (!b.sgemm || !b.set_threads) Die("OpenBLAS lacks cblas_sgemm or openblas_set_num_threads");
    return b;
  }
};

// A module built by the builder, loaded into this process with a parallel pool behind it.
class LocalModule {
 public:
  LocalModule(const std::string& library, const std::string& function, server::ParallelPool* pool,
              const std::string& dir, const std::string& name) {
    path_ = dir + "/" + name + ".so";
    std::ofstream(path_, std::ios::binary).write(library.data(), std::streamsize(library.size()));
    handle_ = ::dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) Die("dlopen " + path_ + ": " + ::dlerror());
    if (void* rt = ::dlsym(handle_, CT_RUNTIME_SYMBOL)) {
      *static_cast<const ct_runtime**>(rt) = pool->runtime();
    }
    auto entry = reinterpret_cast<ct_module_entry>(::dlsym(handle_, CT_MODULE_SYMBOL));
    if (!entry) Die(path_ + " is not a crosstune module");
    const ct_module* m = entry();
    for (uint32_t i = 0; i < m->num_functions; ++i) {
      if (function == m->functions[i].name) fn_ = m->functions[i].fn;
    }
    if (!fn_) Die(path_ + " has no function " + function);
  }
  ~LocalModule() {
    if (handle_) ::dlclose(handle_);
    ::unlink(path_.c_str());
  }
  LocalModule(const LocalModule&) = delete;
  LocalModule& operator=(const LocalModule&) = delete;
  int32_t Call(const std::vector<ct_arg>& args) const {
    return fn_(args.data(), static_cast<int32_t>(args.size()));
  }

 private:
  std::string path_;
  void* handle_ = nullptr;
  ct_packed_fn fn_ = nullptr;
};

// A float buffer at a chosen offset from a 4 KiB boundary.
class Buffer {
 public:
  Buffer(size_t floats, size_t offset_bytes) : raw_(floats * 4 + offset_bytes + 4096) {
    auto base = reinterpret_cast<uintptr_t>(raw_.data());
    data_ = reinterpret_cast<float*>((base + 4095) / 4096 * 4096 + offset_bytes);
    floats_ = floats;
  }
  float* data() const { return data_; }
  size_t size() const { return floats_; }

 private:
  std::vector<char> raw_;
  float* data_ = nullptr;
  size_t floats_ = 0;
};

struct Tensor2d {
  int64_t shape[2];
  DLTensor t{};
  Tensor2d(float* data, int64_t rows, int64_t cols) : shape{rows, cols} {
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = 2;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
  }
};

ct_arg TensorArg(DLTensor* t) {
  ct_arg a{};
  a.kind = CT_ARG_TENSOR;
  a.value.v_tensor = t;
  return a;
}

// A task's arguments as DLTensors over host buffers, for in-process calls: float32 ones over
// `data` itself, the others over their bytes (Bytes(i); `data` keeps their inputs' values).
struct TaskArgs {
  tuner::HostArgs data;
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<DLTensor> tensors;
  std::vector<ct_arg> args;
  TaskArgs(const tuner::Task& task, uint64_t seed)
      : TaskArgs(task, tuner::MakeInputs(task, seed)) {}
  TaskArgs(const tuner::Task& task, tuner::HostArgs values) : data(std::move(values)) {
    const auto specs = task.args();
    shapes.reserve(specs.size());
    tensors.resize(specs.size());
    bytes.resize(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      shapes.push_back(specs[i].shape);
      DLTensor& t = tensors[i];
      const bool is_float = specs[i].dtype.code == kDLFloat;
      if (!is_float) bytes[i] = tuner::ArgBytes(specs[i], data[i]);
      t.data = is_float ? static_cast<void*>(data[i].data()) : bytes[i].data();
      t.device = {kDLCPU, 0};
      t.ndim = static_cast<int32_t>(shapes[i].size());
      t.dtype = specs[i].dtype;
      t.shape = shapes[i].data();
      args.push_back(TensorArg(&t));
    }
  }
};

// A conv2d task's inputs as oneDNN takes them here, NCHW/KCRS: a blocked layout's (block cb)
// unblocked, its packed weight unpacked, its bias cut to K.
tuner::HostArgs NchwInputs(const std::vector<int64_t>& shape, const tuner::HostArgs& in,
                           int64_t cb) {
  const int64_t layout = shape.size() > 11 ? shape[11] : 0;
  if (layout == 0) return in;
  const int64_t n = shape[0], c = shape[1], h = shape[2], w = shape[3], k = shape[4];
  const int64_t r = shape[5], s = shape[6];
  const int64_t ohw =
      ((h + 2 * shape[8] - r) / shape[7] + 1) * ((w + 2 * shape[8] - s) / shape[7] + 1);
  tuner::HostArgs out = in;
  if (layout == 1) {
    out[0] = tuner::FromBlocked(in[0], n, c, h * w, cb);
    out[1] = tuner::UnpackWeight(in[1], k, c, r, s, cb);
  }
  out[2].resize(static_cast<size_t>(k));
  if (shape.size() > 9 && shape[9] != 0) out[3] = tuner::FromBlocked(in[3], n, k, ohw, cb);
  out.back() = tuner::FromBlocked(in.back(), n, k, ohw, cb);
  return out;
}

// One ResNet-50 convolution through oneDNN: its own choice of algorithm and of blocked layouts
// (inputs reordered once, outside the timing), bias and ReLU (and the residual sum) as post-ops,
// as a framework that keeps activations in oneDNN's layout would run it.
class OneDnnConv {
 public:
  // shape: N,C,H,W,K,R,S,stride,pad[,residual[,activation[,layout]]]; inputs in NCHW/KCRS (see
  // NchwInputs for a blocked layout's).
  OneDnnConv(const std::vector<int64_t>& shape, const tuner::HostArgs& inputs)
      : eng_(dnnl::engine::kind::cpu, 0), stream_(eng_) {
    using dnnl::memory;
    using tag = memory::format_tag;
    using dt = memory::data_type;
    const int64_t n = shape[0], c = shape[1], h = shape[2], w = shape[3], k = shape[4],
                  r = shape[5], s = shape[6], stride = shape[7], pad = shape[8];
    residual_ = shape.size() > 9 && shape[9] != 0;
    const bool relu = shape.size() < 11 || shape[10] != 0;
    const int64_t oh = (h + 2 * pad - r) / stride + 1, ow = (w + 2 * pad - s) / stride + 1;
    memory::dims src{n, c, h, w}, wei{k, c, r, s}, bia{k}, dst{n, k, oh, ow};
    memory::dims strides{stride, stride}, padding{pad, pad};
    auto any = [](const memory::dims& d) { return memory::desc(d, dt::f32, tag::any); };
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_auto, any(src), any(wei),
        memory::desc(bia, dt::f32, tag::x), any(dst), strides, padding, padding);
    dnnl::post_ops ops;
    if (residual_) ops.append_sum(1.0f);
    if (relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    pd_ = dnnl::convolution_forward::primitive_desc(desc, attr, eng_);
    conv_ = dnnl::convolution_forward(pd_);
    // The user's NCHW tensors, reordered once into the layouts the primitive chose.
    auto from_user = [&](const std::vector<float>& host, const memory::dims& d, tag t,
                         const memory::desc& want) {
      memory user(memory::desc(d, dt::f32, t), eng_, const_cast<float*>(host.data()));
      memory mem(want, eng_);
      dnnl::reorder(user, mem).execute(stream_, user, mem);
      return mem;
    };
    src_ = from_user(inputs[0], src, tag::nchw, pd_.src_desc());
    wei_ = from_user(inputs[1], wei, tag::oihw, pd_.weights_desc());
    bia_ = memory(memory::desc(bia, dt::f32, tag::x), eng_, const_cast<float*>(inputs[2].data()));
    if (residual_) {
      residual_src_ = from_user(inputs[3], dst, tag::nchw, pd_.dst_desc());
    }
    dst_ = memory(pd_.dst_desc(), eng_);
    out_nchw_.resize(static_cast<size_t>(n * k * oh * ow));
    user_dst_ = memory(memory::desc(dst, dt::f32, tag::nchw), eng_, out_nchw_.data());
    stream_.wait();
  }

  void Run() {
    if (residual_) {
      // The sum post-op adds what dst holds: the residual, copied in as a framework would have
      // it (in place of the skip connection's output).
      dnnl::reorder(residual_src_, dst_).execute(stream_, residual_src_, dst_);
    }
    conv_.execute(stream_, {{DNNL_ARG_SRC, src_},
                            {DNNL_ARG_WEIGHTS, wei_},
                            {DNNL_ARG_BIAS, bia_},
                            {DNNL_ARG_DST, dst_}});
    stream_.wait();
  }
  // The last output in NCHW.
  const std::vector<float>& Output() {
    dnnl::reorder(dst_, user_dst_).execute(stream_, dst_, user_dst_);
    stream_.wait();
    return out_nchw_;
  }
  std::string Implementation() const { return pd_.impl_info_str(); }

 private:
  dnnl::engine eng_;
  dnnl::stream stream_;
  dnnl::convolution_forward::primitive_desc pd_;
  dnnl::convolution_forward conv_;
  dnnl::memory src_, wei_, bia_, dst_, residual_src_, user_dst_;
  std::vector<float> out_nchw_;
  bool residual_ = false;
};

// The same convolution in int8 through oneDNN, as conv2d_int8 computes it: uint8 data, int8
// weight, per-channel output scales and ReLU as attributes, uint8 out (no bias: the rows zero
// ours, so the two agree whatever order oneDNN applies a bias and the scales in). Layouts are
// oneDNN's choice, the inputs reordered into them once, outside the timing.
class OneDnnConvInt8 {
 public:
  // shape: conv2d_int8's (in_zero and out_zero 0); data NHWC, weight [K, C, R, S].
  OneDnnConvInt8(const std::vector<int64_t>& shape, const std::vector<uint8_t>& data_nhwc,
                 const std::vector<int8_t>& weight_kcrs, const std::vector<float>& scale)
      : eng_(dnnl::engine::kind::cpu, 0), stream_(eng_) {
    using dnnl::memory;
    using tag = memory::format_tag;
    using dt = memory::data_type;
    const int64_t n = shape[0], c = shape[1], h = shape[2], w = shape[3], k = shape[4],
                  r = shape[5], s = shape[6], stride = shape[7], pad = shape[8];
    const bool relu = shape.size() < 12 || shape[11] != 0;
    const int64_t oh = (h + 2 * pad - r) / stride + 1, ow = (w + 2 * pad - s) / stride + 1;
    memory::dims src{n, c, h, w}, wei{k, c, r, s}, dst{n, k, oh, ow};
    memory::dims strides{stride, stride}, padding{pad, pad};
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        memory::desc(src, dt::u8, tag::any), memory::desc(wei, dt::s8, tag::any),
        memory::desc(dst, dt::u8, tag::any), strides, padding, padding);
    dnnl::primitive_attr attr;
    attr.set_output_scales(1 << 1, std::vector<float>(scale.begin(), scale.begin() + k));
    dnnl::post_ops ops;
    if (relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
    pd_ = dnnl::convolution_forward::primitive_desc(desc, attr, eng_);
    conv_ = dnnl::convolution_forward(pd_);
    memory user_src(memory::desc(src, dt::u8, tag::nhwc), eng_,
                    const_cast<uint8_t*>(data_nhwc.data()));
    src_ = memory(pd_.src_desc(), eng_);
    dnnl::reorder(user_src, src_).execute(stream_, user_src, src_);
    memory user_wei(memory::desc(wei, dt::s8, tag::oihw), eng_,
                    const_cast<int8_t*>(weight_kcrs.data()));
    wei_ = memory(pd_.weights_desc(), eng_);
    dnnl::reorder(user_wei, wei_).execute(stream_, user_wei, wei_);
    dst_ = memory(pd_.dst_desc(), eng_);
    out_nhwc_.resize(static_cast<size_t>(n * k * oh * ow));
    user_dst_ = memory(memory::desc(dst, dt::u8, tag::nhwc), eng_, out_nhwc_.data());
    stream_.wait();
  }
  void Run() {
    conv_.execute(stream_, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, wei_}, {DNNL_ARG_DST, dst_}});
    stream_.wait();
  }
  // The last output in NHWC.
  const std::vector<uint8_t>& Output() {
    dnnl::reorder(dst_, user_dst_).execute(stream_, dst_, user_dst_);
    stream_.wait();
    return out_nhwc_;
  }
  std::string Implementation() const { return pd_.impl_info_str(); }

 private:
  dnnl::engine eng_;
  dnnl::stream stream_;
  dnnl::convolution_forward::primitive_desc pd_;
  dnnl::convolution_forward conv_;
  dnnl::memory src_, wei_, dst_, user_dst_;
  std::vector<uint8_t> out_nhwc_;
};

}  // namespace

static int BenchMain(int argc, char** argv) {
  CLI::App app{"crosstune-bench-kernels: tuned templates against OpenBLAS, same run"};
  std::string shape_text = "1024,1024,1024", tuner_name = "xgb", server_bin = CT_DEFAULT_SERVER;
  std::string log_path;
  int trials = 40, conv_trials = 60;
  // ResNet-50 layers as its compiled network runs them (blocked layout 1, conv_layout.h).
  std::vector<std::string> conv_layers = {"1,64,56,56,64,3,3,1,1,0,1,1",
                                          "1,128,56,56,128,3,3,2,1,0,1,1",
                                          "1,256,56,56,64,1,1,1,0,0,1,1"};
  // The same layers' convs in int8 (conv2d_int8: NHWC, zero points 0, ReLU), beside oneDNN's.
  std::vector<std::string> int8_layers = {"1,64,56,56,64,3,3,1,1,0,0,1",
                                          "1,256,56,56,64,1,1,1,0,0,0,1"};
  std::vector<int> thread_counts = {1, 2};
  app.add_option("--shape", shape_text, "matmul M,N,K")->capture_default_str();
  app.add_option("--trials", trials, "trials per task (the default config included)")
      ->capture_default_str();
  app.add_option("--threads", thread_counts, "thread counts to compare")->capture_default_str();
  app.add_option("--conv-trials", conv_trials, "trials per conv2d layer")->capture_default_str();
  app.add_option("--conv", conv_layers, "conv2d layers as conv2d's --shape (none: skip)")
      ->capture_default_str();
  app.add_option("--conv-int8", int8_layers,
                 "conv2d_int8 layers as conv2d_int8's --shape, zero points 0 (none: skip)")
      ->capture_default_str();
  app.add_option("--tuner", tuner_name, "search strategy")->capture_default_str();
  app.add_option("--log", log_path, "tuning records: appended, and reused by a later run");
  app.add_option("--server-bin", server_bin, "crosstune-server binary")->capture_default_str();
  double min_round_ms = 200;
  app.add_option("--min-round-ms", min_round_ms, "shortest timed round (median of --rounds)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 10000.0));
  std::string openblas_core;
  app.add_option("--openblas-core", openblas_core,
                 "OpenBLAS kernel family to compare with (e.g. Haswell, AVX2 only; default: the "
                 "best for this CPU)");
  app.add_option("--rounds", g_rounds, "timed rounds per measurement")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  g_min_round_s = min_round_ms / 1000;

  // oneDNN runs on OpenMP, whose runtime read OMP_NUM_THREADS when it loaded (before main), so
  // its thread count is set through the runtime itself: one thread, as ours run here.
  if (auto set = reinterpret_cast<void (*)(int)>(::dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) {
    set(1);
  } else {
    Die("cannot find omp_set_num_threads (oneDNN's OpenMP runtime)");
  }
  // OpenBLAS first, so that nothing else has touched its environment variables' effect.
  Blas blas = Blas::Open(openblas_core);

  auto builder = builder::Builder::Create({.workers = 1});
  if (!builder.ok()) Die(builder.status().ToString());
  const int max_threads = *std::max_element(thread_counts.begin(), thread_counts.end());
  client::LocalServer server;
  if (Status s = server.Start({server_bin, "--host", "127.0.0.1", "--port", "0", "--threads", "1",
                               "--max-threads", std::to_string(max_threads)},
                              std::chrono::seconds(30));
      !s.ok()) {
    Die(s.ToString());
  }
  client::ConnectOptions co;
  co.server = server.address();
  auto session = client::Session::Connect(co);
  if (!session.ok()) Die(session.status().ToString());
  auto info = (*session)->Info();
  (void)(*session)->Close();
  if (!info.ok()) Die(info.status().ToString());
  auto target = builder::TargetFromDevice(*info);
  if (!target.ok()) Die(target.status().ToString());
  tuner::DeviceSpec device;
  device.name = "local";
  device.server = server.address();
  device.request_timeout = std::chrono::seconds(300);

  std::string dir = std::filesystem::temp_directory_path() /
                    ("crosstune-bench-kernels-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  if (log_path.empty()) log_path = dir + "/records.jsonl";

  const std::vector<int64_t> shape = ShapeOrDie(shape_text);
  if (shape.size() != 3) Die("--shape takes M,N,K");
  const int64_t m = shape[0], n = shape[1], k = shape[2];
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);

  json out;
  out["target"] = target->ToString();
  out["cpu"] = info->cpu_model;
  out["openblas_kernel"] = blas.corename ? blas.corename() : "unknown";
  out["openblas_config"] = blas.config ? blas.config() : "unknown";
  out["tuner"] = tuner_name;
  out["trials_per_task"] = trials;
  out["log"] = log_path;

  // The two placements, one set of buffers each; inputs equal across placements.
  struct Placement {
    const char* name;
    size_t offsets[3];
  };
  const Placement placements[] = {{"same_4k_offset", {0, 0, 0}},
                                  {"staggered", {0, 1024 + 64, 2048 + 128}}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a_host(static_cast<size_t>(m * k)), b_host(static_cast<size_t>(k * n));
  for (float& x : a_host) x = dist(rng);
  for (float& x : b_host) x = dist(rng);

  json matmul = json::object();
  matmul["shape"] = shape;
  bool all_ok = true;
  for (int threads : thread_counts) {
    auto task = tuner::MakeTask("matmul", shape, *target, {.threads = threads});
    if (!task.ok()) Die(task.status().ToString());
    tuner::TuneOptions o;
    o.tuner = tuner_name;
    o.trials = trials;
    o.batch = 8;
    o.overlap = false;  // never compile while a kernel is timed: the two CPUs contend
    o.log_path = log_path;
    o.measure.timing.repeat = 3;
    o.measure.timing.min_repeat_ms = 50;
    auto summary = tuner::Tune(**task, {device}, **builder, o);
    json row;
    if (!summary.ok() || !summary->has_best) {
      row["error"] = summary.ok() ? "no config ran" : summary.status().ToString();
      matmul[std::to_string(threads) + "_threads"] = row;
      all_ok = false;
      continue;
    }
    row["trials_in_log"] = summary->trials_in_log;
    row["tuning_wall_s"] = summary->wall_s;
    row["best_config"] = summary->best.config_values;
    row["best_gflops_in_tuning"] = summary->best.gflops();

    // The tuned and the default kernels, built again and loaded here.
    const uint64_t best_index = summary->best.config_index;
    const uint64_t default_index = (*task)->DefaultConfig().index();
    tuner::MeasureOptions mo;
    auto built = tuner::BuildCandidates(**builder, **task, {best_index, default_index}, *info, mo);
    if (built.size() != 2 || built[0].error != tuner::TrialError::kOk ||
        built[1].error != tuner::TrialError::kOk) {
      row["error"] = "rebuilding the tuned or default config failed";
      matmul[std::to_string(threads) + "_threads"] = row;
      all_ok = false;
      continue;
    }
    server::ParallelPool pool(threads);
    pool.SetThreads(threads);
    LocalModule tuned(built[0].library, "matmul", &pool, dir, "tuned" + std::to_string(threads));
    LocalModule untuned(built[1].library, "matmul", &pool, dir,
                        "default" + std::to_string(threads));
    blas.set_threads(threads);

    for (const Placement& p : placements) {
      Buffer a(a_host.size(), p.offsets[0]), b(b_host.size(), p.offsets[1]),
          c(static_cast<size_t>(m * n), p.offsets[2]),
          c_blas(static_cast<size_t>(m * n), p.offsets[2]);
      std::copy(a_host.begin(), a_host.end(), a.data());
      std::copy(b_host.begin(), b_host.end(), b.data());
      Tensor2d ta(a.data(), m, k), tb(b.data(), k, n), tc(c.data(), m, n);
      std::vector<ct_arg> args = {TensorArg(&ta.t), TensorArg(&tb.t), TensorArg(&tc.t)};
      auto ours = [&] {
        if (tuned.Call(args) != 0) Die("the tuned kernel failed");
      };
      auto ours_default = [&] {
        if (untuned.Call(args) != 0) Die("the default kernel failed");
      };
      auto theirs = [&] {
        // Row-major C = A B: CblasRowMajor (101), no transposes (111).
        blas.sgemm(101, 111, 111, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                   1.0f, a.data(), static_cast<int>(k), b.data(), static_cast<int>(n), 0.0f,
                   c_blas.data(), static_cast<int>(n));
      };
      // Alternate the two, several times, and keep each one's median.
      std::vector<double> t_ours, t_blas;
      for (int rep = 0; rep < 3; ++rep) {
        t_ours.push_back(TimeCalls(ours));
        t_blas.push_back(TimeCalls(theirs));
      }
      std::sort(t_ours.begin(), t_ours.end());
      std::sort(t_blas.begin(), t_blas.end());
      double s_ours = t_ours[1], s_blas = t_blas[1];
      double s_default = TimeCalls(ours_default, std::min(g_rounds, 3));
      // Both answers agree (the tuned one was checked against the reference while tuning).
      ours();
      theirs();
      double max_diff = 0;
      for (size_t i = 0; i < c.size(); ++i) {
        max_diff =
            std::max(max_diff, static_cast<double>(std::fabs(c.data()[i] - c_blas.data()[i])));
      }
      // And both agree with a double-precision reference on the first rows.
      double err_ours = 0, err_blas = 0;
      for (int64_t i = 0; i < std::min<int64_t>(m, 4); ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double ref = 0;
          for (int64_t p = 0; p < k; ++p) {
            ref += static_cast<double>(a_host[i * k + p]) * b_host[p * n + j];
          }
          err_ours = std::max(err_ours, std::fabs(c.data()[i * n + j] - ref));
          err_blas = std::max(err_blas, std::fabs(c_blas.data()[i * n + j] - ref));
        }
      }
      json cell;
      cell["max_abs_err_first_rows"] = {{"tuned", err_ours}, {"openblas", err_blas}};
      cell["tuned_gflops"] = flops / s_ours / 1e9;
      cell["openblas_gflops"] = flops / s_blas / 1e9;
      cell["tuned_over_openblas"] = s_blas / s_ours;
      cell["default_gflops"] = flops / s_default / 1e9;
      cell["max_abs_diff_vs_openblas"] = max_diff;
      row[p.name] = cell;
    }
    matmul[std::to_string(threads) + "_threads"] = row;
  }
  out["matmul"] = matmul;

  // A conv layer's task tuned on the local server (serially), and its best and default configs
  // built again: the two candidates, or none with the row's error set.
  auto tune_layer =
      [&](const std::string& name, const std::string& layer,
          json& row) -> std::pair<std::unique_ptr<tuner::Task>, std::vector<tuner::Candidate>> {
    row["shape"] = layer;
    auto task = tuner::MakeTask(name, ShapeOrDie(layer), *target);
    if (!task.ok()) {
      row["error"] = task.status().ToString();
      return {};
    }
    tuner::TuneOptions o;
    o.tuner = tuner_name;
    o.trials = conv_trials;
    o.batch = 8;
    o.overlap = false;
    o.log_path = log_path;
    o.transfer_logs = {log_path};
    o.measure.timing.repeat = 3;
    o.measure.timing.min_repeat_ms = 50;
    auto summary = tuner::Tune(**task, {device}, **builder, o);
    if (!summary.ok() || !summary->has_best) {
      row["error"] = summary.ok() ? "no config ran" : summary.status().ToString();
      return {};
    }
    row["trials_in_log"] = summary->trials_in_log;
    row["tuning_wall_s"] = summary->wall_s;
    row["best_config"] = summary->best.config_values;
    tuner::MeasureOptions mo;
    auto built = tuner::BuildCandidates(
        **builder, **task, {summary->best.config_index, (*task)->DefaultConfig().index()}, *info,
        mo);
    if (built.size() != 2 || built[0].error != tuner::TrialError::kOk ||
        built[1].error != tuner::TrialError::kOk) {
      row["error"] = "rebuilding the tuned or default config failed";
      return {};
    }
    return {std::move(task).value(), std::move(built)};
  };

  // ResNet-50 convolutions, 1 thread: tuned and default against oneDNN, alternating.
  json convs = json::array();
  for (const std::string& layer : conv_layers) {
    if (layer.empty() || layer == "none") continue;
    json row;
    auto [task, built] = tune_layer("conv2d", layer, row);
    if (!task) {
      convs.push_back(row);
      all_ok = false;
      continue;
    }
    server::ParallelPool pool(1);
    LocalModule tuned(built[0].library, task->function(), &pool, dir, "conv_tuned");
    LocalModule untuned(built[1].library, task->function(), &pool, dir, "conv_default");
    TaskArgs args(*task, 11);
    const int64_t cb = tuner::BlockedChannels(*target);
    // oneDNN keeps a pointer to the bias: its inputs live as long as it does.
    const tuner::HostArgs nchw_inputs = NchwInputs(ShapeOrDie(layer), args.data, cb);
    OneDnnConv theirs(ShapeOrDie(layer), nchw_inputs);
    auto ours = [&] {
      if (tuned.Call(args.args) != 0) Die("the tuned conv2d failed");
    };
    auto ours_default = [&] {
      if (untuned.Call(args.args) != 0) Die("the default conv2d failed");
    };
    std::vector<double> t_ours, t_dnnl;
    for (int rep = 0; rep < 3; ++rep) {
      t_ours.push_back(TimeCalls(ours));
      t_dnnl.push_back(TimeCalls([&] { theirs.Run(); }));
    }
    std::sort(t_ours.begin(), t_ours.end());
    std::sort(t_dnnl.begin(), t_dnnl.end());
    const double s_default = TimeCalls(ours_default, std::min(g_rounds, 3));
    // The answers agree.
    ours();
    theirs.Run();
    const std::vector<float>& want = theirs.Output();
    const std::vector<float> got = NchwInputs(ShapeOrDie(layer), args.data, cb).back();
    double max_diff = 0;
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
      max_diff = std::max(max_diff, static_cast<double>(std::fabs(got[i] - want[i])));
    }
    const double f = task->flops();
    row["tuned_gflops"] = f / t_ours[1] / 1e9;
    row["onednn_gflops"] = f / t_dnnl[1] / 1e9;
    row["tuned_over_onednn"] = t_dnnl[1] / t_ours[1];
    row["default_gflops"] = f / s_default / 1e9;
    row["onednn_implementation"] = theirs.Implementation();
    if (auto get = reinterpret_cast<int (*)()>(::dlsym(RTLD_DEFAULT, "omp_get_max_threads"))) {
      row["onednn_threads"] = get();
    }
    row["max_abs_diff_vs_onednn"] = max_diff;
    convs.push_back(row);
  }
  out["conv2d_1_thread"] = convs;

  // int8 convolutions, 1 thread: tuned and default against oneDNN's int8 conv, alternating.
  json int8_convs = json::array();
  for (const std::string& layer : int8_layers) {
    if (layer.empty() || layer == "none") continue;
    json row;
    const std::vector<int64_t> int8_shape = ShapeOrDie(layer);
    if ((int8_shape.size() > 9 && int8_shape[9] != 0) ||
        (int8_shape.size() > 10 && int8_shape[10] != 0)) {
      row["shape"] = layer;
      row["error"] = "oneDNN's side here takes zero points 0";
      int8_convs.push_back(row);
      all_ok = false;
      continue;
    }
    auto [task, built] = tune_layer("conv2d_int8", layer, row);
    if (!task) {
      int8_convs.push_back(row);
      all_ok = false;
      continue;
    }
    server::ParallelPool pool(1);
    LocalModule tuned(built[0].library, task->function(), &pool, dir, "int8_tuned");
    LocalModule untuned(built[1].library, task->function(), &pool, dir, "int8_default");
    tuner::HostArgs values = tuner::MakeInputs(*task, 11);
    std::fill(values[2].begin(), values[2].end(), 0.0f);  // no bias (OneDnnConvInt8)
    // Weights of 7 bits ([-64, 63]): oneDNN's AVX2 and AVX-512 (no VNNI) int8 kernels add pairs of
    // products in 16 bits (vpmaddubsw), which saturate with full-range weights (our kernel's sums
    // are exact either way); quantizers keep weights to 7 bits for them (onnxruntime's
    // reduce_range).
    for (float& w : values[1]) w = std::floor(w / 2);
    TaskArgs args(*task, std::move(values));
    const auto specs = task->args();
    const std::vector<int8_t> kcrs = tuner::UnpackInt8Weight(
        std::vector<int8_t>(args.data[1].begin(), args.data[1].end()), int8_shape[4], int8_shape[1],
        int8_shape[5], int8_shape[6], specs[1].shape[4]);
    OneDnnConvInt8 theirs(int8_shape, args.bytes[0], kcrs, args.data[3]);
    auto ours = [&] {
      if (tuned.Call(args.args) != 0) Die("the tuned conv2d_int8 failed");
    };
    auto ours_default = [&] {
      if (untuned.Call(args.args) != 0) Die("the default conv2d_int8 failed");
    };
    std::vector<double> t_ours, t_dnnl;
    for (int rep = 0; rep < 3; ++rep) {
      t_ours.push_back(TimeCalls(ours));
      t_dnnl.push_back(TimeCalls([&] { theirs.Run(); }));
    }
    std::sort(t_ours.begin(), t_ours.end());
    std::sort(t_dnnl.begin(), t_dnnl.end());
    const double s_default = TimeCalls(ours_default, std::min(g_rounds, 3));
    // The answers agree: within one quantization step where oneDNN rounds as we do (AVX2's
    // int8 path may halve the weights to keep its 16-bit sums from saturating).
    ours();
    theirs.Run();
    const std::vector<uint8_t>& want = theirs.Output();
    const std::vector<uint8_t>& got = args.bytes.back();
    int max_diff = 0;
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
      max_diff = std::max(max_diff, std::abs(static_cast<int>(got[i]) - want[i]));
    }
    const double f = task->flops();
    row["tuned_gops"] = f / t_ours[1] / 1e9;
    row["onednn_gops"] = f / t_dnnl[1] / 1e9;
    row["tuned_over_onednn"] = t_dnnl[1] / t_ours[1];
    row["default_gops"] = f / s_default / 1e9;
    row["onednn_implementation"] = theirs.Implementation();
    row["max_abs_diff_vs_onednn"] = max_diff;
    int8_convs.push_back(row);
  }
  out["conv2d_int8_1_thread"] = int8_convs;
  out["targets"] = {{"matmul_tuned_over_openblas_at_least", 1.0},
                    {"conv2d_tuned_over_onednn_at_least", 0.9}};
  std::error_code ec;
  if (log_path.rfind(dir, 0) == 0) std::filesystem::remove_all(dir, ec);
  std::printf("%s\n", out.dump(2).c_str());
  return all_ok ? 0 : 1;
}

int main(int argc, char** argv) {
  return crosstune::GuardedMain("crosstune-bench-kernels", [&] { return BenchMain(argc, argv); });
}
