// What people see: the status page in a real browser (headless Chromium), /metrics, and the
// `crosstune lease / query / kick` commands against a running test farm.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>

#include "farm.h"

namespace crosstune::testing {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

// Runs a shell command line; returns its exit status and stdout.
int Shell(const std::string& command, std::string* out) {
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string HttpGet(uint16_t port, const std::string& target, std::string* content_type) {
  boost::asio::io_context io;
  tcp::resolver resolver(io);
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(5));
  stream.connect(resolver.resolve("127.0.0.1", std::to_string(port)));
  http::request<http::string_body> req(http::verb::get, target, 11);
  req.set(http::field::host, "127.0.0.1");
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(stream, buffer, res);
  if (content_type) *content_type = std::string(res[http::field::content_type]);
  return res.body();
}

std::string FindChromium() {
  for (const char* p :
       {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

class TrackerWebTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(farm_.StartTracker());
    ASSERT_GE(farm_.StartServer("rpi4", {"--tag", "soc=bcm2711"}), 0);
    ASSERT_GE(farm_.StartServer("jetson"), 0);
    ASSERT_TRUE(farm_.WaitRegistered(2));
  }
  Farm farm_;
};

TEST_F(TrackerWebTest, StatusPageShowsTheFarmInHeadlessChromium) {
  std::string chromium = FindChromium();
  if (chromium.empty()) {
    GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs it)";
  }
  auto holder = farm_.Client("ci-job-42");
  client::LeaseRequest req;
  req.key = "jetson";
  req.multi_session = true;
  ASSERT_TRUE(holder->RequestDevice(req).ok());

  std::string url = "http://127.0.0.1:" + std::to_string(farm_.http_port()) + "/";
  std::string dom;
  int rc = Shell(chromium + " --headless --disable-gpu --no-sandbox --no-first-run " +
                     "--user-data-dir=" + farm_.Path("chromium") +
                     " --virtual-time-budget=3000 --dump-dom " + url + " 2>/dev/null",
                 &dom);
  ASSERT_EQ(rc, 0) << dom;
  // Rendered by the page's script from /api/summary, so these prove the JS ran.
  EXPECT_NE(dom.find("id=\"device-" + farm_.server_addr(0) + "\""), std::string::npos) << dom;
  EXPECT_NE(dom.find("id=\"device-" + farm_.server_addr(1) + "\""), std::string::npos) << dom;
  EXPECT_NE(dom.find("soc=bcm2711"), std::string::npos);
  EXPECT_NE(dom.find("ci-job-42"), std::string::npos);
  EXPECT_NE(dom.find("2 devices, 1 leases"), std::string::npos);
}

TEST_F(TrackerWebTest, ServesSummaryJsonAndPrometheusMetrics) {
  std::string type;
  auto summary = nlohmann::json::parse(HttpGet(farm_.http_port(), "/api/summary", &type));
  EXPECT_EQ(type, "application/json");
  EXPECT_EQ(summary["devices"].size(), 2u);
  std::string metrics = HttpGet(farm_.http_port(), "/metrics", &type);
  EXPECT_EQ(type.rfind("text/plain", 0), 0u);
  for (const char* family :
       {"crosstune_queue_depth{key=\"rpi4\"} 0", "crosstune_queue_wait_seconds_count",
        "crosstune_device_utilisation{device=", "crosstune_device_infra_failures_total",
        "crosstune_device_quarantined"}) {
    EXPECT_NE(metrics.find(family), std::string::npos) << family << "\n" << metrics;
  }
  EXPECT_NE(HttpGet(farm_.http_port(), "/nosuch", nullptr).find("not found"), std::string::npos);
}

#ifdef CROSSTUNE_CLI_BIN
TEST_F(TrackerWebTest, LeaseCommandRunsItsChildWithTheLeaseAndExitsWithItsStatus) {
  std::string cli = CROSSTUNE_CLI_BIN;
  std::string out;
  // The child reaches the leased server through CROSSTUNE_SERVER + CROSSTUNE_LEASE.
  int rc = Shell(cli + " lease --tracker " + farm_.tracker() + " --key rpi4 --hold 30 -- sh -c '" +
                     cli + " info --json > /dev/null && echo \"$CROSSTUNE_SERVER\" && exit 7'",
                 &out);
  EXPECT_EQ(rc, 7) << out;
  EXPECT_NE(out.find(farm_.server_addr(0)), std::string::npos) << out;
  // Released at exit: free again.
  EXPECT_TRUE(Eventually([&] { return farm_.Device(farm_.server_addr(0))["state"] == "free"; }));
  // Without the lease the same command is refused by the server.
  out.clear();
  EXPECT_NE(Shell(cli + " info --server " + farm_.server_addr(0) + " 2>&1", &out), 0);
  EXPECT_NE(out.find("lease"), std::string::npos) << out;
}

TEST_F(TrackerWebTest, SessionCommandsReachADeviceThroughTheTracker) {
  std::string cli = CROSSTUNE_CLI_BIN;
  std::string out;
  EXPECT_EQ(Shell(cli + " info --json --tracker " + farm_.tracker() + " --key rpi4", &out), 0)
      << out;
  EXPECT_NE(out.find("\"arch\""), std::string::npos) << out;
  // The device the tracker granted, not the (empty) --server flag.
  EXPECT_EQ(nlohmann::json::parse(out.substr(out.find('{')))["server"], farm_.server_addr(0)) << out;
  // The one-session lease ended with the session.
  EXPECT_TRUE(Eventually([&] { return farm_.Device(farm_.server_addr(0))["state"] == "free"; }));
  out.clear();
  EXPECT_EQ(Shell(cli + " query --tracker " + farm_.tracker(), &out), 0);
  EXPECT_NE(out.find("jetson"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(Shell(cli + " query --json --tracker " + farm_.tracker(), &out), 0);
  EXPECT_EQ(nlohmann::json::parse(out)["devices"].size(), 2u);
  out.clear();
  EXPECT_NE(Shell(cli + " kick --tracker " + farm_.tracker() + " " + farm_.server_addr(0) +
                      " --admin-token-file /dev/null 2>&1",
                  &out),
            0);
}
#endif

}  // namespace
}  // namespace crosstune::testing
