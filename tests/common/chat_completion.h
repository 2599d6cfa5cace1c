// Answers in the OpenAI chat completions shape, for tests whose loopback
// model server is written by hand (it inspects what arrives).
#ifndef STEPS_TESTS_COMMON_CHAT_COMPLETION_H_
#define STEPS_TESTS_COMMON_CHAT_COMPLETION_H_

#include <nlohmann/json.hpp>
#include <string>

namespace steps::test_support {

// A whole non-streamed answer carrying `message`.
inline nlohmann::json ChatAnswer(const nlohmann::json& message) {
  return {{"id", "c"},
          {"object", "chat.completion"},
          {"created", 1},
          {"model", "m"},
          {"choices",
           {{{"index", 0},
             {"message", message},
             {"finish_reason",
              message.contains("tool_calls") ? "tool_calls" : "stop"}}}},
          {"usage", {{"prompt_tokens", 5}, {"completion_tokens", 2}}}};
}

// An assistant message calling run_shell with `command`.
inline nlohmann::json ShellCall(const std::string& id,
                                const std::string& command) {
  nlohmann::json function = {
      {"name", "run_shell"},
      {"arguments", nlohmann::json({{"command", command}}).dump()}};
  nlohmann::json call = {
      {"id", id}, {"type", "function"}, {"function", function}};
  return {{"role", "assistant"},
          {"content", nullptr},
          {"tool_calls", nlohmann::json::array({call})}};
}

}  // namespace steps::test_support

#endif  // STEPS_TESTS_COMMON_CHAT_COMPLETION_H_
