// What an agent conversation sends and gets back, one HTTP request at a
// time: the seam `steps run --record` uses to write a mock script of a run
// (agent/recording.h). An ExchangeObserver given to the runner sees every
// request of every hosted source (retries and fallbacks included, each on
// its own), after its answer or error and before the engine acts on it.
#ifndef STEPS_AGENT_EXCHANGES_H_
#define STEPS_AGENT_EXCHANGES_H_

#include <string>

#include "providers/provider.h"

namespace steps::agent {

// One request and its outcome. The pointers live for the call only.
struct ProviderExchange {
  std::string agent;  // The agent entry's name (X-Steps-Agent).
  std::string step;   // The step's name (X-Steps-Step).
  // The source as the pipeline names it ("openai/gpt-4o").
  std::string source;
  // 0 for the agent's own source, k for its k-th fallback.
  int source_index = 0;
  // The source asked for a streamed answer (the answer below is the
  // assembled one either way).
  bool stream = false;
  const ChatRequest* request = nullptr;
  // The answer, or the error with its kind and HTTP status.
  const ChatResult* result = nullptr;
};

// Thread-safety: OnExchange is called from every conversation's own thread,
// concurrently; within one conversation, in the order requests were sent.
class ExchangeObserver {
 public:
  virtual ~ExchangeObserver() = default;
  virtual void OnExchange(const ProviderExchange& exchange) = 0;
};

// A Provider that passes each Send to `inner` (one request) and reports it
// to `observer`. Neither is owned; both must outlive it.
class ObservedProvider : public Provider {
 public:
  // `about` gives agent-independent fields (source, source_index, stream);
  // agent and step come from each call's context.
  ObservedProvider(Provider& inner, ExchangeObserver& observer,
                   ProviderExchange about);
  ChatResult Send(const ChatRequest& request,
                  const CallContext& context) override;

 private:
  Provider& inner_;
  ExchangeObserver& observer_;
  ProviderExchange about_;
};

}  // namespace steps::agent

#endif  // STEPS_AGENT_EXCHANGES_H_
