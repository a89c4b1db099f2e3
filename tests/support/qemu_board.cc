#include "crosstune/testing/qemu_board.h"

#include <unistd.h>

namespace crosstune::testing {

std::vector<QemuBoard> QemuBoards() {
  return {
      {"aarch64",
       CT_QEMU_AARCH64,
       "/usr/aarch64-linux-gnu",
       CT_SERVER_AARCH64,
       "aarch64",
       "cortex-a72",
       {"--target=aarch64-linux-gnu"}},
      {"armhf",
       CT_QEMU_ARMHF,
       "/usr/arm-linux-gnueabihf",
       CT_SERVER_ARMHF,
       "armv7l",
       "armv7-neon",
       {"--target=armv7a-linux-gnueabihf", "-mfloat-abi=hard", "-mfpu=neon"}},
      // No vector extension reported: the kernel templates take their generic vector path.
      {"riscv64",
       CT_QEMU_RISCV64,
       "/usr/riscv64-linux-gnu",
       CT_SERVER_RISCV64,
       "riscv64",
       "riscv64",
       {"--target=riscv64-linux-gnu", "-march=rv64gc", "-mabi=lp64d", "-mno-relax"}},
  };
}

std::string QemuBoardUnavailable(const QemuBoard& board) {
  if (board.qemu.empty() || ::access(board.qemu.c_str(), X_OK) != 0) {
    return "qemu-user for " + board.name + " is missing ('" + board.qemu +
           "'); scripts/install-deps.sh installs it";
  }
  if (board.server.empty() || ::access(board.server.c_str(), X_OK) != 0) {
    return "no cross-built crosstune-server for " + board.name + " ('" + board.server +
           "'); configure with CROSSTUNE_CROSS_SERVERS=ON (needs the cross compilers from "
           "scripts/install-deps.sh)";
  }
  return "";
}

Status StartOnBoard(const QemuBoard& board, const std::string& work_dir,
                    client::LocalServer* server, std::chrono::seconds timeout) {
  return server->Start(
      {board.qemu, "-L", board.sysroot, "-E", "LD_LIBRARY_PATH=" + board.sysroot + "/lib",
       board.server, "--host", "127.0.0.1", "--port", "0", "--work-dir", work_dir},
      timeout);
}

}  // namespace crosstune::testing
