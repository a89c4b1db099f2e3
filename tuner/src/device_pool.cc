#include "crosstune/tuner/device_pool.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "crosstune/channel.h"
#include "crosstune/client/session.h"
#include "crosstune/cpus.h"
#include "crosstune/json_reader.h"
#include "crosstune/protocol.h"

namespace crosstune::tuner {

namespace {
std::chrono::milliseconds RenewEvery(std::chrono::milliseconds hold) {
  return std::max(std::chrono::milliseconds(200),
                  std::min(hold / 3, std::chrono::milliseconds(20'000)));
}
}  // namespace

std::unique_ptr<DevicePool> DevicePool::FromServers(const std::vector<std::string>& servers,
                                                    const std::string& auth_secret,
                                                    std::chrono::milliseconds request_timeout,
                                                    const std::vector<std::string>& names) {
  std::unique_ptr<DevicePool> pool(new DevicePool());
  for (size_t i = 0; i < servers.size(); ++i) {
    const std::string& s = servers[i];
    DeviceSpec d;
    d.name = i < names.size() ? names[i] : s;
    d.server = s;
    d.auth_secret = auth_secret;
    d.request_timeout = request_timeout;
    pool->devices_.push_back(d);
    pool->trackers_.emplace_back();
  }
  return pool;
}

Expected<std::unique_ptr<DevicePool>> DevicePool::FromTracker(
    const client::TrackerOptions& tracker, const std::string& key, int max_devices,
    std::chrono::milliseconds wait, const std::string& server_secret,
    std::chrono::milliseconds request_timeout) {
  std::unique_ptr<DevicePool> pool(new DevicePool());
  // How many devices of the key could serve now: free ones, or one if all are busy.
  int want = 1;
  {
    CT_ASSIGN_OR_RETURN(auto probe, client::TrackerClient::Connect(tracker));
    CT_ASSIGN_OR_RETURN(std::string summary, probe->Query());
    // The tracker's summary (one reply frame): bounded, as all JSON from outside.
    auto j = ParseJson(summary, {.max_bytes = Limits::kMaxFrameBytes});
    auto text = [](const nlohmann::json& d, const char* field) {
      auto it = d.find(field);
      return it != d.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    int free = 0;
    if (j.ok() && j->is_object() && j->contains("devices") && (*j)["devices"].is_array()) {
      for (const auto& d : (*j)["devices"]) {
        if (d.is_object() && text(d, "key") == key && text(d, "state") == "free") ++free;
      }
    }
    want = std::max(1, free);
    if (max_devices > 0) want = std::min(want, max_devices);
  }
  client::LeaseRequest req;
  req.key = key;
  req.multi_session = true;
  Status first_error;
  for (int i = 0; i < want; ++i) {
    CT_ASSIGN_OR_RETURN(auto tc, client::TrackerClient::Connect(tracker));
    // The first device may be waited for; the rest only if they are free now.
    req.wait = i == 0 ? wait : std::chrono::milliseconds(2'000);
    auto grant = tc->RequestDevice(req);
    if (!grant.ok()) {
      if (i == 0) return grant.status();
      break;
    }
    tc->StartAutoRenew(grant->lease_token, RenewEvery(std::chrono::milliseconds(grant->lease_ms)));
    DeviceSpec d;
    d.name = grant->device;
    d.server = grant->address;
    d.lease_token = grant->lease_token;
    d.key = key;
    d.auth_secret = server_secret;
    d.request_timeout = request_timeout;
    pool->devices_.push_back(d);
    pool->trackers_.push_back(std::move(tc));
  }
  return pool;
}

void DevicePool::Lost(const DeviceSpec& device, const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i].lease_token.empty() || devices_[i].lease_token != device.lease_token) continue;
    if (auto& tc = trackers_[i]) {
      tc->StopAutoRenew();
      (void)tc->Release(device.lease_token, msg::Outcome::kUnreachable, why.message());
      tc.reset();
    }
  }
}

Status DevicePool::ReportProgress(msg::TuneProgress report) {
  std::lock_guard<std::mutex> lock(mu_);
  auto now = std::chrono::steady_clock::now();
  if (!report.finished && last_report_ != std::chrono::steady_clock::time_point{} &&
      now - last_report_ < std::chrono::seconds(1)) {
    return Status::Ok();
  }
  client::TrackerClient* via = nullptr;
  report.lease_tokens.clear();
  // The tracker refuses a report naming more leases than msg::kMaxTuneProgressLeases: a run on
  // more devices names its first ones, and the page shows those.
  for (size_t i = 0;
       i < devices_.size() && report.lease_tokens.size() < msg::kMaxTuneProgressLeases; ++i) {
    if (!trackers_[i]) continue;  // a server given by address, or a lease given back
    if (via == nullptr) via = trackers_[i].get();
    report.lease_tokens.push_back(devices_[i].lease_token);
  }
  if (via == nullptr) return Status::Ok();
  last_report_ = now;
  return via->ReportTuneProgress(report);
}

DevicePool::~DevicePool() {
  for (size_t i = 0; i < trackers_.size(); ++i) {
    if (!trackers_[i]) continue;
    trackers_[i]->StopAutoRenew();
    (void)trackers_[i]->Release(devices_[i].lease_token, msg::Outcome::kOk, "tuning done");
  }
}

Expected<std::unique_ptr<DevicePool>> DevicePool::StartLocal(
    std::chrono::milliseconds request_timeout, const client::LocalServerOptions& options) {
  auto local = std::make_unique<client::LocalServer>();
  CT_RETURN_IF_ERROR(local->Start(options));
  auto pool = FromServers({local->address()}, "", request_timeout, {"local"});
  pool->local_ = std::move(local);
  return pool;
}

bool AllOnThisMachine(const std::vector<DeviceSpec>& devices) {
  for (const DeviceSpec& d : devices) {
    std::string host;
    uint16_t port = 0;
    if (!Channel::ParseHostPort(d.server, &host, &port).ok()) return false;
    const bool loopback = host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
    if (!loopback) return false;
  }
  return !devices.empty();
}

LocalCpuSplit SplitLocalCpus(int kernel_threads, const std::vector<int>& allowed,
                             const std::function<std::vector<int>(int)>& siblings) {
  LocalCpuSplit split;
  if (kernel_threads < 1 || allowed.size() <= static_cast<size_t>(kernel_threads)) return split;
  split.kernel.assign(allowed.end() - kernel_threads, allowed.end());
  std::set<int> taken(split.kernel.begin(), split.kernel.end());
  for (int c : split.kernel) {
    for (int s : siblings(c)) taken.insert(s);
  }
  for (int c : allowed) {
    if (taken.count(c) == 0) split.build.push_back(c);
  }
  return split;
}

LocalCpuSplit SplitLocalCpus(int kernel_threads) {
  return SplitLocalCpus(kernel_threads, AllowedCpus(), [](int cpu) -> std::vector<int> {
    std::ifstream f("/sys/devices/system/cpu/cpu" + std::to_string(cpu) +
                    "/topology/thread_siblings_list");
    std::string text;
    if (!std::getline(f, text)) return {cpu};
    auto list = ParseCpuList(text);
    return list.ok() ? *list : std::vector<int>{cpu};
  });
}

Expected<builder::Target> ResolveTarget(const std::string& text, const DeviceSpec& device) {
  if (text != "auto" && text != "cuda") return builder::ParseTarget(text);
  client::ConnectOptions co;
  co.server = device.server;
  co.auth_secret = device.auth_secret;
  co.lease_token = device.lease_token;
  co.request_timeout = device.request_timeout;
  CT_ASSIGN_OR_RETURN(auto session, client::Session::Connect(co));
  CT_ASSIGN_OR_RETURN(msg::DeviceInfo info, session->Info());
  return builder::TargetFromDevice(
      info, text == "cuda" ? builder::TargetKind::kCuda : builder::TargetKind::kCpu);
}

}  // namespace crosstune::tuner
