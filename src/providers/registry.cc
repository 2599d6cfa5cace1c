#include "providers/registry.h"

#include <cstdlib>

#include "providers/adapter_provider.h"
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
  adapters_.erase(name);
}

void ProviderRegistry::RegisterAdapter(std::shared_ptr<const Adapter> adapter) {
  const std::string name = adapter->info().name;
  Register(
      name,
      [adapter](
          const SourceSpec& spec, const std::string&,
          const ProviderEnvironment& env) -> Result<std::unique_ptr<Provider>> {
        const AdapterInfo& info = adapter->info();
        // A base_url points somewhere the author chose (a local server, a
        // gateway): the key is then only required when api_key_env names one.
        const bool custom_url = !spec.base_url.empty();
        const bool required =
            custom_url ? !spec.api_key_env.empty() : info.key_required;
        auto key = ReadApiKey(spec, info.key_env, required, env);
        if (!key.ok()) return key.status();
        AdapterConfig config;
        config.base_url = custom_url ? spec.base_url : info.default_base_url;
        while (!config.base_url.empty() && config.base_url.back() == '/') {
          config.base_url.pop_back();
        }
        config.api_key = *key;
        config.headers = spec.headers;
        config.stream = spec.stream && info.can_stream;
        AdapterLimits limits;
        limits.stream_idle_limit = spec.stream_idle_limit;
        return std::unique_ptr<Provider>(std::make_unique<AdapterProvider>(
            adapter, std::move(config), *env.transport, limits));
      });
  adapters_[name] = std::move(adapter);
}

std::shared_ptr<const Adapter> ProviderRegistry::FindAdapter(
    const std::string& name) const {
  auto it = adapters_.find(name);
  return it == adapters_.end() ? nullptr : it->second;
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

}  // namespace steps
