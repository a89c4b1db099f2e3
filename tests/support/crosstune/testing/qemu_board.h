// The emulated boards the qemu tests run on: crosstune-server cross-built for aarch64, armhf and
// riscv64 (cmake/CrossServers.cmake) under qemu-user, with what each test needs to know about the
// board. qemu_board_test.h turns these into a GoogleTest fixture.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "crosstune/client/local_server.h"
#include "crosstune/status.h"

namespace crosstune::testing {

struct QemuBoard {
  std::string name;                       // "aarch64", "armhf", "riscv64": the test's name
  std::string qemu;                       // the qemu-user binary found at configure time
  std::string sysroot;                    // the cross compiler's sysroot (qemu's -L)
  std::string server;                     // the cross-built crosstune-server
  std::string uname;                      // the arch the board's server reports
  std::string builder_target;             // a builder target spec for the board
  std::vector<std::string> clang_target;  // clang flags that select the board's target
};

// Every board, whether or not this build can run them.
std::vector<QemuBoard> QemuBoards();

// Why `board` cannot run here (no qemu-user, no cross-built server), or "" when it can.
std::string QemuBoardUnavailable(const QemuBoard& board);

// Starts the board's crosstune-server under qemu-user on 127.0.0.1, port 0, serving `work_dir`.
// The board's libraries come from the sysroot only: on a host that also has the board's libc as
// a multiarch package (libc6:arm64), the guest's loader would otherwise find that one through the
// host's ld.so.cache, another build than the sysroot's loader, and the server would die.
Status StartOnBoard(const QemuBoard& board, const std::string& work_dir,
                    client::LocalServer* server,
                    std::chrono::seconds timeout = std::chrono::seconds(60));

}  // namespace crosstune::testing
