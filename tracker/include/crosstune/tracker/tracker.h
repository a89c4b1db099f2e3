// crosstune-tracker as a library: the Asio front end over the Scheduler. One io_context, one
// thread: every handler runs on it, so the Scheduler and the Store need no locks.
//
// Connections speak the framed protocol of common/ (tracker_messages.h lists the exchanges).
// Every wait has a deadline: handshakes, server heartbeats, idle clients and each write are
// swept by a periodic timer; one write is in flight per socket, the rest queue behind it.
//
// Thread-safety: construct, Start, Stop and destroy on the io_context's thread (or before it runs).
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "crosstune/status.h"
#include "crosstune/tracker/scheduler.h"
#include "crosstune/tracker/tvm.h"

namespace crosstune::tracker {

struct TrackerOptions {
  std::string host = "127.0.0.1";  // listening beyond loopback needs a reason (and auth)
  uint16_t port = 9190;            // 0: any free port (see Tracker::port())
  // >= 0: serve the tracker port on this inherited socket, already bound and listening, instead
  // of binding `port` (socket activation: whoever holds the socket keeps the port across a
  // restart, and connections wait in its backlog meanwhile).
  int listen_fd = -1;
  int http_port = -1;   // -1: no HTTP; 0: any free port
  std::string db_path;  // "": in memory, nothing survives a restart
  // Non-empty: the farm's tuning records are kept in this PostgreSQL database (a postgresql://
  // URI or libpq's key=value form; pg_records.h), which other trackers may share, instead of
  // db_path's.
  std::string records_db;
  std::string auth_secret;  // non-empty: clients (and servers, without server_secret) must
                            // answer the HMAC challenge
  // Non-empty: peers that say they are servers answer the challenge with this secret instead,
  // so a client (who holds auth_secret) cannot register as a server.
  std::string server_secret;
  std::string admin_secret;  // non-empty: enables drain/undrain/kick for holders of it
  SchedulerOptions scheduler;
  TvmOptions tvm;  // TVM's tracker protocol on the same port (off unless tvm.allow)
  Ms handshake_timeout{10'000};
  Ms client_idle_timeout{120'000};  // clients send something (renew, heartbeat) more often
  Ms write_timeout{10'000};
  Ms probe_timeout{3'000};  // self-check: connect + Hello to the device's address
  Ms tick{100};
  // Connections that have not completed their handshake (each may hold a small buffer until
  // the handshake timeout): more are refused with Busy at once.
  size_t max_pre_auth_conns = 512;
  size_t max_pre_auth_conns_per_peer = 64;
  // The farm's tuning records each sender may send a second, and in a burst (records.h).
  double records_per_second = 2000;
  double records_burst = 20000;
};

class Tracker {
 public:
  Tracker(boost::asio::io_context& io, TrackerOptions options);
  ~Tracker();
  Tracker(const Tracker&) = delete;
  Tracker& operator=(const Tracker&) = delete;

  // Opens the database, restores active leases, binds the listeners and starts accepting.
  Status Start();
  // Closes listeners and connections; pending handlers finish with operation_aborted.
  void Stop();

  uint16_t port() const;
  uint16_t http_port() const;  // 0 when HTTP is off

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace crosstune::tracker
