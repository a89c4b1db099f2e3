// Shared by the binding's files: failed Status values as C++ exceptions (raised in Python as the
// package's class for the code), and the parts of the module each file binds.
#pragma once

#include <nanobind/nanobind.h>

#include <stdexcept>
#include <utility>

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

void BindTracker(nanobind::module_& m);
void BindBuilder(nanobind::module_& m);
void BindTuner(nanobind::module_& m);

}  // namespace crosstune::python
