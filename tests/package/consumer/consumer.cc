// A downstream program on crosstune::client: connects to a crosstune-server, uploads a kernel
// module, runs its vadd on device tensors and checks the answer.
//   consumer HOST:PORT MODULE.so      prints "consumer: vadd ok on <arch>" and exits 0
#include <cstdio>
#include <string>
#include <vector>

#include "crosstune/client/session.h"
#include "crosstune/protocol.h"

namespace ct = crosstune;

static int Fail(const std::string& what, const ct::Status& s) {
  std::fprintf(stderr, "consumer: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer HOST:PORT MODULE.so\n");
    return 2;
  }
  ct::client::ConnectOptions options;
  options.server = argv[1];
  auto session = ct::client::Session::Connect(options);
  if (!session.ok()) return Fail("connect", session.status());
  auto& s = **session;
  auto info = s.Info();
  if (!info.ok()) return Fail("info", info.status());
  if (auto up = s.Upload(argv[2], "vadd.so"); !up.ok()) return Fail("upload", up.status());
  auto module = s.LoadModule("vadd.so");
  if (!module.ok()) return Fail("load", module.status());

  const int64_t n = 1000;
  const DLDataType f32{kDLFloat, 32, 1};
  std::vector<float> a(n), b(n), c(n, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = 0.5f * static_cast<float>(i);
  }
  std::vector<ct::client::RemoteTensor> t;
  for (const auto* host : {&a, &b, &c}) {
    auto r = s.AllocTensor({n}, f32);
    if (!r.ok()) return Fail("alloc", r.status());
    if (auto st = r->CopyFrom(host->data(), n * sizeof(float)); !st.ok())
      return Fail("copy in", st);
    t.push_back(*r);
  }
  auto call =
      module->Call("vadd", {ct::client::CallArg::Tensor(t[0]), ct::client::CallArg::Tensor(t[1]),
                            ct::client::CallArg::Tensor(t[2])});
  if (!call.ok()) return Fail("vadd", call.status());
  if (auto st = t[2].CopyTo(c.data(), n * sizeof(float)); !st.ok()) return Fail("copy out", st);
  for (int64_t i = 0; i < n; ++i) {
    if (c[i] != 1.5f * static_cast<float>(i)) {
      std::fprintf(stderr, "consumer: c[%lld] = %g, want %g\n", static_cast<long long>(i), c[i],
                   1.5 * static_cast<double>(i));
      return 1;
    }
  }
  std::printf("consumer: vadd ok on %s (crosstune %s)\n", info->arch.c_str(),
              std::string(ct::kCrosstuneVersion).c_str());
  return 0;
}
