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
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "farm.h"

namespace crosstune::testing {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

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
  auto run = RunCommand(chromium + " --headless --disable-gpu --no-sandbox --no-first-run " +
                        "--user-data-dir=" + farm_.Path("chromium") +
                        " --virtual-time-budget=3000 --dump-dom " + url);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::string& dom = run.out;
  // Rendered by the page's script from /api/summary, so these prove the JS ran.
  EXPECT_NE(dom.find("id=\"device-" + farm_.server_addr(0) + "\""), std::string::npos) << dom;
  EXPECT_NE(dom.find("id=\"device-" + farm_.server_addr(1) + "\""), std::string::npos) << dom;
  EXPECT_NE(dom.find("soc=bcm2711"), std::string::npos);
  EXPECT_NE(dom.find("ci-job-42"), std::string::npos);
  EXPECT_NE(dom.find("2 devices, 1 leases"), std::string::npos);
}

// True when some line of `text` matches `pattern` as a whole.
bool HasLine(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_match(line, re)) return true;
  }
  return false;
}

TEST_F(TrackerWebTest, ServesSummaryJsonAndPrometheusMetrics) {
  // One lease on the jetson, so the counters and states below are not all zero.
  auto holder = farm_.Client("metrics-holder");
  client::LeaseRequest req;
  req.key = "jetson";
  req.multi_session = true;
  ASSERT_TRUE(holder->RequestDevice(req).ok());

  std::string type;
  auto summary = nlohmann::json::parse(HttpGet(farm_.http_port(), "/api/summary", &type));
  EXPECT_EQ(type, "application/json");
  EXPECT_EQ(summary["devices"].size(), 2u);
  std::string metrics = HttpGet(farm_.http_port(), "/metrics", &type);
  EXPECT_EQ(type.rfind("text/plain", 0), 0u);
  // Every family the README documents, with its TYPE line and a whole sample line.
  const std::string rpi =
      R"(device="127\.0\.0\.1:)" + std::to_string(farm_.server_port(0)) + R"(",key="rpi4")";
  const std::string jetson =
      R"(device="127\.0\.0\.1:)" + std::to_string(farm_.server_port(1)) + R"(",key="jetson")";
  const std::string number = R"([0-9]+(\.[0-9]+)?(e[-+][0-9]+)?)";
  const std::vector<std::pair<std::string, std::string>> families = {
      {"crosstune_leases_active gauge", "crosstune_leases_active 1"},
      {"crosstune_queue_depth gauge", R"(crosstune_queue_depth\{key="rpi4"\} 0)"},
      {"crosstune_queue_oldest_wait_seconds gauge",
       R"(crosstune_queue_oldest_wait_seconds\{key="jetson"\} 0)"},
      {"crosstune_queue_wait_seconds summary",
       R"(crosstune_queue_wait_seconds_count\{key="jetson"\} 1)"},
      {"crosstune_queue_wait_seconds summary",
       R"(crosstune_queue_wait_seconds_sum\{key="jetson"\} )" + number},
      {"crosstune_queue_wait_seconds_max gauge",
       R"(crosstune_queue_wait_seconds_max\{key="jetson"\} )" + number},
      {"crosstune_requests_timed_out_total counter",
       R"(crosstune_requests_timed_out_total\{key="rpi4"\} 0)"},
      {"crosstune_requests_no_device_total counter",
       R"(crosstune_requests_no_device_total\{key="rpi4"\} 0)"},
      {"crosstune_device_up gauge",
       R"(crosstune_device_up\{)" + rpi + R"(,state="free",protocol="crosstune"\} 1)"},
      {"crosstune_device_up gauge",
       R"(crosstune_device_up\{)" + jetson + R"(,state="leased",protocol="crosstune"\} 1)"},
      {"crosstune_device_utilisation gauge",
       R"(crosstune_device_utilisation\{)" + jetson + R"(\} )" + number},
      {"crosstune_device_busy_seconds_total counter",
       R"(crosstune_device_busy_seconds_total\{)" + jetson + R"(\} )" + number},
      {"crosstune_device_infra_failures_total counter",
       R"(crosstune_device_infra_failures_total\{)" + rpi + R"(\} 0)"},
      {"crosstune_device_quarantined gauge", R"(crosstune_device_quarantined\{)" + rpi + R"(\} 0)"},
  };
  for (const auto& [type_line, sample] : families) {
    EXPECT_TRUE(HasLine(metrics, "# TYPE " + type_line)) << type_line << "\n" << metrics;
    EXPECT_TRUE(HasLine(metrics, sample)) << sample << "\n" << metrics;
  }
  EXPECT_NE(HttpGet(farm_.http_port(), "/nosuch", nullptr).find("not found"), std::string::npos);
}

