#include "tcp_probe.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cstdlib>
#include <memory>

namespace crosstune::tracker {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

std::pair<std::string, int> SplitHostPort(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return {address, 0};
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  long port = std::strtol(address.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535) port = 0;  // not a port: as if none was given
  return {host, static_cast<int>(port)};
}

void ProbeTcp(asio::io_context& io, const std::string& address, std::string bytes, Ms timeout,
              ProbeReplyCheck check_reply, std::function<void(Status)> done) {
  // Lives as long as the probe's pending operations; Finish runs once, whichever ends it.
  struct State {
    explicit State(asio::io_context& io) : socket(io), resolver(io), timer(io) {}
    tcp::socket socket;
    tcp::resolver resolver;
    asio::steady_timer timer;
    std::string bytes;
    std::array<unsigned char, 4> reply{};
    ProbeReplyCheck check_reply;
    std::function<void(Status)> done;
    bool finished = false;
    void Finish(Status s) {
      if (finished) return;
      finished = true;
      timer.cancel();
      resolver.cancel();
      boost::system::error_code ignored;
      socket.shutdown(tcp::socket::shutdown_both, ignored);
      socket.close(ignored);
      done(std::move(s));
    }
    void Failed(const boost::system::error_code& ec) {
      Finish(Status(ErrorCode::kDisconnected, ec.message()));
    }
  };
  auto st = std::make_shared<State>(io);
  st->bytes = std::move(bytes);
  st->check_reply = std::move(check_reply);
  st->done = std::move(done);
  auto [host, port] = SplitHostPort(address);
  st->timer.expires_after(timeout);
  st->timer.async_wait([st](boost::system::error_code ec) {
    if (!ec) st->Finish(Status(ErrorCode::kTimeout, "no answer within the probe timeout"));
  });
  auto read_reply = [st](boost::system::error_code ec, size_t) {
    // Without a reply to judge, the connect was the test: a peer may drop the connection as soon
    // as it sees the bytes, so how the write ends says nothing more.
    if (!st->check_reply) return st->Finish(Status::Ok());
    if (ec) return st->Failed(ec);
    asio::async_read(st->socket, asio::buffer(st->reply),
                     [st](boost::system::error_code ec2, size_t) {
                       if (ec2) return st->Failed(ec2);
                       st->Finish(st->check_reply(st->reply));
                     });
  };
  st->resolver.async_resolve(
      host, std::to_string(port),
      [st, read_reply](boost::system::error_code ec, tcp::resolver::results_type r) {
        if (ec) return st->Failed(ec);
        asio::async_connect(st->socket, r,
                            [st, read_reply](boost::system::error_code ec2, const tcp::endpoint&) {
                              if (ec2) return st->Failed(ec2);
                              asio::async_write(st->socket, asio::buffer(st->bytes), read_reply);
                            });
      });
}

}  // namespace crosstune::tracker
