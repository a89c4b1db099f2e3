// The CPU backend: ELF shared objects that export the kernel_abi.h module table.
#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "crosstune/server/elf.h"
#include "crosstune/server/module.h"
#include "crosstune/text.h"
#include "package_loader.h"

namespace crosstune::server {

std::string ShowAs(std::string text, const std::string& path, const std::string& name) {
  if (path.empty()) return text;
  for (size_t at = text.find(path); at != std::string::npos;
       at = text.find(path, at + name.size())) {
    text.replace(at, path.size(), name);
  }
  return text;
}

namespace {

// The one checking helper for the dl* API: dlerror() text, or a fallback.
std::string DlError(const char* fallback) {
  const char* e = ::dlerror();
  return e ? e : fallback;
}

// "<dir>/.ct-tmp-mod-<n>-<pid>.so" beside `path` (the workspace hides .ct-tmp- names).
std::string UniqueLinkName(const std::string& path) {
  static uint64_t counter = 0;
  std::string dir = path.substr(0, path.rfind('/') + 1);
  return dir + ".ct-tmp-mod-" + std::to_string(++counter) + "-" + std::to_string(::getpid()) +
         ".so";
}

// Whether the page holding `p` is mapped writable (from /proc/self/maps; loads are rare).
bool IsWritable(const void* p) {
  FILE* maps = std::fopen("/proc/self/maps", "re");
  if (!maps) return false;
  auto addr = reinterpret_cast<uintptr_t>(p);
  char line[512];
  bool writable = false;
  while (std::fgets(line, sizeof line, maps)) {
    // "lo-hi perms ...", addresses in hex.
    char* end = nullptr;
    unsigned long long lo = std::strtoull(line, &end, 16);
    if (*end != '-') continue;
    unsigned long long hi = std::strtoull(end + 1, &end, 16);
    if (*end != ' ' || addr < lo || addr >= hi) continue;
    writable = end[1] != '\0' && end[2] == 'w';
    break;
  }
  std::fclose(maps);
  return writable;
}

class CpuModule final : public Module {
 public:
  CpuModule(void* handle, const ct_module* table) : handle_(handle), table_(table) {
    target_ = table->target ? table->target : "";
    for (uint32_t i = 0; i < table->num_functions; ++i) {
      const ct_function& f = table->functions[i];
      functions_.push_back(msg::FunctionInfo{f.name ? f.name : "", f.signature ? f.signature : ""});
    }
  }
  ~CpuModule() override {
    if (handle_) ::dlclose(handle_);
  }

  std::string_view kind() const override { return "cpu"; }
  const std::string& target() const override { return target_; }
  const std::vector<msg::FunctionInfo>& functions() const override { return functions_; }

  Status Invoke(size_t index, const ct_arg* args, int32_t num_args, uint64_t times,
                int32_t* ret) override {
    ct_packed_fn fn = table_->functions[index].fn;
    *ret = 0;
    for (uint64_t i = 0; i < times; ++i) {
      int32_t r = fn(args, num_args);
      if (r != 0) {
        *ret = r;
        break;
      }
    }
    return Status::Ok();
  }

  std::string LastError() const override {
    if (!table_->last_error) return "";
    const char* e = table_->last_error();
    return e ? e : "";
  }

 private:
  void* handle_;
  const ct_module* table_;
  std::string target_;
  std::vector<msg::FunctionInfo> functions_;
};

class CpuLoader final : public ModuleLoader {
 public:
  std::string_view name() const override { return "cpu"; }
  bool Accepts(const LoadRequest& request) const override {
    // Anything that is not claimed by a more specific loader lands here, so a non-ELF file gets
    // the ELF check's "not an ELF file" rather than "no loader".
    (void)request;
    return true;
  }

