#include "crosstune/builder/target.h"

#include <llvm/ADT/StringRef.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/TargetSelect.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include "crosstune/package.h"

// LLVM 14 keeps MCSubtargetInfo's cpu and feature tables private (LLVM 15 adds
// getAllProcessorDescriptions/getAllProcessorFeatures, which is what -mcpu=help prints). Explicit
// template instantiation may name private members, so this reads the two tables without copying
// the class layout.
namespace {
template <typename Tag, typename Tag::type kMember>
struct PrivateAccess {
  friend typename Tag::type Get(Tag) { return kMember; }
};
struct ProcFeaturesTag {
  using type = llvm::ArrayRef<llvm::SubtargetFeatureKV> llvm::MCSubtargetInfo::*;
  friend type Get(ProcFeaturesTag);
};
struct ProcDescTag {
  using type = llvm::ArrayRef<llvm::SubtargetSubTypeKV> llvm::MCSubtargetInfo::*;
  friend type Get(ProcDescTag);
};
template struct PrivateAccess<ProcFeaturesTag, &llvm::MCSubtargetInfo::ProcFeatures>;
template struct PrivateAccess<ProcDescTag, &llvm::MCSubtargetInfo::ProcDesc>;
}  // namespace

namespace crosstune::builder {
namespace {

struct ArchInfo {
  std::string arch;                           // "aarch64"
  std::string triple;                         // canonical triple
  std::string default_cpu;                    // what LLVM calls the baseline
  std::vector<std::string> default_features;  // what the clang driver adds for the triple
  std::set<std::string> baseline;             // every device of the arch has these
  std::set<std::string> checkable;            // ISA features a device reports and we check
};

const std::vector<ArchInfo>& Arches() {
  static const std::vector<ArchInfo> kArches = {
      {"x86_64",
       "x86_64-linux-gnu",
       "x86-64",
       {},
       {"64bit", "cmov", "cx8", "fxsr", "mmx", "sse", "sse2", "x87"},
       {"sse3",       "ssse3",       "sse4.1",       "sse4.2",
        "popcnt",     "avx",         "avx2",         "fma",
        "f16c",       "bmi",         "bmi2",         "lzcnt",
        "movbe",      "aes",         "pclmul",       "sha",
        "adx",        "cx16",        "xsave",        "avx512f",
        "avx512cd",   "avx512bw",    "avx512dq",     "avx512vl",
        "avx512vnni", "avx512bf16",  "avx512fp16",   "avx512ifma",
        "avx512vbmi", "avx512vbmi2", "avx512bitalg", "avx512vpopcntdq",
        "vaes",       "vpclmulqdq",  "gfni",         "avxvnni",
        "amx-tile",   "amx-int8",    "amx-bf16",     "avx512er"}},
      {"aarch64",
       "aarch64-linux-gnu",
       "generic",
       {"+neon"},
       {"neon", "fp-armv8"},
       // Only what crosstune-server reports (HWCAP bits); "crypto" is covered by aes + sha2.
       {"crc", "aes", "sha2", "sha3", "sm4", "lse", "rdm", "dotprod", "fullfp16", "rcpc", "sve",
        "sve2", "i8mm", "bf16"}},
      {"armv7",
       "armv7-linux-gnueabihf",
       "generic",
       {"+vfp3d16", "+fp64"},
       {"vfp2", "vfp2sp", "vfp3d16", "vfp3d16sp", "fp64"},
       // Only what crosstune-server reports (HWCAP bits); neon implies d32.
       {"neon", "vfp3", "vfp4", "hwdiv"}},
      {"riscv64",
       "riscv64-linux-gnu",
       "generic-rv64",
       {"+m", "+a", "+f", "+d", "+c", "-relax"},
       {"64bit", "m", "a", "f", "d", "c"},
       {"v", "zba", "zbb", "zbc", "zbs", "zfh", "zve32x", "zve64d"}},
  };
  return kArches;
}

const ArchInfo* FindArch(std::string_view triple_arch) {
  std::string a(triple_arch);
  if (a == "amd64") a = "x86_64";
  if (a == "arm64") a = "aarch64";
  if (a == "armv7a" || a == "armv7l" || a == "armhf") a = "armv7";
  for (const ArchInfo& info : Arches()) {
    if (info.arch == a) return &info;
  }
  return nullptr;
}

std::string Join(const std::vector<std::string>& v, std::string_view sep) {
  std::string s;
  for (const auto& x : v) {
    if (!s.empty()) s += sep;
    s += x;
  }
  return s;
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

Status Invalid(std::string msg) { return Status(ErrorCode::kInvalidArgument, std::move(msg)); }

// Canonical triple for a user's triple: x86_64-pc-linux-gnu and x86_64-unknown-linux-gnu are
// x86_64-linux-gnu; armv7 must be hard-float.
Expected<const ArchInfo*> ResolveTriple(const std::string& triple) {
  auto parts = Split(triple, '-');
  const ArchInfo* info = parts.empty() ? nullptr : FindArch(parts[0]);
  std::string supported;
  for (const ArchInfo& a : Arches()) supported += (supported.empty() ? "" : ", ") + a.triple;
  if (info == nullptr) {
    return Invalid("unsupported triple '" + triple + "' (supported: " + supported + ")");
  }
  if (triple.find("linux") == std::string::npos) {
    return Invalid("unsupported triple '" + triple +
                   "': kernels are built for linux (supported: " + supported + ")");
  }
  if (info->arch == "armv7" && triple.find("gnueabihf") == std::string::npos) {
    return Invalid("unsupported triple '" + triple +
                   "': armv7 kernels are hard-float, use armv7-linux-gnueabihf");
  }
  return info;
}

std::once_flag g_llvm_init;
void InitLlvmTargets() {
  std::call_once(g_llvm_init, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargetMCs();
  });
}

Expected<std::unique_ptr<llvm::MCSubtargetInfo>> MakeSti(const std::string& triple,
                                                         const std::string& cpu,
                                                         const std::string& features) {
  InitLlvmTargets();
  std::string err;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(triple, err);
  if (t == nullptr) return Invalid("LLVM has no target for '" + triple + "': " + err);
  std::unique_ptr<llvm::MCSubtargetInfo> sti(t->createMCSubtargetInfo(triple, cpu, features));
  if (!sti) return Invalid("LLVM cannot describe '" + triple + "'");
  return sti;
}

std::string FeatureString(const Target& t, const ArchInfo& info) {
  std::vector<std::string> f = info.default_features;
  f.insert(f.end(), t.attrs.begin(), t.attrs.end());
  return Join(f, ",");
}

}  // namespace

std::string Target::ToString() const {
  if (kind == TargetKind::kCuda) return "cuda -arch=" + cuda_arch;
  std::string s = "llvm -mtriple=" + triple + " -mcpu=" + cpu;
  if (!attrs.empty()) s += " -mattr=" + Join(attrs, ",");
  return s;
}

std::string Target::Arch() const {
  if (kind == TargetKind::kCuda) return cuda_arch;
  return triple.substr(0, triple.find('-'));
}

const std::vector<std::pair<std::string, std::string>>& Presets() {
  static const std::vector<std::pair<std::string, std::string>> kPresets = {
      {"x86-64", "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64"},
      {"x86-avx2", "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3"},
      {"x86-avx512", "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v4"},
      {"aarch64", "llvm -mtriple=aarch64-linux-gnu -mcpu=generic"},
      {"cortex-a53", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53"},
      {"cortex-a72", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"},
      // The Raspberry Pi 4's BCM2711 is a Cortex-A72 without the crypto extension.
      {"rpi4", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=-crypto,-aes,-sha2"},
      {"armv7-neon", "llvm -mtriple=armv7-linux-gnueabihf -mcpu=generic -mattr=+neon"},
      {"riscv64", "llvm -mtriple=riscv64-linux-gnu -mcpu=generic-rv64"},
      {"sm_80", "cuda -arch=sm_80"},
      {"a100", "cuda -arch=sm_80"},
      {"sm_90", "cuda -arch=sm_90"},
      {"h100", "cuda -arch=sm_90"},
  };
  return kPresets;
}

Expected<Target> ParseTarget(std::string_view text_in) {
  std::string text(text_in);
  auto words = Split(text, ' ');
  if (words.empty()) return Invalid("empty target string");
  if (words.size() == 1 && words[0] == "auto") {
    return Invalid("target 'auto' needs a device: pass --server or --tracker/--key");
  }
  if (words.size() == 1 && words[0] != "llvm" && words[0] != "cuda") {
    for (const auto& [name, str] : Presets()) {
      if (name == words[0]) return ParseTarget(str);
    }
    std::string names;
    for (const auto& p : Presets()) names += (names.empty() ? "" : ", ") + p.first;
    return Invalid("unknown target '" + text +
                   "' (a target string starts with llvm or cuda; presets: " + names + ")");
  }
  Target t;
  const std::string& kind = words[0];
  std::vector<std::string> valid_keys;
  if (kind == "llvm") {
    t.kind = TargetKind::kCpu;
    valid_keys = {"-mtriple", "-mcpu", "-mattr"};
  } else if (kind == "cuda") {
    t.kind = TargetKind::kCuda;
    valid_keys = {"-arch"};
  } else {
    return Invalid("unknown target kind '" + kind + "' in '" + text + "' (valid: llvm, cuda)");
  }
  std::map<std::string, std::string> kv;
  for (size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    size_t eq = w.find('=');
    std::string key = w.substr(0, eq);
    if (std::find(valid_keys.begin(), valid_keys.end(), key) == valid_keys.end()) {
      return Invalid("unknown key '" + key + "' in target '" + text + "' (valid for " + kind +
                     ": " + Join(valid_keys, " ") + ")");
    }
    if (eq == std::string::npos || eq + 1 == w.size()) {
      return Invalid("key '" + key + "' in target '" + text + "' needs a value (" + key + "=...)");
    }
    if (!kv.emplace(key, w.substr(eq + 1)).second) {
      return Invalid("key '" + key + "' given twice in target '" + text + "'");
    }
  }
  if (t.kind == TargetKind::kCuda) {
    auto it = kv.find("-arch");
    if (it == kv.end()) return Invalid("cuda target needs -arch=sm_XX (e.g. cuda -arch=sm_90)");
    const std::string& a = it->second;
    // sm_ and a number of two to four digits, 50 or more (from_chars: no exception, no overflow).
    int number = 0;
    bool ok = a.size() >= 5 && a.size() <= 7 && a.rfind("sm_", 0) == 0 &&
              std::all_of(a.begin() + 3, a.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
              std::from_chars(a.data() + 3, a.data() + a.size(), number).ec == std::errc();
    if (!ok || number < 50) {
      return Invalid("unknown CUDA arch '" + a +
                     "' (valid: sm_50 .. sm_90, e.g. sm_80, sm_86, sm_89, sm_90)");
    }
    t.cuda_arch = a;
    return t;
  }
  auto tr = kv.find("-mtriple");
  if (tr == kv.end()) {
    return Invalid("llvm target needs -mtriple= (e.g. llvm -mtriple=aarch64-linux-gnu)");
  }
  CT_ASSIGN_OR_RETURN(const ArchInfo* info, ResolveTriple(tr->second));
  t.triple = info->triple;
  auto cpu = kv.find("-mcpu");
  t.cpu = cpu == kv.end() ? info->default_cpu : cpu->second;
  if (auto at = kv.find("-mattr"); at != kv.end()) {
    for (const std::string& f : Split(at->second, ',')) {
      if (f[0] != '+' && f[0] != '-') {
        return Invalid("feature '" + f + "' in -mattr needs a + or - (e.g. -mattr=+neon,-avx)");
      }
      t.attrs.push_back(f);
    }
  }
  CT_RETURN_IF_ERROR(ValidateTarget(t));
  return t;
}

Status ValidateTarget(const Target& t) {
  if (t.kind == TargetKind::kCuda) return Status::Ok();
  CT_ASSIGN_OR_RETURN(const ArchInfo* info, ResolveTriple(t.triple));
  CT_ASSIGN_OR_RETURN(auto sti, MakeSti(info->triple, "", ""));
  auto cpus = (*sti).*Get(ProcDescTag{});
  auto features = (*sti).*Get(ProcFeaturesTag{});
  if (!sti->isCPUStringValid(t.cpu)) {
    std::string names;
    for (const auto& c : cpus) names += (names.empty() ? "" : " ") + std::string(c.Key);
    return Invalid("unknown cpu '" + t.cpu + "' for " + info->triple + " (valid: " + names + ")");
  }
  for (const std::string& a : t.attrs) {
    std::string name = a.substr(1);
    bool known = std::any_of(features.begin(), features.end(),
                             [&](const llvm::SubtargetFeatureKV& kv) { return name == kv.Key; });
    if (!known) {
      std::string names;
      for (const auto& f : features) names += (names.empty() ? "" : " ") + std::string(f.Key);
      return Invalid("unknown cpu feature '" + name + "' for " + info->triple +
                     " (valid: " + names + ")");
    }
  }
  return Status::Ok();
}

Expected<std::vector<std::string>> RequiredFeatures(const Target& t) {
  if (t.kind == TargetKind::kCuda) return std::vector<std::string>{};
  CT_ASSIGN_OR_RETURN(const ArchInfo* info, ResolveTriple(t.triple));
  CT_ASSIGN_OR_RETURN(auto sti, MakeSti(info->triple, t.cpu, FeatureString(t, *info)));
  const llvm::FeatureBitset& bits = sti->getFeatureBits();
  std::vector<std::string> out;
  for (const auto& kv : (*sti).*Get(ProcFeaturesTag{})) {
    if (bits.test(kv.Value) && info->checkable.count(kv.Key) != 0) out.push_back(kv.Key);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Expected<Target> TargetFromDevice(const msg::DeviceInfo& device, TargetKind kind) {
  if (kind == TargetKind::kCuda) {
    if (device.gpus.empty()) {
      return Status(
          ErrorCode::kNoDevice,
          "device has no GPU" + (device.gpu_status.empty() ? "" : " (" + device.gpu_status + ")"));
    }
    return ParseTarget("cuda -arch=" + device.gpus[0].arch);
  }
  std::string arch =
      device.arch.empty() ? device.triple.substr(0, device.triple.find('-')) : device.arch;
  const ArchInfo* info = FindArch(arch);
  if (info == nullptr) {
    return Status(ErrorCode::kWrongArch,
                  "the builder cannot target the device's arch '" + arch + "'");
  }
  Target t;
  t.triple = info->triple;
  t.cpu = info->default_cpu;
  for (const std::string& f : device.cpu_features) {
    if (info->checkable.count(f) != 0) t.attrs.push_back("+" + f);
  }
  std::sort(t.attrs.begin(), t.attrs.end());
  CT_RETURN_IF_ERROR(ValidateTarget(t));
  return t;
}

std::vector<std::string> Cc1TargetArgs(const Target& t) {
  std::vector<std::string> args;
  const ArchInfo* info = FindArch(t.Arch());
  if (info == nullptr) return args;
  args.insert(args.end(), {"-target-cpu", t.cpu});
  for (const std::string& f : info->default_features)
    args.insert(args.end(), {"-target-feature", f});
  for (const std::string& f : t.attrs) args.insert(args.end(), {"-target-feature", f});
  if (info->arch == "aarch64") {
    args.insert(args.end(), {"-target-abi", "aapcs"});
  } else if (info->arch == "armv7") {
    args.insert(args.end(), {"-target-abi", "aapcs-linux", "-mfloat-abi", "hard"});
  } else if (info->arch == "riscv64") {
    args.insert(args.end(), {"-target-abi", "lp64d"});
  }
  return args;
}

}  // namespace crosstune::builder
