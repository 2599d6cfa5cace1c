#include "process/process.h"

#include <string.h>

#include <utility>

#include "process/live_process.h"

namespace steps {

std::string_view OutputStreamName(OutputStream stream) {
  return stream == OutputStream::kStdout ? "stdout" : "stderr";
}

std::string_view ProcessEndName(ProcessEnd end) {
  switch (end) {
    case ProcessEnd::kExited:
      return "exited";
    case ProcessEnd::kSignaled:
      return "signaled";
    case ProcessEnd::kTimedOut:
      return "timed out";
    case ProcessEnd::kCancelled:
      return "cancelled";
    case ProcessEnd::kFailedToStart:
      return "failed to start";
    case ProcessEnd::kLost:
      return "lost";
  }
  return "unknown";
}

ProcessRequest ProcessRequest::Shell(std::string command) {
  ProcessRequest request;
  request.command = std::move(command);
  return request;
}

ProcessRequest ProcessRequest::Exec(std::vector<std::string> argv) {
  ProcessRequest request;
  request.argv = std::move(argv);
  return request;
}

std::string ProcessResult::Describe() const {
  switch (end) {
    case ProcessEnd::kExited:
      return "exited with code " + std::to_string(exit_code.value_or(-1));
    case ProcessEnd::kSignaled: {
      int sig = term_signal.value_or(0);
      const char* abbrev = sigabbrev_np(sig);
      return "killed by signal " + std::to_string(sig) + " (SIG" +
             (abbrev ? abbrev : "?") + ")";
    }
    case ProcessEnd::kTimedOut:
      return "timed out";
    case ProcessEnd::kCancelled:
      return "cancelled";
    case ProcessEnd::kFailedToStart:
      return "failed to start: " + error;
    case ProcessEnd::kLost:
      return "lost: " + error;
  }
  return "unknown";
}

Result<std::unique_ptr<LiveProcess>> ProcessLauncher::Start(
    const ProcessRequest& request) {
  (void)request;
  return Status(StatusCode::kInternal,
                "this process launcher cannot start a long-running process");
}

}  // namespace steps
