// Status and StatusOr<T>: errors as values for anything that input or the
// environment can break (files, user requests, configuration).
// Invariants of the program itself use KVS_CHECK, which aborts.
// Thread-safety: value types; safe to copy and move between threads.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace kvs {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // bad input from a caller or a file
  kNotFound,           // a named thing does not exist
  kOutOfRange,         // a value outside the allowed range
  kResourceExhausted,  // memory, KV blocks or queue slots ran out
  kFailedPrecondition, // the system is not in a state to do this
  kUnimplemented,      // valid input that this build does not support
  kInternal,           // a bug
  kDataLoss,           // a malformed or truncated file
  kIo,                 // the operating system refused (open, mmap, read)
  kCancelled,
  kDeadlineExceeded,
  kUnavailable,        // try again later (draining, not ready)
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message"
  std::string ToString() const;

  // Prepends context ("while loading x: ") to the message.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename... Args>
Status InvalidArgument(fmt::format_string<Args...> f, Args&&... a) {
  return Status(StatusCode::kInvalidArgument, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args>
Status NotFound(fmt::format_string<Args...> f, Args&&... a) {
  return Status(StatusCode::kNotFound, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args>
Status OutOfRange(fmt::format_string<Args...> f, Args&&... a) {
  return Status(StatusCode::kOutOfRange, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args>
Status ResourceExhausted(fmt::format_string<Args...> f, Args&&... a) {
  return Status(StatusCode::kResourceExhausted, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args>
Status FailedPrecondition(fmt::format_string<Args...> f, Args&&... a) {
  return Status(StatusCode::kFailedPrecondition, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args>
Status Unimplemented(fmt::format_string<Args...> f, Args&&... a) {
  return Status(StatusCode::kUnimplemented, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args>
Status Internal(fmt::format_string<Args...> f, Args&&... a) {
  return Status(StatusCode::kInternal, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args>
Status DataLoss(fmt::format_string<Args...> f, Args&&... a) {
  return Status(StatusCode::kDataLoss, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args>
Status DeadlineExceeded(fmt::format_string<Args...> f, Args&&... a) {
  return Status(StatusCode::kDeadlineExceeded, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args>
Status IoError(fmt::format_string<Args...> f, Args&&... a) {
  return Status(StatusCode::kIo, fmt::format(f, std::forward<Args>(a)...));
}

// Holds either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : v_(status) { CheckNotOk(); }  // NOLINT
  StatusOr(Status&& status) : v_(std::move(status)) { CheckNotOk(); }  // NOLINT
  StatusOr(const T& value) : v_(value) {}  // NOLINT
  StatusOr(T&& value) : v_(std::move(value)) {}  // NOLINT
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U&&, T> &&
                                                    !std::is_same_v<std::decay_t<U>, Status> &&
                                                    !std::is_same_v<std::decay_t<U>, T>>>
  StatusOr(U&& value) : v_(T(std::forward<U>(value))) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { CheckOk(); return std::get<T>(v_); }
  const T& value() const& { CheckOk(); return std::get<T>(v_); }
  T&& value() && { CheckOk(); return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void CheckNotOk() const {
    if (std::get<Status>(v_).ok()) {
      std::fprintf(stderr, "StatusOr constructed from an OK status\n");
      std::abort();
    }
  }
  void CheckOk() const {
    if (!ok()) {
      std::fprintf(stderr, "StatusOr::value() on error: %s\n", std::get<Status>(v_).ToString().c_str());
      std::abort();
    }
  }
  std::variant<Status, T> v_;
};

}  // namespace kvs

#define KVS_CONCAT_INNER(a, b) a##b
#define KVS_CONCAT(a, b) KVS_CONCAT_INNER(a, b)

#define KVS_RETURN_IF_ERROR(expr)          \
  do {                                     \
    ::kvs::Status _kvs_st = (expr);        \
    if (!_kvs_st.ok()) return _kvs_st;     \
  } while (0)

#define KVS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

// KVS_ASSIGN_OR_RETURN(auto x, FunctionReturningStatusOr());
#define KVS_ASSIGN_OR_RETURN(lhs, expr) \
  KVS_ASSIGN_OR_RETURN_IMPL(KVS_CONCAT(_kvs_so_, __LINE__), lhs, expr)

// Invariant checks: always on, abort with location. Never for bad input.
#define KVS_CHECK(cond)                                                              \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

#define KVS_CHECK_MSG(cond, ...)                                                     \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s: %s\n", __FILE__, __LINE__, #cond, \
                   ::fmt::format(__VA_ARGS__).c_str());                              \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

#ifdef NDEBUG
#define KVS_DCHECK(cond) do { (void)sizeof(cond); } while (0)
#else
#define KVS_DCHECK(cond) KVS_CHECK(cond)
#endif