  Expected<std::unique_ptr<Module>> Load(const LoadRequest& request) override {
    const std::string& name = request.display_name;
    CT_RETURN_IF_ERROR(CheckElfForHost(request.head, name));
    // dlopen under a name used once: glibc hands back an already-loaded library of the same
    // path (and one that cannot be unloaded stays), which would run stale code after a re-upload
    // under the same name. A hard link next to the file gives a fresh name; once mapped, it goes.
    std::string unique = UniqueLinkName(request.abs_path);
    bool linked = ::link(request.abs_path.c_str(), unique.c_str()) == 0;
    const std::string& open_path = linked ? unique : request.abs_path;
    ::dlerror();
    void* handle = ::dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    std::string why = handle ? "" : DlError("dlopen failed");
    if (linked) ::unlink(unique.c_str());
    if (!handle) {
      why = ShowAs(ShowAs(why, open_path, name), request.abs_path, name);
      return Status(ErrorCode::kInvalidArgument, name + ": cannot load: " + why);
    }
    // The session's threads, before the module's entry runs (a module may ask for them there).
    if (void* slot = ::dlsym(handle, CT_RUNTIME_SYMBOL)) {
      // It must be a writable pointer variable, not a function or a constant in read-only data.
      Dl_info info;
      void* extra = nullptr;
      bool found = ::dladdr1(slot, &info, &extra, RTLD_DL_SYMENT) != 0;
      const auto* sym = static_cast<const ElfW(Sym)*>(extra);
      bool is_pointer = found && sym && ELF64_ST_TYPE(sym->st_info) == STT_OBJECT &&
                        sym->st_size == sizeof(const ct_runtime*) && IsWritable(slot);
      if (!is_pointer) {
        ::dlclose(handle);
        return Status(ErrorCode::kInvalidArgument,
                      name + ": " CT_RUNTIME_SYMBOL
                             " must be a writable pointer variable "
                             "(const ct_runtime*), as kernel_abi.h defines it");
      }
      *static_cast<const ct_runtime**>(slot) = request.runtime;
    }
    auto entry = reinterpret_cast<ct_module_entry>(::dlsym(handle, CT_MODULE_SYMBOL));
    if (!entry) {
      std::string why =
          ShowAs(ShowAs(DlError("symbol not found"), open_path, name), request.abs_path, name);
      ::dlclose(handle);
      return Status(ErrorCode::kInvalidArgument,
                    name + ": not a crosstune module (no " CT_MODULE_SYMBOL "): " + why);
    }
    const ct_module* table = entry();
    if (!table) {
      ::dlclose(handle);
      return Status(ErrorCode::kInvalidArgument, name + ": " CT_MODULE_SYMBOL "() returned null");
    }
    if (table->abi_version != CT_ABI_VERSION) {
      uint32_t v = table->abi_version;
      ::dlclose(handle);
      return Status(ErrorCode::kVersionMismatch, name + ": kernel ABI version " +
                                                     std::to_string(v) + ", this server speaks " +
                                                     std::to_string(CT_ABI_VERSION));
    }
    // The table is the module's word: bound the count, and every name and signature must be a
    // short UTF-8 string (they go into replies, which must be valid UTF-8 and fit a frame).
    constexpr uint32_t kMaxFunctions = 4096;
    constexpr size_t kMaxNameBytes = 256;
    if (table->num_functions > kMaxFunctions || (table->num_functions && !table->functions)) {
      uint32_t n = table->num_functions;
      ::dlclose(handle);
      return Status(ErrorCode::kInvalidArgument, name + ": the module lists " + std::to_string(n) +
                                                     " functions (at most " +
                                                     std::to_string(kMaxFunctions) + ")");
    }
    for (uint32_t i = 0; i < table->num_functions; ++i) {
      const ct_function& f = table->functions[i];
      if (!f.name || !f.fn || !f.signature) {
        ::dlclose(handle);
        return Status(ErrorCode::kInvalidArgument, name + ": function " + std::to_string(i) +
                                                       " has no name, pointer or signature");
      }
      size_t name_len = ::strnlen(f.name, kMaxNameBytes + 1);
      size_t sig_len = ::strnlen(f.signature, kMaxNameBytes + 1);
      if (name_len > kMaxNameBytes || sig_len > kMaxNameBytes ||
          !IsValidUtf8(std::string_view(f.name, name_len)) ||
          !IsValidUtf8(std::string_view(f.signature, sig_len))) {
        ::dlclose(handle);
        return Status(ErrorCode::kInvalidArgument,
                      name + ": function " + std::to_string(i) +
                          " has a name or signature that is not a short UTF-8 string");
      }
    }
    return std::unique_ptr<Module>(std::make_unique<CpuModule>(handle, table));
  }
};

}  // namespace

std::unique_ptr<ModuleLoader> MakeCpuLoader() { return std::make_unique<CpuLoader>(); }

Expected<std::unique_ptr<Module>> LoaderRegistry::Load(const LoadRequest& request) {
  for (auto& loader : loaders_) {
    if (loader->Accepts(request)) return loader->Load(request);
  }
  return Status(ErrorCode::kInvalidArgument, request.display_name + ": no loader for this file");
}

void RegisterDefaultLoaders(LoaderRegistry& registry) {
  // More specific loaders (".ctpkg" packages, CUDA cubin/PTX) go before the CPU loader, which
  // accepts everything so that unknown files get its "not an ELF file" message.
  registry.Add(MakePackageLoader());
  registry.Add(MakeCpuLoader());
}

Status CheckSignature(const std::string& function, const std::string& signature,
                      const std::vector<msg::Arg>& args) {
  if (args.size() != signature.size()) {
    return Status(ErrorCode::kInvalidArgument, "'" + function + "' takes " +
                                                   std::to_string(signature.size()) +
                                                   " arguments (signature \"" + signature +
                                                   "\"), got " + std::to_string(args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    char want = signature[i];
    auto kind = static_cast<msg::ArgKind>(args[i].kind);
    char got = kind == msg::ArgKind::kInt64     ? 'i'
               : kind == msg::ArgKind::kFloat64 ? 'f'
               : kind == msg::ArgKind::kTensor  ? 't'
                                                : '?';
    if (want != 'i' && want != 'f' && want != 't') {
      return Status(ErrorCode::kInvalidArgument,
                    "'" + function + "' has a bad signature \"" + signature + "\"");
    }
    if (got != want) {
      auto kind_name = [](char c) {
        return c == 'i'   ? "an int64"
               : c == 'f' ? "a float64"
               : c == 't' ? "a tensor"
                          : "an unknown kind";
      };
      return Status(ErrorCode::kInvalidArgument, "'" + function + "' argument " +
                                                     std::to_string(i) + " must be " +
                                                     kind_name(want) + ", got " + kind_name(got));
    }
  }
  return Status::Ok();
}

}  // namespace crosstune::server
