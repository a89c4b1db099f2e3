// Status and Expected<T>: errors inside crosstune carry a protocol ErrorCode and a message.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

#include "crosstune/error_code.h"

namespace crosstune {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Timeout: call vadd ran past 5 s".
  std::string ToString() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Expected(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).ok()); }  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  // The error; Status::Ok() when this holds a value.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

#define CT_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::crosstune::Status ct_status_ = (expr); \
    if (!ct_status_.ok()) return ct_status_; \
  } while (0)

#define CT_CONCAT_INNER(a, b) a##b
#define CT_CONCAT(a, b) CT_CONCAT_INNER(a, b)
#define CT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
// CT_ASSIGN_OR_RETURN(auto x, Foo()); returns Foo()'s Status on error.
#define CT_ASSIGN_OR_RETURN(lhs, expr) \
  CT_ASSIGN_OR_RETURN_IMPL(CT_CONCAT(ct_expected_, __LINE__), lhs, expr)

}  // namespace crosstune
