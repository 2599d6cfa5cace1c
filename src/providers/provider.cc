#include "providers/provider.h"

#include <algorithm>
#include <atomic>

namespace steps {

const char* RoleName(Role role) {
  switch (role) {
    case Role::kSystem:
      return "system";
    case Role::kUser:
      return "user";
    case Role::kAssistant:
      return "assistant";
    case Role::kTool:
      return "tool";
  }
  return "user";
}

uint64_t NewHistoryId() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

Message Message::System(std::string text) {
  Message m;
  m.role = Role::kSystem;
  m.content = std::move(text);
  return m;
}

Message Message::User(std::string text) {
  Message m;
  m.role = Role::kUser;
  m.content = std::move(text);
  return m;
}

Message Message::Assistant(std::string text, std::vector<ToolCall> calls) {
  Message m;
  m.role = Role::kAssistant;
  m.content = std::move(text);
  m.tool_calls = std::move(calls);
  return m;
}

Message Message::ToolResult(std::string call_id, std::string result,
                            std::string tool_name) {
  Message m;
  m.role = Role::kTool;
  m.tool_call_id = std::move(call_id);
  m.content = std::move(result);
  m.tool_name = std::move(tool_name);
  return m;
}

const char* ProviderErrorKindName(ProviderErrorKind kind) {
  switch (kind) {
    case ProviderErrorKind::kConnection:
      return "connection";
    case ProviderErrorKind::kTimeout:
      return "timeout";
    case ProviderErrorKind::kHttpStatus:
      return "http_status";
    case ProviderErrorKind::kMalformed:
      return "malformed";
    case ProviderErrorKind::kStreamIdle:
      return "stream_idle";
    case ProviderErrorKind::kStreamError:
      return "stream_error";
    case ProviderErrorKind::kNoDescriptors:
      return "no_descriptors";
    case ProviderErrorKind::kTooLarge:
      return "too_large";
    case ProviderErrorKind::kDeadline:
      return "deadline";
    case ProviderErrorKind::kCancelled:
      return "cancelled";
    case ProviderErrorKind::kConfig:
      return "config";
    case ProviderErrorKind::kRateLimited:
      return "rate_limited";
    case ProviderErrorKind::kCircuitOpen:
      return "circuit_open";
  }
  return "unknown";
}

bool IsRetryableHttpStatus(int status) {
  return status == 408 || status == 409 || status == 429 ||
         (status >= 500 && status <= 599);
}

bool ProviderError::retryable() const {
  switch (kind) {
    case ProviderErrorKind::kConnection:
    case ProviderErrorKind::kTimeout:
    case ProviderErrorKind::kMalformed:
    case ProviderErrorKind::kStreamIdle:
    case ProviderErrorKind::kStreamError:
    case ProviderErrorKind::kNoDescriptors:
      return true;
    case ProviderErrorKind::kHttpStatus:
      return IsRetryableHttpStatus(http_status);
    case ProviderErrorKind::kTooLarge:
    case ProviderErrorKind::kDeadline:
    case ProviderErrorKind::kCancelled:
    case ProviderErrorKind::kConfig:
    case ProviderErrorKind::kRateLimited:
    case ProviderErrorKind::kCircuitOpen:
      return false;
  }
  return false;
}

std::string ProviderError::StatusLabel() const {
  if (kind == ProviderErrorKind::kHttpStatus) {
    return std::to_string(http_status);
  }
  return ProviderErrorKindName(kind);
}

Status ProviderError::ToStatus() const {
  switch (kind) {
    case ProviderErrorKind::kDeadline:
      return Status(StatusCode::kDeadlineExceeded, message);
    case ProviderErrorKind::kCancelled:
      return Status(StatusCode::kCancelled, message);
    case ProviderErrorKind::kConfig:
      return InvalidArgument(message);
    default:
      return Status(StatusCode::kUnavailable, message);
  }
}

std::optional<Millis> CallContext::RequestLimit() const {
  std::optional<Millis> left = deadline.Remaining(*clock);
  if (llm_timeout.count() <= 0) return left;
  if (!left) return llm_timeout;
  return std::min(*left, llm_timeout);
}

bool CallContext::LimitIsDeadline() const {
  std::optional<Millis> left = deadline.Remaining(*clock);
  if (!left) return false;
  return llm_timeout.count() <= 0 || *left <= llm_timeout;
}

}  // namespace steps
