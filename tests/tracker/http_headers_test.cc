// The tracker's HTTP port as a browser meets it: every answer (the status page, /api/summary,
// /metrics, a 404, a refused method) carries the headers that keep the page from being sniffed,
// framed, cached or made to run another script. The tracker runs in process on 127.0.0.1:0.
// (That the page still works under its Content-Security-Policy is tracker_web_cli_test's
// StatusPageShowsTheFarmInHeadlessChromium: the table it checks is filled by the page's script.)
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "crosstune/tracker/status_page.h"
#include "crosstune/tracker/tracker.h"

namespace crosstune::tracker {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

// One answer of the HTTP port, headers and all.
http::response<http::string_body> Fetch(uint16_t port, http::verb verb, const std::string& target) {
  boost::asio::io_context io;
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(10));
  stream.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
  http::request<http::string_body> req(verb, target, 11);
  req.set(http::field::host, "127.0.0.1");
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.skip(verb == http::verb::head);  // a HEAD answer has a length but no body
  http::read(stream, buffer, parser);
  return parser.release();
}

class TrackerHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TrackerOptions o;
    o.port = 0;
    o.http_port = 0;
    tracker_ = std::make_unique<Tracker>(io_, o);
    ASSERT_TRUE(tracker_->Start().ok());
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    boost::asio::post(io_, [this] { tracker_->Stop(); });
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }
  boost::asio::io_context io_;
  std::unique_ptr<Tracker> tracker_;
  std::thread thread_;
};

TEST_F(TrackerHttpTest, EveryAnswerCarriesTheSecurityHeaders) {
  const std::vector<std::pair<http::verb, std::string>> asks = {
      {http::verb::get, "/"},
      {http::verb::get, "/index.html"},
      {http::verb::get, "/api/summary"},
      {http::verb::get, "/api/summary?x=1"},
      {http::verb::get, "/metrics"},
      {http::verb::head, "/"},
      {http::verb::get, "/nosuch"},
      {http::verb::post, "/api/summary"}};
  for (const auto& [verb, target] : asks) {
    SCOPED_TRACE(std::string(http::to_string(verb)) + " " + target);
    auto res = Fetch(tracker_->http_port(), verb, target);
    EXPECT_EQ(res["X-Content-Type-Options"], "nosniff");
    EXPECT_EQ(res["X-Frame-Options"], "DENY");
    EXPECT_EQ(res["Referrer-Policy"], "no-referrer");
    EXPECT_EQ(res[http::field::cache_control], "no-store");
    EXPECT_EQ(res["Cross-Origin-Resource-Policy"], "same-origin");
    const std::string csp(res["Content-Security-Policy"]);
    for (const char* part :
         {"default-src 'none'", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'",
          "form-action 'none'", "script-src 'sha256-", "style-src 'sha256-"}) {
      EXPECT_NE(csp.find(part), std::string::npos) << part << " in " << csp;
    }
    EXPECT_EQ(csp.find("unsafe"), std::string::npos) << csp;
  }
  EXPECT_EQ(Fetch(tracker_->http_port(), http::verb::get, "/nosuch").result(),
            http::status::not_found);
}

// The CSP's hashes name the page's own script and style, byte for byte: a browser runs nothing
// else. Checked against OpenSSL's SHA-256 and base64, not the tracker's encoder.
TEST(ContentSecurityPolicyTest, NamesThePagesScriptAndStyleBySha256) {
  const std::string page(StatusPageHtml());
  for (const char* tag : {"script", "style"}) {
    SCOPED_TRACE(tag);
    const std::string open = std::string("<") + tag + ">", close = std::string("</") + tag + ">";
    ASSERT_NE(page.find(open), std::string::npos);
    const size_t begin = page.find(open) + open.size();
    EXPECT_EQ(page.find(open, begin), std::string::npos) << "a second inline " << tag;
    const std::string text = page.substr(begin, page.find(close) - begin);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    ASSERT_EQ(EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr), 1);
    unsigned char b64[2 * EVP_MAX_MD_SIZE];
    const int n = EVP_EncodeBlock(b64, digest, static_cast<int>(size));
    const std::string source = std::string(tag) + "-src 'sha256-" +
                               std::string(reinterpret_cast<char*>(b64), static_cast<size_t>(n)) +
                               "'";
    EXPECT_NE(ContentSecurityPolicy().find(source), std::string::npos)
        << source << " in " << ContentSecurityPolicy();
  }
}

}  // namespace
}  // namespace crosstune::tracker
