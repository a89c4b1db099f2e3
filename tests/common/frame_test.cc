#include "crosstune/frame.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <thread>

#include "crosstune/channel.h"
#include "crosstune/cpus.h"
#include "crosstune/handshake.h"
#include "crosstune/wire.h"

namespace crosstune {
namespace {

TEST(Frame, RoundTripsAMessage) {
  msg::UploadRequest req{"dir/kernel.so", 1234, "abc"};
  std::string bytes = EncodeFrame(Opcode::kUpload, 7, req);
  auto len = DecodeFrameLength(reinterpret_cast<const unsigned char*>(bytes.data()));
  ASSERT_TRUE(len.ok());
  ASSERT_EQ(*len, bytes.size() - 4);
  auto f = DecodeFrameBody(bytes.data() + 4, *len);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->op, Opcode::kUpload);
  EXPECT_EQ(f->request_id, 7u);
  auto back = f->As<msg::UploadRequest>();
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->path, "dir/kernel.so");
  EXPECT_EQ(back->size, 1234u);
}

TEST(Frame, RefusesOversizeLengthBeforeAllocating) {
  unsigned char prefix[4] = {0xff, 0xff, 0xff, 0x7f};
  auto len = DecodeFrameLength(prefix);
  ASSERT_FALSE(len.ok());
  EXPECT_EQ(len.status().code(), ErrorCode::kLimitExceeded);
}

TEST(Frame, RefusesGarbageBody) {
  std::string garbage = "\xc1\xc1\xc1\xc1garbage";
  auto f = DecodeFrameBody(garbage.data(), garbage.size());
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::kProtocolError);
}

TEST(Frame, RefusesBodyThatIsNotATriple) {
  msgpack::sbuffer sb;
  msgpack::pack(sb, std::vector<int>{1, 2});
  auto f = DecodeFrameBody(sb.data(), sb.size());
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::kProtocolError);
}

TEST(Frame, RefusesStringsThatAreNotUtf8AnywhereInThePayload) {
  msg::Hello hello;
  hello.peer_name = "B\xfcro";
  std::string bytes = EncodeFrame(Opcode::kHello, 1, hello);
  auto f = DecodeFrameBody(bytes.data() + 4, bytes.size() - 4);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::kProtocolError);
  EXPECT_NE(f.status().message().find("UTF-8"), std::string::npos);

  std::map<std::string, std::string> tags{{"room", "B\xfcro"}};
  bytes = EncodeFrame(Opcode::kRegister, 1, std::vector<decltype(tags)>{tags});
  EXPECT_FALSE(DecodeFrameBody(bytes.data() + 4, bytes.size() - 4).ok());
  tags = {{"B\xfcro", "room"}};
  bytes = EncodeFrame(Opcode::kRegister, 1, tags);
  EXPECT_FALSE(DecodeFrameBody(bytes.data() + 4, bytes.size() - 4).ok());
  tags = {{"room", "B\xc3\xbcro"}};
  bytes = EncodeFrame(Opcode::kRegister, 1, tags);
  EXPECT_TRUE(DecodeFrameBody(bytes.data() + 4, bytes.size() - 4).ok());
}

TEST(Frame, TrustedPipesMayCarryRawBytesInStrings) {
  std::string bytes = EncodeFrame(Opcode::kResult, 1,
                                  std::string("\x7f"
                                              "ELF\xff\xfe",
                                              6));
  EXPECT_FALSE(DecodeFrameBody(bytes.data() + 4, bytes.size() - 4).ok());
  auto f = DecodeFrameBody(bytes.data() + 4, bytes.size() - 4, /*utf8_strings=*/false);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->As<std::string>().value(), std::string("\x7f"
                                                      "ELF\xff\xfe",
                                                      6));
}

TEST(Frame, ErrorMessagesAreSentAsValidUtf8) {
  std::string bytes = EncodeError(3, Status(ErrorCode::kNotFound, "/tmp/B\xfcro.so: not found"));
  auto f = DecodeFrameBody(bytes.data() + 4, bytes.size() - 4);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  Status s = f->AsStatus();
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_EQ(s.message(), "/tmp/B\xef\xbf\xbdro.so: not found");
}

