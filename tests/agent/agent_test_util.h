// Helpers for the conversation engine's tests: invocations, mock-served
// runners and log capture.
#ifndef STEPS_TESTS_AGENT_AGENT_TEST_UTIL_H_
#define STEPS_TESTS_AGENT_AGENT_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/runner.h"
#include "common/log_capture.h"
#include "common/temp_dir.h"
#include "core/log.h"
#include "mock_provider/script.h"

namespace steps::agent::testing {

// A hosted source served by the mock (its script key is the model name
// after "mock/").
inline AgentSource MockSource(const std::string& model) {
  AgentSource s;
  s.model = "mock/" + model;
  return s;
}

inline AgentInvocation Invocation(std::vector<AgentSource> sources) {
  AgentInvocation inv;
  inv.agent_name = "tester";
  inv.step_name = "step";
  inv.sources = std::move(sources);
  inv.messages = {"Do the task."};
  inv.timeout = std::nullopt;
  inv.attempts = 1;
  inv.max_turns = std::nullopt;
  inv.working_dir = std::filesystem::temp_directory_path().string();
  return inv;
}

// Retries with a fixed schedule: 1 s, 2 s, 4 s ... (no jitter).
inline RetryPolicy FixedBackoff(Millis initial = Millis(1000)) {
  RetryPolicy p;
  p.initial_backoff = initial;
  p.jitter = [] { return 1.0; };
  return p;
}

inline std::unique_ptr<ConversationRunner> MockRunner(
    const std::string& script_yaml, RetryPolicy retry = FixedBackoff()) {
  auto script = ParseMockScriptText(script_yaml);
  EXPECT_TRUE(script.ok()) << script.status().message();
  AgentRunnerOptions options;
  options.retry = std::move(retry);
  return MakeMockAgentRunner(script.ok() ? *script : MockScript{},
                             std::move(options));
}

// The messages of a request the mock received, as JSON.
inline nlohmann::json RequestMessages(const MockRequestRecord& record) {
  return nlohmann::json::parse(record.body)["messages"];
}

// The text of a message's content (a string in the OpenAI format).
inline std::string ContentOf(const nlohmann::json& message) {
  if (message.contains("content") && message["content"].is_string()) {
    return message["content"].get<std::string>();
  }
  return "";
}

// How many messages of a request contain `text`.
inline int CountContaining(const MockRequestRecord& record,
                           const std::string& text) {
  int n = 0;
  for (const auto& m : RequestMessages(record)) {
    if (ContentOf(m).find(text) != std::string::npos) ++n;
  }
  return n;
}

using test_support::LogCapture;
using test_support::TempDir;

}  // namespace steps::agent::testing

#endif  // STEPS_TESTS_AGENT_AGENT_TEST_UTIL_H_
