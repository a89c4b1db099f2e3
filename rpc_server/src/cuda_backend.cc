#include "cuda_backend.h"

#include <dlfcn.h>

#include <cstring>
#include <fstream>
#include <mutex>
#include <vector>

namespace crosstune::server {
namespace {

// The few driver API types and entry points used, declared here so nothing links against CUDA.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
constexpr int kComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kComputeCapabilityMinor = 76;

struct Driver {
  void* lib = nullptr;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, void*, void**, void**) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  int sm = 0;  // compute capability of device 0, e.g. 90
};

Driver g_driver;
Status g_init_status = Status(ErrorCode::kNoDevice, "CUDA not initialized");
std::once_flag g_once;

// The one checking helper for driver calls: names the call and the driver's text for the code.
Status Check(CUresult r, const char* what) {
  if (r == 0) return Status::Ok();
  const char* text = nullptr;
  if (g_driver.cuGetErrorString) g_driver.cuGetErrorString(r, &text);
  return Status(ErrorCode::kInternal, std::string(what) + " failed: " +
                                          (text ? text : "CUDA error " + std::to_string(r)));
}

template <typename Fn>
bool Sym(void* lib, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(::dlsym(lib, name));
  return *out != nullptr;
}

Status DoInit() {
  Driver& d = g_driver;
  d.lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (d.lib == nullptr) {
    const char* e = ::dlerror();
    return Status(ErrorCode::kNoDevice,
                  std::string("no CUDA driver (") + (e ? e : "libcuda.so.1") + ")");
  }
  bool ok = Sym(d.lib, "cuInit", &d.cuInit) && Sym(d.lib, "cuDeviceGet", &d.cuDeviceGet) &&
            Sym(d.lib, "cuDeviceGetAttribute", &d.cuDeviceGetAttribute) &&
            Sym(d.lib, "cuDevicePrimaryCtxRetain", &d.cuDevicePrimaryCtxRetain) &&
            Sym(d.lib, "cuCtxSetCurrent", &d.cuCtxSetCurrent) &&
            Sym(d.lib, "cuCtxSynchronize", &d.cuCtxSynchronize) &&
            Sym(d.lib, "cuModuleLoadData", &d.cuModuleLoadData) &&
            Sym(d.lib, "cuModuleUnload", &d.cuModuleUnload) &&
            Sym(d.lib, "cuModuleGetFunction", &d.cuModuleGetFunction) &&
            Sym(d.lib, "cuLaunchKernel", &d.cuLaunchKernel) &&
            Sym(d.lib, "cuMemAlloc_v2", &d.cuMemAlloc) &&
            Sym(d.lib, "cuMemFree_v2", &d.cuMemFree) &&
            Sym(d.lib, "cuMemcpyHtoD_v2", &d.cuMemcpyHtoD) &&
            Sym(d.lib, "cuMemcpyDtoH_v2", &d.cuMemcpyDtoH) &&
            Sym(d.lib, "cuGetErrorString", &d.cuGetErrorString);
  if (!ok) return Status(ErrorCode::kNoDevice, "CUDA driver lacks the driver API entry points");
  if (d.cuInit(0) != 0) return Status(ErrorCode::kNoDevice, "cuInit failed: no usable GPU");
  CUdevice dev = 0;
  if (d.cuDeviceGet(&dev, 0) != 0) return Status(ErrorCode::kNoDevice, "no CUDA devices");
  int major = 0, minor = 0;
  CT_RETURN_IF_ERROR(
      Check(d.cuDeviceGetAttribute(&major, kComputeCapabilityMajor, dev), "cuDeviceGetAttribute"));
  CT_RETURN_IF_ERROR(
      Check(d.cuDeviceGetAttribute(&minor, kComputeCapabilityMinor, dev), "cuDeviceGetAttribute"));
  d.sm = major * 10 + minor;
  CUcontext ctx = nullptr;
  CT_RETURN_IF_ERROR(Check(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain"));
  return Check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
}

Expected<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(ErrorCode::kIoError, path + ": cannot open");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

class CudaModule final : public Module {
 public:
  CudaModule(CUmodule mod, std::string target, std::vector<pkg::Function> fns,
             std::vector<CUfunction> handles)
      : mod_(mod), target_(std::move(target)), fns_(std::move(fns)), handles_(std::move(handles)) {
    for (const auto& f : fns_) infos_.push_back({f.name, f.signature});
  }
  ~CudaModule() override {
    if (mod_) g_driver.cuModuleUnload(mod_);
  }
  std::string_view kind() const override { return "cuda"; }
  const std::string& target() const override { return target_; }
  const std::vector<msg::FunctionInfo>& functions() const override { return infos_; }
  std::string LastError() const override { return last_error_; }

  Status Invoke(size_t index, const ct_arg* args, int32_t num_args, uint64_t times,
                int32_t* ret) override {
    *ret = 0;
    const pkg::Function& f = fns_[index];
    unsigned dims[6];
    for (int i = 0; i < 3; ++i) {
      CT_ASSIGN_OR_RETURN(
          dims[i], EvalLaunchDim(f.grid.size() > size_t(i) ? f.grid[i] : "1", args, num_args));
      CT_ASSIGN_OR_RETURN(dims[3 + i], EvalLaunchDim(f.block.size() > size_t(i) ? f.block[i] : "1",
                                                     args, num_args));
    }
    // Kernel parameters: a device pointer per tensor, int64 and double as they are.
    slots_.assign(static_cast<size_t>(num_args), 0);
    params_.assign(static_cast<size_t>(num_args), nullptr);
    for (int32_t i = 0; i < num_args; ++i) {
      if (args[i].kind == CT_ARG_TENSOR) {
        const DLTensor* t = args[i].value.v_tensor;
        if (t->device.device_type != kDLCUDA) {
          return Status(ErrorCode::kInvalidArgument,
                        f.name + ": argument " + std::to_string(i) +
                            " is a host tensor; CUDA kernels take tensors allocated on kDLCUDA");
        }
        CUdeviceptr p = reinterpret_cast<CUdeviceptr>(t->data) + t->byte_offset;
        static_assert(sizeof(p) == sizeof(uint64_t));
        std::memcpy(&slots_[static_cast<size_t>(i)], &p, sizeof(p));
      } else if (args[i].kind == CT_ARG_INT64) {
        std::memcpy(&slots_[static_cast<size_t>(i)], &args[i].value.v_int64, 8);
      } else {
        std::memcpy(&slots_[static_cast<size_t>(i)], &args[i].value.v_float64, 8);
      }
      params_[static_cast<size_t>(i)] = &slots_[static_cast<size_t>(i)];
    }
    for (uint64_t n = 0; n < times; ++n) {
      CT_RETURN_IF_ERROR(Check(
          g_driver.cuLaunchKernel(handles_[index], dims[0], dims[1], dims[2], dims[3], dims[4],
                                  dims[5], f.shared_mem_bytes, nullptr, params_.data(), nullptr),
          "cuLaunchKernel"));
    }
    return Check(g_driver.cuCtxSynchronize(), "cuCtxSynchronize");
  }

 private:
  CUmodule mod_;
  std::string target_;
  std::vector<pkg::Function> fns_;
  std::vector<CUfunction> handles_;
  std::vector<msg::FunctionInfo> infos_;
  std::vector<uint64_t> slots_;
  std::vector<void*> params_;
  std::string last_error_;
};

}  // namespace

Status CudaInit() {
  std::call_once(g_once, [] { g_init_status = DoInit(); });
  return g_init_status;
}

Expected<uint32_t> EvalLaunchDim(const std::string& dim, const ct_arg* args, int32_t num_args) {
  auto bad = [&] {
    return Status(ErrorCode::kInvalidArgument, "bad launch dimension '" + dim + "'");
  };
  if (dim.empty()) return bad();
  try {
    if (dim[0] != 'a') return static_cast<uint32_t>(std::stoul(dim));
    size_t slash = dim.find('/');
    int k = std::stoi(dim.substr(1, slash == std::string::npos ? std::string::npos : slash - 1));
    if (k < 0 || k >= num_args || args[k].kind != CT_ARG_INT64) return bad();
    int64_t v = args[k].value.v_int64;
    int64_t div = slash == std::string::npos ? 1 : std::stoll(dim.substr(slash + 1));
    if (v < 0 || div <= 0) return bad();
    int64_t r = (v + div - 1) / div;
    if (r > 0x7fffffff)
      return Status(ErrorCode::kInvalidArgument, "launch dimension '" + dim + "' is too large");
    return static_cast<uint32_t>(r < 1 ? 1 : r);
  } catch (...) {
    return bad();
  }
}

Expected<std::unique_ptr<Module>> LoadCudaModule(const pkg::Manifest& m, const std::string& dir) {
  CT_RETURN_IF_ERROR(CudaInit());
  int want = std::stoi(m.arch.substr(3));
  // The cubin runs on its own major at the same or a later minor; otherwise the PTX is
  // JIT-compiled.
  bool use_cubin = g_driver.sm / 10 == want / 10 && g_driver.sm >= want;
  std::string path = dir + "/" + (use_cubin || m.ptx.empty() ? m.library : m.ptx);
  CT_ASSIGN_OR_RETURN(std::string image, ReadFile(path));
  if (!use_cubin) image.push_back('\0');  // PTX is loaded as a C string
  CUmodule mod = nullptr;
  CT_RETURN_IF_ERROR(Check(g_driver.cuModuleLoadData(&mod, image.data()), "cuModuleLoadData"));
  std::vector<CUfunction> handles;
  for (const pkg::Function& f : m.functions) {
    CUfunction fn = nullptr;
    Status st = Check(g_driver.cuModuleGetFunction(
                          &fn, mod, f.symbol.empty() ? f.name.c_str() : f.symbol.c_str()),
                      "cuModuleGetFunction");
    if (!st.ok()) {
      g_driver.cuModuleUnload(mod);
      return st;
    }
    handles.push_back(fn);
  }
  return std::unique_ptr<Module>(
      std::make_unique<CudaModule>(mod, m.target, m.functions, std::move(handles)));
}

Expected<void*> CudaAlloc(uint64_t nbytes) {
  CT_RETURN_IF_ERROR(CudaInit());
  CUdeviceptr p = 0;
  CT_RETURN_IF_ERROR(Check(g_driver.cuMemAlloc(&p, nbytes), "cuMemAlloc"));
  return reinterpret_cast<void*>(p);
}

void CudaFree(void* p) {
  if (p != nullptr && CudaInit().ok()) g_driver.cuMemFree(reinterpret_cast<CUdeviceptr>(p));
}

Status CudaCopyToDevice(void* dst, const void* src, uint64_t n) {
  CT_RETURN_IF_ERROR(CudaInit());
  return Check(g_driver.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(dst), src, n), "cuMemcpyHtoD");
}

Status CudaCopyToHost(void* dst, const void* src, uint64_t n) {
  CT_RETURN_IF_ERROR(CudaInit());
  return Check(g_driver.cuMemcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(src), n), "cuMemcpyDtoH");
}

}  // namespace crosstune::server