TEST(Frame, AnEmptyHelloIsNotComplete) {
  std::string bytes = EncodeFrame(Opcode::kHello, 1, std::vector<int>{});
  auto f = DecodeFrameBody(bytes.data() + 4, bytes.size() - 4);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->As<msg::Hello>().ok());  // it decodes, to the defaults, magic included
  EXPECT_FALSE(HelloIsComplete(*f));
  bytes = EncodeFrame(Opcode::kHello, 1, msg::Hello{});
  f = DecodeFrameBody(bytes.data() + 4, bytes.size() - 4);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(HelloIsComplete(*f));
}

TEST(Frame, WrongPayloadShapeIsAProtocolError) {
  std::string bytes = EncodeFrame(Opcode::kUpload, 1, std::string("not a struct"));
  auto f = DecodeFrameBody(bytes.data() + 4, bytes.size() - 4);
  ASSERT_TRUE(f.ok());
  auto req = f->As<msg::UploadRequest>();
  ASSERT_FALSE(req.ok());
  EXPECT_EQ(req.status().code(), ErrorCode::kProtocolError);
}

TEST(Frame, ErrorFrameCarriesCodeAndMessage) {
  std::string bytes = EncodeError(3, Status(ErrorCode::kWrongArch, "built for aarch64"));
  auto f = DecodeFrameBody(bytes.data() + 4, bytes.size() - 4);
  ASSERT_TRUE(f.ok());
  Status s = f->AsStatus();
  EXPECT_EQ(s.code(), ErrorCode::kWrongArch);
  EXPECT_EQ(s.message(), "built for aarch64");
}

TEST(Frame, OlderPeerWithFewerFieldsGetsDefaults) {
  // A Hello from a peer that knew only the first three fields.
  std::string bytes =
      EncodeFrame(Opcode::kHello, 1, std::make_tuple(kProtocolMagic, uint16_t{1}, uint16_t{0}));
  auto f = DecodeFrameBody(bytes.data() + 4, bytes.size() - 4);
  ASSERT_TRUE(f.ok());
  auto h = f->As<msg::Hello>();
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->magic, kProtocolMagic);
  EXPECT_TRUE(h->lease_token.empty());
}

std::pair<Channel, Channel> SocketPair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  return {Channel(fds[0]), Channel(fds[1])};
}

TEST(Channel, ReadTimesOutAtDeadline) {
  auto [a, b] = SocketPair();
  auto f = a.ReadFrame(DeadlineIn(std::chrono::milliseconds(50)));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::kTimeout);
}

TEST(Channel, BytesReadAheadWithAFrameAreTheNextReadsBytes) {
  auto [a, b] = SocketPair();
  // Two frames and a raw body in one write: the first ReadFrame's single receive takes them all.
  std::string wire = EncodeFrame(Opcode::kHeartbeat, 7, msg::Empty{}) +
                     EncodeFrame(Opcode::kResult, 8, msg::Empty{}) + "raw-body";
  ASSERT_TRUE(b.WriteBytes(wire.data(), wire.size(), DeadlineIn(std::chrono::seconds(2))).ok());
  auto first = a.ReadFrame(DeadlineIn(std::chrono::seconds(2)));
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->request_id, 7u);
  // What a poll() of the socket would miss: the rest is already here.
  EXPECT_TRUE(a.has_buffered_input());
  auto second = a.ReadFrame(DeadlineIn(std::chrono::milliseconds(1)));
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(second->request_id, 8u);
  char body[8];
  ASSERT_TRUE(a.ReadBytes(body, sizeof body, DeadlineIn(std::chrono::milliseconds(1))).ok());
  EXPECT_EQ(std::string(body, sizeof body), "raw-body");
  EXPECT_FALSE(a.has_buffered_input());
  // A moved channel keeps what it had read ahead.
  std::string more = EncodeFrame(Opcode::kResult, 9, msg::Empty{}) + "xy";
  ASSERT_TRUE(b.WriteBytes(more.data(), more.size(), DeadlineIn(std::chrono::seconds(2))).ok());
  ASSERT_TRUE(a.ReadFrame(DeadlineIn(std::chrono::seconds(2))).ok());
  Channel moved = std::move(a);
  ASSERT_TRUE(moved.ReadBytes(body, 2, DeadlineIn(std::chrono::milliseconds(1))).ok());
  EXPECT_EQ(std::string(body, 2), "xy");
}

