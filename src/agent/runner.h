// The AgentRunner the executor uses: MakeAgentRunner builds one that runs
// every conversation with the engine of agent/conversation.h, against real
// providers or, under `steps test` / `steps run --mock`, against the
// in-process mock provider.
//
//   // A pipeline with a `mock:` block:
//   auto script = ParseMockScript(mock_node);       // mock_provider/script.h
//   if (!script.ok()) ...                            // "LINE: message"
//   auto runner = MakeMockAgentRunner(std::move(*script));
//   AgentResult r = runner->Run(invocation, context);
//   for (const std::string& f : runner->MockExpectationFailures()) ...
//
//   // Real sources:
//   auto runner = MakeAgentRunner({});
#ifndef STEPS_AGENT_RUNNER_H_
#define STEPS_AGENT_RUNNER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/exchanges.h"
#include "agent/prices.h"
#include "mock_provider/engine.h"
#include "providers/guard.h"
#include "providers/registry.h"
#include "providers/retry.h"
#include "tools/registry.h"
#include "tools/tool.h"

namespace steps::agent {

struct AgentRunnerOptions {
  // When set, every source of every conversation (hosted ones whatever
  // their provider or base_url, `mock/` ones and CLI ones) is answered by
  // this engine in process, and nothing leaves the process. Its delays and
  // hangs wait on each run's AgentContext::clock.
  // Default: none (real sources).
  std::shared_ptr<MockEngine> mock;
  // Builds providers for hosted sources. Not owned; must outlive the
  // runner. Default: the built-in providers (openai, openrouter, ollama,
  // anthropic).
  const ProviderRegistry* registry = nullptr;
  // What the registry's factories use (transport, environment variables).
  // Default: ProviderEnvironment::Process().
  std::optional<ProviderEnvironment> environment;
  // The tools invocations may be granted. Not owned; must outlive the
  // runner. Default: ToolRegistry::BuiltIn().
  const ToolRegistry* tools = nullptr;
  // Backoff between request retries (`attempts` comes from each
  // invocation). Default: 1 s doubling to 30 s, with jitter.
  RetryPolicy retry;
  // Bounds on what tools read, write and return.
  ToolLimits tool_limits;
  // Sees every request of every hosted source, retries and fallbacks
  // included (agent/exchanges.h); `steps run --record` gives a
  // MockRecorder. Not owned; must outlive the runner. Default: none.
  ExchangeObserver* exchanges = nullptr;
  // Prices the answers of sources without `price:` whose provider reports
  // no cost (`--prices FILE`, agent/prices.h). Default: none.
  std::shared_ptr<const PriceTable> prices;
};

// Thread-safe: any number of Runs at once, each blocking its own thread.
class ConversationRunner : public AgentRunner {
 public:
  explicit ConversationRunner(AgentRunnerOptions options);

  AgentResult Run(const AgentInvocation& invocation,
                  const AgentContext& context) override;
  // Empty for real sources; under a mock, "mock" and the fingerprint of
  // the script entries that may answer `agent` (MockScriptFingerprint).
  std::string CacheIdentity(const std::string& agent) const override;

  // The mock engine serving this runner's sources; nullptr when real.
  MockEngine* mock() const { return options_.mock.get(); }
  // Every request the mock received, in order (empty when real).
  std::vector<MockRequestRecord> MockRequests() const;
  // Every failed `expect` so far ("line N: ... (request K, agent 'A')");
  // empty when all held or when real. Under `steps test` a non-empty list
  // fails the job.
  std::vector<std::string> MockExpectationFailures() const;

 private:
  AgentRunnerOptions options_;
  ProviderEnvironment environment_;
  // Rate limits, retry budgets and circuits: one set per run.
  HostGuards guards_;
};

std::unique_ptr<ConversationRunner> MakeAgentRunner(AgentRunnerOptions options);

// A runner whose every source is served from `script` in process (a
// pipeline's `mock:` block, parsed with ParseMockScript). `options.mock` is
// replaced.
std::unique_ptr<ConversationRunner> MakeMockAgentRunner(
    MockScript script, AgentRunnerOptions options = {});

}  // namespace steps::agent

#endif  // STEPS_AGENT_RUNNER_H_
