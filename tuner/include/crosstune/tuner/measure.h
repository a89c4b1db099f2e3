// The measure pipeline: candidates -> builder pool -> devices -> check -> records.
//
// A DeviceRunner keeps one session open on one device (a crosstune-server reached directly or
// through a tracker lease) with the task's input tensors in place, and measures built candidates
// one after another: upload, load, one checked call against the reference (the output tensor is
// filled with NaN first, so an element the kernel never writes is caught), then the device's time
// evaluator. Every failure becomes one Measurement with a TrialError and the whole message. A
// crash or a call time-out ends the server's session; the runner opens a new one and goes on.
// When the device itself is gone (the connection drops and cannot be reopened) the runner
// reports kDeviceLost, so the caller can hand the candidate to another device.
//
// Thread-safety: a DeviceRunner is used by one thread at a time; runners of different devices
// run in parallel.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/client/session.h"
#include "crosstune/client/tracker_client.h"
#include "crosstune/tuner/records.h"
#include "crosstune/tuner/task.h"

namespace crosstune::tuner {

struct MeasureOptions {
  TimingOptions timing{.number = 1, .repeat = 3, .min_repeat_ms = 50};
  uint32_t run_timeout_ms = 10'000;  // per kernel call on the device
  std::chrono::milliseconds build_timeout{30'000};
  bool check = true;  // compare the output with the reference
  uint64_t input_seed = 42;
};

// How to reach one device, and how to reach it again after a crash ended its session.
struct DeviceSpec {
  std::string name;         // "local", the tracker's device name, or host:port
  std::string server;       // host:port
  std::string auth_secret;  // server HMAC secret; empty: none
  std::string lease_token;  // a multi-session lease from the tracker; empty: none
  std::string key;          // the tracker key it was granted under
  std::chrono::milliseconds request_timeout{60'000};
};

// A built (or refused) candidate, ready for a device.
struct Candidate {
  uint64_t index = 0;
  TrialError error = TrialError::kOk;  // set when it failed before reaching a device
  std::string message;
  std::string
      library;  // the module's bytes (a CUDA task's: its .ctpkg, which holds the launch geometry)
  double build_s = 0;
  // Whether its build came from the builder's cache; unset when it never reached the builder.
  std::optional<bool> build_cached;
  std::string cache_warning;  // BuildResult::cache_warning
};

struct Measurement {
  uint64_t index = 0;
  TrialError error = TrialError::kOk;
  std::string message;
  std::vector<double> costs;
  double mean = 0;
  double build_s = 0;
  double run_s = 0;
  std::optional<bool> build_cached;  // Candidate::build_cached
  // Timed for fewer rounds than asked: its rounds were all slower than stop_above_s (Measure),
  // so its mean is a lower bound on its time, not a measurement of it.
  bool stopped_early = false;
};

// The task's inputs and the reference outputs, computed once on the host.
struct ReferenceData {
  HostArgs inputs;  // outputs zeroed
  HostArgs expected;
  static ReferenceData Make(const Task& task, uint64_t seed);
};

// Bytes of all the task's arguments (saturating at UINT64_MAX).
uint64_t TaskTensorBytes(const Task& task);

class DeviceRunner {
 public:
  // Connects and reads the device's info; kLimitExceeded (CheckTensorsFit) when the task's
  // tensors cannot fit the device, so a task too big is refused before the host allocates its
  // inputs and reference. Start() then prepares the session.
  static Expected<std::unique_ptr<DeviceRunner>> Connect(const DeviceSpec& spec, const Task& task,
                                                         const MeasureOptions& options);
  // Allocates the task's tensors and copies the inputs in. `reference` must outlive the runner.
  Status Start(const ReferenceData& reference);
  // Connect() and Start() in one.
  static Expected<std::unique_ptr<DeviceRunner>> Open(const DeviceSpec& spec, const Task& task,
                                                      const ReferenceData& reference,
                                                      const MeasureOptions& options);
  ~DeviceRunner();

  // stop_above_s > 0: the device stops timing the candidate after a round once even its fastest
  // round took more than that per call (Measurement::stopped_early).
  Measurement Measure(const Candidate& candidate, double stop_above_s = 0);
  const DeviceSpec& spec() const { return spec_; }
  const msg::DeviceInfo& info() const { return info_; }
  DeviceId id() const;

 private:
  DeviceRunner(const DeviceSpec& spec, const Task& task, const MeasureOptions& options);
  // A new session: connect, info, limits, and (once started) the tensors.
  Status Reopen();
  Status PrepareTensors();
  Measurement MeasureOnce(const Candidate& candidate, double stop_above_s);

  DeviceSpec spec_;
  const Task& task_;
  const ReferenceData* reference_ = nullptr;  // set by Start()
  MeasureOptions options_;
  std::unique_ptr<client::Session> session_;
  std::vector<client::RemoteTensor> tensors_;
  msg::DeviceInfo info_;
  uint64_t uploads_ = 0;
};

// Builds candidates on the pool; refused configs (constraints, device limits) never reach the
// compiler and come back as kInvalidConfig.
std::vector<Candidate> BuildCandidates(builder::BuildService& builder, const Task& task,
                                       const std::vector<uint64_t>& indices,
                                       const msg::DeviceInfo& device,
                                       const MeasureOptions& options);

// Maps an error from a session call to the trial error it means.
TrialError TrialErrorFromStatus(const Status& status, TrialError otherwise);

}  // namespace crosstune::tuner
