#include "crosstune/server/device_info.h"

#include <dlfcn.h>
#include <sys/auxv.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <msgpack.hpp>
#include <sstream>

#include "crosstune/cpus.h"
#include "crosstune/wire.h"

namespace crosstune::server {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The value of the first "key : value" line of /proc/cpuinfo whose key is `key` (unused where
// nothing of the CPU is read from there, e.g. riscv64).
[[maybe_unused]] std::string CpuInfoField(const std::string& key) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (Trim(line.substr(0, colon)) == key) return Trim(line.substr(colon + 1));
  }
  return "";
}

[[maybe_unused]] std::string ArmCpuName(const std::string& part) {
  static const std::map<std::string, std::string> kParts = {
      {"0xd03", "cortex-a53"}, {"0xd04", "cortex-a35"},  {"0xd05", "cortex-a55"},
      {"0xd07", "cortex-a57"}, {"0xd08", "cortex-a72"},  {"0xd09", "cortex-a73"},
      {"0xd0a", "cortex-a75"}, {"0xd0b", "cortex-a76"},  {"0xd0c", "neoverse-n1"},
      {"0xd0d", "cortex-a77"}, {"0xd40", "neoverse-v1"}, {"0xd41", "cortex-a78"},
      {"0xd44", "cortex-x1"},  {"0xd46", "cortex-a510"}, {"0xd47", "cortex-a710"},
      {"0xd48", "cortex-x2"},  {"0xd49", "neoverse-n2"}, {"0xd4f", "neoverse-v2"},
      {"0xc07", "cortex-a7"},  {"0xc09", "cortex-a9"},   {"0xc0f", "cortex-a15"},
  };
  auto it = kParts.find(part);
  return it == kParts.end() ? "" : it->second;
}

std::string Arch() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__i386__)
  return "i686";
#elif defined(__aarch64__)
  return "aarch64";
#elif defined(__arm__)
  return "armv7l";
#elif defined(__riscv) && __riscv_xlen == 64
  return "riscv64";
#else
  struct utsname u;
  return ::uname(&u) == 0 ? u.machine : "unknown";
#endif
}

std::string Triple() {
#if defined(__x86_64__)
  return "x86_64-linux-gnu";
#elif defined(__i386__)
  return "i686-linux-gnu";
#elif defined(__aarch64__)
  return "aarch64-linux-gnu";
#elif defined(__arm__) && defined(__ARM_PCS_VFP)
  return "armv7-linux-gnueabihf";
#elif defined(__arm__)
  return "arm-linux-gnueabi";
#elif defined(__riscv) && __riscv_xlen == 64
  return "riscv64-linux-gnu";
#else
  return Arch() + "-linux-gnu";
#endif
}

void CpuModelAndFeatures(msg::DeviceInfo* info) {
#if defined(__x86_64__) || defined(__i386__)
  info->cpu_model = CpuInfoField("model name");
  info->cpu_features = X86FlagsToLlvmFeatures(CpuInfoField("flags"));
#elif defined(__aarch64__)
  std::string name = ArmCpuName(CpuInfoField("CPU part"));
  info->cpu_model = name.empty() ? "generic" : name;
  unsigned long hw = ::getauxval(AT_HWCAP);
  unsigned long hw2 = ::getauxval(AT_HWCAP2);
  // Bit numbers from the kernel's arch/arm64/include/uapi/asm/hwcap.h.
  struct Bit {
    unsigned long mask;
    bool second;
    const char* name;
  };
  static const Bit kBits[] = {
      {1ul << 0, false, "fp-armv8"}, {1ul << 1, false, "neon"}, {1ul << 3, false, "aes"},
      {1ul << 5, false, "sha2"},     {1ul << 7, false, "crc"},  {1ul << 8, false, "lse"},
      {1ul << 9, false, "fullfp16"}, {1ul << 12, false, "rdm"}, {1ul << 14, false, "rcpc"},
      {1ul << 17, false, "sha3"},    {1ul << 19, false, "sm4"}, {1ul << 20, false, "dotprod"},
      {1ul << 22, false, "sve"},     {1ul << 1, true, "sve2"},  {1ul << 13, true, "i8mm"},
      {1ul << 14, true, "bf16"},
  };
  for (const Bit& b : kBits) {
    if ((b.second ? hw2 : hw) & b.mask) info->cpu_features.push_back(b.name);
  }
#elif defined(__arm__)
  std::string name = ArmCpuName(CpuInfoField("CPU part"));
  info->cpu_model = name.empty() ? "generic" : name;
  unsigned long hw = ::getauxval(AT_HWCAP);
  // arch/arm/include/uapi/asm/hwcap.h.
  if (hw & (1ul << 12)) info->cpu_features.push_back("neon");
  if (hw & (1ul << 13)) info->cpu_features.push_back("vfp3");
  if (hw & (1ul << 16)) info->cpu_features.push_back("vfp4");
  if (hw & (1ul << 17)) info->cpu_features.push_back("hwdiv");
#else
  info->cpu_model = "generic";
#endif
}

