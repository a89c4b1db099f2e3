// crosstune-bench-rpc: what the RPC layer costs over plain TCP on loopback, measured side by side.
//
// Starts a real crosstune-server (child process, port 0) and a raw TCP echo/sink server (a forked
// child), then alternates the two sides for --rounds rounds:
//   raw_tcp_rtt_us       ping-pong of a small message over a plain socket
//   rpc_call_rtt_us      calling the empty `noop` kernel through a session
//   rpc_call_rtt_no_busy_poll_us
//                        the same through a second server and session with busy polling off
//                        (--busy-poll-us 0 on both sides: the blocking path, this run's baseline)
//   raw_tcp_busy_poll_rtt_us
//                        the raw ping-pong with both sides polling as the RPC does (50 us, not
//                        when pinned), for what polling alone gives
//   raw_tcp_stream_mb_s  one-way stream into the sink
//   upload_mb_s          Session::Upload of a --mib file (SHA-256 checked)
//   tensor_copy_mb_s     a --mib tensor copied in and out (RemoteTensor::CopyFrom / CopyTo)
// and prints one JSON object with the medians, their ratios and the targets. MB = 1e6 bytes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "crosstune/client/local_server.h"
#include "crosstune/client/session.h"
#include "crosstune/cpus.h"
#include "crosstune/crypto.h"
#include "crosstune/guarded_main.h"

namespace crosstune::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kPingBytes = 64;  // about the size of an RPC call frame
constexpr size_t kChunk = 1 << 20;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Child process groups to end if this process is interrupted (the server and raw server run in
// groups of their own, out of reach of a terminal's Ctrl-C).
volatile sig_atomic_t g_server_group = 0;
volatile sig_atomic_t g_blocking_server_group = 0;
volatile sig_atomic_t g_raw_group = 0;

void OnSignal(int sig) {
  if (g_server_group > 0) kill(-g_server_group, SIGKILL);
  if (g_blocking_server_group > 0) kill(-g_blocking_server_group, SIGKILL);
  if (g_raw_group > 0) kill(-g_raw_group, SIGKILL);
  signal(sig, SIG_DFL);
  raise(sig);
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "crosstune-bench-rpc: error: %s\n", what.c_str());
  std::exit(1);
}

void Check(const Status& s, const char* what) {
  if (!s.ok()) Die(std::string(what) + ": " + s.ToString());
}

bool ReadFull(int fd, void* buf, size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteFull(int fd, const void* buf, size_t n) {
  auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t r = write(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// ReadFull that first polls the socket for up to 50 us, as Channel does for frames (and, like it,
// only when this process may use more than one CPU).
bool PollingReadFull(int fd, void* buf, size_t n) {
  static const bool poll = UsableCpus() > 1;
  auto* p = static_cast<char*>(buf);
  auto end = Clock::now() + std::chrono::microseconds(50);
  while (n > 0 && poll && Clock::now() < end) {
    ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r == 0) return false;
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
    }
  }
  return ReadFull(fd, p, n);
}

void NoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// The raw baseline server: a process per connection, as crosstune-server has. The first byte
// picks the mode:
//   'P': echo kPingBytes messages until the peer closes;
//   'Q': the same, polling before each read (PollingReadFull);
//   'S': read a u64 size, then that many bytes, then answer one byte.
[[noreturn]] void RawServerMain(int listen_fd) {
  std::vector<char> buf(kChunk);
  for (;;) {
    int fd = accept(listen_fd, nullptr, nullptr);
    if (fd < 0) continue;
    if (fork() != 0) {
      close(fd);
      continue;
    }
    close(listen_fd);
    NoDelay(fd);
    char mode = 0;
    if (ReadFull(fd, &mode, 1)) {
      if (mode == 'P') {
        while (ReadFull(fd, buf.data(), kPingBytes) && WriteFull(fd, buf.data(), kPingBytes)) {
        }
      } else if (mode == 'Q') {
        while (PollingReadFull(fd, buf.data(), kPingBytes) &&
               WriteFull(fd, buf.data(), kPingBytes)) {
        }
      } else if (mode == 'S') {
        uint64_t size = 0;
        while (ReadFull(fd, &size, sizeof(size))) {
          while (size > 0) {
            size_t n = static_cast<size_t>(std::min<uint64_t>(size, buf.size()));
            ssize_t r = read(fd, buf.data(), n);
            if (r <= 0) break;
            size -= static_cast<uint64_t>(r);
          }
          char ack = 1;
          if (!WriteFull(fd, &ack, 1)) break;
        }
      }
    }
    _exit(0);
  }
}

int ConnectRaw(uint16_t port, char mode) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) Die("raw connect failed");
  NoDelay(fd);
  WriteFull(fd, &mode, 1);
  return fd;
}

