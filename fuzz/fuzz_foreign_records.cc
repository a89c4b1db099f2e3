// Other tools' records as `crosstune records import` reads them (tuner/foreign_records.h). The
// first byte picks the format (mod 3): an AutoTVM log, a MetaSchedule database (its tuning-record
// file's text, a NUL, then its workload file's text), a Kernel Tuner cache. Every record read must
// survive our log line's round trip, and an AutoTVM record must export as the line it came from.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "crosstune/tuner/foreign_records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crosstune::tuner;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  LogContents log;
  switch (data[0] % 3) {
    case 0:
      log = ParseAutoTvmLog(text, "fuzz.log", {});
      break;
    case 1: {
      const size_t nul = text.find('\0');
      const std::string_view records = text.substr(0, nul);
      const std::string_view workloads =
          nul == std::string_view::npos ? std::string_view() : text.substr(nul + 1);
      auto got = ParseMetaScheduleDatabase(records, workloads, "fuzz", {});
      if (!got.ok()) return 0;
      log = std::move(*got);
      break;
    }
    default: {
      auto got = ParseKernelTunerRecords(std::string(text), "fuzz.json", {});
      if (!got.ok()) return 0;
      log = std::move(*got);
      break;
    }
  }
  for (const Record& r : log.records) {
    if (DeviceKind(r).empty() || r.target.empty()) std::abort();  // the farm could not place it
    auto back = Record::FromJson(nlohmann::json::parse(
        r.ToJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
    if (!back.ok()) std::abort();
    const nlohmann::json autotvm = ToAutoTvmJson(*back);
    if (data[0] % 3 == 0 && autotvm != r.source["line"]) std::abort();
  }
  return 0;
}
