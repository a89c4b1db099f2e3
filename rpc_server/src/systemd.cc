#include "crosstune/server/systemd.h"

#include <dlfcn.h>
#include <spawn.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace crosstune::server {
namespace {

using SdNotify = decltype(&sd_notify);

struct Library {
  SdNotify notify = nullptr;
  std::string error;
};

const Library& LoadLibsystemd() {
  static Library lib;
  static std::once_flag once;
  std::call_once(once, [] {
    void* handle = ::dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = ::dlerror();
      lib.error = std::string("cannot load libsystemd.so.0 (install libsystemd0): ") +
                  (why ? why : "unknown dlopen error");
      return;
    }
    lib.notify = reinterpret_cast<SdNotify>(::dlsym(handle, "sd_notify"));
    if (lib.notify == nullptr) lib.error = "libsystemd.so.0 has no sd_notify";
  });
  return lib;
}

}  // namespace

bool SystemdWantsNotify() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  return socket != nullptr && *socket != '\0';
}

Status NotifySystemd(const std::string& state) {
  if (!SystemdWantsNotify()) return Status::Ok();
  const Library& lib = LoadLibsystemd();
  if (lib.notify == nullptr) return Status(ErrorCode::kInternal, "sd_notify: " + lib.error);
  int r = lib.notify(0, state.c_str());
  if (r < 0) {
    return Status(ErrorCode::kIoError, std::string("sd_notify: ") + std::strerror(-r));
  }
  if (r == 0) return Status(ErrorCode::kIoError, "sd_notify: NOTIFY_SOCKET was not usable");
  return Status::Ok();
}

std::vector<std::string> UnitLimitsCommand(const std::string& unit, const UnitLimits& limits) {
  if (limits.tasks_max == 0 && limits.memory_max_bytes == 0) return {};
  std::vector<std::string> argv = {"systemctl", "set-property", "--runtime", "--", unit};
  if (limits.tasks_max != 0) argv.push_back("TasksMax=" + std::to_string(limits.tasks_max));
  if (limits.memory_max_bytes != 0) {
    argv.push_back("MemoryMax=" + std::to_string(limits.memory_max_bytes));
  }
  return argv;
}

Status ApplyUnitLimits(const std::string& unit, const UnitLimits& limits) {
  std::vector<std::string> argv = UnitLimitsCommand(unit, limits);
  if (argv.empty()) return Status::Ok();
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  int err = ::posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ);
  if (err != 0) {
    return Status(ErrorCode::kIoError, std::string("cannot run systemctl: ") + std::strerror(err));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    return Status(ErrorCode::kInternal,
                  "'" + cmd + "' failed (status " + std::to_string(WEXITSTATUS(status)) + ")");
  }
  return Status::Ok();
}

}  // namespace crosstune::server
