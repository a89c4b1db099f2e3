// The box a build runs in: Landlock (Linux 5.13+) restricts what files a build process may open,
// so a kernel source from another host (a build worker's client) or a generated one (a template
// parameter) cannot make the compiler or the linker read the host's files (`.incbin`, `#include`,
// a linker script) or write outside its scratch folder.
//
//   SandboxPaths paths = BuildSandboxPaths(scratch_dir, cache_dir);
//   if (Status s = ConfineBuildProcess(paths); !s.ok()) ...   // from now on, for good
//
// A confined process may read the toolchain's trees (clang's resource dir, the kernel include
// tree and what its links point at, the NVRTC library's folder), read and write its scratch folder
// and the build cache, and read and write /dev/null; any other open() fails with EACCES, and
// nothing may be executed. Landlock does not cover stat(): compiler_cpu.cc's file system filter
// keeps `__has_include` from probing what exists.
//
// Confinement is per process and cannot be undone; the process's children inherit it. Call it in
// a process that builds and does nothing else afterwards (a pool's worker, a build worker's
// session), before it reads anything from a client.
#pragma once

#include <string>
#include <vector>

#include "crosstune/status.h"

namespace crosstune::builder {

struct SandboxPaths {
  std::vector<std::string> read_only;   // trees (or files) to read
  std::vector<std::string> read_write;  // trees to read, write, create in and remove from
};

// The Landlock ABI version of the running kernel: 0 when it has none (older than 5.13, built
// without it, or not among the enabled security modules).
int LandlockAbi();

// What a build needs: the toolchain's trees read-only, `scratch_dir` (where the compiler and the
// linker write their temporary files) and `cache_dir` (when not empty) read-write.
SandboxPaths BuildSandboxPaths(const std::string& scratch_dir, const std::string& cache_dir);

// Sets PR_SET_NO_NEW_PRIVS and confines the calling process (every thread of it: call it while it
// has one) to `paths`. A path that does not exist is skipped. kInternal when Landlock is not
// available (LandlockAbi() == 0) or refuses the rules; the process is then unconfined.
Status ConfineBuildProcess(const SandboxPaths& paths);

// A build process's confinement in one call: points TMPDIR at `scratch_dir` (the linker's and
// LLVM's temporary files go there) and confines the process to BuildSandboxPaths(scratch_dir,
// cache_dir).
Status ConfineBuilds(const std::string& scratch_dir, const std::string& cache_dir);

}  // namespace crosstune::builder
