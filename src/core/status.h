// Status and Result<T>: expected failures are values, passed up the stack.
#ifndef STEPS_CORE_STATUS_H_
#define STEPS_CORE_STATUS_H_

#include <string>
#include <utility>
#include <variant>

namespace steps {

// A failure's kind decides how callers react; the message is for people.
enum class StatusCode {
  kOk,
  kInvalidArgument,   // Bad input from a user or a file.
  kNotFound,          // A named thing does not exist.
  kIoError,           // The OS said no (errno turned into a message).
  kDeadlineExceeded,  // A deadline passed before the work finished.
  kCancelled,         // Cancelled from outside (abort, parent timeout).
  kUnavailable,       // A transient fault: another try may help.
  kInternal,          // A bug or broken invariant.
};

const char* StatusCodeName(StatusCode code);

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "code: message", or "OK".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
inline Status NotFound(std::string m) {
  return Status(StatusCode::kNotFound, std::move(m));
}
inline Status IoError(std::string m) {
  return Status(StatusCode::kIoError, std::move(m));
}
inline Status Internal(std::string m) {
  return Status(StatusCode::kInternal, std::move(m));
}
// An IoError whose message is `context` followed by strerror(err).
Status ErrnoStatus(const std::string& context, int err);

// A value or the Status that explains why there is none.
// REQUIRES: a Result built from a Status holds a non-OK one.
template <typename T>
class Result {
 public:
  Result(T value) : data_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(data_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(data_);
  }
  // REQUIRES: ok().
  T& value() { return std::get<T>(data_); }
  const T& value() const { return std::get<T>(data_); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace steps

#endif  // STEPS_CORE_STATUS_H_
