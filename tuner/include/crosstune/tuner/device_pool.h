// The devices of a tuning run: crosstune-servers given by address, every free device of a key
// that a tracker can grant (each on a multi-session lease, renewed in the background, so a runner
// can reconnect after a kernel crash ends its session), or a crosstune-server the pool starts on
// this machine.
//
// Thread-safety: Lost() may be called from any thread; the rest from the owner's.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "crosstune/builder/target.h"
#include "crosstune/client/local_server.h"
#include "crosstune/client/tracker_client.h"
#include "crosstune/tuner/measure.h"

namespace crosstune::tuner {

class DevicePool {
 public:
  // Servers reached directly ("host:port"), named by `names` or else by their address.
  static std::unique_ptr<DevicePool> FromServers(const std::vector<std::string>& servers,
                                                 const std::string& auth_secret,
                                                 std::chrono::milliseconds request_timeout,
                                                 const std::vector<std::string>& names = {});
  // Every free device of `key`, up to `max_devices` (0: no limit). Waits up to `wait` for the
  // first; later ones are taken only if granted at once. `server_secret` answers the servers'
  // HMAC challenge (the lease token alone is enough when the servers trust the tracker).
  static Expected<std::unique_ptr<DevicePool>> FromTracker(
      const client::TrackerOptions& tracker, const std::string& key, int max_devices,
      std::chrono::milliseconds wait, const std::string& server_secret,
      std::chrono::milliseconds request_timeout);
  // A crosstune-server started on this machine (client::LocalServer), named "local"; it ends
  // with the pool. What `crosstune tune` measures on when it is given no device.
  static Expected<std::unique_ptr<DevicePool>> StartLocal(
      std::chrono::milliseconds request_timeout, const client::LocalServerOptions& options = {});
  // Releases every lease still held (outcome ok), then stops the local server, if any.
  ~DevicePool();

  const std::vector<DeviceSpec>& devices() const { return devices_; }
  // A device stopped answering: give its lease back now (outcome unreachable), so the tracker
  // can check it and others are not kept waiting for a lease nobody uses.
  void Lost(const DeviceSpec& device, const Status& why);

  // Tells the tracker how the run is going (its status page and /metrics), naming the leases
  // this pool still holds, over one of their connections. At most once a second: a report
  // sooner after the last is skipped (Ok), except the run's last (`report.finished`). Ok and
  // nothing sent for servers given by address. An error (the tracker refused or is gone) is for
  // a warning only: tuning goes on without reports.
  Status ReportProgress(msg::TuneProgress report);

 private:
  DevicePool() = default;
  std::chrono::steady_clock::time_point last_report_{};
  std::vector<DeviceSpec> devices_;
  std::mutex mu_;
  // One tracker connection per lease: its auto-renew thread keeps that lease alive.
  std::vector<std::unique_ptr<client::TrackerClient>> trackers_;
  std::unique_ptr<client::LocalServer> local_;  // StartLocal's server
};

// Whether every device is a server on this machine (a loopback address: 127.x, ::1,
// localhost): builds then run on the cores its kernels are timed on.
bool AllOnThisMachine(const std::vector<DeviceSpec>& devices);

// How a tuning run shares this machine between the kernel it times and its builds when it
// measures on a server it starts here: the server (and so the timed kernel) runs on the last
// `kernel_threads` of `allowed` (the first CPU usually takes the devices' interrupts: on a 2-vCPU
// VM all of the network's and disk's went to CPU 0), the builds on the rest, less any CPU that
// shares a physical core with a kernel CPU (`siblings(cpu)`: its SMT siblings, itself included).
// `build` is empty when nothing is left: builds and runs then take turns. `kernel` is empty when
// `allowed` holds no more CPUs than `kernel_threads`: the server is not pinned.
struct LocalCpuSplit {
  std::vector<int> kernel;
  std::vector<int> build;
};
LocalCpuSplit SplitLocalCpus(int kernel_threads, const std::vector<int>& allowed,
                             const std::function<std::vector<int>(int)>& siblings);
// The same with this process's CPUs and the machine's topology (/sys/devices/system/cpu).
LocalCpuSplit SplitLocalCpus(int kernel_threads);

// The target a run builds for: "auto" asks `device` for its CPU (builder::TargetFromDevice),
// "cuda" for its first GPU; anything else is parsed as a target string or preset.
Expected<builder::Target> ResolveTarget(const std::string& text, const DeviceSpec& device);

}  // namespace crosstune::tuner
