#include "server_process.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>

namespace crosstune::testing {

std::unique_ptr<ServerProcess> ServerProcess::Start(const std::vector<std::string>& args,
                                                    std::string* error, const std::string& binary) {
  auto p = std::unique_ptr<ServerProcess>(new ServerProcess());
  p->work_dir_ = MakeTempDir("crosstune-rpc-test");
  const char* env_bin = std::getenv("CROSSTUNE_TEST_SERVER");
  std::string bin = !binary.empty() ? binary : env_bin && *env_bin ? env_bin : CT_SERVER_BIN;
  std::vector<std::string> argv;
  if (const char* prefix = std::getenv("CROSSTUNE_TEST_SERVER_PREFIX")) {
    std::istringstream words(prefix);
    for (std::string w; words >> w;) argv.push_back(w);
  }
  // --exit-with-parent: a test binary killed mid-run (a ctest time-out, SIGPIPE) takes its
  // servers with it.
  argv.insert(argv.end(), {bin, "--host", "127.0.0.1", "--exit-with-parent"});
  auto given = std::find(args.begin(), args.end(), "--work-dir");
  if (given == args.end()) {
    argv.insert(argv.end(), {"--work-dir", p->work_dir_});
  } else if (given + 1 != args.end()) {
    std::filesystem::remove(p->work_dir_);
    p->work_dir_ = *(given + 1);
  }
  if (std::find(args.begin(), args.end(), "--port") == args.end()) {
    argv.insert(argv.end(), {"--port", "0"});
  }
  argv.insert(argv.end(), args.begin(), args.end());
  // A generous limit, so a loaded machine (or qemu) does not fail the test.
  Status s = p->process_.Start(argv, std::chrono::seconds(30));
  if (!s.ok()) {
    *error = s.ToString();
    return nullptr;
  }
  p->port_ = p->process_.port();
  return p;
}

ServerProcess::~ServerProcess() {
  process_.Stop();
  std::error_code ec;
  if (!work_dir_.empty()) std::filesystem::remove_all(work_dir_, ec);
}

std::vector<std::string> ServerProcess::Workspaces() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(work_dir_, ec)) {
    out.push_back(e.path().filename().string());
  }
  return out;
}

bool ServerProcess::WaitForNoWorkspaces(double seconds) const {
  return Eventually([this] { return Workspaces().empty(); },
                    std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
}

}  // namespace crosstune::testing
