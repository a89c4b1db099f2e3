// The tracker's front end inside: one connection's state (Conn) and Tracker::Impl, the state the
// listeners share and the calls each file defines. Private to tracker/src; included only by the
// files that define Impl's calls:
//   tracker.cc          construction, Start/Stop and the ports, the listening sockets, the tick
//   tracker_conns.cc    a connection on the tracker port: reads, the write queue, close
//   tracker_sessions.cc the crosstune protocol: accepting, the handshake, the requests
//   tracker_tvm.cc      connections that speak TVM's tracker protocol, handed to TvmPeers
//   tracker_http.cc     the HTTP listener (status page, /api/summary, /metrics) and the summary
//   tracker_leases.cc   the Scheduler's actions carried out, group commit of lease rows,
//                       self-checks
//   tracker_records.cc  the farm's tuning records: put, query, claim (records.h)
//
// Thread-safety: none; everything runs on the io_context's thread (tracker.h).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "crosstune/frame.h"
#include "crosstune/status.h"
#include "crosstune/tracker/pg_records.h"
#include "crosstune/tracker/records.h"
#include "crosstune/tracker/scheduler.h"
#include "crosstune/tracker/store.h"
#include "crosstune/tracker/tracker.h"
#include "crosstune/tracker/tune_runs.h"
#include "crosstune/tracker_messages.h"
#include "tvm_peers.h"

namespace crosstune::tracker {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

// Output queued for one connection: at kPauseReadingBytes the tracker stops reading (and
// handling) what the peer sends until the peer has read some of it, so a peer that sends requests
// and never reads the replies cannot make the tracker queue more; past kMaxQueuedBytes (only
// what the tracker pushes on its own could get there) the connection is closed.
inline constexpr size_t kPauseReadingBytes = 256 << 10;
inline constexpr size_t kMaxQueuedBytes = 8 << 20;

inline std::string HostPort(const asio::ip::address& a, uint16_t port) {
  std::string h = a.to_string();
  if (a.is_v6()) h = "[" + h + "]";
  return h + ":" + std::to_string(port);
}

// A connection: framed reads one after another, a queue of writes with one in flight.
struct Conn : std::enable_shared_from_this<Conn> {
  enum class Stage { kHello, kAuth, kReady, kClosed };
  Conn(tcp::socket s, uint64_t i) : socket(std::move(s)), id(i) {}

