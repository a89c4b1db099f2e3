// crosstune-bench-tracker: a real crosstune-tracker process under 1,000 simulated servers and
// 1,000 clients on loopback. Prints one JSON object.
//
// What is simulated: the servers are lightweight in-process fakes (one TCP connection each, from
// this process) that speak the real registration protocol: Hello, Register (each with its own
// --custom-addr style address, since all connect from 127.0.0.1), a heartbeat every second, and
// an acknowledgement of every lease token the tracker pushes. They run no sessions. The clients
// are real protocol clients (one TCP connection each) that request a multi-session lease, wait
// for the grant, and release it at once.
//
// Two phases: "paced" offers a fixed request rate (Poisson arrivals spread over all clients) well
// under capacity and measures grant latency (request sent -> grant received, which includes the
// tracker's push to the fake server and its ack); "saturated" lets every client loop without
// pause and measures throughput (grants per second) and the latency that queueing then adds.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <boost/asio.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "crosstune/client/local_server.h"
#include "crosstune/frame.h"
#include "crosstune/guarded_main.h"
#include "crosstune/tracker_messages.h"

extern char** environ;

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using namespace crosstune;

// A framed connection: continuous reads, one write in flight, the rest queued.
class Peer : public std::enable_shared_from_this<Peer> {
 public:
  explicit Peer(asio::io_context& io) : socket(io) {}
  tcp::socket socket;
  std::function<void(const Frame&)> on_frame;
  std::function<void()> on_error;

  void Send(std::string bytes) {
    out_.push_back(std::move(bytes));
    if (out_.size() == 1) Write();
  }
  template <typename T>
  void Send(Opcode op, uint32_t id, const T& payload) {
    Send(EncodeFrame(op, id, payload));
  }
  void Read() {
    asio::async_read(socket, asio::buffer(header_),
                     [self = shared_from_this()](boost::system::error_code ec, size_t) {
                       if (ec) return self->Fail();
                       auto n = DecodeFrameLength(self->header_.data());
                       if (!n.ok()) return self->Fail();
                       self->body_.resize(*n);
                       asio::async_read(self->socket, asio::buffer(self->body_),
                                        [self](boost::system::error_code ec2, size_t) {
                                          if (ec2) return self->Fail();
                                          auto f = DecodeFrameBody(self->body_.data(),
                                                                   self->body_.size());
                                          if (!f.ok()) return self->Fail();
                                          self->on_frame(*f);
                                          self->Read();
                                        });
                     });
  }

 private:
  void Write() {
    asio::async_write(socket, asio::buffer(out_.front()),
                      [self = shared_from_this()](boost::system::error_code ec, size_t) {
                        if (ec) return self->Fail();
                        self->out_.pop_front();
                        if (!self->out_.empty()) self->Write();
                      });
  }
  void Fail() {
    if (failed_) return;
    failed_ = true;
    if (on_error) on_error();
  }
  std::array<unsigned char, 4> header_{};
  std::vector<char> body_;
  std::deque<std::string> out_;
  bool failed_ = false;
};

msg::Hello MakeHello(PeerRole role, const std::string& name) {
  msg::Hello h;
  h.role = static_cast<uint8_t>(role);
  h.peer_name = name;
  return h;
}

struct Stats {
  std::vector<double> latency_us;
  uint64_t grants = 0;
  uint64_t errors = 0;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1,
                      static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1))));
  return v[i];
}

double RssMb(pid_t pid, const char* field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field, 0) == 0) return std::stod(line.substr(std::strlen(field))) / 1024.0;
  }
  return 0;
}

// CPU seconds (user + system) the process has used so far.
double CpuSeconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), {});
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace

static int BenchMain(int argc, char** argv) {
  std::string tracker_bin = CT_DEFAULT_TRACKER;
  int servers = 1000, clients = 1000;
  double paced_rate = 1000, paced_s = 5, saturated_s = 3;
  CLI::App app{"crosstune-bench-tracker: grant latency and throughput of crosstune-tracker"};
  app.add_option("--tracker-bin", tracker_bin, "crosstune-tracker binary")->capture_default_str();
  app.add_option("--servers", servers, "simulated servers")->capture_default_str();
  app.add_option("--clients", clients, "clients")->capture_default_str();
  app.add_option("--rate", paced_rate, "requests per second offered in the paced phase")
      ->capture_default_str();
  app.add_option("--paced-seconds", paced_s, "length of the paced phase")->capture_default_str();
  app.add_option("--saturated-seconds", saturated_s, "length of the saturated phase")
      ->capture_default_str();
  bool memory_db = false;
  app.add_flag("--memory-db", memory_db,
               "run the tracker without a database file (to see what SQLite costs)");
  CLI11_PARSE(app, argc, argv);

  // Both sides hold one descriptor per connection: raise the limit (inherited by the tracker).
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < static_cast<rlim_t>(servers) + static_cast<rlim_t>(clients) + 64) {
    std::fprintf(stderr, "crosstune-bench-tracker: error: RLIMIT_NOFILE %llu is too low\n",
                 static_cast<unsigned long long>(lim.rlim_cur));
    return 1;
  }

  // The tracker, as its own process, with an on-disk database like a real deployment.
  std::string db = memory_db
                       ? std::string()
                       : "/tmp/crosstune-bench-tracker-" + std::to_string(::getpid()) + ".sqlite";
  std::vector<std::string> targv = {tracker_bin, "--host", "127.0.0.1", "--port", "0", "--db", db,
                                    "--log-level", "warn", "--startup-grace-s", "0",
                                    // Every simulated peer connects from 127.0.0.1 at once.
                                    "--max-handshakes", std::to_string(servers + clients + 64),
                                    "--max-handshakes-per-peer",
                                    std::to_string(servers + clients + 64)};
  client::LocalServer tracker;
  if (Status s = tracker.Start(targv, std::chrono::seconds(30), "/dev/null"); !s.ok()) {
    std::fprintf(stderr, "crosstune-bench-tracker: error: %s\n", s.ToString().c_str());
    return 1;
  }
  const pid_t tracker_pid = tracker.pid();
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), tracker.port());
  double rss_idle = RssMb(tracker_pid, "VmRSS:");

  asio::io_context io;
  std::vector<std::shared_ptr<Peer>> server_peers, client_peers;
  int registered = 0, connected_clients = 0, failures = 0;

  // --- simulated servers ---
  for (int i = 0; i < servers; ++i) {
    auto p = std::make_shared<Peer>(io);
    server_peers.push_back(p);
    p->on_error = [&failures] { failures++; };
    p->on_frame = [p, i, &registered](const Frame& f) {
      if (f.op == Opcode::kGrant) {
        p->Send(Opcode::kResult, f.request_id, msg::Empty{});  // token taken
      } else if (f.op == Opcode::kResult && f.request_id == 1) {
        msg::Register reg;
        reg.key = "bench";
        reg.info.arch = "x86_64";
        reg.info.cores = 8;
        reg.info.memory_bytes = 8ull << 30;
        reg.custom_addr = "10." + std::to_string(i / 65536) + "." + std::to_string(i / 256 % 256) +
                          "." + std::to_string(i % 256) + ":9090";
        reg.port = 9090;
        p->Send(Opcode::kRegister, 2, reg);
      } else if (f.op == Opcode::kResult && f.request_id == 2) {
        registered++;
      }
    };
    p->socket.async_connect(ep, [p](boost::system::error_code ec) {
      if (ec) return p->on_error();
      p->socket.set_option(tcp::no_delay(true));
      p->Read();
      p->Send(Opcode::kHello, 1, MakeHello(PeerRole::kServer, "sim"));
    });
  }
  // Each simulated server heartbeats once a second, spread over the second as real ones are
  // (one timer sends a hundredth of them every 10 ms).
  asio::steady_timer heartbeat(io);
  uint32_t hb_id = 100;
  size_t hb_next = 0;
  std::function<void()> beat = [&] {
    size_t n = (server_peers.size() + 99) / 100;
    for (size_t k = 0; k < n; ++k, ++hb_next) {
      server_peers[hb_next % server_peers.size()]->Send(Opcode::kHeartbeat, hb_id++,
                                                        msg::ServerHeartbeat{});
    }
    heartbeat.expires_after(std::chrono::milliseconds(10));
    heartbeat.async_wait([&](boost::system::error_code ec) {
      if (!ec) beat();
    });
  };
  auto run_until = [&](std::function<bool()> done, std::chrono::seconds limit) {
    auto deadline = Clock::now() + limit;
    while (!done() && Clock::now() < deadline) io.run_for(std::chrono::milliseconds(10));
    return done();
  };
  if (!run_until([&] { return registered == servers; }, std::chrono::seconds(60))) {
    std::fprintf(stderr, "crosstune-bench-tracker: error: only %d of %d servers registered\n",
                 registered, servers);
    return 1;  // ~LocalServer kills the tracker
  }
  beat();

  // --- clients ---
  enum class Phase { kConnecting, kPaced, kSaturated, kDone };
  Phase phase = Phase::kConnecting;
  Stats paced, saturated;
  std::mt19937 rng(42);
  // Each client waits an exponential gap between cycles: together they offer `paced_rate`.
  std::exponential_distribution<double> gap(paced_rate / clients);
  struct ClientState {
    uint32_t next_id = 10;
    uint32_t request_id = 0;
    Clock::time_point sent;
    std::string token;
    std::unique_ptr<asio::steady_timer> timer;
  };
  std::vector<ClientState> states(clients);
  std::function<void(int)> cycle;
  cycle = [&](int i) {
    if (phase == Phase::kDone) return;
    auto& s = states[i];
    msg::DeviceRequest req;
    req.key = "bench";
    req.holder = "bench-client-" + std::to_string(i);
    req.multi_session = true;
    req.queue_timeout_ms = 60'000;
    s.request_id = s.next_id++;
    s.sent = Clock::now();
    client_peers[i]->Send(Opcode::kRequestDevice, s.request_id, req);
  };
  auto schedule_next = [&](int i) {
    if (phase == Phase::kSaturated) return cycle(i);
    if (phase != Phase::kPaced) return;
    auto& t = states[i].timer;
    t->expires_after(std::chrono::microseconds(static_cast<int64_t>(gap(rng) * 1e6)));
    t->async_wait([&, i](boost::system::error_code ec) {
      if (!ec) cycle(i);
    });
  };
  for (int i = 0; i < clients; ++i) {
    auto p = std::make_shared<Peer>(io);
    client_peers.push_back(p);
    states[i].timer = std::make_unique<asio::steady_timer>(io);
    p->on_error = [&failures] { failures++; };
    p->on_frame = [&, i](const Frame& f) {
      auto& s = states[i];
      if (f.op == Opcode::kResult && f.request_id == 1) {
        connected_clients++;
        return;
      }
      if (f.request_id == s.request_id && f.op != Opcode::kQueueUpdate) {
        Stats& st = phase == Phase::kSaturated ? saturated : paced;
        if (f.op == Opcode::kError) {
          st.errors++;
          return schedule_next(i);
        }
        auto g = f.As<msg::Grant>();
        if (!g.ok()) {
          st.errors++;
          return schedule_next(i);
        }
        st.grants++;
        st.latency_us.push_back(
            std::chrono::duration<double, std::micro>(Clock::now() - s.sent).count());
        s.request_id = 0;
        client_peers[i]->Send(Opcode::kReleaseLease, s.next_id++,
                              msg::ReleaseLease{g->lease_token, 0, ""});
        schedule_next(i);
      }
    };
    p->socket.async_connect(ep, [p, i](boost::system::error_code ec) {
      if (ec) return p->on_error();
      p->socket.set_option(tcp::no_delay(true));
      p->Read();
      p->Send(Opcode::kHello, 1, MakeHello(PeerRole::kClient, "bench-" + std::to_string(i)));
    });
  }
  if (!run_until([&] { return connected_clients == clients; }, std::chrono::seconds(60))) {
    std::fprintf(stderr, "crosstune-bench-tracker: error: only %d of %d clients connected\n",
                 connected_clients, clients);
    return 1;  // ~LocalServer kills the tracker
  }

  phase = Phase::kPaced;
  for (int i = 0; i < clients; ++i) schedule_next(i);
  auto t0 = Clock::now();
  io.run_for(std::chrono::milliseconds(static_cast<int64_t>(paced_s * 1000)));
  double paced_elapsed = std::chrono::duration<double>(Clock::now() - t0).count();

  // Let paced cycles in flight finish, then every client loops flat out.
  phase = Phase::kSaturated;
  for (auto& s : states) s.timer->cancel();
  io.run_for(std::chrono::milliseconds(200));
  saturated = Stats{};
  for (int i = 0; i < clients; ++i) {
    if (states[i].request_id == 0) cycle(i);
  }
  auto t1 = Clock::now();
  double cpu0 = CpuSeconds(tracker_pid);
  io.run_for(std::chrono::milliseconds(static_cast<int64_t>(saturated_s * 1000)));
  double saturated_elapsed = std::chrono::duration<double>(Clock::now() - t1).count();
  double tracker_cpu = CpuSeconds(tracker_pid) - cpu0;
  double rss = RssMb(tracker_pid, "VmRSS:");
  double hwm = RssMb(tracker_pid, "VmHWM:");
  phase = Phase::kDone;

  tracker.Terminate();
  if (!db.empty()) {
    for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((db + suffix).c_str());
  }

  nlohmann::json j;
  j["grant_latency_us_p50"] = Percentile(paced.latency_us, 0.50);
  j["grant_latency_us_p99"] = Percentile(paced.latency_us, 0.99);
  j["requests_per_s"] = saturated.grants / saturated_elapsed;
  j["tracker_rss_mb"] = rss;
  j["tracker_rss_peak_mb"] = hwm;
  j["tracker_rss_idle_mb"] = rss_idle;
  j["paced_offered_requests_per_s"] = paced_rate;
  j["paced_grants"] = paced.grants;
  j["paced_achieved_requests_per_s"] = paced.grants / paced_elapsed;
  j["saturated_grants"] = saturated.grants;
  // Same-run ratios: the paced phase answered what was offered, and the tracker's memory with
  // every server registered and every client served over its memory before any connected.
  j["paced_achieved_over_offered"] = paced_rate > 0 ? paced.grants / paced_elapsed / paced_rate : 0;
  j["rss_loaded_over_idle"] = rss_idle > 0 ? rss / rss_idle : 0;
  j["saturated_latency_us_p50"] = Percentile(saturated.latency_us, 0.50);
  j["saturated_latency_us_p99"] = Percentile(saturated.latency_us, 0.99);
  // Independent of how busy the machine is: the tracker's own CPU time per request/release cycle.
  j["tracker_cpu_us_per_grant"] = saturated.grants ? tracker_cpu * 1e6 / saturated.grants : 0;
  j["tracker_cpu_share_saturated"] = tracker_cpu / saturated_elapsed;
  double load = 0;
  if (std::ifstream la("/proc/loadavg"); la) la >> load;
  j["host_loadavg_1m"] = load;
  j["host_cpus"] = std::thread::hardware_concurrency();
  j["database"] = memory_db ? "in memory" : "SQLite file (WAL)";
  j["errors"] = paced.errors + saturated.errors + failures;
  j["servers"] = servers;
  j["clients"] = clients;
  j["simulated"] =
      "servers: in-process fakes speaking the real registration protocol (Hello, Register, 1 s "
      "heartbeats, token-push acks), one TCP connection each, no sessions; clients: real "
      "protocol clients, one TCP connection each, multi-session lease then immediate release; "
      "tracker: the real crosstune-tracker process with an on-disk SQLite database; all on "
      "loopback on one machine";
  j["target_p99_us"] = 5000;
  j["target_rss_mb"] = 100;
  std::printf("%s\n", j.dump(2).c_str());
  return (j["errors"].get<uint64_t>() == 0 && paced.grants > 0) ? 0 : 1;
}

int main(int argc, char** argv) {
  return crosstune::GuardedMain("crosstune-bench-tracker", [&] { return BenchMain(argc, argv); });
}