#ifdef CROSSTUNE_CLI_BIN
// This build's `crosstune`, or $CROSSTUNE_TEST_CLI (as farm.h takes the servers').
const std::string kCli = [] {
  const char* e = std::getenv("CROSSTUNE_TEST_CLI");
  return std::string(e && *e ? e : CROSSTUNE_CLI_BIN);
}();

TEST_F(TrackerWebTest, LeaseCommandRunsItsChildWithTheLeaseAndExitsWithItsStatus) {
  // The child reaches the leased server through CROSSTUNE_SERVER + CROSSTUNE_LEASE.
  auto r =
      RunCommand(kCli + " lease --tracker " + farm_.tracker() + " --key rpi4 --hold 30 -- sh -c '" +
                 kCli + " info --json > /dev/null && echo \"$CROSSTUNE_SERVER\" && exit 7'");
  EXPECT_EQ(r.exit_code, 7) << r.out << r.err;
  EXPECT_NE(r.out.find(farm_.server_addr(0)), std::string::npos) << r.out;
  // Released at exit: free again.
  EXPECT_TRUE(Eventually([&] { return farm_.Device(farm_.server_addr(0))["state"] == "free"; }));
  // Without the lease the same command is refused by the server, in one error line.
  r = RunCommand(kCli + " info --server " + farm_.server_addr(0));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("crosstune: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("lease"), std::string::npos) << r.err;
}

TEST_F(TrackerWebTest, SessionCommandsReachADeviceThroughTheTracker) {
  auto r = RunCommand(kCli + " info --json --tracker " + farm_.tracker() + " --key rpi4");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // The device the tracker granted, not the (empty) --server flag.
  auto info = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(info.is_object()) << r.out;
  EXPECT_FALSE(info["arch"].get<std::string>().empty()) << r.out;
  EXPECT_EQ(info["server"], farm_.server_addr(0)) << r.out;
  // The one-session lease ended with the session.
  EXPECT_TRUE(Eventually([&] { return farm_.Device(farm_.server_addr(0))["state"] == "free"; }));
  r = RunCommand(kCli + " query --tracker " + farm_.tracker());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("jetson"), std::string::npos) << r.out;
  r = RunCommand(kCli + " query --json --tracker " + farm_.tracker());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["devices"].size(), 2u);
}