  tcp::socket socket;
  uint64_t id;
  Stage stage = Stage::kHello;
  bool pre_auth_counted = false;  // counted in Impl::pre_auth_* until the handshake completes
  bool tvm_counted = false;       // counted in Impl::tvm_* while open
  PeerRole role = PeerRole::kClient;
  bool is_device = false;
  bool tvm = false;  // speaks TVM's tracker protocol (TvmPeers), not ours
  std::string peer_name, nonce, session_id;
  asio::ip::address remote;
  std::vector<char> in;  // received bytes; [in_begin, in_end) not handled yet
  size_t in_begin = 0, in_end = 0;
  std::deque<std::string> out;
  size_t out_bytes = 0;      // in `out`, the write in flight included
  bool read_paused = false;  // no read in flight: `out` must drain first (kPauseReadingBytes)
  bool writing = false;
  bool close_after_write = false;
  SteadyClock::time_point read_deadline = SteadyClock::time_point::max();
  SteadyClock::time_point write_started;
  uint32_t next_request_id = 1;
  // Replies to requests the tracker sent this peer (SetLease, SelfCheck).
  std::map<uint32_t, std::function<void(const Frame&)>> pending;
};

struct Tracker::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io, TrackerOptions o);

  asio::io_context& io;
  TrackerOptions options;
  Scheduler sched;
  TuneRuns tune_runs;                // what tune runs report (status page, /metrics)
  UsageHistory usage;                // each device's utilisation over the last hour
  RecordClaims record_claims;        // which run times which config right now
  RecordsThrottle records_throttle;  // records a second per sender
  std::unique_ptr<Store> store;
  std::unique_ptr<PgRecordStore> pg_records;  // with options.records_db
  RecordStore* records = nullptr;             // the farm's records: pg_records, else store
  std::unique_ptr<TvmPeers> tvm;
  tcp::acceptor acceptor;
  tcp::acceptor http_acceptor;
  asio::steady_timer tick_timer;
  // One backoff timer per listener: a shared one let each listener's wait cancel the other's,
  // and the cancelled listener never accepted again.
  asio::steady_timer backoff_timer;
  asio::steady_timer http_backoff_timer;
  std::map<uint64_t, std::shared_ptr<Conn>> conns;
  // Connections that have not completed their handshake, in total and per peer address.
  size_t pre_auth_total = 0;
  std::map<asio::ip::address, size_t> pre_auth_by_peer;
  // Open TVM connections (TvmOptions::max_conns*), in total and per peer address.
  size_t tvm_total = 0;
  std::map<asio::ip::address, size_t> tvm_by_peer;
  uint64_t next_conn_id = 1;
  bool stopped = false;
  bool batch_open = false;  // a store transaction is open (see OpenBatch)
  std::vector<std::pair<uint64_t, std::string>> held_grants;  // conn id, encoded grant

  // --- listening sockets and the clock (tracker.cc) ---------------------------------------------

  Status Listen(tcp::acceptor& a, uint16_t port);
  // Takes over an inherited listening socket (TrackerOptions::listen_fd).
  Status Adopt(tcp::acceptor& a, int fd);
  void Tick();
  // Deadlines of every connection, then the scheduler's own clock work.
  void Sweep();

  // --- connections (tracker_conns.cc) -----------------------------------------------------------

  Ms ReadTimeout(const Conn& c) const;
  // Reads whatever the socket has into the connection's buffer and handles every whole frame in
  // it: one recv for many small frames. A frame's length is checked before room is made for it.
  void StartRead(const std::shared_ptr<Conn>& c);
  static bool Backlogged(const Conn& c) { return c.out_bytes >= kPauseReadingBytes; }
  // Handles what the connection's buffer holds, then reads more, unless the peer has first to
  // read what is queued for it: then reading pauses until Write drains the queue.
  void Pump(const std::shared_ptr<Conn>& c);
  void Send(const std::shared_ptr<Conn>& c, std::string bytes);
  template <typename T>
  void Reply(const std::shared_ptr<Conn>& c, uint32_t id, const T& payload) {
    Send(c, EncodeFrame(Opcode::kResult, id, payload));
  }
  void SendError(const std::shared_ptr<Conn>& c, uint32_t id, const Status& s) {
    Send(c, EncodeError(id, s));
  }
  // A request from the tracker to the peer; `on_reply` sees the reply frame, or a kError frame
  // made up here when the connection goes first (never called after Stop).
  template <typename T>
  void Ask(const std::shared_ptr<Conn>& c, Opcode op, const T& payload,
           std::function<void(const Frame&)> on_reply) {
    uint32_t id = c->next_request_id++;
    c->pending[id] = std::move(on_reply);
    Send(c, EncodeFrame(op, id, payload));
  }
  void Write(const std::shared_ptr<Conn>& c);
  void Close(const std::shared_ptr<Conn>& c, const std::string& why);
  std::shared_ptr<Conn> ConnById(uint64_t id);

  // --- the crosstune protocol (tracker_sessions.cc) ---------------------------------------------

  void Accept();
  // Counts a new connection against the unauthenticated limits, or refuses it (Busy) when the
  // tracker already holds too many, in total or from this peer address.
  bool AdmitPreAuth(const std::shared_ptr<Conn>& c);
  void LeavePreAuth(Conn& c);
  void HandleInput(const std::shared_ptr<Conn>& c);
  void OnFrame(const std::shared_ptr<Conn>& c, const Frame& f);
  void Refuse(const std::shared_ptr<Conn>& c, uint32_t id, const Status& s);
  // The checks are common/handshake.h's, shared with crosstune-server.
  void OnHello(const std::shared_ptr<Conn>& c, const Frame& f);
  // Servers prove themselves with the server secret when the tracker has one; everyone else
  // (and servers otherwise) with the client secret.
  const std::string& SecretFor(const Conn& c) const;
  void OnAuth(const std::shared_ptr<Conn>& c, const Frame& f);
  template <typename T, typename Fn>
  void With(const std::shared_ptr<Conn>& c, const Frame& f, Fn fn) {
    auto m = f.As<T>();
    if (!m.ok()) return SendError(c, f.request_id, m.status());
    fn(*m);
  }
  void Dispatch(const std::shared_ptr<Conn>& c, const Frame& f);
  void OnRegister(SteadyClock::time_point now, const std::shared_ptr<Conn>& c, const Frame& f,
                  const msg::Register& reg);
  void OnAdmin(SteadyClock::time_point now, const std::shared_ptr<Conn>& c, const Frame& f,
               const msg::AdminRequest& a);
  // A tune run's report: bounded, and only on leases that are active (their tokens are their
  // holders' secrets); the run is shown with those leases' devices.
  Status TakeTuneProgress(SteadyClock::time_point now, const Conn& c, const msg::TuneProgress& p);

  // --- the farm's tuning records (tracker_records.cc) -------------------------------------------

  // Clients only (servers do not tune); each answers the request itself.
  void OnRecordsPut(SteadyClock::time_point now, const std::shared_ptr<Conn>& c, const Frame& f,
                    const msg::RecordsPut& put);
  void OnRecordsQuery(const std::shared_ptr<Conn>& c, const Frame& f, const msg::RecordsQuery& q);
  void OnRecordsClaim(SteadyClock::time_point now, const std::shared_ptr<Conn>& c, const Frame& f,
                      const msg::RecordsClaim& claim);
  void OnRecordsList(const std::shared_ptr<Conn>& c, const Frame& f, const msg::RecordsList& l);

  // --- TVM's tracker protocol (tracker_tvm.cc) --------------------------------------------------

  // Counts a connection that sent TVM's magic against the TVM limits, or says why not.
  Status AdmitTvm(Conn& c);
  void LeaveTvm(Conn& c);
  // Acks at once after each read (TVM's client writes a message in two parts).
  static void QuickAck(Conn& c);
  // A connection whose first four bytes are TVM's tracker magic is handed to TvmPeers.
  bool StartTvm(const std::shared_ptr<Conn>& c);
  // One message at a time, so that a backlog of replies stops the handling of further requests.
  void HandleTvmInput(const std::shared_ptr<Conn>& c);

  // --- HTTP and the summary (tracker_http.cc) ---------------------------------------------------

  void AcceptHttp();
  struct Http;  // the handlers, defined where Beast is included
  // Each device's leased seconds since it registered, by name (what UsageHistory samples).
  static std::map<std::string, double> BusySeconds(const Snapshot& snap);
  // Strings reach the summary from the wire and from the database (which may hold rows older
  // than the wire's UTF-8 check): bytes that are not UTF-8 are shown as U+FFFD, never thrown.
  static std::string DumpJson(const nlohmann::json& j, int indent = -1);
  nlohmann::json Summary();

  // --- lease bookkeeping: the Scheduler's actions (tracker_leases.cc) ---------------------------

  // Restores the leases the store holds as active (at Start).
  Status RestoreLeases();
  void Drain();
  void Execute(Action& a);
  // Group commit: the database writes of every event handled before the io_context gets back to
  // this posted handler share one transaction; the grants they carry are held until it commits.
  void OpenBatch();
  void CommitBatch();
  // Self-check of a quarantined device: the server checks itself (SelfCheck over its
  // registration connection), then the tracker checks that the address clients are given
  // answers a Hello.
  void SelfCheck(const std::shared_ptr<Conn>& c, const std::string& device);
  // Any well-formed frame back (even a refusal) proves a live crosstune server.
  void Probe(const std::string& address, std::function<void(Status)> done);
};

}  // namespace crosstune::tracker
