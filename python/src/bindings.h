// Shared by the binding's files: failed Status values as C++ exceptions (raised in Python as the
// package's class for the code), and the parts of the module each file binds.
#pragma once

#include <dlpack/dlpack.h>
#include <nanobind/nanobind.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "crosstune/client/session.h"
#include "crosstune/status.h"

namespace crosstune::python {

// Python types with their arguments, for the stubs (dict[str, Any], Sequence[Any], ...).
using AnyDict = nanobind::typed<nanobind::dict, nanobind::str, nanobind::any>;
using AnyDictList = nanobind::typed<nanobind::list, AnyDict>;
using AnySequence = nanobind::typed<nanobind::sequence, nanobind::any>;

class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return status_.message().c_str(); }

 private:
  Status status_;
};

void Check(const Status& s);

template <typename T>
T Unwrap(Expected<T>&& e) {
  if (!e.ok()) throw StatusError(e.status());
  return std::move(e).value();
}

// A host array as the client library sends it: in place, never copied here. Arrays come as they
// are (no conversion, so never a temporary copy a call would write into); the client refuses
// those that are not C-ordered CPU memory.
struct HostArray {
  std::vector<int64_t> shape, strides;
  DLTensor tensor{};
};
// A numpy (or any DLPack) array as a host argument; false for anything else. A read-only array
// is an input never written back.
bool ToHostArg(nanobind::handle h, HostArray& storage, client::HostArg& out);
// Seconds as the client's millisecond timeouts (0 or less: 0, the server's default).
uint32_t TimeoutMs(double seconds);
// Seconds as a duration, rounded to the millisecond.
std::chrono::milliseconds Ms(double seconds);
// The time evaluator's options as the package passes them.
client::TimeOptions TimeOptionsOf(uint32_t number, uint32_t repeat, uint32_t min_repeat_ms,
                                  uint32_t cooldown_ms, bool flush_cache, double timeout_s,
                                  uint32_t threads);
// numpy's name of a crosstune dtype ("f32" -> "float32").
std::string NumpyDType(DLDataType t);

void BindTracker(nanobind::module_& m);
void BindBuilder(nanobind::module_& m);
void BindTuner(nanobind::module_& m);
void BindModel(nanobind::module_& m);

}  // namespace crosstune::python
