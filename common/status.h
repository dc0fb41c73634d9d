#pragma once
// Status and StatusOr<T>: the error values every Tandem library returns.
//
// Codes follow gRPC's numbering so the agent can map them onto the wire without a table.
// Header-only and standard-library-only: the engine carries it to a bare CUDA machine.

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace tandem {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// The canonical upper-snake name, e.g. "INVALID_ARGUMENT".
constexpr std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kUnknown: return "UNKNOWN";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kAborted: return "ABORTED";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kDataLoss: return "DATA_LOSS";
    case StatusCode::kUnauthenticated: return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

// The result of a fallible call: OK, or a code with a human-readable message.
// Cheap to copy when OK (an empty string). Never throws.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(code == StatusCode::kOk ? std::string() : std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status Unknown(std::string m) { return {StatusCode::kUnknown, std::move(m)}; }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
  static Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
  static Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
  static Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
  static Status Unauthenticated(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "INVALID_ARGUMENT: port must be in 1..65535", or "OK".
  std::string ToString() const {
    if (ok()) return "OK";
    std::string out(StatusCodeName(code_));
    out += ": ";
    out += message_;
    return out;
  }

  // The same code with `context` prepended: "reading model.safetensors: header length ...".
  // An OK status stays OK.
  Status WithContext(std::string_view context) const {
    if (ok()) return *this;
    std::string m(context);
    m += ": ";
    m += message_;
    return Status(code_, std::move(m));
  }

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value of type T, or the Status that explains why there is none.
// REQUIRES: a StatusOr is never built from an OK Status (that becomes kInternal).
template <typename T>
class [[nodiscard]] StatusOr {
  static_assert(!std::is_same_v<std::decay_t<T>, Status>, "StatusOr<Status> is meaningless");

 public:
  StatusOr(const T& value) : value_(value) {}        // NOLINT(google-explicit-constructor)
  StatusOr(T&& value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  StatusOr(Status status)                            // NOLINT(google-explicit-constructor)
      : status_(status.ok() ? Status::Internal("StatusOr constructed from an OK status")
                            : std::move(status)) {}
  template <typename U, typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                                    !std::is_same_v<std::decay_t<U>, Status> &&
                                                    !std::is_same_v<std::decay_t<U>, StatusOr>>>
  StatusOr(U&& value) : value_(std::forward<U>(value)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok(). Calling these on an error is a programming bug: it aborts with the error.
  const T& value() const& {
    CheckOk();
    return *value_;
  }
  T& value() & {
    CheckOk();
    return *value_;
  }
  T&& value() && {
    CheckOk();
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  // The value, or `fallback` when this holds an error.
  T value_or(T fallback) const& { return ok() ? *value_ : std::move(fallback); }

 private:
  void CheckOk() const {
    if (!ok()) {
      std::fprintf(stderr, "FATAL: StatusOr::value() on error: %s\n", status_.ToString().c_str());
      std::abort();
    }
  }

  Status status_;
  std::optional<T> value_;
};

namespace internal {
inline const Status& AsStatus(const Status& s) { return s; }
template <typename T>
const Status& AsStatus(const StatusOr<T>& s) {
  return s.status();
}
}  // namespace internal

}  // namespace tandem

#define TANDEM_STATUS_CONCAT_INNER(a, b) a##b
#define TANDEM_STATUS_CONCAT(a, b) TANDEM_STATUS_CONCAT_INNER(a, b)

// Returns the error of `expr` (a Status or a StatusOr) from the enclosing function.
#define RETURN_IF_ERROR(expr)                                                                 \
  do {                                                                                        \
    const auto& tandem_status_or_ = (expr);                                                   \
    const ::tandem::Status& tandem_status_ = ::tandem::internal::AsStatus(tandem_status_or_); \
    if (!tandem_status_.ok()) return tandem_status_;                                          \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, F());` declares x from F()'s value, or returns F()'s error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  TANDEM_ASSIGN_OR_RETURN_IMPL(TANDEM_STATUS_CONCAT(tandem_statusor_, __LINE__), lhs, expr)
#define TANDEM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
