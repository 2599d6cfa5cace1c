#include "providers/registry.h"

#include <gtest/gtest.h>

#include <map>

#include "providers/adapter_provider.h"

namespace steps {
namespace {

SourceSpec Spec(std::string model) {
  SourceSpec spec;
  spec.model = std::move(model);
  return spec;
}

ProviderEnvironment EnvWith(std::map<std::string, std::string> vars) {
  ProviderEnvironment env = ProviderEnvironment::Process();
  env.getenv = [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  return env;
}

TEST(RegistryTest, SplitsTheProviderFromTheModelItSends) {
  ProviderRegistry registry;
  RegisterBuiltinProviders(registry);
  auto source = registry.Create(Spec("openrouter/qwen/qwen3.7-flash"),
                                EnvWith({{"OPENROUTER_API_KEY", "k"}}));
  ASSERT_TRUE(source.ok()) << source.status().message();
  EXPECT_EQ(source->provider_name, "openrouter");
  EXPECT_EQ(source->model, "qwen/qwen3.7-flash");
  EXPECT_NE(source->provider, nullptr);
}

TEST(RegistryTest, AMissingKeyNamesItsVariable) {
  ProviderRegistry registry;
  RegisterBuiltinProviders(registry);
  for (auto [model, var] : std::map<std::string, std::string>{
           {"openai/gpt-4o", "OPENAI_API_KEY"},
           {"anthropic/claude-sonnet", "ANTHROPIC_API_KEY"},
           {"openrouter/a/b", "OPENROUTER_API_KEY"}}) {
    auto source = registry.Create(Spec(model), EnvWith({}));
    ASSERT_FALSE(source.ok()) << model;
    EXPECT_EQ(
        source.status().message(),
        "model '" + model + "': environment variable " + var + " is not set");
  }
  SourceSpec custom = Spec("openai/gpt-4o");
  custom.api_key_env = "MY_KEY";
  auto named = registry.Create(custom, EnvWith({{"OPENAI_API_KEY", "x"}}));
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.status().message().find("MY_KEY"), std::string::npos);
}

TEST(RegistryTest, ABaseUrlOrOllamaNeedsNoKey) {
  ProviderRegistry registry;
  RegisterBuiltinProviders(registry);
  SourceSpec local = Spec("openai/local-model");
  local.base_url = "http://127.0.0.1:9/v1";
  EXPECT_TRUE(registry.Create(local, EnvWith({})).ok());
  EXPECT_TRUE(registry.Create(Spec("ollama/llama3"), EnvWith({})).ok());
}

TEST(RegistryTest, RefusesUnknownProvidersAndBareModels) {
  ProviderRegistry registry;
  RegisterBuiltinProviders(registry);
  auto unknown = registry.Create(Spec("acme/x"), EnvWith({}));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "model 'acme/x': unknown provider 'acme' (known: anthropic, "
            "ollama, openai, openrouter)");
  auto bare = registry.Create(Spec("gpt-4o"), EnvWith({}));
  ASSERT_FALSE(bare.ok());
  EXPECT_EQ(bare.status().message(),
            "model 'gpt-4o' is not of the form PROVIDER/MODEL");
}

TEST(RegistryTest, EveryBuiltinIsAnAdapterConfiguredFromItsSource) {
  ProviderRegistry registry;
  RegisterBuiltinProviders(registry);
  for (const std::string& name : registry.Names()) {
    auto adapter = registry.FindAdapter(name);
    ASSERT_NE(adapter, nullptr) << name;
    EXPECT_EQ(adapter->info().name, name);
    EXPECT_NE(adapter->info().mock_wire, MockWireFormat::kNone) << name;
    SourceSpec spec = Spec(name + "/m");
    spec.base_url = "http://127.0.0.1:9/v1//";
    spec.api_key_env = "K";
    spec.stream = true;
    spec.headers = {{"X-Team", "core"}};
    auto source = registry.Create(spec, EnvWith({{"K", "secret"}}));
    ASSERT_TRUE(source.ok()) << source.status().message();
    auto* provider = dynamic_cast<AdapterProvider*>(source->provider.get());
    ASSERT_NE(provider, nullptr) << name;
    EXPECT_EQ(provider->config().base_url, "http://127.0.0.1:9/v1");
    EXPECT_EQ(provider->config().api_key, "secret");
    EXPECT_TRUE(provider->config().stream);
    EXPECT_EQ(provider->config().headers, spec.headers);
  }
  // A plain factory under an adapter's name replaces the adapter.
  registry.Register(
      "openai",
      [](const SourceSpec&, const std::string&,
         const ProviderEnvironment&) -> Result<std::unique_ptr<Provider>> {
        return InvalidArgument("replaced");
      });
  EXPECT_EQ(registry.FindAdapter("openai"), nullptr);
}

}  // namespace
}  // namespace steps
