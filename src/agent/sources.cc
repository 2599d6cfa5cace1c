#include "agent/sources.h"

namespace steps::agent {

std::string SourceLabel(const AgentSource& source) {
  if (source.is_cli()) return "cli: " + source.cli;
  return source.model;
}

SourceConnector::SourceConnector(const ProviderRegistry& registry,
                                 ProviderEnvironment environment)
    : registry_(&registry), environment_(std::move(environment)) {}

SourceConnector::SourceConnector(const ProviderRegistry& registry,
                                 std::shared_ptr<MockEngine> mock, Clock& clock)
    : mock_transport_(
          std::make_unique<InProcessMockTransport>(std::move(mock), clock)),
      mock_registry_(registry),
      registry_(&mock_registry_) {
  RegisterMockProvider(mock_registry_, *mock_transport_);
  environment_ = MockProviderEnvironment(*mock_transport_);
}

Result<ResolvedSource> SourceConnector::Connect(
    const AgentSource& source) const {
  if (!mocked() && source.model.rfind("mock/", 0) == 0 &&
      !registry_->Has("mock")) {
    return InvalidArgument(
        "a mock/ source is served only from a mock: script (steps test, or "
        "steps run --mock)");
  }
  SourceSpec spec;
  spec.model = source.model;
  spec.base_url = source.base_url.value_or("");
  spec.api_key_env = source.api_key_env.value_or("");
  spec.stream = source.stream;
  for (const auto& [name, value] : source.headers) {
    spec.headers.emplace_back(name, value);
  }
  return registry_->Create(spec, environment_);
}

std::string SourceConnector::EndpointOf(const AgentSource& source) const {
  if (source.base_url && !source.base_url->empty()) return *source.base_url;
  const std::string prefix = source.model.substr(0, source.model.find('/'));
  if (auto adapter = registry_->FindAdapter(prefix)) {
    return adapter->info().default_base_url;
  }
  return prefix;
}

}  // namespace steps::agent