// A bulk body larger than the socket's buffers moves in many bounded sends and receives (32 KiB
// and 1 MiB at most, channel.cc): every byte arrives once, in order, after the bytes read ahead
// with its header, whether it is read into memory, streamed into a file or discarded.
TEST(Channel, ABulkBodyArrivesWholeAndInOrderPastTheReadAhead) {
  auto [a, b] = SocketPair();
  const size_t size = (3 << 20) + 12345;
  std::string body(size, '\0');
  for (size_t i = 0; i < size; ++i) body[i] = static_cast<char>((i * 2654435761u) >> 13);
  std::string header = EncodeFrame(Opcode::kResult, 1, msg::Empty{});
  auto deadline = DeadlineIn(std::chrono::seconds(20));
  std::thread writer([&b = b, &body, &header, deadline] {
    for (int i = 0; i < 3; ++i) {
      // The header and the body's first bytes in one send, so the reader takes some ahead.
      std::string first = header + body.substr(0, 1000);
      ASSERT_TRUE(b.WriteBytes(first.data(), first.size(), deadline).ok());
      ASSERT_TRUE(b.WriteBytes(body.data() + 1000, body.size() - 1000, deadline).ok());
    }
  });
  ASSERT_TRUE(a.ReadFrame(deadline).ok());
  EXPECT_TRUE(a.has_buffered_input());
  std::string got(size, '\0');
  ASSERT_TRUE(a.ReadBytes(got.data(), got.size(), deadline).ok());
  EXPECT_TRUE(got == body) << "the body read into memory differs";

  ASSERT_TRUE(a.ReadFrame(deadline).ok());
  FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  struct Counter : Channel::ByteSink {
    uint64_t bytes = 0;
    void Update(const void*, size_t n) override { bytes += n; }
  } counter;
  ASSERT_TRUE(a.ReceiveToFd(::fileno(file), size, deadline, &counter).ok());
  EXPECT_EQ(counter.bytes, size);
  std::string stored(size + 1, '\0');
  EXPECT_EQ(::pread(::fileno(file), stored.data(), stored.size(), 0), static_cast<ssize_t>(size));
  stored.resize(size);
  std::fclose(file);
  EXPECT_TRUE(stored == body) << "the body streamed into a file differs";

  ASSERT_TRUE(a.ReadFrame(deadline).ok());
  ASSERT_TRUE(a.Discard(size, deadline).ok());
  writer.join();
  // Nothing was left over or taken too far: the stream is in step.
  ASSERT_TRUE(b.Send(Opcode::kResult, 2, msg::Empty{}, deadline).ok());
  auto next = a.ReadFrame(deadline);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->request_id, 2u);
}

TEST(Channel, AWaitEndsAtEachCallsOwnDeadline) {
  auto [a, b] = SocketPair();
  // A long wait first sets the socket's receive limit; a later, shorter deadline must still end
  // its wait on time rather than at the old limit.
  std::string f1 = EncodeFrame(Opcode::kResult, 1, msg::Empty{});
  ASSERT_TRUE(b.WriteBytes(f1.data(), f1.size(), DeadlineIn(std::chrono::seconds(2))).ok());
  ASSERT_TRUE(a.ReadFrame(DeadlineIn(std::chrono::seconds(20))).ok());
  auto start = std::chrono::steady_clock::now();
  auto f = a.ReadFrame(DeadlineIn(std::chrono::milliseconds(100)));
  EXPECT_EQ(f.status().code(), ErrorCode::kTimeout);
  // Not a performance bound: the old 20 s limit would have held the wait far past this.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// The peer would refuse a frame over the limit and close the connection; the sender finds out
// first, sends nothing, and the connection goes on.
TEST(Channel, DoesNotSendAFrameOverTheLimit) {
  auto [a, b] = SocketPair();
  msg::FileList big;
  for (int i = 0; i < 1200; ++i) big.files.push_back({std::string(1000, 'a'), 0, ""});
  Status sent = b.Send(Opcode::kResult, 5, big, DeadlineIn(std::chrono::seconds(2)));
  EXPECT_EQ(sent.code(), ErrorCode::kLimitExceeded) << sent.ToString();
  EXPECT_NE(sent.message().find("over the protocol's frame limit of 1048576"), std::string::npos)
      << sent.message();
  ASSERT_TRUE(b.Send(Opcode::kResult, 6, msg::Empty{}, DeadlineIn(std::chrono::seconds(2))).ok());
  auto f = a.ReadFrame(DeadlineIn(std::chrono::seconds(2)));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->request_id, 6u);  // the refused frame never left
}

