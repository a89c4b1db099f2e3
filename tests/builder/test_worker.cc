// A real build worker (builder.h: RunBuildWorker, as crosstune-build-worker runs it) that states
// another version in its handshake, as a worker of an older or newer crosstune would:
// $CT_TEST_WORKER_MINOR (the protocol minor) and $CT_TEST_WORKER_RELEASE, each when set. PoolTest
// starts it to check that the pool refuses such a worker by name.
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string>

#include "crosstune/builder/builder.h"

int main() {
  crosstune::builder::BuildWorkerVersion version;
  if (const char* minor = std::getenv("CT_TEST_WORKER_MINOR")) {
    std::from_chars(minor, minor + std::strlen(minor), version.minor);
  }
  if (const char* release = std::getenv("CT_TEST_WORKER_RELEASE")) version.release = release;
  crosstune::builder::RunBuildWorker(3, version);
}
