// Helpers shared by the rpc integration tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "crosstune/client/session.h"
#include "server_process.h"

namespace crosstune::testing {

// The host kernels the tests load (CROSSTUNE_TEST_KERNELS: the same kernels built for the server
// under test when that is another architecture).
inline std::string TestKernels() {
  const char* env = std::getenv("CROSSTUNE_TEST_KERNELS");
  return env && *env ? env : CT_TEST_KERNELS;
}

// True when the tests run against a server given by CROSSTUNE_TEST_SERVER, which may be built for
// another architecture than this test (the host-architecture checks then do not apply).
inline bool ForeignServer() {
  const char* env = std::getenv("CROSSTUNE_TEST_SERVER");
  return env && *env;
}

// Starts a server with `args` or fails the test.
inline std::unique_ptr<ServerProcess> StartServer(const std::vector<std::string>& args = {}) {
  std::string error;
  auto server = ServerProcess::Start(args, &error);
  EXPECT_TRUE(server) << error;
  return server;
}

inline client::ConnectOptions Options(const ServerProcess& server, const std::string& secret = "") {
  client::ConnectOptions o;
  o.server = server.address();
  o.auth_secret = secret;
  o.peer_name = "rpc-test";
  o.request_timeout = std::chrono::seconds(30);
  return o;
}

inline std::unique_ptr<client::Session> Connect(const ServerProcess& server,
                                                const std::string& secret = "") {
  auto s = client::Session::Connect(Options(server, secret));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

// The server still answers: a fresh session pings it.
inline void ExpectServerAnswers(const ServerProcess& server) {
  auto s = client::Session::Connect(Options(server));
  ASSERT_TRUE(s.ok()) << "server no longer accepts sessions: " << s.status().ToString();
  Status ping = (*s)->Ping();
  EXPECT_TRUE(ping.ok()) << ping.ToString();
}

}  // namespace crosstune::testing
