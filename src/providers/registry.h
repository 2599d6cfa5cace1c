// From a source as a pipeline names it ({model: PROVIDER/MODEL, base_url?,
// api_key_env?, stream?}) to a Provider. Each provider registers one
// factory under its prefix; adding a provider is its adapter file plus one
// Register line in RegisterBuiltinProviders (docs/providers.md).
#ifndef STEPS_PROVIDERS_REGISTRY_H_
#define STEPS_PROVIDERS_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "providers/http.h"
#include "providers/provider.h"

namespace steps {

struct SourceSpec {
  // "PROVIDER/MODEL", e.g. "openai/gpt-4o", "openrouter/qwen/qwen3-coder".
  std::string model;
  // Overrides the provider's endpoint root (OpenAI-compatible sources).
  std::string base_url;
  // Overrides the environment variable holding the key.
  std::string api_key_env;
  // Ask for streamed answers.
  bool stream = false;
  // A stream silent this long is cut and retried. Default 60 s.
  Millis stream_idle_limit{60000};
};

// What factories may use. Copyable; pointers are not owned.
struct ProviderEnvironment {
  // Where requests go. Default: SharedCurlTransport().
  HttpTransport* transport = nullptr;
  // Reads an environment variable (keys come only from here). Default:
  // the process environment.
  std::function<std::optional<std::string>(const std::string&)> getenv;

  // The two defaults above filled in.
  static ProviderEnvironment Process();
};

struct ResolvedSource {
  std::unique_ptr<Provider> provider;
  // The prefix, e.g. "openrouter".
  std::string provider_name;
  // What to put in ChatRequest::model: everything after the first slash
  // ("qwen/qwen3-coder" for "openrouter/qwen/qwen3-coder").
  std::string model;
};

// Builds the single-request Provider for one source. `model` is the part
// after the prefix. Errors are kInvalidArgument with a message naming the
// source (missing key variable, bad base_url).
using ProviderFactory = std::function<Result<std::unique_ptr<Provider>>(
    const SourceSpec& spec, const std::string& model,
    const ProviderEnvironment& env)>;

// Not thread-safe while registering; Create is safe to call concurrently
// once registration is over.
class ProviderRegistry {
 public:
  // Replaces any factory already registered under `name`.
  void Register(const std::string& name, ProviderFactory factory);
  bool Has(const std::string& name) const;
  // The registered prefixes, sorted.
  std::vector<std::string> Names() const;

  // Splits spec.model at its first '/', finds the factory and runs it.
  Result<ResolvedSource> Create(const SourceSpec& spec,
                                const ProviderEnvironment& env) const;

 private:
  std::map<std::string, ProviderFactory> factories_;
};

// openai, openrouter, ollama, anthropic. (`mock` is registered by the mock
// provider library, which owns the scripts: see mock_provider/in_process.h.)
void RegisterBuiltinProviders(ProviderRegistry& registry);

// The key named by spec.api_key_env, else by `default_env`. Required (an
// error when unset or empty) when `required`; otherwise empty when unset.
Result<std::string> ReadApiKey(const SourceSpec& spec,
                               const std::string& default_env, bool required,
                               const ProviderEnvironment& env);

// Factories of the built-in adapters (one per file).
Result<std::unique_ptr<Provider>> MakeOpenAiSource(const SourceSpec&,
                                                   const std::string&,
                                                   const ProviderEnvironment&);
Result<std::unique_ptr<Provider>> MakeOpenRouterSource(
    const SourceSpec&, const std::string&, const ProviderEnvironment&);
Result<std::unique_ptr<Provider>> MakeOllamaSource(const SourceSpec&,
                                                   const std::string&,
                                                   const ProviderEnvironment&);
Result<std::unique_ptr<Provider>> MakeAnthropicSource(
    const SourceSpec&, const std::string&, const ProviderEnvironment&);

}  // namespace steps

#endif  // STEPS_PROVIDERS_REGISTRY_H_
