// Tuning record logs as `crosstune log`, `crosstune export`, `crosstune replay` and a resumed
// `crosstune tune` read them: JSON lines of outside origin (a log shared by someone else, a torn
// last line). The input is the whole log, read from an in-memory file.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "crosstune/tuner/records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("fuzz.jsonl", MFD_CLOEXEC);
  if (fd < 0) std::abort();
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) {
    std::abort();
  }
  auto log = crosstune::tuner::ReadLog("/proc/self/fd/" + std::to_string(fd));
  if (!log.ok()) return 0;
  for (const auto& r : log->records) {
    // What a log holds must write back and read again as the same record.
    auto again = crosstune::tuner::Record::FromJson(r.ToJson());
    if (!again.ok() || again->ToJson() != r.ToJson()) std::abort();
    (void)r.gflops();
  }
  (void)crosstune::tuner::BestRecords(log->records);
  return 0;
}
