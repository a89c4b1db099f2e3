// crosstune-tracker's front end (tracker.h): Impl's construction, Tracker's public calls (Start,
// Stop, the ports), the listening sockets and the tick that sweeps every deadline. What each
// listener does is in the files tracker_impl.h lists.
#include "crosstune/tracker/tracker.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "tracker_impl.h"

namespace crosstune::tracker {

Tracker::Impl::Impl(asio::io_context& io, TrackerOptions o)
    : io(io),
      options(std::move(o)),
      sched(options.scheduler, SteadyClock::now()),
      records_throttle(options.records_per_second, options.records_burst),
      acceptor(io),
      http_acceptor(io),
      tick_timer(io),
      backoff_timer(io),
      http_backoff_timer(io) {
  TvmPeers::Hooks hooks;
  hooks.send = [this](uint64_t id, std::string bytes) {
    if (auto c = ConnById(id)) Send(c, std::move(bytes));
  };
  hooks.close = [this](uint64_t id, const std::string& why) {
    if (auto c = ConnById(id)) Close(c, why);
  };
  hooks.drain = [this] { Drain(); };
  tvm = std::make_unique<TvmPeers>(io, sched, options.tvm, std::move(hooks));
}

// --- listeners ----------------------------------------------------------------------------------

Status Tracker::Impl::Listen(tcp::acceptor& a, uint16_t port) {
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(options.host, ec);
  if (ec) return Status(ErrorCode::kInvalidArgument, "bad --host '" + options.host + "'");
  tcp::endpoint ep(addr, port);
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status(ErrorCode::kIoError,
                  "cannot listen on " + HostPort(addr, port) + ": " + ec.message());
  }
  return Status::Ok();
}

Status Tracker::Impl::Adopt(tcp::acceptor& a, int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Status(ErrorCode::kInvalidArgument,
                  "--listen-fd " + std::to_string(fd) + ": not a socket: " + std::strerror(errno));
  }
  boost::system::error_code ec;
  a.assign(addr.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
  if (ec) {
    return Status(ErrorCode::kInvalidArgument,
                  "--listen-fd " + std::to_string(fd) + ": " + ec.message());
  }
  return Status::Ok();
}

// --- the clock ----------------------------------------------------------------------------------

void Tracker::Impl::Tick() {
  tick_timer.expires_after(options.tick);
  tick_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec || self->stopped) return;
    self->Sweep();
    self->Tick();
  });
}

void Tracker::Impl::Sweep() {
  auto now = SteadyClock::now();
  std::vector<std::shared_ptr<Conn>> late;
  for (auto& [id, c] : conns) {
    if (now >= c->read_deadline ||
        (c->writing && now - c->write_started >= options.write_timeout)) {
      late.push_back(c);
    }
  }
  for (auto& c : late) Close(c, "deadline passed");
  tvm->Tick(now);
  sched.Tick(now);
  tune_runs.Expire(now);
  record_claims.Expire(now);
  usage.Sample(now, BusySeconds(sched.Snap(now)));
  Drain();
}

// --- Tracker ------------------------------------------------------------------------------------

Tracker::Tracker(asio::io_context& io, TrackerOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {}

Tracker::~Tracker() {
  // Destructors must not throw: a failure while stopping (no memory for the connection list) is
  // logged, and the members' own destructors close what is left.
  try {
    Stop();
  } catch (const std::exception& e) {
    spdlog::error("tracker: error while stopping: {}", e.what());
  }
}

Status Tracker::Start() {
  Impl& m = *impl_;
  CT_RETURN_IF_ERROR(m.tvm->Init());
  CT_ASSIGN_OR_RETURN(m.store, Store::Open(m.options.db_path));
  // A damaged file was moved aside and salvaged: where it is, and what came back and what not.
  if (const auto& recovery = m.store->recovery()) {
    spdlog::warn("tracker: {}", recovery->Summary(m.options.db_path));
  }
  CT_RETURN_IF_ERROR(m.RestoreLeases());
  m.records = m.store.get();
  if (!m.options.records_db.empty()) {
    CT_ASSIGN_OR_RETURN(m.pg_records, PgRecordStore::Open(m.options.records_db));
    m.records = m.pg_records.get();
    CT_ASSIGN_OR_RETURN(int64_t records, m.records->RecordCount());
    spdlog::info("tracker: the farm's tuning records are in PostgreSQL {}: {} record(s)",
                 m.pg_records->name(), records);
  } else if (!m.options.db_path.empty()) {
    CT_ASSIGN_OR_RETURN(int64_t records, m.store->RecordCount());
    spdlog::info("tracker: {} holds {} tuning record(s) of the farm", m.options.db_path, records);
  }
  if (m.options.listen_fd >= 0) {
    CT_RETURN_IF_ERROR(m.Adopt(m.acceptor, m.options.listen_fd));
  } else {
    CT_RETURN_IF_ERROR(m.Listen(m.acceptor, m.options.port));
  }
  if (m.options.http_port >= 0) {
    CT_RETURN_IF_ERROR(m.Listen(m.http_acceptor, static_cast<uint16_t>(m.options.http_port)));
    m.AcceptHttp();
  }
  m.Accept();
  m.Tick();
  m.Drain();
  return Status::Ok();
}

void Tracker::Stop() {
  Impl& m = *impl_;
  if (m.stopped) return;
  m.CommitBatch();
  m.stopped = true;
  boost::system::error_code ignored;
  m.acceptor.close(ignored);
  m.http_acceptor.close(ignored);
  m.tick_timer.cancel();
  m.backoff_timer.cancel();
  m.http_backoff_timer.cancel();
  auto conns = m.conns;
  for (auto& [id, c] : conns) m.Close(c, "tracker stopping");
}

uint16_t Tracker::port() const {
  boost::system::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

uint16_t Tracker::http_port() const {
  if (!impl_->http_acceptor.is_open()) return 0;
  boost::system::error_code ec;
  auto ep = impl_->http_acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

}  // namespace crosstune::tracker