std::string OsName() {
  struct utsname u;
  if (::uname(&u) != 0) return "unknown";
  return std::string(u.sysname) + " " + u.release;
}

// The CUDA driver API, the few entry points Info needs, resolved with dlsym.
void CollectGpus(msg::DeviceInfo* info) {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    info->gpu_status = "no CUDA driver";
    return;
  }
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  using GetFn = int (*)(int*, int);
  using NameFn = int (*)(char*, int, int);
  using MemFn = int (*)(size_t*, int);
  using AttrFn = int (*)(int*, int, int);
  auto init = reinterpret_cast<InitFn>(::dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(::dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<GetFn>(::dlsym(lib, "cuDeviceGet"));
  auto name = reinterpret_cast<NameFn>(::dlsym(lib, "cuDeviceGetName"));
  auto mem = reinterpret_cast<MemFn>(::dlsym(lib, "cuDeviceTotalMem_v2"));
  auto attr = reinterpret_cast<AttrFn>(::dlsym(lib, "cuDeviceGetAttribute"));
  if (!init || !count || !get || !name || !mem || !attr) {
    info->gpu_status = "CUDA driver lacks the driver API entry points";
    return;  // the library stays loaded; unloading a driver is not worth the risk
  }
  int rc = init(0);
  if (rc != 0) {
    info->gpu_status = "cuInit failed with CUDA error " + std::to_string(rc);
    return;
  }
  int n = 0;
  if (count(&n) != 0 || n == 0) {
    info->gpu_status = "no CUDA devices";
    return;
  }
  // 13000 for 13.0: one version for every GPU of the driver (optional: an old driver may lack it).
  std::string driver;
  using VersionFn = int (*)(int*);
  if (auto version = reinterpret_cast<VersionFn>(::dlsym(lib, "cuDriverGetVersion"))) {
    int v = 0;
    if (version(&v) == 0 && v > 0) {
      driver = std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
    }
  }
  constexpr int kComputeMajor = 75, kComputeMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_*
  for (int i = 0; i < n; ++i) {
    int dev = 0;
    if (get(&dev, i) != 0) continue;
    msg::GpuInfo g;
    char buf[256] = {};
    if (name(buf, sizeof(buf) - 1, dev) == 0) g.name = buf;
    int major = 0, minor = 0;
    attr(&major, kComputeMajor, dev);
    attr(&minor, kComputeMinor, dev);
    g.arch = "sm_" + std::to_string(major) + std::to_string(minor);
    size_t bytes = 0;
    if (mem(&bytes, dev) == 0) g.memory_bytes = bytes;
    // CU_DEVICE_ATTRIBUTE_*: MAX_THREADS_PER_BLOCK 1, MAX_SHARED_MEMORY_PER_BLOCK 8, WARP_SIZE 10,
    // MAX_REGISTERS_PER_BLOCK 12, MULTIPROCESSOR_COUNT 16, MAX_SHARED_MEMORY_PER_BLOCK_OPTIN 97.
    auto limit = [&](int attribute) -> uint32_t {
      int v = 0;
      return attr(&v, attribute, dev) == 0 && v > 0 ? static_cast<uint32_t>(v) : 0;
    };
    g.max_threads_per_block = limit(1);
    g.max_shared_per_block = limit(8);
    g.warp_size = limit(10);
    g.max_registers_per_block = limit(12);
    g.multiprocessors = limit(16);
    g.max_shared_per_block_optin = limit(97);
    g.driver = driver;
    info->gpus.push_back(std::move(g));
  }
}

}  // namespace

