// The build box (sandbox.h), in a child process of its own (confinement cannot be undone): the
// toolchain and the scratch folder open, every other file refused, nothing executed.
#include "crosstune/builder/sandbox.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include "crosstune/builder/compiler.h"
#include "crosstune/testing/support.h"

namespace crosstune::builder {
namespace {

// Runs `body` in a forked child and returns its exit status (0: every check passed; otherwise
// the number of the first that failed).
int InChild(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

bool Opens(const std::string& path, int flags = O_RDONLY) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

TEST(SandboxTest, AConfinedProcessOpensTheToolchainAndItsScratchFolderAndNothingElse) {
  if (LandlockAbi() == 0) GTEST_SKIP() << "this kernel has no Landlock";
  testing::TempDir secret_dir("crosstune-secret");
  const std::string secret = testing::WriteFile(secret_dir.path() + "/token", "secret\n");
  testing::TempDir scratch("crosstune-scratch");
  const std::string header = KernelIncludeDir() + "/kernel_abi.h";
  ASSERT_TRUE(Opens(secret));
  ASSERT_TRUE(Opens(header));

  const int rc = InChild([&]() -> int {
    if (!ConfineBuilds(scratch.path(), "").ok()) return 1;
    if (!Opens(header)) return 2;                    // the kernel include tree
    if (Opens(secret) || errno != EACCES) return 3;  // another file
    if (Opens("/etc/passwd")) return 4;              // the host's
    if (!Opens(scratch.path() + "/kernel.o", O_WRONLY | O_CREAT)) return 5;  // its scratch
    if (Opens(secret_dir.path() + "/new", O_WRONLY | O_CREAT)) return 6;     // no writes outside
    if (!Opens("/dev/null", O_WRONLY)) return 7;
    const char* tmp = std::getenv("TMPDIR");
    if (tmp == nullptr || scratch.path() != tmp) return 8;  // the linker's temporary files
    if (::execl("/bin/true", "true", static_cast<char*>(nullptr)) == 0 || errno != EACCES) {
      return 9;  // nothing is executed
    }
    return 0;
  });
  EXPECT_EQ(rc, 0) << "check " << rc << " failed in the confined child";
  EXPECT_TRUE(Opens(secret)) << "this process is not confined";
}

TEST(SandboxTest, AConfinedProcessStillCompilesAndLinks) {
  if (LandlockAbi() == 0) GTEST_SKIP() << "this kernel has no Landlock";
  testing::TempDir scratch("crosstune-scratch");
  auto target = ParseTarget("llvm -mtriple=x86_64-linux-gnu");
  ASSERT_TRUE(target.ok());
  const int rc = InChild([&]() -> int {
    if (!ConfineBuilds(scratch.path(), "").ok()) return 1;
    auto out = CompileCpu(
        "#include \"kernel_abi.h\"\n"
        "#include <stdint.h>\n"
        "static int32_t Nop(const ct_arg* a, int32_t n) { (void)a; (void)n; return 0; }\n"
        "static const ct_function kFns[] = {{\"nop\", Nop, \"\"}};\n"
        "CT_DEFINE_MODULE(\"llvm\", kFns, 0)\n",
        *target, {});
    if (!out.ok()) {
      std::fprintf(stderr, "%s\n", out.status().ToString().c_str());
      return 2;
    }
    return out->library.empty() ? 3 : 0;
  });
  EXPECT_EQ(rc, 0) << "check " << rc << " failed in the confined child";
}

}  // namespace
}  // namespace crosstune::builder
