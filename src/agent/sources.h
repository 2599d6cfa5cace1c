// From an agent source ({model: PROVIDER/MODEL, base_url?, api_key_env?,
// stream?}) to the single-request Provider that serves it: a real one from
// the provider registry, or, when the run is mocked, one whose requests go
// to the in-process mock provider and never leave the process.
#ifndef STEPS_AGENT_SOURCES_H_
#define STEPS_AGENT_SOURCES_H_

#include <memory>
#include <string>

#include "agent/agent.h"
#include "core/clock.h"
#include "core/status.h"
#include "mock_provider/in_process.h"
#include "providers/registry.h"

namespace steps::agent {

// "openai/gpt-4o", or "cli: COMMAND" for a CLI source: how logs, records
// and errors name a source.
std::string SourceLabel(const AgentSource& source);

// Connects the sources of one conversation. Cheap to make (one per run);
// Connect may be called from that run's thread only.
class SourceConnector {
 public:
  // Real sources: `registry` builds providers with `environment`.
  // `registry` is not owned and must outlive the connector.
  SourceConnector(const ProviderRegistry& registry,
                  ProviderEnvironment environment);
  // Every source served by `mock` (every provider prefix, and `mock/`),
  // its delays and hangs waiting on `clock` (not owned; must outlive the
  // connector). `registry` supplies the adapters (wire formats).
  SourceConnector(const ProviderRegistry& registry,
                  std::shared_ptr<MockEngine> mock, Clock& clock);
  SourceConnector(const SourceConnector&) = delete;
  SourceConnector& operator=(const SourceConnector&) = delete;

  // The provider for a hosted source. kInvalidArgument naming the source
  // when it cannot be built (unknown provider, missing key, a `mock/`
  // source with no mock script).
  Result<ResolvedSource> Connect(const AgentSource& source) const;

  bool mocked() const { return mock_transport_ != nullptr; }

  // Where a hosted source's requests go: its base_url, or its provider's
  // default endpoint ("mock" for a mock/ source). Names the host that
  // retry budgets and circuits count per.
  std::string EndpointOf(const AgentSource& source) const;

 private:
  std::unique_ptr<InProcessMockTransport> mock_transport_;
  ProviderRegistry mock_registry_;  // `registry` plus `mock/`, when mocked.
  const ProviderRegistry* registry_;
  ProviderEnvironment environment_;
};

}  // namespace steps::agent

#endif  // STEPS_AGENT_SOURCES_H_
