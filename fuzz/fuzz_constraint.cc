// Tracker constraint expressions ("memory_mb>=2048", "+neon", "soc!=bcm2711") from device
// requests, parsed and matched against a device. The input is split at newlines: the first line
// is a tag value of the device, the rest are constraints.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "crosstune/tracker/scheduler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using crosstune::tracker::Scheduler;
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> lines;
  for (size_t start = 0;;) {
    size_t nl = text.find('\n', start);
    lines.push_back(text.substr(start, nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  crosstune::msg::DeviceInfo info;
  info.arch = "aarch64";
  info.cores = 4;
  info.memory_bytes = 4ull << 30;
  info.cpu_features = {"neon", "fp-armv8"};
  std::map<std::string, std::string> tags{{"soc", lines[0]}, {"rack", "b"}};
  std::vector<std::string> constraints(lines.begin() + 1, lines.end());
  for (const auto& c : constraints) (void)Scheduler::ParseConstraint(c);
  (void)Scheduler::Matches(tags, info, constraints);
  return 0;
}
