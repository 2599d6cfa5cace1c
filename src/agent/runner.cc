#include "agent/runner.h"

#include "agent/conversation.h"
#include "agent/sources.h"

namespace steps::agent {
namespace {

const ProviderRegistry& BuiltinRegistry() {
  static const ProviderRegistry* registry = [] {
    auto* r = new ProviderRegistry();  // Never destroyed: no exit races.
    RegisterBuiltinProviders(*r);
    return r;
  }();
  return *registry;
}

}  // namespace

ConversationRunner::ConversationRunner(AgentRunnerOptions options)
    : options_(std::move(options)) {
  if (options_.registry == nullptr) options_.registry = &BuiltinRegistry();
  if (options_.tools == nullptr) options_.tools = &ToolRegistry::BuiltIn();
  if (!options_.mock) {
    environment_ =
        options_.environment.value_or(ProviderEnvironment::Process());
  }
}

AgentResult ConversationRunner::Run(const AgentInvocation& invocation,
                                    const AgentContext& context) {
  std::optional<SourceConnector> connector;
  if (options_.mock) {
    connector.emplace(*options_.registry, options_.mock, *context.clock);
  } else {
    connector.emplace(*options_.registry, environment_);
  }
  ConversationSetup setup;
  setup.connector = &*connector;
  setup.tools = options_.tools;
  setup.retry = options_.retry;
  setup.tool_limits = options_.tool_limits;
  setup.exchanges = options_.exchanges;
  setup.guards = &guards_;
  setup.prices = options_.prices.get();
  return RunConversation(invocation, context, setup);
}

std::string ConversationRunner::CacheIdentity(const std::string& agent) const {
  if (!options_.mock) return "";
  return "mock\n" + MockScriptFingerprint(options_.mock->script(), agent);
}

std::vector<MockRequestRecord> ConversationRunner::MockRequests() const {
  if (!options_.mock) return {};
  return options_.mock->Requests();
}

std::vector<std::string> ConversationRunner::MockExpectationFailures() const {
  if (!options_.mock) return {};
  return options_.mock->ExpectationFailures();
}

std::unique_ptr<ConversationRunner> MakeAgentRunner(
    AgentRunnerOptions options) {
  return std::make_unique<ConversationRunner>(std::move(options));
}

std::unique_ptr<ConversationRunner> MakeMockAgentRunner(
    MockScript script, AgentRunnerOptions options) {
  options.mock = std::make_shared<MockEngine>(std::move(script));
  return MakeAgentRunner(std::move(options));
}

}  // namespace steps::agent
