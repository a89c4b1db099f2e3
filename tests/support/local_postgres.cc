#include "crosstune/testing/local_postgres.h"

#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <vector>

#include "crosstune/crypto.h"
#include "crosstune/testing/support.h"

namespace crosstune::testing {
namespace {

constexpr const char* kPort = "5432";  // names the socket file only: no TCP

// The newest /usr/lib/postgresql/VERSION/bin with initdb and postgres; "" when none.
std::string FindBinDir() {
  std::string best;
  int best_version = -1;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string bin = e.path().string() + "/bin";
    if (::access((bin + "/initdb").c_str(), X_OK) != 0 ||
        ::access((bin + "/postgres").c_str(), X_OK) != 0) {
      continue;
    }
    int version = std::atoi(e.path().filename().c_str());
    if (version > best_version) {
      best_version = version;
      best = bin;
    }
  }
  return best;
}

}  // namespace

LocalPostgres::LocalPostgres() {
  bin_ = FindBinDir();
  if (bin_.empty()) {
    why_ =
        "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb; "
        "scripts/install-deps.sh installs the postgresql package)";
    return;
  }
  if (::access("/usr/bin/pg_isready", X_OK) != 0 || ::access("/usr/bin/createdb", X_OK) != 0) {
    why_ = "pg_isready and createdb are not installed (Debian's postgresql-client)";
    return;
  }
  dir_ = MakeTempDir("crosstune-pg");
  if (dir_.empty()) {
    why_ = "cannot make a temporary directory";
    return;
  }
  // As root: the cluster is the postgres user's, and its programs run as that user.
  std::string as_user;
  if (::geteuid() == 0) {
    const passwd* pw = ::getpwnam("postgres");
    if (!pw || ::chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      why_ = "running as root, and there is no postgres user to run PostgreSQL as";
      return;
    }
    as_user = "setpriv --reuid=postgres --regid=postgres --init-groups -- ";
  }
  const std::string data = dir_ + "/data";
  CommandResult init = RunCommand(as_user + bin_ + "/initdb -D " + data +
                                  " -A trust -U postgres -E UTF8 --no-sync >/dev/null");
  if (init.exit_code != 0) {
    why_ = "initdb failed: " + init.err;
    return;
  }
  // The server in the foreground of a child of ours (exec'd, so the pid is the postmaster's):
  // no fsync (a test's data need not survive a power cut), the socket in the directory only.
  std::vector<std::string> args;
  if (::geteuid() == 0) {
    args = {"/usr/bin/setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"};
  }
  for (const std::string& a : {bin_ + "/postgres", std::string("-D"), data, std::string("-k"), dir_,
                               std::string("-p"), std::string(kPort), std::string("-F"),
                               std::string("-c"), std::string("listen_addresses=")}) {
    args.push_back(a);
  }
  const std::string log = dir_ + "/server.log";
  pid_ = ::fork();
  if (pid_ == 0) {
    ::setpgid(0, 0);
    FILE* out = std::freopen(log.c_str(), "w", stdout);
    if (out) ::dup2(::fileno(out), 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  if (pid_ < 0) {
    why_ = "cannot fork";
    return;
  }
  const std::string ready = "/usr/bin/pg_isready -q -h " + dir_ + " -p " + kPort;
  const bool up = Eventually(
      [&] {
        int status;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) return true;  // died: checked below
        return RunCommand(ready).exit_code == 0;
      },
      std::chrono::seconds(60));
  if (!up || ::kill(pid_, 0) != 0) {
    why_ = "the PostgreSQL server did not start; its log: " + ReadFile(log);
    pid_ = -1;
  }
}

LocalPostgres::~LocalPostgres() {
  if (pid_ > 0) {
    ::kill(pid_, SIGINT);  // fast shutdown
    int status;
    ::waitpid(pid_, &status, 0);
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

std::string LocalPostgres::conninfo(const std::string& db) const {
  return "host=" + dir_ + " port=" + kPort + " dbname=" + db + " user=postgres";
}

LocalPostgres& LocalPostgres::Shared() {
  static LocalPostgres pg;
  return pg;
}

std::string LocalPostgres::NewDatabase(const std::string& prefix) {
  if (!Shared().ok()) return "";
  const std::string name = prefix + "_" + RandomHex(6);
  return Shared().CreateDatabase(name) ? Shared().conninfo(name) : "";
}

bool LocalPostgres::CreateDatabase(const std::string& name) {
  return ok() &&
         RunCommand("/usr/bin/createdb -h " + dir_ + " -p " + kPort + " -U postgres " + name)
                 .exit_code == 0;
}

}  // namespace crosstune::testing
