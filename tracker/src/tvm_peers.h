// The TVM side of crosstune-tracker: TVM RPC servers and clients that speak TVM's tracker
// protocol (python/tvm/rpc/{base,tracker,server,client}.py) on the tracker's port, mapped onto
// the same Scheduler as crosstune peers.
//
// The protocol: the peer sends the int32 magic 0x2F271 and the tracker echoes it; then each
// message is [int32 length][UTF-8 JSON], one request and one reply.
//   [1]                                       -> 0                          PING
//   [3, key, [port, matchkey], custom_addr]   -> 0                          PUT (server offers)
//   [4, key, user, priority]                  -> [0, [host, port, matchkey]] REQUEST (once granted)
//   [5, {"key": "server:<key>", "addr": [...]}] -> 0                        UPDATE_INFO
//   [6]                                       -> [0, {"queue_info", "server_info"}] SUMMARY
//   [7]                                       -> [matchkeys not handed out] GET_PENDING_MATCHKEYS
//
// How a TVM server maps onto a device: its first PUT registers the device (name "host:port",
// Protocol::kTvm, tag protocol=tvm) and offers it. A grant hands out the match key and starts a
// one-session lease, claimed at once (TVM says nothing when a client connects). The server PUTs
// a fresh key after its session, or when the key went unused for a few seconds; that PUT ends
// the lease and offers the device again. The device is gone when its tracker connection closes.
// Its port is probed while the server is idle (so a running session is never disturbed): after
// TvmOptions::probe_failures failed probes in a row the device leaves the pool, and it comes
// back when a probe passes. The peer is never told: its connection stays open and every reply
// to it is what it would be with a port that answers, so a PUT cannot be used to learn which
// ports of a host listen.
//
// Nothing on this port is authenticated, so everything is bounded: a message is 1 MiB and 64
// levels of JSON at most (ParseJson), a server's merged UPDATE_INFO 64 KiB, a SUMMARY reply about
// 1 MiB; the tracker caps TVM connections (TvmOptions::max_conns*) and stops reading from one
// whose replies queue up unread. A PUT registers the address the server connects from: a
// custom_addr naming another is refused unless TvmOptions::allow_custom_addr (then only an IP
// address within the networks), so that no peer can have the tracker probe other hosts.
//
// A REQUEST waits in the key's queue like a crosstune request (priority, aging, timeout) but is
// granted TVM devices only. It is cancelled when the client's connection closes; a request that
// times out is answered [-1, "why"], which TVM's client reports in its RuntimeError.
//
// Thread-safety: none; the tracker calls it from its io_context thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/network_v4.hpp>
#include <boost/asio/ip/network_v6.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "crosstune/status.h"
#include "crosstune/tracker/scheduler.h"
#include "crosstune/tracker/tvm.h"

namespace crosstune::tracker {

namespace tvm {
// [int32 length][JSON], as one buffer (TVM writes the two parts apart, which meets Nagle).
std::string EncodeMessage(const nlohmann::json& j);
std::string EncodeInt(int32_t v);
}  // namespace tvm

class TvmPeers {
 public:
  struct Hooks {
    std::function<void(uint64_t conn, std::string bytes)> send;
    std::function<void(uint64_t conn, const std::string& why)> close;
    std::function<void()> drain;  // carry out the scheduler's pending actions
  };

  TvmPeers(boost::asio::io_context& io, Scheduler& sched, TvmOptions options, Hooks hooks);
  ~TvmPeers();

  // Validates the options (the networks); call before accepting.
  Status Init();
  // Whether a TVM peer from `remote` is let in; the error says why not.
  Status Admit(const boost::asio::ip::address& remote) const;

  // A connection that sent the magic; the caller echoes it (tvm::EncodeInt(kTrackerMagic)).
  void Opened(uint64_t conn, const boost::asio::ip::address& remote, uint16_t remote_port);
  // Handles the whole messages at the front of `data`, at most `max_messages` of them, and
  // returns the bytes it used; an error means the connection must be closed (the message says
  // why: a protocol violation).
  Expected<size_t> OnInput(TimePoint now, uint64_t conn, std::string_view data,
                           size_t max_messages = SIZE_MAX);
  void Closed(TimePoint now, uint64_t conn, const std::string& why);

  // Carries out a scheduler action addressed to a TVM connection. Returns false for the kinds
  // the tracker does itself: kGrant (sent as EncodeGrant's bytes once the lease is persisted)
  // and kCloseConn.
  bool Execute(TimePoint now, const Action& a);
  std::string EncodeGrant(const Action& a) const;

  // Starts the port probes that are due.
  void Tick(TimePoint now);

 private:
  struct Peer {
    std::string remote;  // peer IP, as text
    uint16_t remote_port = 0;
    nlohmann::json info = nlohmann::json::object();  // UPDATE_INFO
    size_t info_bytes = 2;                           // its size as JSON text
    // As a server:
    std::string device;    // the device name ("host:port") of the latest PUT, "" before one
    bool in_pool = false;  // `device` is registered (not out for failed port probes)
    std::string key;       // its rpc key
    std::string matchkey;  // the latest PUT
    bool handed_out = false;
    int polls_since_grant = 0;
    std::string lease_token, lease_matchkey;
    // Health.
    TimePoint next_probe;
    int failed_probes = 0;
    bool probing = false;
    // As a client:
    uint32_t next_request_id = 1;
  };

  Status Handle(TimePoint now, uint64_t conn, Peer& p, const nlohmann::json& msg);
  Status Put(TimePoint now, uint64_t conn, Peer& p, const nlohmann::json& msg);
  // The host a PUT registers: the peer's own address, or its custom_addr where allowed.
  Expected<std::string> PutHost(const Peer& p, const nlohmann::json& msg) const;
  bool InNetworks(const boost::asio::ip::address& a) const;
  nlohmann::json Summary(TimePoint now) const;
  void Reply(uint64_t conn, const nlohmann::json& j) { hooks_.send(conn, tvm::EncodeMessage(j)); }
  void Probe(const std::string& address, std::function<void(Status)> done);
  void ProbeDone(uint64_t conn, const std::string& device, const Status& s);
  // Registers the peer's `device` with the scheduler, offered for grants when `offer`.
  Status JoinPool(TimePoint now, uint64_t conn, Peer& p, bool offer);
  void LeavePool(TimePoint now, uint64_t conn, Peer& p);
  // Leaves the pool and gives up the claim on `device` (another peer may PUT it then).
  void Release(TimePoint now, uint64_t conn, Peer& p);

  boost::asio::io_context& io_;
  Scheduler& sched_;
  TvmOptions options_;
  Hooks hooks_;
  std::vector<boost::asio::ip::network_v4> nets4_;
  std::vector<boost::asio::ip::network_v6> nets6_;
  std::map<uint64_t, Peer> peers_;
  // The peer whose PUT claims each device name, in the pool or out of it for failed probes.
  std::map<std::string, uint64_t> conn_by_device_;
  // Outlives pending probes' handlers: they check it before touching `this`.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace crosstune::tracker