TEST_F(TrackerWebTest, LeaseCommandTakesConstraintsPriorityAndWait) {
  const std::string lease = kCli + " lease --tracker " + farm_.tracker() + " --key rpi4 ";
  // -c picks by tag, and the command sees the device it got.
  auto r = RunCommand(
      lease + "-c soc=bcm2711 --priority 5 --wait 10 -- sh -c 'echo \"$CROSSTUNE_DEVICE\"'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, farm_.server_addr(0) + "\n") << r.err;
  // A constraint no device of the key meets: NoDevice at once, one error line.
  r = RunCommand(lease + "-c soc=nosuch -- true");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.err.rfind("crosstune: error: ", 0), 0u) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_TRUE(Eventually([&] {
    return farm_.Summary()["keys"].dump().find("\"no_device\":1") != std::string::npos;
  })) << farm_.Summary().dump();

  // While someone holds the device, a waiter queues with its priority; --wait ends the wait.
  auto holder = farm_.Client("holder");
  client::LeaseRequest req;
  req.key = "rpi4";
  req.multi_session = true;
  ASSERT_TRUE(holder->RequestDevice(req).ok());
  CommandResult waited;
  std::thread waiter([&] { waited = RunCommand(lease + "--priority 7 --wait 60 -- true"); });
  bool queued = Eventually([&] {
    auto summary = farm_.Summary();
    for (const auto& k : summary["keys"]) {
      if (k["key"] == "rpi4" && k["queue"].size() == 1 && k["queue"][0]["priority"] == 7) {
        return true;
      }
    }
    return false;
  });
  EXPECT_TRUE(queued) << farm_.Summary().dump();
  holder.reset();  // the holder leaves: the waiter gets the device and runs its command
  waiter.join();
  EXPECT_EQ(waited.exit_code, 0) << waited.err;
  EXPECT_NE(waited.err.find("waiting for a 'rpi4' device: position 1"), std::string::npos)
      << waited.err;

  holder = farm_.Client("holder");
  ASSERT_TRUE(holder->RequestDevice(req).ok());
  r = RunCommand(lease + "--wait 1 -- true");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  // Queue updates may come first; the last line is the one error.
  size_t last = r.err.rfind('\n', r.err.size() - 2);
  EXPECT_EQ(r.err.compare(last == std::string::npos ? 0 : last + 1, 18, "crosstune: error: "), 0)
      << r.err;
}

