// Captures structured log lines for the duration of a test.
#ifndef STEPS_TESTS_COMMON_LOG_CAPTURE_H_
#define STEPS_TESTS_COMMON_LOG_CAPTURE_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "core/log.h"

namespace steps::test_support {

class LogCapture {
 public:
  LogCapture() {
    old_ = SetLogSink([this](LogLevel, const std::string& line) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        lines_.push_back(line);
      }
      logged_.notify_all();
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
  // Waits until a line with `text` is logged, or `limit` passes; whether
  // one was.
  bool WaitFor(const std::string& text, std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return logged_.wait_for(lock, limit, [&] {
      for (const auto& l : lines_) {
        if (l.find(text) != std::string::npos) return true;
      }
      return false;
    });
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable logged_;
  std::vector<std::string> lines_;
  LogSink old_;
};

}  // namespace steps::test_support

#endif  // STEPS_TESTS_COMMON_LOG_CAPTURE_H_