// Mean round trip over `iters` ping-pongs on an open 'P' connection ('Q' with `poll`).
double RawRttUs(int fd, int iters, bool poll = false) {
  char msg[kPingBytes] = {};
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    if (!WriteFull(fd, msg, kPingBytes) ||
        !(poll ? PollingReadFull(fd, msg, kPingBytes) : ReadFull(fd, msg, kPingBytes))) {
      Die("raw ping failed");
    }
  }
  return Seconds(t0) / iters * 1e6;
}

double RawStreamMbS(uint16_t port, uint64_t bytes) {
  int fd = ConnectRaw(port, 'S');
  std::vector<char> buf(kChunk, 'x');
  auto t0 = Clock::now();
  WriteFull(fd, &bytes, sizeof(bytes));
  for (uint64_t left = bytes; left > 0;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
    if (!WriteFull(fd, buf.data(), n)) Die("raw stream failed");
    left -= n;
  }
  char ack;
  if (!ReadFull(fd, &ack, 1)) Die("raw stream ack missing");
  double s = Seconds(t0);
  close(fd);
  return bytes / s / 1e6;
}

}  // namespace
}  // namespace crosstune::bench

static int BenchMain(int argc, char** argv) {
  using namespace crosstune;
  using namespace crosstune::bench;
  CLI::App app{"crosstune-bench-rpc: RPC cost over raw TCP on loopback, as one JSON object"};
  std::string server_bin = CT_DEFAULT_SERVER;
  std::string noop_so = CT_DEFAULT_NOOP;
  uint64_t mib = 256;
  int rounds = 3;
  int rtt_iters = 2000;
  app.add_option("--server-bin", server_bin, "crosstune-server to start")->capture_default_str();
  app.add_option("--noop", noop_so, "module with an empty `noop` function")->capture_default_str();
  app.add_option("--mib", mib, "MiB per upload and per tensor copy")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "rounds, alternating raw and RPC")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--rtt-iters", rtt_iters, "round trips per RTT measurement")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  int pin_cpu = -1;
  app.add_option("--pin-cpu", pin_cpu,
                 "run this process and both servers (and their children) on this one CPU, so "
                 "round trips compare software cost rather than cross-CPU wake-up latency");
  CLI11_PARSE(app, argc, argv);
  if (pin_cpu >= 0) {
    // Inherited by every process started below.
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(pin_cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
      Die("cannot pin to CPU " + std::to_string(pin_cpu));
  }
  const uint64_t bytes = mib << 20;

  // The raw server is a forked child, as the RPC server is a separate process.
  int listen_fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_fd, 8) != 0 ||
      getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    Die("cannot listen for the raw server");
  }
  uint16_t raw_port = ntohs(addr.sin_port);
  pid_t raw_pid = fork();
  if (raw_pid == 0) {
    signal(SIGCHLD, SIG_IGN);  // connection children reap themselves
    setpgid(0, 0);             // one group, so cleanup ends the connection children too
    RawServerMain(listen_fd);
  }
  setpgid(raw_pid, raw_pid);
  g_raw_group = raw_pid;
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  close(listen_fd);

  std::string work =
      std::filesystem::temp_directory_path() / ("crosstune-bench-rpc-" + std::to_string(getpid()));
  std::filesystem::create_directories(work + "/server");
  client::LocalServer server;
  Check(
      server.Start({server_bin, "--host", "127.0.0.1", "--port", "0", "--work-dir",
                    work + "/server", "--max-upload-bytes", std::to_string(bytes * 2 + (64 << 20))},
                   std::chrono::seconds(20)),
      "start crosstune-server");
  g_server_group = server.pid();
  // The same server with busy polling off, for the blocking path's call latency in this run.
  std::filesystem::create_directories(work + "/blocking-server");
  client::LocalServer blocking_server;
  Check(blocking_server.Start({server_bin, "--host", "127.0.0.1", "--port", "0", "--work-dir",
                               work + "/blocking-server", "--busy-poll-us", "0"},
                              std::chrono::seconds(20)),
        "start crosstune-server --busy-poll-us 0");
  g_blocking_server_group = blocking_server.pid();
  auto cleanup = [&] {
    server.Stop();
    g_server_group = 0;
    blocking_server.Stop();
    g_blocking_server_group = 0;
    kill(-raw_pid, SIGKILL);
    g_raw_group = 0;
    waitpid(raw_pid, nullptr, 0);
    std::filesystem::remove_all(work);
  };

  // A session with the noop module loaded.
  auto connect = [&](const client::ConnectOptions& o) {
    auto session_or = client::Session::Connect(o);
    Check(session_or.status(), ("connect to " + o.server).c_str());
    auto s = std::move(session_or).value();
    Check(s->Upload(noop_so, "noop.so").status(), "upload noop");
    auto module_or = s->LoadModule("noop.so");
    Check(module_or.status(), "load noop");
    return std::make_pair(std::move(s), *module_or);
  };
  client::ConnectOptions options;
  options.server = server.address();
  options.request_timeout = std::chrono::seconds(120);
  auto [session, noop] = connect(options);
  client::ConnectOptions blocking_options = options;
  blocking_options.server = blocking_server.address();
  blocking_options.busy_poll = std::chrono::microseconds(0);
  auto [blocking_session, blocking_noop] = connect(blocking_options);

  // The upload source: a file of `bytes` pseudo-random bytes.
  std::string blob = work + "/blob.bin";
  auto write_t0 = Clock::now();
  {
    std::ofstream out(blob, std::ios::binary);
    std::vector<uint64_t> chunk(kChunk / 8);
    std::mt19937_64 rng(1);
    for (uint64_t left = bytes; left > 0;) {
      for (auto& x : chunk) x = rng();
      size_t n = static_cast<size_t>(std::min<uint64_t>(left, kChunk));
      out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(n));
      left -= n;
    }
    out.flush();
  }
  double file_write_mb_s = bytes / Seconds(write_t0) / 1e6;
  // Write-back of this file (and later of each upload) competes for the CPUs; let it finish
  // before measuring round trips, which are sensitive to it.
  ::sync();
  // Context for upload_mb_s: an upload hashes the file here and hashes and writes it there.
  auto hash_t0 = Clock::now();
  Check(Sha256FileHex(blob).status(), "hash");
  double sha256_mb_s = bytes / Seconds(hash_t0) / 1e6;
  auto tensor_or =
      session->AllocTensor({static_cast<int64_t>(bytes / 4)}, DLDataType{kDLFloat, 32, 1});
  Check(tensor_or.status(), "alloc tensor");
  client::RemoteTensor tensor = *tensor_or;
  std::vector<char> host(bytes, 1);

  std::vector<double> raw_rtt, raw_poll_rtt, rpc_rtt, blocking_rtt, raw_stream, upload, copy,
      copy_in, copy_out;
  // Round trips alternate in short blocks on one open connection each side, so both see the
  // same machine (this one is shared and its wake-up latency drifts).
  constexpr int kBlocks = 10;
  const int block_iters = std::max(1, rtt_iters / kBlocks);
  int ping_fd = ConnectRaw(raw_port, 'P');
  int poll_ping_fd = ConnectRaw(raw_port, 'Q');
  for (int i = 0; i < 10; ++i) {
    Check(noop.Call("noop", {}).status(), "warm-up call");
    Check(blocking_noop.Call("noop", {}).status(), "warm-up call");
    RawRttUs(ping_fd, 1);
    RawRttUs(poll_ping_fd, 1, true);
  }
  for (int r = 0; r < rounds; ++r) {
    for (int b = 0; b < kBlocks; ++b) {
      raw_rtt.push_back(RawRttUs(ping_fd, block_iters));
      raw_poll_rtt.push_back(RawRttUs(poll_ping_fd, block_iters, true));
      auto t0 = Clock::now();
      for (int i = 0; i < block_iters; ++i) Check(noop.Call("noop", {}).status(), "call noop");
      rpc_rtt.push_back(Seconds(t0) / block_iters * 1e6);
      t0 = Clock::now();
      for (int i = 0; i < block_iters; ++i) {
        Check(blocking_noop.Call("noop", {}).status(), "call noop without busy polling");
      }
      blocking_rtt.push_back(Seconds(t0) / block_iters * 1e6);
    }

    raw_stream.push_back(RawStreamMbS(raw_port, bytes));
    auto t0 = Clock::now();
    Check(session->Upload(blob, "blob.bin").status(), "upload");
    upload.push_back(bytes / Seconds(t0) / 1e6);
    Check(session->RemoveFile("blob.bin"), "remove upload");

    t0 = Clock::now();
    Check(tensor.CopyFrom(host.data(), bytes), "tensor copy in");
    double in_s = Seconds(t0);
    t0 = Clock::now();
    Check(tensor.CopyTo(host.data(), bytes), "tensor copy out");
    double out_s = Seconds(t0);
    copy_in.push_back(bytes / in_s / 1e6);
    copy_out.push_back(bytes / out_s / 1e6);
    copy.push_back(2.0 * bytes / (in_s + out_s) / 1e6);
    ::sync();
  }
  close(ping_fd);
  close(poll_ping_fd);
  const Channel::BusyPollStats polls = session->busy_poll_stats();
  blocking_session.reset();
  session.reset();
  cleanup();

  nlohmann::ordered_json j;  // keys in the order written: figures, ratios, targets, detail
  j["raw_tcp_rtt_us"] = Median(raw_rtt);
  j["raw_tcp_busy_poll_rtt_us"] = Median(raw_poll_rtt);
  j["rpc_call_rtt_us"] = Median(rpc_rtt);
  j["rpc_call_rtt_no_busy_poll_us"] = Median(blocking_rtt);
  j["raw_tcp_stream_mb_s"] = Median(raw_stream);
  j["upload_mb_s"] = Median(upload);
  j["tensor_copy_mb_s"] = Median(copy);
  j["tensor_copy_in_mb_s"] = Median(copy_in);
  j["tensor_copy_out_mb_s"] = Median(copy_out);
  // Each ratio is the median of per-pair ratios, a pair being one RPC block and the raw block
  // measured just before it: the machine drifts between a ~12 us and a ~50 us wake-up mode, and
  // only side-by-side pairs compare like with like.
  auto pair_ratio = [](const std::vector<double>& num, const std::vector<double>& den) {
    std::vector<double> r;
    for (size_t i = 0; i < num.size() && i < den.size(); ++i) r.push_back(num[i] / den[i]);
    return Median(r);
  };
  double rtt_ratio = pair_ratio(rpc_rtt, raw_rtt);
  double upload_ratio = pair_ratio(upload, raw_stream);
  double tensor_ratio = pair_ratio(copy, raw_stream);
  j["rpc_over_raw_rtt"] = rtt_ratio;
  j["rpc_no_busy_poll_over_raw_rtt"] = pair_ratio(blocking_rtt, raw_rtt);
  j["rpc_over_raw_busy_poll_rtt"] = pair_ratio(rpc_rtt, raw_poll_rtt);
  // The same ratios between each side's fastest block: the software's cost where both sides
  // met the machine's fast wake-up mode at least once (what the smoke test bounds; the medians
  // above move with how the two modes fell on the two sides).
  auto best_ratio = [](const std::vector<double>& num, const std::vector<double>& den) {
    return *std::min_element(num.begin(), num.end()) / *std::min_element(den.begin(), den.end());
  };
  j["rpc_no_busy_poll_over_raw_rtt_best"] = best_ratio(blocking_rtt, raw_rtt);
  j["rpc_over_raw_busy_poll_rtt_best"] = best_ratio(rpc_rtt, raw_poll_rtt);
  j["upload_over_raw_stream"] = upload_ratio;
  j["tensor_over_raw_stream"] = tensor_ratio;
  // The upload's bound is the slower of the stream and this machine's file-write rate (the
  // device writes what it receives); the call's target is 1.15x raw pinned, 1.5x unpinned.
  const double upload_bound = std::min(Median(raw_stream), file_write_mb_s);
  const double upload_over_bound = Median(upload) / upload_bound;
  const double rtt_max = pin_cpu >= 0 ? 1.15 : 1.5;
  j["upload_over_bound"] = upload_over_bound;
  j["targets"] = {{"rpc_over_raw_rtt_max", rtt_max},
                  {"upload_over_bound_min", 0.7},
                  {"tensor_over_raw_stream_min", 0.8}};
  j["targets_met"] = {{"rpc_over_raw_rtt", rtt_ratio <= rtt_max},
                      {"upload_over_bound", upload_over_bound >= 0.7},
                      {"tensor_over_raw_stream", tensor_ratio >= 0.8}};
  j["context"] = {{"local_sha256_mb_s", sha256_mb_s},
                  {"local_file_write_mb_s", file_write_mb_s},
                  // The client's busy polls over the whole run (calls, uploads, copies): replies
                  // found while polling, and polls that ran out. Both 0 when pinned to one CPU.
                  {"client_busy_poll_hits", polls.hits},
                  {"client_busy_poll_misses", polls.misses}};
  j["rounds"] = {
      {"raw_tcp_rtt_us", raw_rtt},         {"raw_tcp_busy_poll_rtt_us", raw_poll_rtt},
      {"rpc_call_rtt_us", rpc_rtt},        {"rpc_call_rtt_no_busy_poll_us", blocking_rtt},
      {"raw_tcp_stream_mb_s", raw_stream}, {"upload_mb_s", upload},
      {"tensor_copy_mb_s", copy}};
  j["config"] = {{"mib", mib},
                 {"rounds", rounds},
                 {"rtt_iters", rtt_iters},
                 {"ping_bytes", kPingBytes},
                 {"units", "us per round trip; MB = 1e6 bytes"},
                 {"ratios", "median over pairs measured back to back (raw block, then RPC blocks)"},
                 {"pin_cpu", pin_cpu}};
  std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

int main(int argc, char** argv) {
  return crosstune::GuardedMain("crosstune-bench-rpc", [&] { return BenchMain(argc, argv); });
}
