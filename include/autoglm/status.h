// Errors are values: every fallible operation returns Status or Result<T>,
// with a message that names the file, field or parameter that was wrong.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace autoglm {

enum class StatusCode {
  kOk,
  kInvalidArgument,
  kNotFound,
  kIoError,
  kCorrupt,
  kUnsupported,
  kOutOfRange,
  kResourceExhausted,
  kInternal
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  // `field`: the request field at fault ("messages", "tool_choice", "response_format", ...),
  // for callers (an HTTP API) that report it apart from the message.
  Status(StatusCode code, std::string message, std::string field)
      : code_(code), message_(std::move(message)), field_(std::move(field)) {}
  static Status ok() { return {}; }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& field() const { return field_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string field_;
};

inline Status invalid_argument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status not_found(std::string m) {
  return {StatusCode::kNotFound, std::move(m)};
}
inline Status io_error(std::string m) {
  return {StatusCode::kIoError, std::move(m)};
}
inline Status corrupt(std::string m) {
  return {StatusCode::kCorrupt, std::move(m)};
}
inline Status unsupported(std::string m) {
  return {StatusCode::kUnsupported, std::move(m)};
}
inline Status out_of_range(std::string m) {
  return {StatusCode::kOutOfRange, std::move(m)};
}
inline Status resource_exhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}
  Result(Status status) : status_(std::move(status)) { assert(!status_.is_ok()); }

  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace autoglm

// Propagate a failed Status from the enclosing function.
#define AUTOGLM_RETURN_IF_ERROR(expr) \
  do {                                \
    ::autoglm::Status _st = (expr);   \
    if (!_st.is_ok()) return _st;     \
  } while (0)

#define AUTOGLM_CONCAT_INNER(a, b) a##b
#define AUTOGLM_CONCAT(a, b) AUTOGLM_CONCAT_INNER(a, b)
// Assign the value of a Result to lhs, or return its Status.
#define AUTOGLM_ASSIGN_OR_RETURN(lhs, expr)                                                      \
  auto AUTOGLM_CONCAT(_res_, __LINE__) = (expr);                                                 \
  if (!AUTOGLM_CONCAT(_res_, __LINE__).is_ok()) return AUTOGLM_CONCAT(_res_, __LINE__).status(); \
  lhs = std::move(AUTOGLM_CONCAT(_res_, __LINE__)).value()
