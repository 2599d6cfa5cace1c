// MockRecorder: an ExchangeObserver that turns every request of a run into
// a mock script entry that replays it (`steps run --record`, docs/mock.md).
//
//   MockRecorder recorder(ProcessRedactor());
//   options.exchanges = &recorder;            // AgentRunnerOptions
//   ... run ...
//   std::string yaml = recorder.Text("Recorded by steps run --record");
//
// Each request becomes one entry of its agent's script, in the order sent
// (a CLI source's run counts as the one request its mocked source sends):
// the answer as received (text, tool calls, usage; a stream's assembled
// answer), or the failure (`status: N`, `drop`, `hang`, `garbage`,
// `error_event`), so retries and fallbacks replay as they happened. Its
// `expect:` checks that the replayed request still asks what the recorded
// one asked, leaving out what changes from run to run: the model named, the
// tools offered, the last message (a user message whole, a tool result by
// its first line), the persona (the system message without the deadline
// disclosure's clock times). A nudge, tool call ids and times are not
// expected. Every text kept passes the redactor first: no secret value
// reaches the script; a text that held one is expected by its longest
// secret-free part.
#ifndef STEPS_AGENT_RECORDING_H_
#define STEPS_AGENT_RECORDING_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/exchanges.h"
#include "core/redact.h"
#include "mock_provider/script.h"

namespace steps::agent {

// Thread-safe.
class MockRecorder : public ExchangeObserver {
 public:
  // `redactor` masks every text kept; null masks nothing.
  explicit MockRecorder(std::shared_ptr<const Redactor> redactor);

  void OnExchange(const ProviderExchange& exchange) override;

  // The recording so far, entries in request order: one script per agent,
  // keyed by its name; an agent that ran in more than one step gets one
  // script per step, keyed AGENT@STEP, so steps that ran side by side
  // replay each their own conversation whatever order they ask in.
  MockScript Script() const;
  // Requests recorded; agents in the order of their first request.
  int requests() const;
  std::vector<std::string> agents() const;
  // The script as YAML (WriteMockScript), `header` as its first comment.
  std::string Text(const std::string& header) const;

 private:
  // The requests of one agent in one step.
  struct Conversation {
    std::string agent;
    std::string step;
    std::vector<MockEntry> entries;
  };
  MockEntry EntryFor(const ProviderExchange& exchange, int number) const;
  // Script() and the order of its keys; mu_ held.
  MockScript ScriptLocked(std::vector<std::string>& keys) const;
  MockExpect ExpectFor(const ChatRequest& request) const;
  std::string Mask(const std::string& text) const;

  std::shared_ptr<const Redactor> redactor_;
  mutable std::mutex mu_;
  std::vector<Conversation> conversations_;  // In the order they began.
  std::vector<std::string> agents_;
  int requests_ = 0;
};

}  // namespace steps::agent

#endif  // STEPS_AGENT_RECORDING_H_
