// CUDA kernels: NVRTC compiles CUDA C to a cubin for one sm_XX (and to PTX for later GPUs). No GPU
// or driver is needed to build.
#include <mutex>
#include <regex>
#include <sstream>

#include "crosstune/builder/compiler.h"

#ifdef CROSSTUNE_HAVE_NVRTC
#include <dlfcn.h>
#include <nvrtc.h>

#include <filesystem>
#endif

namespace crosstune::builder {
namespace {

Status BuildError(std::string text) { return Status(ErrorCode::kBuildError, std::move(text)); }

// "a3/256", "a3", "256".
bool ValidDim(const std::string& d) {
  static const std::regex kDim(R"(^(\d+|a\d+(/\d+)?)$)");
  return std::regex_match(d, kDim) && d != "0";
}

Expected<std::vector<std::string>> ParseDims(const std::string& spec, const std::string& what,
                                             const std::string& kernel, size_t num_args) {
  std::vector<std::string> dims;
  std::stringstream ss(spec);
  std::string d;
  while (std::getline(ss, d, ',')) dims.push_back(d);
  if (dims.empty() || dims.size() > 3) {
    return Status(ErrorCode::kInvalidArgument,
                  "kernel " + kernel + ": " + what + " takes 1 to 3 dims, got '" + spec + "'");
  }
  for (const std::string& x : dims) {
    if (!ValidDim(x)) {
      return Status(ErrorCode::kInvalidArgument,
                    "kernel " + kernel + ": " + what + " dim '" + x +
                        "' is not a number, aK or aK/N (K: an int argument's index)");
    }
    if (x[0] == 'a') {
      size_t k = std::stoul(x.substr(1));
      if (k >= num_args) {
        return Status(ErrorCode::kInvalidArgument,
                      "kernel " + kernel + ": " + what + " dim '" + x + "' names argument " +
                          std::to_string(k) + ", the kernel has " + std::to_string(num_args));
      }
    }
  }
  while (dims.size() < 3) dims.push_back("1");
  return dims;
}

#ifdef CROSSTUNE_HAVE_NVRTC
std::mutex g_nvrtc_mutex;

// The one checking helper for NVRTC calls.
Status NvrtcCheck(nvrtcResult r, const char* what) {
  if (r == NVRTC_SUCCESS) return Status::Ok();
  return BuildError(std::string("NVRTC ") + what + ": " + nvrtcGetErrorString(r));
}

struct Program {
  nvrtcProgram prog = nullptr;
  ~Program() {
    if (prog != nullptr) nvrtcDestroyProgram(&prog);
  }
};

std::string ProgramLog(nvrtcProgram prog) {
  size_t n = 0;
  if (nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n <= 1) return "";
  std::string log(n, '\0');
  nvrtcGetProgramLog(prog, log.data());
  log.resize(n - 1);
  return log;
}

// One NVRTC compilation; `arch` is sm_XX for a cubin or compute_XX for PTX.
Status RunNvrtc(const std::string& source, const std::string& file_name, const std::string& arch,
                const std::vector<std::string>& flags, std::vector<pkg::Function>* functions,
                std::string* binary, std::string* log) {
  Program p;
  CT_RETURN_IF_ERROR(NvrtcCheck(
      nvrtcCreateProgram(&p.prog, source.c_str(), file_name.c_str(), 0, nullptr, nullptr),
      "create"));
  for (const pkg::Function& f : *functions) {
    CT_RETURN_IF_ERROR(NvrtcCheck(nvrtcAddNameExpression(p.prog, f.name.c_str()), "name"));
  }
  std::vector<std::string> opts = {"--gpu-architecture=" + arch, "--std=c++17", "-default-device"};
  opts.insert(opts.end(), flags.begin(), flags.end());
  std::vector<const char*> copts;
  for (const auto& o : opts) copts.push_back(o.c_str());
  nvrtcResult r = nvrtcCompileProgram(p.prog, static_cast<int>(copts.size()), copts.data());
  *log = ProgramLog(p.prog);
  if (r != NVRTC_SUCCESS) {
    return BuildError(log->empty() ? std::string("NVRTC: ") + nvrtcGetErrorString(r) : *log);
  }
  for (pkg::Function& f : *functions) {
    const char* lowered = nullptr;
    if (nvrtcGetLoweredName(p.prog, f.name.c_str(), &lowered) != NVRTC_SUCCESS || !lowered) {
      return BuildError("kernel '" + f.name + "' is annotated but not defined as __global__");
    }
    f.symbol = lowered;
  }
  size_t n = 0;
  if (arch.rfind("sm_", 0) == 0) {
    CT_RETURN_IF_ERROR(NvrtcCheck(nvrtcGetCUBINSize(p.prog, &n), "cubin size"));
    binary->assign(n, '\0');
    CT_RETURN_IF_ERROR(NvrtcCheck(nvrtcGetCUBIN(p.prog, binary->data()), "cubin"));
  } else {
    CT_RETURN_IF_ERROR(NvrtcCheck(nvrtcGetPTXSize(p.prog, &n), "ptx size"));
    binary->assign(n, '\0');
    CT_RETURN_IF_ERROR(NvrtcCheck(nvrtcGetPTX(p.prog, binary->data()), "ptx"));
    if (!binary->empty() && binary->back() == '\0') binary->pop_back();
  }
  return Status::Ok();
}
#endif

}  // namespace

Expected<std::vector<pkg::Function>> ParseCudaKernelAnnotations(const std::string& source) {
  static const std::regex kLine(
      R"(//\s*crosstune:\s*kernel\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(([tif]*)\)\s*(.*))");
  std::vector<pkg::Function> out;
  std::stringstream ss(source);
  std::string line;
  int lineno = 0;
  while (std::getline(ss, line)) {
    ++lineno;
    if (line.find("crosstune:") == std::string::npos) continue;
    std::smatch m;
    if (!std::regex_search(line, m, kLine)) {
      return Status(
          ErrorCode::kInvalidArgument,
          "kernel.cu:" + std::to_string(lineno) +
              ": malformed annotation (want: // crosstune: kernel NAME(SIG) grid=... block=...)");
    }
    pkg::Function f;
    f.name = m[1];
    f.signature = m[2];
    std::stringstream rest(m[3].str());
    std::string kv;
    std::string grid = "1", block;
    while (rest >> kv) {
      size_t eq = kv.find('=');
      std::string key = kv.substr(0, eq), val = eq == std::string::npos ? "" : kv.substr(eq + 1);
      if (key == "grid") {
        grid = val;
      } else if (key == "block") {
        block = val;
      } else if (key == "shared") {
        try {
          f.shared_mem_bytes = static_cast<uint32_t>(std::stoul(val));
        } catch (...) {
          return Status(ErrorCode::kInvalidArgument, "kernel " + f.name + ": shared= needs bytes");
        }
      } else {
        return Status(ErrorCode::kInvalidArgument, "kernel " + f.name +
                                                       ": unknown annotation key '" + key +
                                                       "' (valid: grid block shared)");
      }
    }
    if (block.empty()) {
      return Status(ErrorCode::kInvalidArgument, "kernel " + f.name + ": block= is required");
    }
    CT_ASSIGN_OR_RETURN(f.grid, ParseDims(grid, "grid", f.name, f.signature.size()));
    CT_ASSIGN_OR_RETURN(f.block, ParseDims(block, "block", f.name, f.signature.size()));
    for (const auto& d : f.grid) {
      if (d[0] == 'a' && f.signature[std::stoul(d.substr(1, d.find('/') - 1))] != 'i') {
        return Status(ErrorCode::kInvalidArgument,
                      "kernel " + f.name + ": grid dim '" + d + "' must name an int (i) argument");
      }
    }
    out.push_back(std::move(f));
  }
  if (out.empty()) {
    return Status(ErrorCode::kInvalidArgument,
                  "no kernels declared: add a line like // crosstune: kernel vadd(ttti) "
                  "grid=a3/256 block=256");
  }
  return out;
}

#ifdef CROSSTUNE_HAVE_NVRTC
bool HasNvrtc() { return true; }

std::string NvrtcLibraryDir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  std::error_code ec;
  const std::filesystem::path lib = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? "" : lib.parent_path().string();
}

