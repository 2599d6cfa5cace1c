// The provider-neutral shape of one chat request and its answer. These types
// are what the conversation engine builds and reads; adapters translate them
// to and from each provider's wire format. Plain values: copyable, no
// references into anything else, safe to move across threads.
#ifndef STEPS_PROVIDERS_CHAT_H_
#define STEPS_PROVIDERS_CHAT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/duration.h"
#include "providers/model_parameters.h"

namespace steps {

enum class Role { kSystem, kUser, kAssistant, kTool };

// "system", "user", "assistant", "tool".
const char* RoleName(Role role);

// One function call the model asked for.
struct ToolCall {
  // Provider-assigned id; a tool message answers it by this id.
  std::string id;
  std::string name;
  // The arguments exactly as the model sent them: JSON text, which may be
  // malformed (the model's fault, for the engine to report back).
  std::string arguments;
};

struct Message {
  Role role = Role::kUser;
  // Text content. For kTool, the tool's result.
  std::string content;
  // kAssistant only: calls the model made in this turn.
  std::vector<ToolCall> tool_calls;
  // kTool only: the ToolCall::id this message answers.
  std::string tool_call_id;
  // kTool only, optional: the name of the tool that produced the result.
  std::string tool_name;

  static Message System(std::string text);
  static Message User(std::string text);
  static Message Assistant(std::string text, std::vector<ToolCall> calls = {});
  static Message ToolResult(std::string call_id, std::string result,
                            std::string tool_name = "");
};

// A tool offered to the model, as a function schema.
struct ToolSchema {
  std::string name;
  std::string description;
  // JSON Schema of the arguments object, as JSON text. Empty means
  // {"type":"object","properties":{}}.
  std::string parameters_json;
};

struct ToolChoice {
  enum class Mode {
    kAuto,      // The model decides (the provider default).
    kNone,      // No tool calls.
    kRequired,  // At least one tool call.
    kFunction,  // Exactly the named function.
  };
  Mode mode = Mode::kAuto;
  // kFunction only.
  std::string function;

  static ToolChoice Auto() { return {}; }
  static ToolChoice None() { return {Mode::kNone, ""}; }
  static ToolChoice Required() { return {Mode::kRequired, ""}; }
  static ToolChoice Function(std::string name) {
    return {Mode::kFunction, std::move(name)};
  }
};

// One request: the whole conversation so far plus the tools on offer.
struct ChatRequest {
  // The model as the provider names it (the part after "PROVIDER/"); see
  // ProviderSource::model.
  std::string model;
  std::vector<Message> messages;
  std::vector<ToolSchema> tools;
  ToolChoice tool_choice;
  // Upper bound on generated tokens; unset leaves the provider's default
  // (the Anthropic adapter, where the field is mandatory, sends 4096).
  std::optional<int64_t> max_tokens;
  // Sampling and output parameters; params.max_output_tokens, when set,
  // takes the place of max_tokens.
  ModelParameters params;
  // Vouches for `messages`: requests that carry the same nonzero number
  // are one history that is only ever appended to (each request's
  // messages begin with all of the earlier one's, unchanged), so an
  // adapter that keeps the encodings of messages already sent may reuse
  // them without comparing each one again. 0 vouches for nothing. Take one
  // from NewHistoryId(), and a new one whenever a message already sent is
  // changed or removed.
  uint64_t history_id = 0;
};

// A number no other history of this process has.
uint64_t NewHistoryId();

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t total_tokens() const { return prompt_tokens + completion_tokens; }
  // In US dollars, only where the provider reports it (OpenRouter does).
  std::optional<double> cost_usd;
};

// A successful answer.
struct ChatAnswer {
  // Provider's response id, for records.
  std::string id;
  // The model that answered, as the provider reports it.
  std::string model;
  std::string text;
  std::vector<ToolCall> tool_calls;
  // Normalised: "stop", "tool_calls", "length", "content_filter", or the
  // provider's own word when it has no equivalent.
  std::string finish_reason;
  Usage usage;
  // HTTP requests this answer took, retries included (>= 1).
  int requests = 1;
  // Time spent waiting for rate limits and an open circuit before sending.
  Millis waited{0};
};

}  // namespace steps

#endif  // STEPS_PROVIDERS_CHAT_H_
