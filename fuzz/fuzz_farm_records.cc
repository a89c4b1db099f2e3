// The farm's tuning records in the tracker (tracker/records.h) fed what clients may send: records
// with any JSON text, names and numbers; what the checks let through is kept (sent again: every
// one a duplicate), read back as sent, found by any query, and claimed by two runs.
//
// What must hold: a record is kept once however often it comes; every record read back is one
// that was sent; two runs are never granted the same config of the same task and kind.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "crosstune/tracker/records.h"
#include "crosstune/tracker/store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crosstune;
  using namespace crosstune::tracker;
  FuzzedDataProvider in(data, size);
  const std::vector<std::string> tasks = {"matmul 8,8,8 float32", "conv2d 1,3,8,8 float32"};
  const std::vector<std::string> kinds = {"x86_64/AMD EPYC 9R14", "x86_64/AMD EPYC 7B13",
                                          "aarch64/cortex-a72"};
  auto pick = [&in](const std::vector<std::string>& from) {
    return in.ConsumeBool() ? from[in.ConsumeIntegralInRange<size_t>(0, from.size() - 1)]
                            : in.ConsumeRandomLengthString(64);
  };
  auto store = Store::Open("");
  if (!store.ok()) std::abort();

  std::vector<msg::FarmRecord> good;
  std::set<std::string> sent;
  const int n = in.ConsumeIntegralInRange<int>(0, 8);
  for (int i = 0; i < n; ++i) {
    msg::FarmRecord r;
    r.task = pick(tasks);
    r.target = "llvm";
    r.device_kind = pick(kinds);
    r.generator = in.ConsumeBool() ? "g" : "";
    r.config_index = in.ConsumeIntegralInRange<uint64_t>(0, 15);
    r.mean = in.ConsumeFloatingPoint<double>();
    r.ok = in.ConsumeBool();
    r.stopped_early = in.ConsumeBool();
    r.json = in.ConsumeRandomLengthString(4096);
    if (ValidateRecord(r).ok()) {
      good.push_back(r);
      sent.insert(r.json);
    }
  }
  auto first = (*store)->PutRecords("run", "fuzz", 1, good);
  if (!first.ok()) std::abort();
  if (first->added + first->duplicates != good.size() || first->added != sent.size()) std::abort();
  auto again = (*store)->PutRecords("run", "fuzz", 2, good);
  if (!again.ok() || again->added != 0 || again->duplicates != good.size()) std::abort();

  msg::RecordsQuery q;
  q.task = pick(tasks);
  q.target = in.ConsumeBool() ? "llvm" : in.ConsumeRandomLengthString(16);
  q.device_kind = pick(kinds);
  q.best_only = in.ConsumeBool();
  q.nearest = in.ConsumeBool();
  q.limit = in.ConsumeIntegralInRange<uint32_t>(0, 300);
  auto reply = QueryRecords(**store, q);
  if (reply.ok()) {
    for (const auto& r : reply->records) {
      if (!sent.count(r.json)) std::abort();  // only what was sent comes back
    }
  }

  RecordClaims claims;
  const auto now = RecordClaims::Clock::now();
  std::set<uint64_t> granted_a;
  for (const char* run : {"A", "B"}) {
    msg::RecordsClaim c;
    c.run_id = run;
    c.task = tasks[0];
    c.target = "llvm";
    c.device_kind = kinds[0];
    const int m = in.ConsumeIntegralInRange<int>(0, 8);
    for (int i = 0; i < m; ++i) c.configs.push_back(in.ConsumeIntegralInRange<uint64_t>(0, 15));
    c.ttl_ms = in.ConsumeIntegralInRange<uint32_t>(0, 700'000);
    if (!ValidateRecordsClaim(c).ok()) continue;
    auto measured = (*store)->MeasuredConfigs(c);
    if (!measured.ok()) std::abort();
    auto got = claims.Claim(now, c, *measured);
    for (uint64_t g : got.granted) {
      if (std::string(run) == "A") {
        granted_a.insert(g);
      } else if (granted_a.count(g)) {
        std::abort();  // both runs hold it
      }
    }
  }
  return 0;
}
