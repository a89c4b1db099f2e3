// The tracker's HTTP listener: the status page (status_page.h), /api/summary and /metrics, one
// Beast session per connection; and the summary they show, which the protocol's Query returns
// too.
#include <spdlog/spdlog.h>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "crosstune/records_json.h"
#include "crosstune/text.h"
#include "crosstune/tracker/status_page.h"
#include "tracker_impl.h"

namespace crosstune::tracker {
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

// The farm's records the summary shows (the first in (task, target, kind) order); `crosstune
// records ls` lists them all.
constexpr uint32_t kSummaryRecordRows = 100;

// One HTTP/1.1 connection to the status page; its lifetime follows its pending I/O.
class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  using Handler =
      std::function<http::response<http::string_body>(const http::request<http::string_body>&)>;
  HttpSession(tcp::socket s, Handler h) : stream_(std::move(s)), handler_(std::move(h)) {}

  void Read() {
    req_ = {};
    stream_.expires_after(std::chrono::seconds(15));
    http::async_read(stream_, buffer_, req_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->Shut();
                       self->Respond();
                     });
  }

 private:
  void Respond() {
    auto res = std::make_shared<http::response<http::string_body>>(handler_(req_));
    // Here, so that no answer goes without them: the page, the API, errors and 404s alike.
    for (const auto& [name, value] : HttpSecurityHeaders()) res->set(name, value);
    res->keep_alive(req_.keep_alive());
    res->prepare_payload();
    stream_.expires_after(std::chrono::seconds(15));
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        if (ec || res->need_eof()) return self->Shut();
                        self->Read();
                      });
  }
  void Shut() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
  Handler handler_;
};

}  // namespace

// Impl's HTTP handlers, apart from Impl's declaration so that only this file needs Beast.
struct Tracker::Impl::Http {
  static http::response<http::string_body> Handle(Impl& m,
                                                  const http::request<http::string_body>& req) {
    try {
      return Serve(m, req);
    } catch (const std::exception& e) {
      spdlog::error("tracker: internal error serving {}: {}",
                    EscapeForLog(std::string(req.target())), e.what());
      http::response<http::string_body> res(http::status::internal_server_error, req.version());
      res.set(http::field::content_type, "text/plain");
      res.body() = "internal error\n";
      return res;
    }
  }

  static http::response<http::string_body> Serve(Impl& m,
                                                 const http::request<http::string_body>& req) {
    http::response<http::string_body> res(http::status::ok, req.version());
    res.set(http::field::server, "crosstune-tracker");
    std::string target(req.target());
    if (auto q = target.find('?'); q != std::string::npos) target.resize(q);
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      res.result(http::status::method_not_allowed);
      res.body() = "GET only\n";
    } else if (target == "/" || target == "/index.html") {
      res.set(http::field::content_type, "text/html; charset=utf-8");
      res.body() = std::string(StatusPageHtml());
    } else if (target == "/api/summary") {
      res.set(http::field::content_type, "application/json");
      res.body() = DumpJson(m.Summary(), 1);
    } else if (target == "/metrics") {
      res.set(http::field::content_type, "text/plain; version=0.0.4");
      res.body() = MetricsText(m.sched.Snap(SteadyClock::now()));
      m.tune_runs.AppendMetrics(&res.body());
    } else {
      res.result(http::status::not_found);
      res.set(http::field::content_type, "text/plain");
      res.body() = "not found: / /api/summary /metrics\n";
    }
    return res;
  }
};

void Tracker::Impl::AcceptHttp() {
  http_acceptor.async_accept(
      [self = shared_from_this()](boost::system::error_code ec, tcp::socket s) {
        if (self->stopped) return;
        if (!ec) {
          std::weak_ptr<Impl> weak = self;
          std::make_shared<HttpSession>(std::move(s), [weak](const auto& req) {
            if (auto me = weak.lock()) return Http::Handle(*me, req);
            return http::response<http::string_body>(http::status::service_unavailable, 11);
          })->Read();
          self->AcceptHttp();
        } else {
          spdlog::warn("tracker: http accept: {}", ec.message());
          self->http_backoff_timer.expires_after(std::chrono::milliseconds(100));
          self->http_backoff_timer.async_wait([self](boost::system::error_code e) {
            if (!e) self->AcceptHttp();
          });
        }
      });
}

// --- the summary --------------------------------------------------------------------------------

std::map<std::string, double> Tracker::Impl::BusySeconds(const Snapshot& snap) {
  std::map<std::string, double> busy;
  for (const auto& d : snap.devices) busy[d.name] = d.busy_seconds;
  return busy;
}

std::string Tracker::Impl::DumpJson(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json Tracker::Impl::Summary() {
  std::vector<HistoryRow> history;
  if (auto h = store->RecentHistory(20); h.ok()) history = std::move(*h);
  auto now = SteadyClock::now();
  auto snap = sched.Snap(now);
  nlohmann::json j = SummaryJson(snap, history);
  j["tune_runs"] = tune_runs.ToJson(now);
  j["usage"] = usage.ToJson(now, BusySeconds(snap));
  // The farm's records: the first rows, in (task, target, kind) order.
  msg::RecordsList list;
  list.limit = kSummaryRecordRows;
  j["records"] = nlohmann::json::array();
  if (auto rows = records ? records->ListRecords(list)
                          : Expected<msg::RecordsListReply>(msg::RecordsListReply{});
      rows.ok()) {
    for (const auto& r : rows->rows) {
      j["records"].push_back(RecordsSummaryRowJson(r));
    }
    j["records_more"] = rows->more;
  } else {
    spdlog::warn("tracker: the status page's records: {}", rows.status().ToString());
  }
  return j;
}

}  // namespace crosstune::tracker
