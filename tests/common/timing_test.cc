#include "crosstune/timing.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <msgpack.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "crosstune/messages.h"
#include "crosstune/protocol.h"
#include "crosstune/wire.h"

namespace crosstune {
namespace {

// Parses `args` (without the program name) into a copy of `defaults` through AddTimingFlags.
TimingOptions Parse(std::vector<std::string> args, TimingOptions defaults = {}) {
  CLI::App app("timing");
  TimingOptions t = defaults;
  AddTimingFlags(&app, &t, "runs");
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
  app.parse(args);
  return t;
}

TEST(TimingFlags, ParseEveryFlagIntoTheStruct) {
  TimingOptions t = Parse({"--number", "7", "--repeat", "3", "--min-repeat-ms", "50",
                           "--cooldown-ms", "10", "--flush-cache"});
  EXPECT_EQ(
      t,
      (TimingOptions{
          .number = 7, .repeat = 3, .min_repeat_ms = 50, .cooldown_ms = 10, .flush_cache = true}));
}

TEST(TimingFlags, KeepTheCallersDefaultsWhenAbsent) {
  const TimingOptions defaults{.number = 10, .repeat = 5, .min_repeat_ms = 50};
  EXPECT_EQ(Parse({}, defaults), defaults);
  TimingOptions only_repeat = defaults;
  only_repeat.repeat = 2;
  EXPECT_EQ(Parse({"--repeat", "2"}, defaults), only_repeat);
}

TEST(TimingFlags, ShowTheDefaultsInHelp) {
  CLI::App app("timing");
  TimingOptions t{.number = 10, .repeat = 5};
  AddTimingFlags(&app, &t, "runs");
  const std::string help = app.help();
  EXPECT_NE(help.find("runs per round"), std::string::npos) << help;
  EXPECT_NE(help.find("10"), std::string::npos) << help;
  EXPECT_NE(help.find("--flush-cache"), std::string::npos) << help;
}

TEST(TimingFlags, RefuseWhatTheServerWouldRefuse) {
  EXPECT_THROW(Parse({"--number", "0"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--repeat", "0"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--repeat", std::to_string(Limits::kMaxTimeRepeat + 1)}),
               CLI::ValidationError);
  EXPECT_THROW(Parse({"--min-repeat-ms", std::to_string(Limits::kMaxTimeRoundMs + 1)}),
               CLI::ValidationError);
  EXPECT_THROW(Parse({"--cooldown-ms", std::to_string(Limits::kMaxTimeRoundMs + 1)}),
               CLI::ValidationError);
  EXPECT_NO_THROW(Parse({"--repeat", std::to_string(Limits::kMaxTimeRepeat)}));
}

template <typename... T>
std::string Pack(const T&... fields) {
  msgpack::sbuffer b;
  msgpack::pack(b, std::make_tuple(fields...));
  return std::string(b.data(), b.size());
}

template <typename T>
std::string Pack(const T& message) {
  msgpack::sbuffer b;
  msgpack::pack(b, message);
  return std::string(b.data(), b.size());
}

// The timing fields stay flat on the wire, in their order before TimingOptions existed, so
// servers and clients of either side of that change still understand each other.
TEST(TimingOnTheWire, TimeRequestKeepsItsFlatFieldOrder) {
  msg::TimeRequest r;
  r.call.module_id = 3;
  r.call.function = "f";
  r.timing = {
      .number = 7, .repeat = 3, .min_repeat_ms = 50, .cooldown_ms = 10, .flush_cache = true};
  r.stop_above_s = 0.25;
  EXPECT_EQ(Pack(r),
            Pack(r.call, uint32_t{7}, uint32_t{3}, uint32_t{50}, uint32_t{10}, true, 0.25));
  auto decoded = msgpack::unpack(Pack(r).data(), Pack(r).size());
  msg::TimeRequest back;
  decoded.get().convert(back);
  EXPECT_EQ(back.timing, r.timing);
  EXPECT_EQ(back.stop_above_s, 0.25);
}

// stop_above_s and stopped_early came later, last: a request or reply of a peer from before them
// reads as "every round".
TEST(TimingOnTheWire, TheLoserLimitIsOptionalBothWays) {
  msg::CallRequest call;
  call.module_id = 3;
  const std::string old_request =
      Pack(call, uint32_t{1}, uint32_t{3}, uint32_t{50}, uint32_t{0}, false);
  msg::TimeRequest req;
  req.stop_above_s = 9;
  msgpack::unpack(old_request.data(), old_request.size()).get().convert(req);
  EXPECT_EQ(req.stop_above_s, 9) << "a field the peer did not send keeps its default";
  msg::TimeRequest fresh;
  msgpack::unpack(old_request.data(), old_request.size()).get().convert(fresh);
  EXPECT_EQ(fresh.stop_above_s, 0);
  const std::string old_reply = Pack(std::vector<double>{0.1, 0.1}, uint32_t{4}, uint32_t{2});
  msg::TimeReply reply;
  msgpack::unpack(old_reply.data(), old_reply.size()).get().convert(reply);
  EXPECT_FALSE(reply.stopped_early);
  EXPECT_EQ(reply.seconds_per_call.size(), 2u);
}

TEST(TimingOnTheWire, TimeModelRequestKeepsItsFlatFieldOrder) {
  msg::TimeModelRequest r;
  r.model_id = 4;
  r.timing = {.number = 2, .repeat = 9, .min_repeat_ms = 1, .cooldown_ms = 6, .flush_cache = true};
  r.timeout_ms = 500;
  r.threads = 2;
  EXPECT_EQ(Pack(r), Pack(uint32_t{4}, uint32_t{2}, uint32_t{9}, uint32_t{1}, uint32_t{6}, true,
                          uint32_t{500}, uint32_t{2}));
}

}  // namespace
}  // namespace crosstune
