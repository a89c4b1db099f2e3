// The Build request's transfer (build_job.h) against a fake peer on a socketpair: a result whose
// bytes do not match their SHA-256 is kBadHash, an announced size over the limit is refused before
// anything is allocated, and a good one arrives whole.
#include "crosstune/build_job.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <thread>

#include "crosstune/crypto.h"

namespace crosstune {
namespace {

struct Pair {
  Pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    client = Channel(fds[0]);
    peer = Channel(fds[1]);
  }
  Channel client, peer;
};

Deadline Soon() { return DeadlineIn(std::chrono::seconds(10)); }

// The fake worker: reads one job and answers with `reply` followed by `body`.
std::thread FakeWorker(Channel& peer, msg::BuildJobReply reply, std::string body,
                       std::string* got_request) {
  return std::thread([&peer, reply, body, got_request] {
    auto f = peer.ReadFrame(Soon());
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_EQ(f->op, Opcode::kBuild);
    auto job = f->As<msg::BuildJob>();
    ASSERT_TRUE(job.ok());
    auto request = ReceiveBuildJob(peer, *job, Soon());
    ASSERT_TRUE(request.ok()) << request.status().ToString();
    *got_request = *request;
    ASSERT_TRUE(peer.Send(Opcode::kResult, f->request_id, reply, Soon()).ok());
    ASSERT_TRUE(peer.WriteBytes(body.data(), body.size(), Soon()).ok());
  });
}

TEST(BuildJob, AResultArrivesWholeWithItsHashChecked) {
  Pair p;
  const std::string result = std::string("library\0bytes", 13);
  std::string got;
  std::thread worker = FakeWorker(p.peer, {result.size(), Sha256Hex(result)}, result, &got);
  auto bytes = CallBuildJob(p.client, "the request", 1000, Soon());
  worker.join();
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(*bytes, result);
  EXPECT_EQ(got, "the request");
}

TEST(BuildJob, AResultWhoseBytesDoNotMatchTheirHashIsBadHash) {
  Pair p;
  const std::string sent = "library bytes";
  std::string damaged = sent;
  damaged[3] ^= 1;  // one bit flipped on the way
  std::string got;
  std::thread worker = FakeWorker(p.peer, {damaged.size(), Sha256Hex(sent)}, damaged, &got);
  auto bytes = CallBuildJob(p.client, "the request", 1000, Soon());
  worker.join();
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), ErrorCode::kBadHash) << bytes.status().ToString();
  EXPECT_NE(bytes.status().message().find("SHA-256"), std::string::npos);
}

TEST(BuildJob, AnOversizeResultIsRefusedBeforeItsBytesAreRead) {
  Pair p;
  std::string got;
  std::thread worker = FakeWorker(p.peer, {Limits::kMaxBuildJobBytes + 1, Sha256Hex("")}, "", &got);
  auto bytes = CallBuildJob(p.client, "the request", 1000, Soon());
  worker.join();
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), ErrorCode::kLimitExceeded) << bytes.status().ToString();
}

TEST(BuildJob, ARequestWhoseBytesDoNotMatchTheirHashIsBadHashOnTheWorker) {
  Pair p;
  msg::BuildJob job{5, Sha256Hex("right"), 0};
  ASSERT_TRUE(p.client.Send(Opcode::kBuild, 1, job, Soon()).ok());
  ASSERT_TRUE(p.client.WriteBytes("wrong", 5, Soon()).ok());
  auto f = p.peer.ReadFrame(Soon());
  ASSERT_TRUE(f.ok());
  auto request = ReceiveBuildJob(p.peer, *f->As<msg::BuildJob>(), Soon());
  ASSERT_FALSE(request.ok());
  EXPECT_EQ(request.status().code(), ErrorCode::kBadHash);
}

}  // namespace
}  // namespace crosstune
