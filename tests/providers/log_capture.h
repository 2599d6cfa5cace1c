// Captures structured log lines for the duration of a test.
#ifndef STEPS_TESTS_PROVIDERS_LOG_CAPTURE_H_
#define STEPS_TESTS_PROVIDERS_LOG_CAPTURE_H_

#include <mutex>
#include <string>
#include <vector>

#include "core/log.h"

namespace steps {

class LogCapture {
 public:
  LogCapture() {
    old_ = SetLogSink([this](LogLevel, const std::string& line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back(line);
    });
  }
  ~LogCapture() { SetLogSink(old_); }
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
  LogSink old_;
};

}  // namespace steps

#endif  // STEPS_TESTS_PROVIDERS_LOG_CAPTURE_H_
