// One TCP probe of a device's address, shared by the self-check of a quarantined crosstune server
// (tracker_leases.cc: a Hello, any frame back proves a live server) and the port probe of an idle
// TVM server (tvm_peers.cc: four bytes that are not TVM's RPC magic, nothing read back).
//
// Thread-safety: call on the io_context's thread; `done` runs there too.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <string>
#include <utility>

#include "crosstune/status.h"
#include "crosstune/tracker/outbox.h"

namespace crosstune::tracker {

// "host:port" or "[v6]:port" -> host (brackets off), port (0 when absent or not a number).
std::pair<std::string, int> SplitHostPort(const std::string& address);

// Judges the first four bytes the peer sent back.
using ProbeReplyCheck = std::function<Status(const std::array<unsigned char, 4>& reply)>;

// Resolves `address`, connects, sends `bytes` and, when `check_reply` is set, reads four bytes
// and returns its verdict; without it, an accepted connection is a pass (the write is sent, its
// outcome not judged). All within `timeout`. `done`
// runs exactly once: Ok, Timeout, Disconnected (naming the socket error) or check_reply's Status.
void ProbeTcp(boost::asio::io_context& io, const std::string& address, std::string bytes,
              Ms timeout, ProbeReplyCheck check_reply, std::function<void(Status)> done);

}  // namespace crosstune::tracker
