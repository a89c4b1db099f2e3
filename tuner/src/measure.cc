#include "crosstune/tuner/measure.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>

#include "crosstune/builder/backend.h"
#include "crosstune/tensor.h"

namespace crosstune::tuner {

namespace {
using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
// A .ctpkg of one build, as bytes: written to a private temporary file and read back.
Expected<std::string> PackageBytes(const builder::BuildRequest& request,
                                   const builder::BuildResult& result) {
  std::string path =
      (std::filesystem::temp_directory_path() / "crosstune-candidate-XXXXXX.ctpkg").string();
  int fd = ::mkstemps(path.data(), 6);
  if (fd < 0) return Status(ErrorCode::kIoError, "cannot create a temporary package file");
  ::close(fd);
  auto written = builder::WriteBuildPackage(request, result, path);
  std::string bytes;
  if (written.ok()) {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
    if (!in.good() && !in.eof()) written = Status(ErrorCode::kIoError, path + ": cannot read");
  }
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (!written.ok()) return written.status();
  return bytes;
}

}  // namespace

ReferenceData ReferenceData::Make(const Task& task, uint64_t seed) {
  ReferenceData r;
  r.inputs = MakeInputs(task, seed);
  r.expected = r.inputs;
  task.Reference(r.expected);
  return r;
}

TrialError TrialErrorFromStatus(const Status& status, TrialError otherwise) {
  switch (status.code()) {
    case ErrorCode::kDisconnected:
      return TrialError::kDeviceLost;
    case ErrorCode::kRemoteCrash:
      return TrialError::kRemoteCrash;
    case ErrorCode::kTimeout:
      return TrialError::kRunTimeout;
    case ErrorCode::kKernelError:
      return TrialError::kRuntimeError;
    default:
      return otherwise;
  }
}

std::vector<Candidate> BuildCandidates(builder::BuildService& builder, const Task& task,
                                       const std::vector<uint64_t>& indices,
                                       const msg::DeviceInfo& device,
                                       const MeasureOptions& options) {
  std::vector<Candidate> out(indices.size());
  std::vector<builder::BuildRequest> requests;
  std::vector<size_t> slot;  // request -> candidate
  for (size_t i = 0; i < indices.size(); ++i) {
    out[i].index = indices[i];
    Config c = task.space().Get(indices[i]);
    Status valid = task.space().Check(c);
    if (valid.ok()) valid = task.CheckLimits(c, device);
    if (!valid.ok()) {
      out[i].error = TrialError::kInvalidConfig;
      out[i].message = valid.message();
      continue;
    }
    builder::BuildRequest req;
    req.source = task.Generate(c);
    req.target = task.target();
    req.name = task.function() + "_" + std::to_string(indices[i]);
    req.source_name = task.id().template_name + "_" + std::to_string(indices[i]) +
                      std::string(task.target().backend().source_extension());
    req.timeout = options.build_timeout;
    requests.push_back(std::move(req));
    slot.push_back(i);
  }
  std::vector<builder::BuildResult> results = builder.BuildMany(requests);
  for (size_t r = 0; r < results.size(); ++r) {
    Candidate& c = out[slot[r]];
    builder::BuildResult& b = results[r];
    c.build_s = b.build_seconds;
    c.build_cached = b.cache_hit;
    c.cache_warning = std::move(b.cache_warning);
    if (b.ok() && task.target().backend().loads_from_package()) {
      // The module needs its manifest (a CUDA module's launch geometry): send the whole package.
      auto bytes = PackageBytes(requests[r], b);
      if (bytes.ok()) {
        c.library = std::move(bytes).value();
      } else {
        c.error = TrialError::kBuildError;
        c.message = "packaging: " + bytes.status().ToString();
      }
    } else if (b.ok()) {
      c.library = std::move(b.library);
    } else if (b.status.code() == ErrorCode::kTimeout) {
      c.error = TrialError::kBuildTimeout;
      c.message = b.status.message();
    } else {
      c.error = TrialError::kBuildError;
      c.message = b.status.message();
      if (!b.diagnostics.empty() && c.message.find(b.diagnostics) == std::string::npos) {
        c.message += "\n" + b.diagnostics;
      }
    }
  }
  return out;
}

// --- DeviceRunner ------------------------------------------------------------------------------

uint64_t TaskTensorBytes(const Task& task) {
  uint64_t total = 0;
  for (const ArgSpec& a : task.args()) {
    auto bytes = TensorBytes(a.shape, a.dtype);
    if (!bytes.ok() || __builtin_add_overflow(total, *bytes, &total)) return UINT64_MAX;
  }
  return total;
}

DeviceRunner::DeviceRunner(const DeviceSpec& spec, const Task& task, const MeasureOptions& options)
    : spec_(spec), task_(task), options_(options) {}

DeviceRunner::~DeviceRunner() {
  if (session_) (void)session_->Close();
}

Expected<std::unique_ptr<DeviceRunner>> DeviceRunner::Connect(const DeviceSpec& spec,
                                                              const Task& task,
                                                              const MeasureOptions& options) {
  std::unique_ptr<DeviceRunner> r(new DeviceRunner(spec, task, options));
  CT_RETURN_IF_ERROR(r->Reopen());
  return r;
}

Status DeviceRunner::Start(const ReferenceData& reference) {
  reference_ = &reference;
  return PrepareTensors();
}

Expected<std::unique_ptr<DeviceRunner>> DeviceRunner::Open(const DeviceSpec& spec, const Task& task,
                                                           const ReferenceData& reference,
                                                           const MeasureOptions& options) {
  CT_ASSIGN_OR_RETURN(std::unique_ptr<DeviceRunner> r, Connect(spec, task, options));
  CT_RETURN_IF_ERROR(r->Start(reference));
  return r;
}

DeviceId DeviceRunner::id() const {
  // What the task's kernels run on (a CUDA task's: the GPU) tells one record's device from another.
  return DeviceIdOf(info_, task_.target(), spec_.name, spec_.key);
}

Status DeviceRunner::Reopen() {
  session_.reset();
  tensors_.clear();
  client::ConnectOptions co;
  co.server = spec_.server;
  co.auth_secret = spec_.auth_secret;
  co.lease_token = spec_.lease_token;
  co.request_timeout = spec_.request_timeout;
  // A loaded or emulated board can take seconds to fork a session; the reply deadline bounds it.
  co.connect_timeout = spec_.request_timeout;
  CT_ASSIGN_OR_RETURN(session_, client::Session::Connect(co));
  CT_ASSIGN_OR_RETURN(info_, session_->Info());
  std::string names;
  for (const ArgSpec& a : task_.args()) names += (names.empty() ? "" : ", ") + a.name;
  CT_RETURN_IF_ERROR(
      task_.target().backend().CheckTensorsFit(TaskTensorBytes(task_), info_, names));
  return reference_ ? PrepareTensors() : Status::Ok();
}

Status DeviceRunner::PrepareTensors() {
  tensors_.clear();
  const auto specs = task_.args();
  // Where the backend's kernels read them (a CUDA task's: the GPU; a device without one refuses
  // them, by name).
  const DLDevice where = task_.target().backend().tensor_device();
  for (size_t a = 0; a < specs.size(); ++a) {
    CT_ASSIGN_OR_RETURN(client::RemoteTensor t,
                        session_->AllocTensor(specs[a].shape, specs[a].dtype, where));
    if (!specs[a].output) {
      const std::vector<uint8_t> bytes = ArgBytes(specs[a], reference_->inputs[a]);
      CT_RETURN_IF_ERROR(t.CopyFrom(bytes.data(), bytes.size()));
    }
    tensors_.push_back(t);
  }
  return Status::Ok();
}

Measurement DeviceRunner::Measure(const Candidate& candidate, double stop_above_s) {
  Measurement m;
  m.index = candidate.index;
  m.build_s = candidate.build_s;
  m.build_cached = candidate.build_cached;
  if (candidate.error != TrialError::kOk) {
    m.error = candidate.error;
    m.message = candidate.message;
    return m;
  }
  if (!session_ || !session_->connected()) {
    if (Status s = Reopen(); !s.ok()) {
      m.error = TrialError::kDeviceLost;
      m.message = spec_.name + ": " + s.ToString();
      return m;
    }
  }
  auto t0 = Clock::now();
  m = MeasureOnce(candidate, stop_above_s);
  if (m.error == TrialError::kDeviceLost) {
    // The connection dropped under us. One new session and one more try tell a passing fault
    // from a device that is gone.
    if (Status s = Reopen(); !s.ok()) {
      session_.reset();
      m.message += "; reconnecting: " + s.ToString();
    } else {
      m = MeasureOnce(candidate, stop_above_s);
    }
  }
  m.run_s = Since(t0);
  m.build_s = candidate.build_s;
  m.build_cached = candidate.build_cached;
  // A crash or a time-out ends the server's session. Open the next one now, so that a device
  // that is really gone shows as lost here rather than on the next candidate.
  const bool session_over = m.error == TrialError::kRemoteCrash ||
                            m.error == TrialError::kRunTimeout || !session_ ||
                            !session_->connected();
  if (m.error != TrialError::kDeviceLost && session_over) {
    if (Status s = Reopen(); !s.ok()) {
      session_.reset();  // the next Measure tries once more, then reports the device lost
    }
  }
  return m;
}

Measurement DeviceRunner::MeasureOnce(const Candidate& candidate, double stop_above_s) {
  Measurement m;
  m.index = candidate.index;
  auto fail = [&](TrialError kind, const Status& s, const std::string& what) {
    m.error = TrialErrorFromStatus(s, kind);
    m.message = what + ": " + s.ToString();
    return m;
  };
  const std::string remote = task_.function() + "_" + std::to_string(candidate.index) + "_" +
                             std::to_string(++uploads_) +
                             (task_.target().backend().loads_from_package()
                                  ? std::string(".ctpkg")
                                  : std::string(task_.target().backend().library_extension()));
  auto up = session_->UploadBytes(candidate.library, remote);
  if (!up.ok()) return fail(TrialError::kLoadError, up.status(), "upload");
  auto module = session_->LoadModule(remote);
  if (!module.ok()) {
    (void)session_->RemoveFile(remote);
    return fail(TrialError::kLoadError, module.status(), "load");
  }
  std::vector<msg::Arg> args;
  for (const auto& t : tensors_) args.push_back(client::CallArg::Tensor(t));
  const auto specs = task_.args();

  if (options_.check) {
    // NaN in every float output element: one the kernel leaves unwritten cannot pass for a right
    // one (an integer output's filler passes only where the reference holds that value).
    for (size_t a = 0; a < specs.size(); ++a) {
      if (!specs[a].output) continue;
      const std::vector<uint8_t> unwritten = UnwrittenBytes(specs[a]);
      if (Status s = tensors_[a].CopyFrom(unwritten.data(), unwritten.size()); !s.ok()) {
        return fail(TrialError::kDeviceLost, s, "reset output");
      }
    }
    auto call = module->Call(task_.function(), args, options_.run_timeout_ms,
                             static_cast<uint32_t>(task_.threads()));
    if (!call.ok()) return fail(TrialError::kRuntimeError, call.status(), "call");
    HostArgs got(specs.size());
    for (size_t a = 0; a < specs.size(); ++a) {
      if (!specs[a].output) continue;
      std::vector<uint8_t> bytes(specs[a].elements() * (specs[a].dtype.bits / 8));
      if (Status s = tensors_[a].CopyTo(bytes.data(), bytes.size()); !s.ok()) {
        return fail(TrialError::kDeviceLost, s, "copy out");
      }
      got[a] = ArgValues(specs[a], bytes);
    }
    if (Status s = CompareOutputs(task_, got, reference_->expected); !s.ok()) {
      m.error = TrialError::kWrongAnswer;
      m.message = s.message();
      (void)module->Unload();
      (void)session_->RemoveFile(remote);
      return m;
    }
  }

  client::TimeOptions to;
  to.timing = options_.timing;
  to.timeout_ms = options_.run_timeout_ms;
  to.threads = static_cast<uint32_t>(task_.threads());
  to.stop_above_s = stop_above_s;
  auto timed = module->Time(task_.function(), args, to);
  if (!timed.ok()) return fail(TrialError::kRuntimeError, timed.status(), "time");
  m.costs = timed->seconds_per_call;
  m.stopped_early = timed->stopped_early;
  m.mean = m.costs.empty() ? 0
                           : std::accumulate(m.costs.begin(), m.costs.end(), 0.0) /
                                 static_cast<double>(m.costs.size());
  (void)module->Unload();
  (void)session_->RemoveFile(remote);
  return m;
}

}  // namespace crosstune::tuner
