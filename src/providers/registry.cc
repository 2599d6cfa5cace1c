#include "providers/registry.h"

#include <cstdlib>

#include "providers/curl_transport.h"

namespace steps {

ProviderEnvironment ProviderEnvironment::Process() {
  ProviderEnvironment env;
  env.transport = &SharedCurlTransport();
  env.getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  return env;
}

void ProviderRegistry::Register(const std::string& name,
                                ProviderFactory factory) {
  factories_[name] = std::move(factory);
}

bool ProviderRegistry::Has(const std::string& name) const {
  return factories_.count(name) > 0;
}

std::vector<std::string> ProviderRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, factory] : factories_) names.push_back(name);
  return names;
}

Result<ResolvedSource> ProviderRegistry::Create(
    const SourceSpec& spec, const ProviderEnvironment& env) const {
  size_t slash = spec.model.find('/');
  if (slash == std::string::npos || slash == 0 ||
      slash + 1 == spec.model.size()) {
    return InvalidArgument("model '" + spec.model +
                           "' is not of the form PROVIDER/MODEL");
  }
  std::string name = spec.model.substr(0, slash);
  auto it = factories_.find(name);
  if (it == factories_.end()) {
    std::string known;
    for (const auto& [n, f] : factories_) {
      known += known.empty() ? n : ", " + n;
    }
    return InvalidArgument("model '" + spec.model + "': unknown provider '" +
                           name + "' (known: " + known + ")");
  }
  ProviderEnvironment filled = env;
  ProviderEnvironment process = ProviderEnvironment::Process();
  if (!filled.transport) filled.transport = process.transport;
  if (!filled.getenv) filled.getenv = process.getenv;
  std::string model = spec.model.substr(slash + 1);
  auto provider = it->second(spec, model, filled);
  if (!provider.ok()) return provider.status();
  return ResolvedSource{std::move(*provider), name, model};
}

Result<std::string> ReadApiKey(const SourceSpec& spec,
                               const std::string& default_env, bool required,
                               const ProviderEnvironment& env) {
  const std::string& name =
      spec.api_key_env.empty() ? default_env : spec.api_key_env;
  std::optional<std::string> value;
  if (!name.empty() && env.getenv) value = env.getenv(name);
  if (value && !value->empty()) return *value;
  if (required) {
    return InvalidArgument("model '" + spec.model + "': environment variable " +
                           name + " is not set");
  }
  return std::string();
}

void RegisterBuiltinProviders(ProviderRegistry& registry) {
  registry.Register("openai", MakeOpenAiSource);
  registry.Register("openrouter", MakeOpenRouterSource);
  registry.Register("ollama", MakeOllamaSource);
  registry.Register("anthropic", MakeAnthropicSource);
}

}  // namespace steps