TEST_F(TrackerWebTest, BuildsForTheDeviceATrackerGrants) {
  if (!CT_HAVE_BUILD_COMMAND) GTEST_SKIP() << "this build has no compiler module (no builder)";
  const std::string out = farm_.Path("auto.ctpkg");
  auto r = RunCommand(kCli + " build " + CROSSTUNE_SAMPLE_SOURCE + " --target auto --tracker " +
                      farm_.tracker() + " --key rpi4 --no-cache -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("crosstune: target from the device: llvm -mtriple="), std::string::npos)
      << r.err;
  r = RunCommand(kCli + " run --tracker " + farm_.tracker() + " --key rpi4 " + out +
                 " --func vadd --arg 4xf32:ones --arg 4xf32:ones --arg 4xf32:zeros --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(farm_.server_addr(0)), std::string::npos) << r.out;
}

// `crosstune records`: a tuning log into the farm's records (twice: kept once), its best back,
// and the records written out again as a log the tuner reads.
TEST_F(TrackerWebTest, RecordsCommandsImportALogAndGiveItsBestAndItsRecordsBack) {
  if (!CT_HAVE_BUILD_COMMAND) GTEST_SKIP() << "this build has no compiler module (no tuner)";
  auto line = [](int index, double mean, const char* error) {
    return std::string("{\"v\":1,\"run\":\"r1\",\"tuner\":\"random\",") +
           "\"task\":{\"template\":\"matmul\",\"shape\":[64,64,64],\"dtype\":\"float32\"}," +
           "\"target\":\"llvm -mcpu=znver4\",\"device\":{\"name\":\"local\",\"arch\":" +
           "\"x86_64\",\"cpu\":\"AMD EPYC 9R14\",\"key\":\"\"},\"config\":{\"index\":" +
           std::to_string(index) + ",\"values\":{\"tile\":" + std::to_string(index) + "}}," +
           "\"flops\":524288,\"costs\":[" + std::to_string(mean) +
           "],\"mean\":" + std::to_string(mean) + ",\"error\":\"" + error + "\",\"message\":\"\"," +
           "\"timestamp\":\"2026-12-06T10:00:00.000Z\"}\n";
  };
  const std::string log = farm_.WriteFile(
      "m.jsonl", line(1, 0.004, "ok") + line(2, 0.001, "ok") + line(3, 0, "BuildError"));
  const std::string farm = " --tracker " + farm_.tracker();
  auto r = RunCommand(kCli + " records import " + log + farm);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("3 record(s) read, 3 new to the farm, 0 it had already"), std::string::npos)
      << r.out;
  r = RunCommand(kCli + " records import " + log + farm + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["duplicates"], 3) << r.out;

  // What the farm holds: one task on one kind, its best by the run that sent it.
  r = RunCommand(kCli + " records ls" + farm + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto ls = nlohmann::json::parse(r.out)["rows"];
  ASSERT_EQ(ls.size(), 1u) << r.out;
  EXPECT_EQ(ls[0]["task"], "matmul 64,64,64 float32");
  EXPECT_EQ(ls[0]["device_kind"], "x86_64/AMD EPYC 9R14");
  EXPECT_EQ(ls[0]["records"], 3);
  EXPECT_EQ(ls[0]["best_mean_s"], 0.001);
  EXPECT_EQ(ls[0]["best_config"], 2);
  EXPECT_EQ(ls[0]["best_run_id"], "import") << "the run that sent it: the import's";
  r = RunCommand(kCli + " records ls" + farm);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("1.0000  import"), std::string::npos) << r.out;
  r = RunCommand(kCli + " records ls" + farm + " --task conv2d");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "the farm holds no tuning records of tasks named conv2d...\n");

  const std::string which = farm +
                            " --task 'matmul 64,64,64 float32' --target 'llvm -mcpu=znver4'" +
                            " --device-kind 'x86_64/AMD EPYC 7B13'";
  r = RunCommand(kCli + " records best" + which + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto best = nlohmann::json::parse(r.out);
  EXPECT_EQ(best["exact"], false);
  EXPECT_EQ(best["device_kind"], "x86_64/AMD EPYC 9R14");
  ASSERT_EQ(best["records"].size(), 1u) << r.out;
  EXPECT_EQ(best["records"][0]["config"]["index"], 2);
  EXPECT_NE(r.err.find("the farm has no records of matmul 64,64,64 float32 on x86_64/AMD EPYC "
                       "7B13: these are x86_64/AMD EPYC 9R14's"),
            std::string::npos)
      << r.err;

  const std::string out = farm_.Path("back.jsonl");
  r = RunCommand(kCli + " records export" + which + " -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunCommand(kCli + " log summary " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("trials 3 (3 configs), ok 2"), std::string::npos) << r.out;

  r = RunCommand(kCli + " records best --task x --target y --tracker 127.0.0.1:1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("crosstune: error:"), std::string::npos) << r.err;
}

// Other tools' records into the farm (`records import`, the format found from the content): an
// AutoTVM log, given the device kind it does not name, comes back from `records export --format
// autotvm` line for line; a Kernel Tuner cache of our own comes back as our task on its device.
TEST_F(TrackerWebTest, RecordsImportReadsOtherToolsRecordsAndExportWritesAutoTvmsBack) {
  if (!CT_HAVE_BUILD_COMMAND) GTEST_SKIP() << "this build has no compiler module (no tuner)";
  const std::string task = "autotvm:conv2d_NCHWc.x86 1,64,56,56,64,64,3,3,1,1,1,1,1,1,1,1 float32";
  const std::string target = "llvm -keys=cpu -mcpu=znver3";
  std::string lines;
  for (int i = 0; i < 4; ++i) {
    lines +=
        R"({"input": [")" + target +
        R"(", "conv2d_NCHWc.x86", [["TENSOR", [1, 64, 56, 56], "float32"], ["TENSOR", [64, 64, 3, 3], "float32"], [1, 1], [1, 1, 1, 1], [1, 1], "NCHW", "NCHW", "float32"], {}], "config": {"index": )" +
        std::to_string(100 + i) +
        R"(, "code_hash": null, "entity": [["tile_ic", "sp", [-1, 8]], ["tile_oc", "sp", [-1, )" +
        std::to_string(1 << i) + R"(]], ["unroll_kw", "ot", true]]}, "result": [[)" +
        (i == 3 ? std::string("1000000000.0], 2") : std::to_string(0.001 * (4 - i)) + "], 0") +
        R"(, 0.5, 1700000000.0], "version": 0.2, "tvm_version": "0.9.0"})" + "\n";
  }
  const std::string log = farm_.WriteFile("conv.log", lines);
  const std::string farm = " --tracker " + farm_.tracker();
  auto r = RunCommand(kCli + " records import " + log + farm + " --device-kind 'x86_64/AMD EPYC'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("conv.log: read as AutoTVM records"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 record(s) read, 4 new to the farm"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "") << "the device kind was named: nothing to warn of";
  r = RunCommand(kCli + " records import " + log + farm +
                 " --device-kind 'x86_64/AMD EPYC' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["duplicates"], 4) << "imported twice, kept once";

  const std::string cache = std::string(CT_TUNER_TEST_DATA) + "/matmul-256-xeon-1t.json";
  r = RunCommand(kCli + " records import " + cache + farm);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("read as Kernel Tuner records"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("264 record(s) read, 264 new"), std::string::npos) << r.out;

  r = RunCommand(kCli + " records ls" + farm + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, nlohmann::json> rows;
  const auto listed = nlohmann::json::parse(r.out);
  for (const auto& row : listed["rows"]) {
    rows[row["task"].get<std::string>()] = row;
  }
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_EQ(rows[task]["device_kind"], "x86_64/AMD EPYC");
  EXPECT_EQ(rows[task]["records"], 4);
  EXPECT_EQ(rows[task]["best_mean_s"], 0.002);
  EXPECT_EQ(rows[task]["best_config"], 102) << "the fastest success, not the failure";
  EXPECT_EQ(rows["matmul 256,256,256 float32"]["device_kind"], "x86_64/Intel(R) Xeon(R) Processor");

  const std::string back = farm_.Path("back.log");
  r = RunCommand(kCli + " records export" + farm + " --task '" + task + "' --target '" + target +
                 "' --device-kind 'x86_64/AMD EPYC' --format autotvm -o " + back);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("4 record(s) of " + task + " on x86_64/AMD EPYC, in AutoTVM's format"),
            std::string::npos)
      << r.out;
  std::ifstream in(back);
  std::istringstream want(lines);
  std::string got_line, want_line;
  int n = 0;
  while (std::getline(want, want_line)) {
    ASSERT_TRUE(std::getline(in, got_line)) << "line " << n;
    EXPECT_EQ(nlohmann::json::parse(got_line), nlohmann::json::parse(want_line)) << "line " << n;
    ++n;
  }
  EXPECT_FALSE(std::getline(in, got_line)) << "more lines than were imported";

  r = RunCommand(kCli + " records import " + farm_.WriteFile("junk.txt", "hello\n") + farm);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("junk.txt: not a file of tuning records that crosstune reads"),
            std::string::npos)
      << r.err;
}

// Two hosts tuning the same task on one tracker's records (`tune --records tracker`), at once
// and with the same seed, so that they propose the same configs: no config is timed twice on
// the device kind (each is in the farm's records once), and what one left to the other or took
// from it is counted.
TEST_F(TrackerWebTest, TwoRunsSharingTheFarmsRecordsNeverTimeAConfigTwice) {
  if (!CT_HAVE_BUILD_COMMAND) GTEST_SKIP() << "this build has no compiler module (no tuner)";
  auto tune = [&](const std::string& key, const std::string& log, CommandResult* out) {
    *out = RunCommand(kCli + " tune matmul --shape 48,48,48 --tuner random --seed 7 --trials 20" +
                      " --batch 4 --repeat 1 --min-repeat-ms 0 --tracker " + farm_.tracker() +
                      " --key " + key + " --records tracker --log " + farm_.Path(log) +
                      " --quiet --json");
  };
  CommandResult a, b;
  std::thread other([&] { tune("jetson", "b.jsonl", &b); });
  tune("rpi4", "a.jsonl", &a);
  other.join();
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  ASSERT_TRUE(ja.contains("farm")) << a.out;
  EXPECT_EQ(ja["farm"]["device_kind"], jb["farm"]["device_kind"]) << "one machine: one kind";
  EXPECT_EQ(ja["farm"]["unsent"], 0);

  // The farm's records of the task: each config once, and as many as the two runs measured.
  const std::string kind = ja["farm"]["device_kind"];
  auto r =
      RunCommand(kCli + " records export --tracker " + farm_.tracker() +
                 " --task 'matmul 48,48,48 float32' --target '" + ja["target"].get<std::string>() +
                 "' --device-kind '" + kind + "' -o " + farm_.Path("farm.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<uint64_t, int> timed;
  std::istringstream lines(ReadFile(farm_.Path("farm.jsonl")));
  for (std::string line; std::getline(lines, line);) {
    timed[nlohmann::json::parse(line)["config"]["index"].get<uint64_t>()]++;
  }
  for (const auto& [config, times] : timed) {
    EXPECT_EQ(times, 1) << "config " << config << " was timed " << times << " times";
  }
  EXPECT_EQ(static_cast<int>(timed.size()), ja["measured"].get<int>() + jb["measured"].get<int>());
  EXPECT_GT(ja["farm"]["resumed"].get<int>() + jb["farm"]["resumed"].get<int>() +
                ja["farm"]["elsewhere"].get<int>() + jb["farm"]["elsewhere"].get<int>(),
            0)
      << "the same seed proposes the same configs: one run meets the other's\n"
      << a.out << "\n"
      << b.out;
}

// Warm start from the farm: a run on a kind the farm has no records of (for this task) starts
// from the nearest kind's records: it says whose, and its first batch is their best configs.
// The records of that other kind are this machine's own, imported under another CPU's name.
TEST_F(TrackerWebTest, ARunOnAKindWithoutRecordsStartsFromTheNearestKindsBest) {
  if (!CT_HAVE_BUILD_COMMAND) GTEST_SKIP() << "this build has no compiler module (no tuner)";
  // Three runs (each a few seconds under ASan): the sibling's, the warm one, one that resumes.
  const std::string tune = kCli + " tune matmul --shape 48,48,48 --batch 8 --repeat 1" +
                           " --min-repeat-ms 0 --no-default --tracker " + farm_.tracker() +
                           " --key rpi4";
  auto r = RunCommand(tune + " --tuner random --seed 3 --trials 16 --quiet --log " +
                      farm_.Path("sibling.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // The sibling's records: another CPU's name, the same target. This machine's device kind is
  // ARCH/CPU, as the farm names it.
  std::string kind;
  std::ostringstream renamed;
  std::vector<std::pair<double, uint64_t>> sibling_best;
  std::istringstream lines(ReadFile(farm_.Path("sibling.jsonl")));
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line);
    kind = j["device"]["arch"].get<std::string>() + "/" + j["device"]["cpu"].get<std::string>();
    j["device"]["cpu"] = j["device"]["cpu"].get<std::string>() + " (a sibling)";
    if (j["error"] == "ok") {
      sibling_best.emplace_back(j["mean"].get<double>(), j["config"]["index"].get<uint64_t>());
    }
    renamed << j.dump() << "\n";
  }
  ASSERT_GE(sibling_best.size(), 8u);
  std::sort(sibling_best.begin(), sibling_best.end());
  r = RunCommand(kCli + " records import " + farm_.WriteFile("renamed.jsonl", renamed.str()) +
                 " --tracker " + farm_.tracker());
  ASSERT_EQ(r.exit_code, 0) << r.err;

  r = RunCommand(tune + " --tuner xgb --seed 1 --trials 8 --records tracker --log " +
                 farm_.Path("warm.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // The summary names whose records it started from, and how far it trusted them: judged on the
  // configs of the batch the sibling measured too, at least its six (trusted or set aside
  // depends on these 2-microsecond timings: not asserted).
  EXPECT_NE(r.out.find("warm start: from 16 record(s) of " + kind +
                       " (a sibling), the nearest kind with records of this task; "),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("Kendall tau -?[0-9.]+ over [678] configs")))
      << r.out;
  // The first batch: six of the sibling's configs (its best, then spread over its top), then two
  // as a cold start picks them (8 of a space of thousands: at random, hardly any the sibling's).
  std::set<uint64_t> top;
  for (const auto& [mean, config] : sibling_best) top.insert(config);
  std::set<uint64_t> timed;
  int from_top = 0;
  std::istringstream warm_lines(ReadFile(farm_.Path("warm.jsonl")));
  for (std::string line; std::getline(warm_lines, line);) {
    const uint64_t config = nlohmann::json::parse(line)["config"]["index"].get<uint64_t>();
    timed.insert(config);
    from_top += top.count(config) ? 1 : 0;
  }
  EXPECT_EQ(timed.size(), 8u);
  EXPECT_TRUE(timed.count(sibling_best[0].second)) << "the sibling's best was not timed";
  EXPECT_GE(from_top, 6);
  // On a kind with records of its own (now this one: the run above sent its 8) a run resumes
  // from those and starts from no other kind's.
  r = RunCommand(tune + " --trials 8 --records tracker --quiet --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["farm"]["device_kind"], kind);
  EXPECT_EQ(j["farm"]["resumed"], 8) << r.out;
  EXPECT_FALSE(j["farm"].contains("warm_start")) << r.out;
}

// Warm start across targets: where no kind has records of the task for the run's target (a CPU
// generation with features of its own), the run starts from the nearest kind's records for
// another target, and says so. The records are this machine's own, filed under another CPU's
// name and another target string.
TEST_F(TrackerWebTest, ARunOnATargetWithoutRecordsStartsFromAnotherTargetsNearestKind) {
  if (!CT_HAVE_BUILD_COMMAND) GTEST_SKIP() << "this build has no compiler module (no tuner)";
  const std::string tune = kCli + " tune matmul --shape 48,48,48 --batch 8 --repeat 1" +
                           " --min-repeat-ms 0 --no-default --tracker " + farm_.tracker() +
                           " --key rpi4";
  auto r = RunCommand(tune + " --tuner random --seed 3 --trials 16 --quiet --log " +
                      farm_.Path("other.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::string kind, target;
  std::ostringstream renamed;
  std::istringstream lines(ReadFile(farm_.Path("other.jsonl")));
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line);
    j["device"]["cpu"] = j["device"]["cpu"].get<std::string>() + " (last generation)";
    kind = j["device"]["arch"].get<std::string>() + "/" + j["device"]["cpu"].get<std::string>();
    j["target"] = target = j["target"].get<std::string>() + ",-avx512f";
    renamed << j.dump() << "\n";
  }
  r = RunCommand(kCli + " records import " + farm_.WriteFile("renamed.jsonl", renamed.str()) +
                 " --tracker " + farm_.tracker());
  ASSERT_EQ(r.exit_code, 0) << r.err;

  r = RunCommand(tune + " --tuner xgb --seed 1 --trials 8 --records tracker");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("warm start: from 16 record(s) of " + kind +
                       " (built for another target), the nearest kind with records of this task"),
            std::string::npos)
      << r.out;
  // --json names the target; the run's own records went to the farm under its own target.
  r = RunCommand(kCli + " records ls --tracker " + farm_.tracker() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto listed = nlohmann::json::parse(r.out);
  ASSERT_EQ(listed["rows"].size(), 2u) << r.out;
  std::set<std::string> targets;
  for (const auto& row : listed["rows"]) targets.insert(row["target"].get<std::string>());
  EXPECT_TRUE(targets.count(target)) << r.out;
}

// drain / undrain / kick as an operator runs them: the admin token is checked, each command
// changes the device's state, and kick ends the holder's lease.
TEST(TrackerAdminCliTest, DrainUndrainAndKickNeedTheAdminToken) {
  Farm farm;
  std::string admin = farm.WriteFile("admin", "admin-secret\n");
  std::string wrong = farm.WriteFile("wrong", "guess\n");
  ASSERT_TRUE(farm.StartTracker({"--admin-token-file", admin}));
  int s = farm.StartServer("cpu");
  ASSERT_GE(s, 0);
  ASSERT_TRUE(farm.WaitRegistered(1));
  const std::string dev = farm.server_addr(s);
  auto admin_cmd = [&](const std::string& action, const std::string& token_file) {
    return RunCommand(kCli + " " + action + " --tracker " + farm.tracker() + " " + dev +
                      " --admin-token-file " + token_file);
  };

  auto r = admin_cmd("kick", wrong);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(r.err, "crosstune: error: wrong admin token\n");

  r = admin_cmd("drain", admin);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, dev + ": drained\n");
  EXPECT_EQ(farm.Device(dev)["state"], "drained");
  r = admin_cmd("undrain", admin);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, dev + ": undrained\n");
  EXPECT_EQ(farm.Device(dev)["state"], "free");

  auto holder = farm.Client("holder");
  client::LeaseRequest req;
  req.key = "cpu";
  req.multi_session = true;
  ASSERT_TRUE(holder->RequestDevice(req).ok());
  EXPECT_EQ(farm.Device(dev)["holder"], "holder");
  r = admin_cmd("kick", admin);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, dev + ": kicked\n");
  EXPECT_TRUE(Eventually([&] { return farm.Device(dev)["state"] == "free"; }))
      << farm.Summary().dump();
  bool kicked = false;
  auto summary = farm.Summary();
  for (const auto& h : summary["history"]) {
    kicked |= h["holder"] == "holder" && h["outcome"] == "kicked by an admin";
  }
  EXPECT_TRUE(kicked) << farm.Summary()["history"].dump();
}

// A lease that ends while its command runs (here an admin kicks it from inside the command, so
// no renewal came due) is found lost at release: a warning, and no exit 0 for a command that ran
// on a device it no longer held. It used to exit 0 silently.
TEST(TrackerAdminCliTest, LeaseWarnsAndExitsNonZeroWhenTheLeaseWasLostWhileTheCommandRan) {
  Farm farm;
  std::string admin = farm.WriteFile("admin", "admin-secret\n");
  ASSERT_TRUE(farm.StartTracker({"--admin-token-file", admin}));
  ASSERT_GE(farm.StartServer("cpu"), 0);
  ASSERT_TRUE(farm.WaitRegistered(1));
  const std::string lease = kCli + " lease --tracker " + farm.tracker() + " --key cpu -- sh -c ";
  auto r = RunCommand(lease + "'" + kCli + " kick --tracker " + farm.tracker() +
                      " \"$CROSSTUNE_DEVICE\" --admin-token-file " + admin + "'");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find(": kicked"), std::string::npos) << r.out;
  // Found at release (or by a renewal, should one come due first).
  EXPECT_NE(r.err.find("crosstune: warning: the lease was lost while the command ran"),
            std::string::npos)
      << r.err;
  // A command that failed keeps its own status.
  r = RunCommand(lease + "'" + kCli + " kick --tracker " + farm.tracker() +
                 " \"$CROSSTUNE_DEVICE\" --admin-token-file " + admin + " && exit 3'");
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  // A lease held to the end: exit 0, no warning.
  r = RunCommand(lease + "true");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
}
#endif

}  // namespace
}  // namespace crosstune::testing