void PreloadNvrtcBuiltins() {
  // NVRTC dlopens its builtins by name at the first compile; the dynamic loader then needs
  // /etc/ld.so.cache and the system's library folders, which a confined process cannot read. Once
  // loaded, that dlopen finds the library by its soname without opening a file.
  const std::string dir = NvrtcLibraryDir();
  if (dir.empty()) return;
  static void* handle =
      ::dlopen((dir + "/libnvrtc-builtins.so." + NvrtcVersion()).c_str(), RTLD_NOW | RTLD_LOCAL);
  (void)handle;
}

std::string NvrtcVersion() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "";
  return std::to_string(major) + "." + std::to_string(minor);
}

Expected<CompileOutput> CompileCuda(const std::string& source, const Target& target,
                                    const std::vector<std::string>& flags,
                                    const std::string& file_name) {
  if (target.kind != TargetKind::kCuda)
    return Status(ErrorCode::kInvalidArgument, "CompileCuda needs a cuda target");
  for (const std::string& f : flags) {
    if (f.rfind("-D", 0) != 0 && f.rfind("-U", 0) != 0 && f != "--use_fast_math" &&
        f != "-lineinfo") {
      return Status(ErrorCode::kInvalidArgument,
                    "unsupported NVRTC flag '" + f +
                        "' (allowed: -DNAME[=V] -UNAME --use_fast_math -lineinfo)");
    }
  }
  CompileOutput out;
  CT_ASSIGN_OR_RETURN(out.functions, ParseCudaKernelAnnotations(source));
  std::lock_guard<std::mutex> lock(g_nvrtc_mutex);
  std::string log;
  CT_RETURN_IF_ERROR(
      RunNvrtc(source, file_name, target.cuda_arch, flags, &out.functions, &out.library, &log));
  out.diagnostics = log;
  std::string compute = "compute_" + target.cuda_arch.substr(3);
  std::vector<pkg::Function> ptx_fns = out.functions;
  CT_RETURN_IF_ERROR(RunNvrtc(source, file_name, compute, flags, &ptx_fns, &out.ptx, &log));
  return out;
}
#else
bool HasNvrtc() { return false; }
std::string NvrtcLibraryDir() { return ""; }
void PreloadNvrtcBuiltins() {}
std::string NvrtcVersion() { return ""; }
Expected<CompileOutput> CompileCuda(const std::string&, const Target&,
                                    const std::vector<std::string>&, const std::string&) {
  return Status(ErrorCode::kBuildError,
                "this crosstune was built without NVRTC (CUDA toolkit not found)");
}
#endif

}  // namespace crosstune::builder
