// `crosstune query / lease / drain / undrain / kick` (the tracker).
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "connect.h"
#include "crosstune/client/tracker_client.h"
#include "crosstune/crypto.h"
#include "crosstune/json_reader.h"

namespace crosstune::cli {
namespace {

using std::chrono::milliseconds;

// --- query --------------------------------------------------------------------------------------

void RegisterQuery(CLI::App& app) {
  struct Opts {
    TrackerFlags t;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("query", "list the farm's devices, their state and the queues");
  AddTrackerFlags(cmd, &o->t);
  cmd->add_flag("--json", o->json, "print the tracker's summary as JSON");
  cmd->callback([o] {
    auto tracker = Check(ConnectTracker(o->t));
    std::string text = Check(tracker->Query());
    // One reply frame from a peer: bounded, as all JSON from outside.
    auto parsed = ParseJson(text, {.max_bytes = Limits::kMaxFrameBytes});
    if (!parsed.ok())
      Fail("tracker sent a summary that is not valid: " + parsed.status().message());
    nlohmann::json j = std::move(parsed).value();
    if (o->json) {
      PrintJson(j, 2);
      return;
    }
    std::printf("%-24s %-10s %-12s %-22s %-8s %s\n", "DEVICE", "KEY", "STATE", "HOLDER", "ARCH",
                "TAGS");
    for (const auto& d : j["devices"]) {
      std::string tags;
      for (const auto& [k, v] : d["tags"].items()) {
        tags += (tags.empty() ? "" : " ") + k + "=" + v.get<std::string>();
      }
      std::printf("%-24s %-10s %-12s %-22s %-8s %s\n", d["name"].get<std::string>().c_str(),
                  d["key"].get<std::string>().c_str(), d["state"].get<std::string>().c_str(),
                  d["holder"].get<std::string>().c_str(), d["arch"].get<std::string>().c_str(),
                  tags.c_str());
    }
    if (j["devices"].empty()) std::printf("(no devices registered)\n");
    std::printf("\n%-10s %-8s %-8s %s\n", "KEY", "WAITING", "GRANTS", "QUEUE");
    for (const auto& k : j["keys"]) {
      std::string who;
      for (const auto& w : k["queue"]) {
        who += (who.empty() ? "" : ", ") +
               fmt::format("{} [p{}, {} s]", w["holder"].get<std::string>(),
                           w["priority"].get<int>(), w["waited_ms"].get<int64_t>() / 1000);
      }
      std::printf("%-10s %-8zu %-8llu %s\n", k["key"].get<std::string>().c_str(), k["queue"].size(),
                  static_cast<unsigned long long>(k["grants"].get<uint64_t>()), who.c_str());
    }
  });
}

// --- lease --------------------------------------------------------------------------------------

std::atomic<pid_t> g_child{0};

void ForwardSignal(int sig) {
  pid_t pid = g_child.load();
  if (pid > 0) ::kill(pid, sig);
}

int RunLeased(client::TrackerClient& tracker, const msg::Grant& grant,
              const std::vector<std::string>& command, milliseconds hold) {
  tracker.StartAutoRenew(grant.lease_token, RenewEvery(hold));
  ::setenv("CROSSTUNE_SERVER", grant.address.c_str(), 1);
  ::setenv("CROSSTUNE_LEASE", grant.lease_token.c_str(), 1);
  ::setenv("CROSSTUNE_DEVICE", grant.device.c_str(), 1);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid < 0) {
    PrintError(std::string("fork: ") + std::strerror(errno));
    return 1;
  }
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "crosstune: error: %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  g_child.store(pid);
  struct sigaction sa {};
  sa.sa_handler = ForwardSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child.store(0);
  tracker.StopAutoRenew();
  // The lease may have ended while the command ran (an admin's kick, a failed renewal, expiry):
  // the command then ran, at least in part, on a device it did not hold. A renewal that failed
  // says so; otherwise the release does, since the tracker no longer knows the lease.
  bool lost = false;
  if (Status r = tracker.renew_status(); !r.ok()) {
    std::fprintf(stderr, "crosstune: warning: the lease was lost while the command ran: %s\n",
                 r.message().c_str());
    lost = true;
  }
  Status rel = tracker.Release(grant.lease_token);
  if (!rel.ok() && !lost) {
    const std::string why =
        rel.code() == ErrorCode::kNotFound
            ? "the lease was lost while the command ran (" + rel.message() + " at release)"
            : "release: " + rel.message() + " (the lease may have been lost while the command ran)";
    std::fprintf(stderr, "crosstune: warning: %s\n", why.c_str());
    lost = true;
  }
  int rc = 1;
  if (WIFEXITED(status)) rc = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) rc = 128 + WTERMSIG(status);
  // The command's own failure says more; a command that succeeded without its lease did not.
  return rc == 0 && lost ? 1 : rc;
}

void RegisterLease(CLI::App& app) {
  struct Opts {
    TrackerFlags t;
    std::string key;
    std::vector<std::string> constraints;
    int32_t priority = 0;
    double wait_s = 600, hold_s = 1800;
    std::vector<std::string> command;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "lease",
      "wait for a device, run a command holding it (CROSSTUNE_SERVER and CROSSTUNE_LEASE set), "
      "release it when the command exits; exits with the command's status");
  AddTrackerFlags(cmd, &o->t);
  cmd->add_option("--key", o->key, "device key")->required();
  cmd->add_option("--constraint,-c", o->constraints,
                  "tag or attribute: name=value, name!=value, name>=N, name<=N, +feature");
  cmd->add_option("--priority", o->priority, "higher is served first")->capture_default_str();
  cmd->add_option("--wait", o->wait_s, "seconds to wait in the queue")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--hold", o->hold_s, "lease length in seconds (renewed while the command runs)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("command", o->command, "the command to run (after --)")->required();
  cmd->callback([o] {
    auto tracker = Check(ConnectTracker(o->t));
    client::LeaseRequest req;
    req.key = o->key;
    req.constraints = o->constraints;
    req.priority = o->priority;
    req.wait = milliseconds(static_cast<int64_t>(o->wait_s * 1000));
    req.hold = milliseconds(static_cast<int64_t>(o->hold_s * 1000));
    req.multi_session = true;
    std::string key = o->key;
    req.on_queue_update = [key](const msg::QueueUpdate& u) { PrintQueueUpdate(key, u); };
    msg::Grant grant = Check(tracker->RequestDevice(req));
    std::fprintf(stderr, "crosstune: leased %s (%s) for %.0f s\n", grant.device.c_str(),
                 grant.address.c_str(), o->hold_s);
    int rc = RunLeased(*tracker, grant, o->command, req.hold);
    tracker.reset();
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

// --- admin --------------------------------------------------------------------------------------

void RegisterAdmin(CLI::App& app, const std::string& action, const std::string& help) {
  struct Opts {
    TrackerFlags t;
    std::string device;
    std::string admin_token_file;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(action, help);
  AddTrackerFlags(cmd, &o->t);
  cmd->add_option("device", o->device, "device name as `crosstune query` shows it (HOST:PORT)")
      ->required();
  cmd->add_option("--admin-token-file", o->admin_token_file, "file holding the admin token")
      ->required();
  cmd->callback([o, action] {
    std::string admin = Check(ReadSecretFile(o->admin_token_file));
    auto tracker = Check(ConnectTracker(o->t));
    Check(tracker->Admin(action, o->device, admin));
    std::printf("%s: %s\n", o->device.c_str(),
                action == "kick" ? "kicked" : (action + "ed").c_str());
  });
}

}  // namespace

void RegisterTrackerCommands(CLI::App& app) {
  RegisterQuery(app);
  RegisterLease(app);
  RegisterAdmin(app, "drain", "stop granting a device (its current lease runs on)");
  RegisterAdmin(app, "undrain", "grant a drained device again");
  RegisterAdmin(app, "kick", "end a device's current lease now");
}

}  // namespace crosstune::cli