TEST(Frame, AnErrorFrameFitsWhateverItsMessageQuotes) {
  std::string bytes =
      EncodeError(1, Status(ErrorCode::kInvalidArgument, std::string(2 << 20, 'x')));
  EXPECT_LT(bytes.size(), Limits::kMaxFrameBytes);
  auto f = DecodeFrameBody(bytes.data() + 4, bytes.size() - 4);
  ASSERT_TRUE(f.ok());
  EXPECT_NE(f->AsStatus().message().find("(2097152 bytes)"), std::string::npos);
}

TEST(Channel, PeerCloseIsDisconnected) {
  auto [a, b] = SocketPair();
  b.Close();
  auto f = a.ReadFrame(DeadlineIn(std::chrono::milliseconds(1000)));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::kDisconnected);
}

// Runs the test body with this thread allowed only its current CPU, then restores the mask.
class OneCpu {
 public:
  OneCpu() {
    ::sched_getaffinity(0, sizeof(saved_), &saved_);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(::sched_getcpu(), &one);
    ok_ = ::sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  ~OneCpu() { ::sched_setaffinity(0, sizeof(saved_), &saved_); }
  bool ok() const { return ok_; }

 private:
  cpu_set_t saved_{};
  bool ok_ = false;
};

TEST(Channel, BusyPollIsOffWhenTheProcessMayUseOneCpu) {
  auto [a, b] = SocketPair();
  {
    OneCpu pinned;
    ASSERT_TRUE(pinned.ok());
    a.set_busy_poll(std::chrono::microseconds(50));
    // Spinning there would hold the CPU the peer needs to answer.
    EXPECT_EQ(a.busy_poll().count(), 0);
  }
  if (UsableCpus() < 2) GTEST_SKIP() << "this machine lets the test use one CPU only";
  a.set_busy_poll(std::chrono::microseconds(50));
  EXPECT_EQ(a.busy_poll().count(), 50);
  a.set_busy_poll(std::chrono::microseconds(0));
  EXPECT_EQ(a.busy_poll().count(), 0);
}

TEST(Channel, BusyPollFindsFramesAndBacksOffAfterAMiss) {
  if (UsableCpus() < 2) GTEST_SKIP() << "busy polling needs two CPUs; this test may use one";
  auto [a, b] = SocketPair();
  a.set_busy_poll(std::chrono::microseconds(500));
  auto send = [&b = b](uint32_t id) {
    std::string f = EncodeFrame(Opcode::kResult, id, msg::Empty{});
    ASSERT_TRUE(b.WriteBytes(f.data(), f.size(), DeadlineIn(std::chrono::seconds(2))).ok());
  };
  send(1);
  auto f = a.ReadFrame(DeadlineIn(std::chrono::seconds(2)));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->request_id, 1u);
  EXPECT_EQ(a.busy_poll_stats().hits, 1u);
  EXPECT_EQ(a.busy_poll_stats().misses, 0u);

