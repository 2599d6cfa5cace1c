// `${NAME}` references in env: values, and which variables are secret.
#include "pipeline/environment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "pipeline/loader.h"

namespace steps::pipeline {
namespace {

EnvLookup Fake(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(EnvReferencesTest, ExpandsReferencesAndKeepsEverythingElse) {
  EnvLookup lookup = Fake({{"KEY", "k1"}, {"HOME", "/h"}});
  std::vector<std::string> unset;
  EXPECT_EQ(ExpandEnvReferences("${KEY}", lookup, &unset), "k1");
  EXPECT_EQ(ExpandEnvReferences("${HOME}/x:${KEY}", lookup, &unset), "/h/x:k1");
  // $NAME without braces, a lone $ and $${ are not references.
  EXPECT_EQ(ExpandEnvReferences("$KEY $ $${KEY} $$", lookup, &unset),
            "$KEY $ ${KEY} $$");
  EXPECT_TRUE(unset.empty());
  EXPECT_EQ(ExpandEnvReferences("a${MISSING}b", lookup, &unset), "ab");
  EXPECT_EQ(unset, std::vector<std::string>{"MISSING"});
}

TEST(EnvReferencesTest, MalformedReferencesAreNamed) {
  EXPECT_TRUE(CheckEnvReferences("${A} $B $${ ok").ok());
  for (const char* bad : {"${", "${A", "${}", "${1A}", "${A-B}"}) {
    Status s = CheckEnvReferences(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("is not a reference"), std::string::npos);
  }
}

TEST(SecretVariablesTest, ProviderKeysDeclaredSecretsAndApiKeyEnv) {
  LoadResult r = LoadPipelineText(
      "secrets: [DEPLOY_TOKEN, OPENAI_API_KEY]\n"
      "defaults: { source: { model: openai/m, api_key_env: TEAM_KEY } }\n"
      "agents:\n"
      "- name: a\n"
      "  source: { model: anthropic/m, api_key_env: A_KEY }\n"
      "  fallback: [{ model: openai/m, api_key_env: FALLBACK_KEY }]\n"
      "jobs:\n- name: j\n  plan:\n  - { task: t, run: 'true' }\n",
      "p.yaml");
  ASSERT_TRUE(r.pipeline) << r.diagnostics.FormatAll();
  std::vector<std::string> keys = ProviderKeyVariables(*r.pipeline);
  for (const char* k :
       {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY",
        "OLLAMA_API_KEY", "TEAM_KEY", "A_KEY", "FALLBACK_KEY"}) {
    EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << k;
  }
  EXPECT_EQ(std::find(keys.begin(), keys.end(), "DEPLOY_TOKEN"), keys.end());
  std::vector<std::string> secrets = SecretVariables(*r.pipeline);
  EXPECT_EQ(secrets.size(), keys.size() + 1);  // OPENAI_API_KEY once.
  EXPECT_EQ(secrets.back(), "DEPLOY_TOKEN");
}

}  // namespace
}  // namespace steps::pipeline
