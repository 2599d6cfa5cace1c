// Mock scripts: what the scripted provider answers, per agent or model, in
// order. The same YAML is a pipeline's top-level `mock:` block and the file
// `mock_provider --script FILE` serves. Format: docs/mock.md.
#ifndef STEPS_MOCK_PROVIDER_SCRIPT_H_
#define STEPS_MOCK_PROVIDER_SCRIPT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/duration.h"
#include "core/status.h"
#include "providers/http.h"

namespace YAML {
class Node;
}

namespace steps {

struct MockToolCall {
  // Empty: the engine makes one ("call_<request>_<n>").
  std::string id;
  std::string name;
  // JSON text of the arguments, sent as written (so a script can send
  // malformed arguments on purpose).
  std::string arguments = "{}";
};

// Checks on the request an entry answers. Unset fields check nothing.
struct MockExpect {
  // The system message(s) contain this text.
  std::optional<std::string> system_contains;
  // The last message (whatever its role) contains this text.
  std::optional<std::string> last_contains;
  // A tool result is present (true) or absent (false) in the request.
  std::optional<bool> tool_result;
  // This is the Nth request this script received (1-based).
  std::optional<int> request;
  // The request holds exactly this many messages (system included).
  std::optional<int> messages;
  // JSON text of a mapping every key of which the request's wire body holds
  // with an equal value (nested mappings compared the same way, key by key;
  // lists and scalars whole): `body: {temperature: 0.2, seed: 7}`.
  std::optional<std::string> body;
  // The request names this model (as sent: "gpt-4o" for "openai/gpt-4o").
  std::optional<std::string> model;
  // The names of the tools offered, exactly and in order (empty: none).
  std::optional<std::vector<std::string>> tools;
  // The last message's last part is exactly this text: a user message's
  // text, or the last tool result (Anthropic sends one turn's results as
  // parts of one message; this is the last of them).
  std::optional<std::string> last_is;
};

struct MockUsage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::optional<double> cost;
};

// One scripted answer.
struct MockEntry {
  enum class Action {
    kDefault,     // No answer key: answer as the default entry does.
    kSay,         // Text and/or tool calls.
    kStatus,      // A non-2xx (or any) status with headers and body.
    kHang,        // Never answer (a streamed `say` sends a first piece).
    kDrop,        // Close the connection with no answer.
    kGarbage,     // 200 with a malformed body.
    kErrorEvent,  // 200 whose stream opens with an error event.
  };
  // 1-based line of the entry in its YAML text (0 when unknown).
  int line = 0;
  Action action = Action::kDefault;
  std::string text;  // kSay; kGarbage's body; kErrorEvent's message.
  std::vector<MockToolCall> calls;  // kSay.
  int status = 200;                 // kStatus.
  HttpHeaders headers;              // kStatus (and any answer).
  std::optional<std::string> body;  // kStatus: verbatim body.
  Millis delay{0};                  // Wait this long before answering.
  std::optional<MockUsage> usage;   // Reported usage; default estimated.
  std::optional<MockExpect> expect;
  // Written as a comment above the entry by WriteMockScript; never read
  // back (a recording notes which source answered).
  std::string note;
};

struct MockScript {
  // Entries per key: an agent name (matched against X-Steps-Agent) or a
  // model (matched against the request's model). Agent names win.
  std::map<std::string, std::vector<MockEntry>> scripts;
  // Answers every request no script covers, and every request after a
  // script ran out. Unset: a 400 saying nothing was scripted.
  std::optional<MockEntry> default_entry;
  // Each key's YAML as read ("default" included), in yaml-cpp's one
  // emitted form (comments and layout dropped): what MockScriptFingerprint
  // compares.
  std::map<std::string, std::string> written;
};

// A text that differs whenever the answers `script` may give the agent
// named `agent` differ: the agent's own script and `default` when the
// script has one for the agent (agent names win), else every script (a
// model's script or the default answers it). For the step cache key.
std::string MockScriptFingerprint(const MockScript& script,
                                  const std::string& agent);

// Reads a script from its YAML node (a pipeline's `mock:` value). Errors
// are kInvalidArgument, "LINE: message" with the node's 1-based line, so a
// caller can prefix "FILE:".
Result<MockScript> ParseMockScript(const YAML::Node& node);

// Reads a script from YAML text. Errors as above.
Result<MockScript> ParseMockScriptText(const std::string& text);

// Reads a script file. Errors are "FILE:LINE: message".
Result<MockScript> LoadMockScriptFile(const std::string& path);

// `script` as YAML text that ParseMockScriptText reads back to the same
// entries (lines aside): `header` first as comment lines, then each key's
// entries in `order` (keys missing from it follow, sorted), each entry's
// note as a comment above it. Texts are written so any bytes survive
// (quoted, or as block scalars when they span lines).
std::string WriteMockScript(const MockScript& script,
                            const std::vector<std::string>& order = {},
                            const std::string& header = "");

}  // namespace steps

#endif  // STEPS_MOCK_PROVIDER_SCRIPT_H_
