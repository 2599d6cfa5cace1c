#include "agent/recording.h"

#include <algorithm>
#include <map>

#include "agent/deadline_notice.h"
#include "core/utf8.h"

namespace steps::agent {
namespace {

// Bound on a tool result's first line when it is expected.
constexpr size_t kToolResultExpectBytes = 200;
// Bound on an error message kept in an entry's note.
constexpr size_t kNoteErrorBytes = 200;

constexpr const char kMask[] = "***";

std::string CutTo(const std::string& text, size_t max_bytes) {
  return text.substr(0, Utf8PrefixLength(text, max_bytes));
}

// The longest part of a masked text that holds no mask: what can still be
// expected of a text that held a secret.
std::string LongestUnmasked(const std::string& masked) {
  std::string best;
  size_t start = 0;
  while (start <= masked.size()) {
    size_t end = masked.find(kMask, start);
    if (end == std::string::npos) end = masked.size();
    if (end - start > best.size()) best = masked.substr(start, end - start);
    start = end + sizeof(kMask) - 1;
  }
  return best;
}

// The system message without the deadline disclosure (whose clock time
// changes every run) and what follows it: the persona.
std::string Persona(const std::string& system) {
  size_t at = system.find(kDisclosurePrefix);
  std::string persona = at == std::string::npos ? system : system.substr(0, at);
  while (!persona.empty() &&
         (persona.back() == '\n' || persona.back() == ' ')) {
    persona.pop_back();
  }
  return persona;
}

// What the answer was, for the entry's note.
std::string Describe(const ChatResult& result) {
  if (result.ok()) {
    const ChatAnswer& a = result.answer();
    if (!a.tool_calls.empty()) {
      return std::to_string(a.tool_calls.size()) +
             (a.tool_calls.size() == 1 ? " tool call" : " tool calls");
    }
    return "an answer";
  }
  const ProviderError& e = result.error();
  if (e.kind == ProviderErrorKind::kHttpStatus) {
    return "HTTP " + std::to_string(e.http_status);
  }
  return ProviderErrorKindName(e.kind);
}

// The entry's answer: what was received, or the failure that reproduces
// the error. False for a failure no script can reproduce (nothing sent).
bool SetAnswer(const ChatResult& result, MockEntry& entry) {
  using Action = MockEntry::Action;
  if (result.ok()) {
    const ChatAnswer& a = result.answer();
    entry.action = Action::kSay;
    entry.text = a.text;
    for (const ToolCall& c : a.tool_calls) {
      entry.calls.push_back({"", c.name, c.arguments});
    }
    entry.usage = MockUsage{a.usage.prompt_tokens, a.usage.completion_tokens,
                            a.usage.cost_usd};
    return true;
  }
  const ProviderError& e = result.error();
  switch (e.kind) {
    case ProviderErrorKind::kHttpStatus:
      entry.action = Action::kStatus;
      entry.status = e.http_status;
      // The wait the server asked for, so a replay retries (or gives up
      // before the deadline) as the recorded run did.
      if (e.retry_after) {
        entry.headers.emplace_back("retry-after-ms",
                                   std::to_string(e.retry_after->count()));
      }
      return e.http_status >= 100 && e.http_status <= 599;
    case ProviderErrorKind::kConnection:
    case ProviderErrorKind::kNoDescriptors:
      entry.action = Action::kDrop;
      return true;
    case ProviderErrorKind::kTimeout:
    case ProviderErrorKind::kStreamIdle:
    case ProviderErrorKind::kDeadline:
      entry.action = Action::kHang;
      return true;
    case ProviderErrorKind::kMalformed:
    case ProviderErrorKind::kTooLarge:
      entry.action = Action::kGarbage;
      entry.text = "{\"choices\": [ this is not json";
      return true;
    case ProviderErrorKind::kStreamError:
      entry.action = Action::kErrorEvent;
      entry.text = e.message;
      return true;
    case ProviderErrorKind::kCancelled:
    case ProviderErrorKind::kConfig:
    case ProviderErrorKind::kRateLimited:
    case ProviderErrorKind::kCircuitOpen:
      return false;
  }
  return false;
}

}  // namespace

MockRecorder::MockRecorder(std::shared_ptr<const Redactor> redactor)
    : redactor_(std::move(redactor)) {}

std::string MockRecorder::Mask(const std::string& text) const {
  return redactor_ ? redactor_->Redact(text) : text;
}

MockExpect MockRecorder::ExpectFor(const ChatRequest& request) const {
  MockExpect e;
  e.model = Mask(request.model);
  std::vector<std::string> tools;
  for (const ToolSchema& t : request.tools) tools.push_back(Mask(t.name));
  e.tools = std::move(tools);
  // `text` exactly, or its longest secret-free part when it held a secret.
  auto whole_or_part = [this](const std::string& text, bool exact,
                              std::optional<std::string>& is,
                              std::optional<std::string>& contains) {
    std::string masked = Mask(text);
    if (masked == text) {
      (exact ? is : contains) = text;
    } else if (std::string part = LongestUnmasked(masked); !part.empty()) {
      contains = part;
    }
  };
  bool answered = false;
  for (const Message& m : request.messages) {
    if (m.role == Role::kAssistant) answered = true;
  }
  // The persona, on a conversation's first request.
  if (!answered && !request.messages.empty() &&
      request.messages.front().role == Role::kSystem) {
    std::string persona = Persona(request.messages.front().content);
    std::optional<std::string> unused;
    if (!persona.empty()) {
      whole_or_part(persona, false, unused, e.system_contains);
    }
  }
  if (request.messages.empty()) return e;
  const Message& last = request.messages.back();
  if (last.role == Role::kUser && last.content.rfind(kNudgePrefix, 0) != 0) {
    whole_or_part(last.content, true, e.last_is, e.last_contains);
  } else if (last.role == Role::kTool) {
    e.tool_result = true;
    std::string first = last.content.substr(0, last.content.find('\n'));
    first = CutTo(first, kToolResultExpectBytes);
    std::optional<std::string> unused;
    if (!first.empty()) whole_or_part(first, false, unused, e.last_contains);
  }
  return e;
}

MockEntry MockRecorder::EntryFor(const ProviderExchange& x, int number) const {
  MockEntry entry;
  const ChatResult& result = *x.result;
  SetAnswer(result, entry);
  entry.text = Mask(entry.text);
  for (MockToolCall& c : entry.calls) {
    c.name = Mask(c.name);
    c.arguments = Mask(c.arguments);
  }
  entry.expect = ExpectFor(*x.request);
  std::string note =
      "request " + std::to_string(number) + " of '" + x.agent + "'";
  if (!x.step.empty()) note += ", step '" + x.step + "'";
  note += ": " + Describe(result) + " from " + x.source;
  if (x.source_index > 0) {
    note += " (fallback " + std::to_string(x.source_index) + ")";
  }
  if (x.stream) note += ", streamed";
  if (!result.ok()) {
    note += "\n" + CutTo(result.error().message, kNoteErrorBytes);
  }
  entry.note = Mask(note);
  return entry;
}

void MockRecorder::OnExchange(const ProviderExchange& exchange) {
  if (exchange.request == nullptr || exchange.result == nullptr) return;
  {
    MockEntry probe;
    if (!SetAnswer(*exchange.result, probe)) return;  // Nothing to replay.
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(
      conversations_.begin(), conversations_.end(), [&](const Conversation& c) {
        return c.agent == exchange.agent && c.step == exchange.step;
      });
  if (it == conversations_.end()) {
    if (std::find(agents_.begin(), agents_.end(), exchange.agent) ==
        agents_.end()) {
      agents_.push_back(exchange.agent);
    }
    conversations_.push_back({exchange.agent, exchange.step, {}});
    it = conversations_.end() - 1;
  }
  it->entries.push_back(
      EntryFor(exchange, static_cast<int>(it->entries.size()) + 1));
  ++requests_;
}

MockScript MockRecorder::ScriptLocked(std::vector<std::string>& keys) const {
  std::map<std::string, int> steps_of;
  for (const Conversation& c : conversations_) ++steps_of[c.agent];
  MockScript script;
  for (const Conversation& c : conversations_) {
    std::string key = c.agent;
    if (steps_of[c.agent] > 1 && !c.step.empty()) key += "@" + c.step;
    std::vector<MockEntry>& entries = script.scripts[key];
    if (entries.empty()) keys.push_back(key);
    entries.insert(entries.end(), c.entries.begin(), c.entries.end());
  }
  return script;
}

MockScript MockRecorder::Script() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> keys;
  return ScriptLocked(keys);
}

int MockRecorder::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

std::vector<std::string> MockRecorder::agents() const {
  std::lock_guard<std::mutex> lock(mu_);
  return agents_;
}

std::string MockRecorder::Text(const std::string& header) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> keys;
  MockScript script = ScriptLocked(keys);
  return WriteMockScript(script, keys, header);
}

}  // namespace steps::agent
