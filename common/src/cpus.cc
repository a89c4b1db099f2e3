#include "crosstune/cpus.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <string_view>

namespace crosstune {

int UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

namespace {

Status BadList(const std::string& text, const std::string& why) {
  return Status(ErrorCode::kInvalidArgument,
                "CPU list '" + text + "': " + why + " (expected e.g. 0-3,6)");
}

bool ParseCpu(std::string_view s, int* out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && *out >= 0 && *out < CPU_SETSIZE;
}

}  // namespace

Expected<std::vector<int>> ParseCpuList(const std::string& text) {
  if (text.empty()) return BadList(text, "empty");
  std::vector<int> cpus;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    const size_t dash = item.find('-');
    int first = 0, last = 0;
    if (!ParseCpu(item.substr(0, dash), &first) ||
        (dash != std::string_view::npos && !ParseCpu(item.substr(dash + 1), &last))) {
      return BadList(text, "'" + std::string(item) + "' is not a CPU number (0 to " +
                               std::to_string(CPU_SETSIZE - 1) + ") or a range of them");
    }
    if (dash == std::string_view::npos) last = first;
    if (last < first) return BadList(text, "the range '" + std::string(item) + "' is reversed");
    for (int c = first; c <= last; ++c) cpus.push_back(c);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

Status PinToCpus(const std::vector<int>& cpus, pid_t pid) {
  if (cpus.empty()) return Status(ErrorCode::kInvalidArgument, "no CPU to pin to");
  const std::vector<int> allowed = AllowedCpus();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (!allowed.empty() && !std::binary_search(allowed.begin(), allowed.end(), c)) {
      return Status(ErrorCode::kInvalidArgument, "CPU " + std::to_string(c) +
                                                     " is not one this process may use (allowed: " +
                                                     FormatCpuList(allowed) + ")");
    }
    CPU_SET(c, &set);
  }
  if (::sched_setaffinity(pid, sizeof(set), &set) != 0) {
    return Status(ErrorCode::kIoError,
                  "cannot pin to CPUs " + FormatCpuList(cpus) + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Status RestoreCpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return Status(ErrorCode::kInvalidArgument, "no CPU to restore");
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE) {
      return Status(ErrorCode::kInvalidArgument, "CPU " + std::to_string(c) + " out of range");
    }
    CPU_SET(c, &set);
  }
  if (::sched_setaffinity(0, sizeof(set), &set) != 0) {
    return Status(ErrorCode::kIoError,
                  "cannot restore CPUs " + FormatCpuList(cpus) + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace crosstune
