// crosstune-bench-call: the C++ client's side of bench/python_call_overhead.py, which runs it in
// turns with the Python package's own loop against the same server, so that the Python call's
// added cost is measured in the same run. One block: connect, load the noop module, warm up,
// then `--iters` calls of `noop` and `--copy-rounds` round trips of a `--mib` tensor (CopyFrom,
// CopyTo). Prints one JSON object: per-call microseconds (mean over the block) and the copy
// rate.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crosstune/client/session.h"
#include "crosstune/guarded_main.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename T>
T Check(crosstune::Expected<T> e, const char* what) {
  if (!e.ok()) {
    std::fprintf(stderr, "crosstune-bench-call: %s: %s\n", what, e.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(e).value();
}

void Check(const crosstune::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "crosstune-bench-call: %s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

int BenchMain(int argc, char** argv) {
  std::string server, noop;
  int iters = 20000, copy_rounds = 4;
  int mib = 64;
  CLI::App app("The C++ client's noop call and tensor round trip, one block");
  app.add_option("--server", server, "crosstune-server HOST:PORT")->required();
  app.add_option("--noop", noop, "module with an empty `noop` function")->required();
  app.add_option("--iters", iters, "noop calls")->capture_default_str();
  app.add_option("--copy-rounds", copy_rounds, "tensor round trips")->capture_default_str();
  app.add_option("--mib", mib, "tensor size in MiB")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  crosstune::client::ConnectOptions options;
  options.server = server;
  auto session = Check(crosstune::client::Session::Connect(options), "connect");
  Check(session->Upload(noop, "noop.so").status(), "upload");
  auto module = Check(session->LoadModule("noop.so"), "load");
  for (int i = 0; i < 1000; ++i) Check(module.Call("noop", {}).status(), "warm-up");
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) Check(module.Call("noop", {}).status(), "call");
  const double call_us =
      std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;

  const uint64_t bytes = uint64_t(mib) << 20;
  std::vector<float> host(bytes / 4, 1.0f), back(bytes / 4);
  auto tensor =
      Check(session->AllocTensor({int64_t(bytes / 4)}, DLDataType{kDLFloat, 32, 1}), "alloc");
  Check(tensor.CopyFrom(host.data(), bytes), "warm-up copy");
  t0 = Clock::now();
  for (int r = 0; r < copy_rounds; ++r) {
    Check(tensor.CopyFrom(host.data(), bytes), "copy in");
    Check(tensor.CopyTo(back.data(), bytes), "copy out");
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  nlohmann::json out = {{"call_us", call_us},
                        {"round_trip_mb_s", 2.0 * copy_rounds * bytes / s / 1e6},
                        {"iters", iters}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return crosstune::GuardedMain("crosstune-bench-call", [&] { return BenchMain(argc, argv); });
}
