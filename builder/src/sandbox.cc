#include "crosstune/builder/sandbox.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "crosstune/builder/compiler.h"

#ifndef CROSSTUNE_CLANG_RESOURCE_DIR
#error "CROSSTUNE_CLANG_RESOURCE_DIR must name clang's resource dir"
#endif

// Landlock through raw system calls: the C library has no wrappers, and the kernel headers of
// older distributions (Debian 12's define ABI 2 at most) lack the newer rights. The numbers are
// the same on every architecture (the generic system call table).
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

namespace crosstune::builder {
namespace {

namespace fs = std::filesystem;

// The kernel's structures and constants (include/uapi/linux/landlock.h), spelled here.
struct RulesetAttr {
  uint64_t handled_access_fs;
};
struct PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));
constexpr uint32_t kCreateRulesetVersion = 1u << 0;
constexpr int kRulePathBeneath = 1;

constexpr uint64_t kExecute = 1ull << 0;
constexpr uint64_t kWriteFile = 1ull << 1;
constexpr uint64_t kReadFile = 1ull << 2;
constexpr uint64_t kReadDir = 1ull << 3;
constexpr uint64_t kRemoveDir = 1ull << 4;
constexpr uint64_t kRemoveFile = 1ull << 5;
constexpr uint64_t kMakeChar = 1ull << 6;
constexpr uint64_t kMakeDir = 1ull << 7;
constexpr uint64_t kMakeReg = 1ull << 8;
constexpr uint64_t kMakeSock = 1ull << 9;
constexpr uint64_t kMakeFifo = 1ull << 10;
constexpr uint64_t kMakeBlock = 1ull << 11;
constexpr uint64_t kMakeSym = 1ull << 12;
constexpr uint64_t kRefer = 1ull << 13;     // ABI 2: link or rename across folders
constexpr uint64_t kTruncate = 1ull << 14;  // ABI 3

// Every right of the ABI this kernel speaks, up to the newest one handled here (3): what is not
// handled stays allowed everywhere, so each right we know of is denied unless a rule grants it.
uint64_t HandledRights(int abi) {
  uint64_t rights = kExecute | kWriteFile | kReadFile | kReadDir | kRemoveDir | kRemoveFile |
                    kMakeChar | kMakeDir | kMakeReg | kMakeSock | kMakeFifo | kMakeBlock | kMakeSym;
  if (abi >= 2) rights |= kRefer;
  if (abi >= 3) rights |= kTruncate;
  return rights;
}

// The rights a rule on a file (not a folder) may carry.
constexpr uint64_t kFileRights = kExecute | kWriteFile | kReadFile | kTruncate;
constexpr uint64_t kReadRights = kReadFile | kReadDir;
constexpr uint64_t kWriteRights = kReadRights | kWriteFile | kRemoveDir | kRemoveFile | kMakeDir |
                                  kMakeReg | kMakeSock | kMakeFifo | kMakeSym | kRefer | kTruncate;

Status Failed(const std::string& what) {
  return Status(ErrorCode::kInternal,
                "cannot confine the build process: " + what + ": " + std::strerror(errno));
}

// Adds `tree` (and, read-only, where the links inside it point) to `out`, once each.
void AddTreeWithLinkTargets(const std::string& tree, std::vector<std::string>* out) {
  std::error_code ec;
  const fs::path real = fs::canonical(tree, ec);
  if (ec) return;
  out->push_back(real.string());
  for (fs::recursive_directory_iterator it(real, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_symlink(ec)) continue;
    const fs::path target = fs::canonical(it->path(), ec);
    if (ec) {
      ec.clear();  // a dangling link: nothing to allow
      continue;
    }
    const std::string t = target.string();
    if (t.rfind(real.string() + "/", 0) != 0) out->push_back(t);
  }
}

}  // namespace

int LandlockAbi() {
  const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

SandboxPaths BuildSandboxPaths(const std::string& scratch_dir, const std::string& cache_dir) {
  SandboxPaths paths;
  AddTreeWithLinkTargets(CROSSTUNE_CLANG_RESOURCE_DIR, &paths.read_only);
  AddTreeWithLinkTargets(KernelIncludeDir(), &paths.read_only);
  // NVRTC loads its builtins library (and reads nothing else) at the first compile.
  if (std::string nvrtc = NvrtcLibraryDir(); !nvrtc.empty()) paths.read_only.push_back(nvrtc);
  paths.read_write.push_back("/dev/null");
  if (!scratch_dir.empty()) paths.read_write.push_back(scratch_dir);
  if (!cache_dir.empty()) paths.read_write.push_back(cache_dir);
  return paths;
}

Status ConfineBuildProcess(const SandboxPaths& paths) {
  const int abi = LandlockAbi();
  if (abi == 0) {
    errno = ENOSYS;
    return Failed(
        "this kernel has no Landlock (Linux 5.13 or later, with landlock among the "
        "enabled security modules)");
  }
  const uint64_t handled = HandledRights(abi);
  RulesetAttr attr{handled};
  const int ruleset =
      static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0));
  if (ruleset < 0) return Failed("landlock_create_ruleset");
  auto add = [&](const std::string& path, uint64_t rights) -> Status {
    const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) return Status::Ok();  // nothing there to allow
    struct stat st {};
    if (::fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) rights &= kFileRights;
    PathBeneathAttr rule{rights & handled, fd};
    const long rc = ::syscall(SYS_landlock_add_rule, ruleset, kRulePathBeneath, &rule, 0);
    ::close(fd);
    if (rc != 0) return Failed("landlock_add_rule " + path);
    return Status::Ok();
  };
  Status st = Status::Ok();
  for (const auto& p : paths.read_only) {
    if (st.ok()) st = add(p, kReadRights);
  }
  for (const auto& p : paths.read_write) {
    if (st.ok()) st = add(p, kWriteRights);
  }
  if (st.ok() && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) st = Failed("PR_SET_NO_NEW_PRIVS");
  if (st.ok() && ::syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) {
    st = Failed("landlock_restrict_self");
  }
  ::close(ruleset);
  return st;
}

Status ConfineBuilds(const std::string& scratch_dir, const std::string& cache_dir) {
  // Read while the files can still be opened: the time zone (log lines' local time) and NVRTC's
  // builtins library.
  ::tzset();
  PreloadNvrtcBuiltins();
  if (!scratch_dir.empty()) ::setenv("TMPDIR", scratch_dir.c_str(), 1);
  // A rule names a folder that exists: a cache made later could not be used.
  std::error_code ec;
  if (!cache_dir.empty()) fs::create_directories(cache_dir, ec);
  return ConfineBuildProcess(BuildSandboxPaths(scratch_dir, cache_dir));
}

}  // namespace crosstune::builder
