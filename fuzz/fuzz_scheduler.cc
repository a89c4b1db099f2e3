// The tracker's scheduler (tracker/src/scheduler.cc) driven by what its peers may send, in any
// order: servers registering (under one another's addresses too), heartbeating, acking tokens and
// reporting sessions; clients requesting, cancelling, renewing, releasing and vanishing; admins
// draining and kicking; the clock moving. Message fields come from small vocabularies so that the
// steps meet (the tracker validates strings before they reach the scheduler; fuzz_frame and
// fuzz_constraint fuzz that part).
//
// What must hold after every step: a device is never leased twice at once (each kLeaseStarted
// names a device without a live lease), every grant is for a lease that started, and a leased
// device shows its holder.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "crosstune/tracker/scheduler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crosstune;
  using namespace crosstune::tracker;
  FuzzedDataProvider in(data, size);
  auto byte = [&in] { return in.ConsumeIntegral<uint8_t>(); };
  auto pick = [&in](const auto& from) -> const auto& {
    return from[in.ConsumeIntegralInRange<size_t>(0, from.size() - 1)];
  };
  TimePoint now = TimePoint{} + std::chrono::hours(1);
  SchedulerOptions so;
  so.startup_grace = std::chrono::milliseconds(byte() % 2 ? 0 : 2000);
  so.aging_step = std::chrono::milliseconds(1000 * (1 + byte() % 4));
  int counter = 0;
  so.make_token = [&counter] { return "t" + std::to_string(++counter); };
  Scheduler sched(so, now);
  sched.unix_ms = [&now] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  };

  const std::vector<std::string> keys = {"a", "b"};
  const std::vector<std::string> holders = {"ann", "bob", ""};
  const std::vector<std::string> ids = {"s1", "s2", "s3", ""};
  const std::vector<std::string> constraints = {"cores>=2", "+neon",     "arch=aarch64",
                                                "room=lab", "cores>=64", "memory_mb<=1"};
  const std::vector<std::string> admin = {"drain", "undrain", "kick", "reboot"};
  const std::vector<uint32_t> lease_ms = {0, 500, 5000, 4000000000u};
  std::vector<std::string> tokens = {"", "forged"};
  std::vector<std::string> devices = {"10.0.0.1:9090"};
  std::map<std::string, std::string> live;  // device -> token of its live lease
  std::set<std::string> started;            // tokens whose lease started

  auto check = [&] {
    for (Action& a : sched.TakeActions()) {
      switch (a.kind) {
        case Action::Kind::kPushToken:
          if (!a.token.empty()) tokens.push_back(a.token);
          break;
        case Action::Kind::kLeaseStarted:
          if (live.count(a.lease.device) != 0) std::abort();  // two leases on one device
          live[a.lease.device] = a.lease.token;
          started.insert(a.lease.token);
          break;
        case Action::Kind::kLeaseEnded: {
          auto it = live.find(a.lease.device);
          if (it != live.end() && it->second == a.lease.token) live.erase(it);
          break;
        }
        case Action::Kind::kGrant:
          if (started.count(a.grant.lease_token) == 0) std::abort();  // granted, never started
          break;
        default:
          break;
      }
    }
    Snapshot snap = sched.Snap(now);
    for (const auto& d : snap.devices) {
      bool held = d.state == "granting" || d.state == "in-session" || d.state == "leased";
      if (held && d.holder.empty()) std::abort();
    }
  };

  while (in.remaining_bytes() > 0) {
    uint8_t op = byte() % 16;
    uint64_t server = 1 + byte() % 4;
    uint64_t client = 11 + byte() % 4;
    switch (op) {
      case 0:
      case 1: {
        msg::Register reg;
        reg.key = pick(keys);
        reg.info.arch = byte() % 2 ? "aarch64" : "x86_64";
        reg.info.cores = byte() % 8;
        reg.info.memory_bytes = uint64_t{byte()} << 24;
        reg.info.cpu_features = {"neon"};
        if (byte() % 2) reg.tags["room"] = "lab";
        reg.port = 9090;
        reg.lease_token = pick(tokens);
        reg.session_active = byte() % 2;
        reg.server_id = pick(ids);
        // Mostly its own address; sometimes another server's (a restart, or a hijack attempt).
        uint64_t at = byte() % 4 ? server : 1 + byte() % 4;
        std::string address = "10.0.0." + std::to_string(at) + ":9090";
        auto r = sched.RegisterDevice(now, server, reg, address);
        if (r.ok()) devices.push_back(r->device);
        break;
      }
      case 2: {
        msg::DeviceRequest req;
        req.key = pick(keys);
        if (byte() % 3 == 0) req.constraints.push_back(pick(constraints));
        req.priority = static_cast<int8_t>(byte());
        req.queue_timeout_ms = pick(lease_ms);
        req.lease_ms = pick(lease_ms);
        req.holder = pick(holders);
        if (req.holder.empty()) req.holder = "client" + std::to_string(client);
        req.multi_session = byte() % 2;
        sched.Request(now, client, byte() % 4, req);
        break;
      }
      case 3:
        (void)sched.Cancel(now, client, byte() % 4);
        break;
      case 4:
        (void)sched.Renew(now, client, msg::RenewLease{pick(tokens), pick(lease_ms)});
        break;
      case 5:
        (void)sched.Release(
            now, msg::ReleaseLease{pick(tokens), static_cast<uint8_t>(byte() % 6), "why"});
        break;
      case 6:
        sched.TokenAcked(now, server, pick(tokens));
        break;
      case 7:
        (void)sched.SessionStarted(now, server, pick(tokens));
        break;
      case 8:
        sched.SessionEnded(
            now, server,
            msg::SessionEnded{pick(tokens), static_cast<uint8_t>(byte() % 6), "ended"});
        break;
      case 9:
        sched.Heartbeat(now, server, msg::ServerHeartbeat{byte() % 2 == 1, pick(tokens)});
        break;
      case 10:
        sched.SelfCheckResult(
            now, pick(devices),
            byte() % 2 ? Status::Ok() : Status(ErrorCode::kInternal, "self-check failed"));
        break;
      case 11:
        (void)sched.Admin(now, pick(admin), pick(devices));
        break;
      case 12:
        sched.DeviceDisconnected(now, server);
        break;
      case 13:
        sched.ClientDisconnected(now, client);
        break;
      default:
        now += std::chrono::milliseconds(100 * byte());
        sched.Tick(now);
        break;
    }
    check();
  }
  return 0;
}