std::vector<std::string> X86FlagsToLlvmFeatures(const std::string& flags_line) {
  static const std::map<std::string, std::string> kMap = {
      {"sse", "sse"},
      {"sse2", "sse2"},
      {"pni", "sse3"},
      {"ssse3", "ssse3"},
      {"sse4_1", "sse4.1"},
      {"sse4_2", "sse4.2"},
      {"popcnt", "popcnt"},
      {"avx", "avx"},
      {"avx2", "avx2"},
      {"fma", "fma"},
      {"f16c", "f16c"},
      {"bmi1", "bmi"},
      {"bmi2", "bmi2"},
      {"lzcnt", "lzcnt"},
      {"abm", "lzcnt"},
      {"movbe", "movbe"},
      {"aes", "aes"},
      {"pclmulqdq", "pclmul"},
      {"sha_ni", "sha"},
      {"adx", "adx"},
      {"rdrand", "rdrnd"},
      {"rdseed", "rdseed"},
      {"avx512f", "avx512f"},
      {"avx512bw", "avx512bw"},
      {"avx512vl", "avx512vl"},
      {"avx512dq", "avx512dq"},
      {"avx512cd", "avx512cd"},
      {"avx512ifma", "avx512ifma"},
      {"avx512vbmi", "avx512vbmi"},
      {"avx512_vbmi2", "avx512vbmi2"},
      {"avx512_vnni", "avx512vnni"},
      {"avx512_bitalg", "avx512bitalg"},
      {"avx512_vpopcntdq", "avx512vpopcntdq"},
      {"avx512_bf16", "avx512bf16"},
      {"avx512_fp16", "avx512fp16"},
      {"avx_vnni", "avxvnni"},
      {"avx512er", "avx512er"},
      {"amx_tile", "amx-tile"},
      {"amx_int8", "amx-int8"},
      {"amx_bf16", "amx-bf16"},
      {"vaes", "vaes"},
      {"vpclmulqdq", "vpclmulqdq"},
      {"gfni", "gfni"},
      {"xsave", "xsave"},
      {"cx16", "cx16"},
  };
  std::vector<std::string> out;
  std::istringstream in(flags_line);
  std::string flag;
  while (in >> flag) {
    auto it = kMap.find(flag);
    if (it != kMap.end()) out.push_back(it->second);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Everything but the GPUs (safe in a process that forks later).
static msg::DeviceInfo CollectHostInfo() {
  msg::DeviceInfo info;
  info.arch = Arch();
  info.triple = Triple();
  CpuModelAndFeatures(&info);
  // The CPUs this server may run on (taskset, --cpus, a cgroup's cpuset), not all the machine's.
  info.cores = static_cast<uint32_t>(UsableCpus());
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) info.memory_bytes = static_cast<uint64_t>(pages) * page;
  info.os = OsName();
  info.version = std::string(kCrosstuneVersion);
  return info;
}

msg::DeviceInfo CollectDeviceInfo() {
  msg::DeviceInfo info = CollectHostInfo();
  CollectGpus(&info);
  return info;
}

}  // namespace crosstune::server

namespace crosstune::server {

msg::DeviceInfo CollectDeviceInfoInChild() {
  int fds[2];
  if (::pipe(fds) != 0) {
    msg::DeviceInfo info = CollectHostInfo();
    info.gpu_status = "not probed (pipe failed)";
    return info;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    msg::DeviceInfo info = CollectHostInfo();
    info.gpu_status = "not probed (fork failed)";
    return info;
  }
  if (pid == 0) {
    ::close(fds[0]);
    msgpack::sbuffer buf;
    msgpack::pack(buf, CollectDeviceInfo());
    const char* p = buf.data();
    size_t left = buf.size();
    while (left > 0) {
      ssize_t n = ::write(fds[1], p, left);
      if (n <= 0) break;
      p += n;
      left -= static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string bytes;
  char chunk[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    bytes.append(chunk, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  try {
    msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
    return oh.get().as<msg::DeviceInfo>();
  } catch (const std::exception&) {
    // The probe died (a broken driver can crash it): describe the CPU without GPUs.
  }
  msg::DeviceInfo info = CollectHostInfo();
  info.gpu_status = "GPU probe failed (exit status " + std::to_string(status) + ")";
  return info;
}

}  // namespace crosstune::server
