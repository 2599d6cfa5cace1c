// Captures structured log lines for the duration of a test.
#ifndef STEPS_TESTS_COMMON_LOG_CAPTURE_H_
#define STEPS_TESTS_COMMON_LOG_CAPTURE_H_

#include <mutex>
#include <string>
#include <vector>

#include "core/log.h"

namespace steps::test_support {

class LogCapture {
 public:
  LogCapture() {
    old_ = SetLogSink([this](LogLevel, const std::string& line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back(line);
    });
  }
  ~LogCapture() { SetLogSink(old_); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }
  // The lines that contain `text`, in order.
  std::vector<std::string> LinesWith(const std::string& text) const {
    std::vector<std::string> out;
    for (const auto& l : lines()) {
      if (l.find(text) != std::string::npos) out.push_back(l);
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
  LogSink old_;
};

}  // namespace steps::test_support

#endif  // STEPS_TESTS_COMMON_LOG_CAPTURE_H_
