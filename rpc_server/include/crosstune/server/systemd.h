// The server as a systemd service: readiness and status reports (Type=notify units) through
// libsystemd's sd_notify, and the unit's resource limits taken from the server's config.
//
// libsystemd is loaded at run time (dlopen "libsystemd.so.0"), as the CUDA driver is: the same
// server binary runs on boards without systemd, under qemu-user and on riscv64, for which Debian
// has no libsystemd to link against. Nothing is loaded unless systemd asked for reports
// (NOTIFY_SOCKET is set).
//
// Thread-safety: NotifySystemd may be called from any thread; the library is loaded once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "crosstune/status.h"

namespace crosstune::server {

// Whether the service manager asked for notifications (NOTIFY_SOCKET is set).
bool SystemdWantsNotify();

// Sends `state` (e.g. "READY=1\nSTATUS=registered with farm:9190") with sd_notify. Ok and nothing
// sent when NOTIFY_SOCKET is unset; an error naming the cause when it is set but libsystemd
// cannot be loaded or sd_notify fails (the unit would otherwise wait for a readiness that never
// comes).
Status NotifySystemd(const std::string& state);

// The service's limits: every task (process or thread) and all memory of the unit's cgroup,
// which holds the server, its fork server and every session. 0 leaves a limit as the unit has it.
struct UnitLimits {
  uint64_t tasks_max = 0;
  uint64_t memory_max_bytes = 0;
};

// The systemctl command that sets `limits` on `unit` for this boot (set-property --runtime), as an
// argument vector; empty when both limits are 0.
std::vector<std::string> UnitLimitsCommand(const std::string& unit, const UnitLimits& limits);

// Runs UnitLimitsCommand (systemctl from PATH; from ExecStartPre=+ as root, before the server
// starts) and waits for it: an error with systemctl's exit status when it fails.
Status ApplyUnitLimits(const std::string& unit, const UnitLimits& limits);

}  // namespace crosstune::server
