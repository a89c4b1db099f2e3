// The qemu tests' fixture: one test per emulated board (QemuBoards()), each with the board's
// crosstune-server started under qemu-user in a fresh work folder and a session to it. Skips with
// the reason when qemu-user or the cross-built server is missing. Instantiate a suite with
// CT_INSTANTIATE_QEMU_BOARDS(Suite).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <ostream>
#include <string>

#include "crosstune/client/session.h"
#include "crosstune/testing/qemu_board.h"
#include "crosstune/testing/support.h"

namespace crosstune::testing {

// GoogleTest prints a parameter in each test's listing: the board's name, not its bytes.
inline void PrintTo(const QemuBoard& board, std::ostream* os) { *os << board.name; }

class QemuBoardTest : public ::testing::TestWithParam<QemuBoard> {
 protected:
  // qemu runs everything at emulation speed: requests get a generous timeout.
  static constexpr std::chrono::seconds kRequestTimeout{120};

  void SetUp() override {
    if (std::string why = QemuBoardUnavailable(board()); !why.empty()) GTEST_SKIP() << why;
    ASSERT_FALSE(dir_.path().empty());
    std::filesystem::create_directories(work_dir());
    Status st = StartOnBoard(board(), work_dir(), &server_);
    ASSERT_TRUE(st.ok()) << st.ToString();
    client::ConnectOptions options;
    options.server = server_.address();
    options.request_timeout = kRequestTimeout;
    auto s = client::Session::Connect(options);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    session_ = std::move(s).value();
  }
  void TearDown() override {
    session_.reset();
    server_.Stop();
  }

  const QemuBoard& board() const { return GetParam(); }
  std::string address() const { return server_.address(); }
  client::Session& session() { return *session_; }
  // The server's work folder, and a folder beside it for the test's own files.
  std::string work_dir() const { return dir_.path() + "/work"; }
  const std::string& scratch_dir() const { return dir_.path(); }

 private:
  TempDir dir_{"crosstune-qemu"};
  client::LocalServer server_;
  std::unique_ptr<client::Session> session_;
};

}  // namespace crosstune::testing

#define CT_INSTANTIATE_QEMU_BOARDS(Suite)                                         \
  INSTANTIATE_TEST_SUITE_P(                                                       \
      Boards, Suite, ::testing::ValuesIn(::crosstune::testing::QemuBoards()),     \
      [](const ::testing::TestParamInfo<::crosstune::testing::QemuBoard>& info) { \
        return info.param.name;                                                   \
      })