  // Nothing comes: the poll runs out, then the read waits in recv() until its deadline.
  EXPECT_EQ(a.ReadFrame(DeadlineIn(std::chrono::milliseconds(30))).status().code(),
            ErrorCode::kTimeout);
  EXPECT_EQ(a.busy_poll_stats().misses, 1u);
  // After one miss the next read does not poll; the one after it does again.
  send(2);
  ASSERT_TRUE(a.ReadFrame(DeadlineIn(std::chrono::seconds(2))).ok());
  EXPECT_EQ(a.busy_poll_stats().hits, 1u);
  send(3);
  ASSERT_TRUE(a.ReadFrame(DeadlineIn(std::chrono::seconds(2))).ok());
  EXPECT_EQ(a.busy_poll_stats().hits, 2u);
  // Misses in a row double the reads that skip polling: 1, then 2.
  auto time_out = [&a = a] {
    EXPECT_EQ(a.ReadFrame(DeadlineIn(std::chrono::milliseconds(10))).status().code(),
              ErrorCode::kTimeout);
  };
  time_out();  // polls and misses
  EXPECT_EQ(a.busy_poll_stats().misses, 2u);
  time_out();  // skips
  EXPECT_EQ(a.busy_poll_stats().misses, 2u);
  time_out();  // polls and misses again
  EXPECT_EQ(a.busy_poll_stats().misses, 3u);
  for (uint32_t id = 4; id < 7; ++id) {
    send(id);
    auto g = a.ReadFrame(DeadlineIn(std::chrono::seconds(2)));
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->request_id, id);
  }
  // Frames 4 and 5 skipped; 6 was polled for.
  EXPECT_EQ(a.busy_poll_stats().hits, 3u);
  // A peer that closes is seen while polling too.
  b.Close();
  EXPECT_EQ(a.ReadFrame(DeadlineIn(std::chrono::seconds(2))).status().code(),
            ErrorCode::kDisconnected);
  EXPECT_EQ(a.busy_poll_stats().hits, 4u);
}

TEST(Channel, BusyPollNeverRunsPastTheReadsDeadline) {
  if (UsableCpus() < 2) GTEST_SKIP() << "busy polling needs two CPUs; this test may use one";
  auto [a, b] = SocketPair();
  a.set_busy_poll(std::chrono::seconds(60));
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(a.ReadFrame(DeadlineIn(std::chrono::milliseconds(50))).status().code(),
            ErrorCode::kTimeout);
  // Not a performance bound: a poll that ignored the deadline would spin for a minute.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(a.busy_poll_stats().misses, 1u);
}

TEST(Channel, ParsesHostPort) {
  std::string host;
  uint16_t port = 0;
  ASSERT_TRUE(Channel::ParseHostPort("board:9090", &host, &port).ok());
  EXPECT_EQ(host, "board");
  EXPECT_EQ(port, 9090);
  ASSERT_TRUE(Channel::ParseHostPort("[::1]:80", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  EXPECT_FALSE(Channel::ParseHostPort("board", &host, &port).ok());
  EXPECT_FALSE(Channel::ParseHostPort("board:99999", &host, &port).ok());
}

void RunHandshake(const std::string& server_secret, const std::string& client_secret,
                  Status* server_status, Status* client_status) {
  auto [c, s] = SocketPair();
  std::thread server([&, ch = std::move(s)]() mutable {
    ServerHandshakeOptions opts;
    opts.secret = server_secret;
    *server_status =
        ServerHandshake(ch, opts, DeadlineIn(std::chrono::milliseconds(2000))).status();
  });
  msg::Hello hello;
  *client_status =
      ClientHandshake(c, hello, client_secret, DeadlineIn(std::chrono::milliseconds(2000)))
          .status();
  c.Close();
  server.join();
}

TEST(Handshake, AcceptsMatchingSecret) {
  Status s, c;
  RunHandshake("sesame", "sesame", &s, &c);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(c.ok()) << c.ToString();
}

TEST(Handshake, RefusesWrongSecret) {
  Status s, c;
  RunHandshake("sesame", "wrong", &s, &c);
  EXPECT_EQ(s.code(), ErrorCode::kUnauthorized);
  EXPECT_EQ(c.code(), ErrorCode::kUnauthorized);
}

TEST(Handshake, RefusesMissingSecretClientSide) {
  Status s, c;
  RunHandshake("sesame", "", &s, &c);
  EXPECT_EQ(c.code(), ErrorCode::kUnauthorized);
  EXPECT_FALSE(s.ok());
}

TEST(Handshake, RefusesOtherMajorVersion) {
  auto [c, s] = SocketPair();
  Status server_status;
  std::thread server([&, ch = std::move(s)]() mutable {
    server_status = ServerHandshake(ch, {}, DeadlineIn(std::chrono::milliseconds(2000))).status();
  });
  msg::Hello hello;
  hello.major = kProtocolMajor + 1;
  auto r = ClientHandshake(c, hello, "", DeadlineIn(std::chrono::milliseconds(2000)));
  server.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kVersionMismatch);
  EXPECT_EQ(server_status.code(), ErrorCode::kVersionMismatch);
}

}  // namespace
}  // namespace crosstune
