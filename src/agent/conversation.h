// The conversation engine: one agent step's whole conversation, from the
// first request to the answer, under one deadline.
//
// The turn loop: a system message (persona, then the deadline disclosure),
// the step's messages (and a critique, when routed back), the context_paths
// files; then request -> tool calls executed -> results appended -> next
// request, until an answer with no tool call, which is the answer.
// Around it: the nudge, request retries (RetryingProvider, `attempts` per
// failing turn), fallback sources carrying the same conversation on, the
// turn cap, budgets, the loop and text-answer guards, and CLI sources.
// docs/agents.md describes the behaviour for users.
#ifndef STEPS_AGENT_CONVERSATION_H_
#define STEPS_AGENT_CONVERSATION_H_

#include "agent/agent.h"
#include "agent/exchanges.h"
#include "agent/prices.h"
#include "agent/sources.h"
#include "providers/retry.h"
#include "tools/registry.h"
#include "tools/tool.h"

namespace steps::agent {

// The error of a conversation cut by its deadline, exactly.
inline constexpr const char kDeadlineExceededError[] =
    "agent: generate content: context deadline exceeded";

// Sent after a text answer while a tool call is required.
inline constexpr const char kRequiredToolReminder[] =
    "A tool call is required. Carry on with the tools; when you are done, "
    "call finish with your final answer.";

// The built-in tool that ends a `required: tools` conversation; its
// `answer` argument is the answer.
inline constexpr const char kFinishToolName[] = "finish";

// What a conversation is run with besides the invocation and its context.
// Pointers are not owned and must outlive the run.
struct ConversationSetup {
  const SourceConnector* connector = nullptr;
  // The tools invocations may be granted.
  const ToolRegistry* tools = nullptr;
  // The backoff between request retries; `attempts` is replaced by the
  // invocation's.
  RetryPolicy retry;
  ToolLimits tool_limits;
  // Sees every request of every hosted source; optional.
  ExchangeObserver* exchanges = nullptr;
  // The run's rate limiters, retry budgets and circuits; null: none are
  // enforced.
  HostGuards* guards = nullptr;
  // Prices answers no `price:` and no reported cost price (--prices);
  // null: none.
  const PriceTable* prices = nullptr;
};

// Runs one conversation to its end on the calling thread. Never throws.
AgentResult RunConversation(const AgentInvocation& invocation,
                            const AgentContext& context,
                            const ConversationSetup& setup);

}  // namespace steps::agent

#endif  // STEPS_AGENT_CONVERSATION_H_
