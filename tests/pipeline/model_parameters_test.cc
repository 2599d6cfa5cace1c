// Model parameters on sources and agent entries: read at their edges,
// refused where a source cannot honour them, merged field by field, part of
// the step's identity, and shown by explain.
#include <gtest/gtest.h>

#include <string>

#include "pipeline/explain.h"
#include "pipeline/resolve.h"
#include "test_util.h"

namespace steps::pipeline {
namespace {

constexpr Severity kError = Severity::kError;

// An agent entry with `keys` (one line, flow style) on it, line 4.
std::string Entry(const std::string& keys,
                  const std::string& model = "openai/gpt-4o") {
  return "agents:\n- name: a\n  source: { model: " + model + " }\n  " + keys +
         "\njobs:\n- name: j\n  plan:\n  - agent: a\n    messages: [hi]\n";
}

// An agent whose source carries `keys` (line 3).
std::string OnSource(const std::string& keys,
                     const std::string& model = "openai/gpt-4o") {
  return "agents:\n- name: a\n  source: { model: " + model + ", " + keys +
         " }\njobs:\n- name: j\n  plan:\n  - agent: a\n    messages: [hi]\n";
}

TEST(ModelParametersTest, TemperatureEdges) {
  EXPECT_TRUE(MustLoad(Entry("temperature: 0")));
  EXPECT_TRUE(MustLoad(Entry("temperature: 2")));
  ExpectDiag(Entry("temperature: 2.01"), kError, 4,
             "'temperature' must be a number from 0 to 2");
  ExpectDiag(Entry("temperature: -0.1"), kError, 4,
             "'temperature' must be a number from 0 to 2");
  ExpectDiag(Entry("temperature: .nan"), kError, 4, "'temperature' must be");
  ExpectDiag(Entry("temperature: warm"), kError, 4, "temperature");
}

TEST(ModelParametersTest, TopPExcludesZero) {
  EXPECT_TRUE(MustLoad(Entry("top_p: 1")));
  EXPECT_TRUE(MustLoad(Entry("top_p: 0.001")));
  ExpectDiag(Entry("top_p: 0"), kError, 4, "'top_p' must be a number above 0");
  ExpectDiag(Entry("top_p: 1.5"), kError, 4, "'top_p' must be");
}

TEST(ModelParametersTest, SeedAndMaxOutputTokens) {
  // Seeds stay exact in every JSON reader: at most 2^53 - 1 either way.
  EXPECT_TRUE(MustLoad(Entry("seed: -5")));
  EXPECT_TRUE(MustLoad(Entry("seed: 9007199254740991")));
  EXPECT_TRUE(MustLoad(Entry("seed: -9007199254740991")));
  ExpectDiag(Entry("seed: 9007199254740992"), kError, 4,
             "'seed' must be an integer from -(2^53 - 1) to 2^53 - 1");
  ExpectDiag(Entry("seed: 1.5"), kError, 4, "seed");
  EXPECT_TRUE(MustLoad(Entry("max_output_tokens: 1")));
  ExpectDiag(Entry("max_output_tokens: 0"), kError, 4,
             "'max_output_tokens' must be a positive integer");
  ExpectDiag(Entry("max_output_tokens: -1"), kError, 4, "max_output_tokens");
  ExpectDiag(Entry("max_output_tokens: 99999999999999"), kError, 4,
             "max_output_tokens");
}

TEST(ModelParametersTest, StopTakesOneToFourStrings) {
  auto p = MustLoad(Entry("stop: END"));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->agents[0].params.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(MustLoad(Entry("stop: [a, b, c, d]")));
  ExpectDiag(Entry("stop: [a, b, c, d, e]"), kError, 4,
             "'stop' must be one to four non-empty strings");
  ExpectDiag(Entry("stop: []"), kError, 4, "'stop' must be one to four");
  ExpectDiag(Entry("stop: ['']"), kError, 4, "'stop' must be one to four");
}

TEST(ModelParametersTest, ResponseFormatNeedsAnObjectSchema) {
  auto p = MustLoad(
      Entry("response_format: { json_schema: { type: object, properties: "
            "{ a: { type: string } } } }"));
  ASSERT_TRUE(p);
  ASSERT_TRUE(p->agents[0].params.json_schema);
  EXPECT_EQ(*p->agents[0].params.json_schema,
            R"({"properties":{"a":{"type":"string"}},"type":"object"})");
  ExpectDiag(Entry("response_format: json"), kError, 4,
             "must be { json_schema: SCHEMA }");
  ExpectDiag(Entry("response_format: { json_schema: { type: array } }"),
             kError, 4, "'type: object' at the top");
  ExpectDiag(Entry("response_format: {}"), kError, 4,
             "needs 'json_schema: SCHEMA'");
  // An unknown key is a warning, as everywhere (--strict makes it fatal).
  ExpectDiag(Entry("response_format: { json_schema: { type: object }, x: 1 }"),
             Severity::kWarning, 4, "unknown key 'x' in 'response_format'");
}

TEST(ModelParametersTest, OnASourceWithItsKeyInTheMessage) {
  ExpectDiag(OnSource("temperature: 3"), kError, 3,
             "'source.temperature' must be");
  auto p = MustLoad(OnSource("temperature: 0.5, seed: 1"));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->agents[0].source->params.temperature, 0.5);
  EXPECT_EQ(p->agents[0].source->params.seed, 1);
}

TEST(ModelParametersTest, RefusedWhereTheSourceCannotHonourThem) {
  // A CLI source takes none, on itself or from its entry.
  ExpectDiag(R"(agents:
- name: a
  source: { cli: "coder --yes", temperature: 0.2 }
jobs: [{ name: j, plan: [{ agent: a, messages: [hi] }] }]
)",
             kError, 3, "a CLI source ('cli: coder --yes') takes no model");
  ExpectDiag(R"(agents:
- name: a
  source: { cli: "coder --yes" }
  seed: 3
jobs: [{ name: j, plan: [{ agent: a, messages: [hi] }] }]
)",
             kError, 4, "agent 'a' sets 'seed', but its source 'cli: coder");
  // Anthropic has no seed and no JSON-schema answers: refused, on the line
  // that sets it, whether the entry's or the source's.
  ExpectDiag(Entry("seed: 3", "anthropic/claude-sonnet-4-5"), kError, 4,
             "'seed' cannot be honoured by provider 'anthropic'");
  ExpectDiag(OnSource("seed: 3", "anthropic/claude-sonnet-4-5"), kError, 3,
             "'seed' cannot be honoured by provider 'anthropic'");
  ExpectDiag(Entry("response_format: { json_schema: { type: object } }",
                   "anthropic/claude-sonnet-4-5"),
             kError, 4, "'response_format' cannot be honoured");
  // What Anthropic has, it takes.
  EXPECT_TRUE(MustLoad(
      Entry("temperature: 1", "anthropic/claude-sonnet-4-5")));
  // A seed for an OpenAI primary with an Anthropic fallback: the entry's
  // seed would reach the fallback, so it must go on the source.
  ExpectDiag(R"(agents:
- name: a
  source: { model: openai/gpt-4o }
  fallback: [{ model: anthropic/claude-sonnet-4-5 }]
  seed: 3
jobs: [{ name: j, plan: [{ agent: a, messages: [hi] }] }]
)",
             kError, 5, "'seed' cannot be honoured by provider 'anthropic'");
  EXPECT_TRUE(MustLoad(R"(agents:
- name: a
  source: { model: openai/gpt-4o, seed: 3 }
  fallback: [{ model: anthropic/claude-sonnet-4-5 }]
jobs: [{ name: j, plan: [{ agent: a, messages: [hi] }] }]
)"));
}

std::string IdentityOf(const std::string& text) {
  auto p = MustLoad(text);
  if (!p) return "";
  ResolvedPlan plan(p);
  return plan.For(*p->jobs[0].plan[0]).identity;
}

TEST(ModelParametersTest, PartOfTheIdentity) {
  const std::string none = IdentityOf(Entry("persona: p"));
  const std::string warm = IdentityOf(Entry("temperature: 0.7"));
  const std::string cool = IdentityOf(Entry("temperature: 0.2"));
  EXPECT_NE(none, warm);
  EXPECT_NE(warm, cool);
  EXPECT_EQ(warm, IdentityOf(Entry("temperature: 0.70")));
  EXPECT_NE(IdentityOf(Entry("stop: [a]")), IdentityOf(Entry("stop: [b]")));
  EXPECT_NE(IdentityOf(Entry("seed: 1")), IdentityOf(Entry("seed: 2")));
  EXPECT_NE(IdentityOf(Entry("max_output_tokens: 10")),
            IdentityOf(Entry("max_output_tokens: 11")));
  EXPECT_NE(
      IdentityOf(Entry("response_format: { json_schema: { type: object } }")),
      IdentityOf(Entry(
          "response_format: { json_schema: { type: object, required: [a] } "
          "}")));
  // The same value on the source or on the entry sends the same request.
  EXPECT_EQ(IdentityOf(OnSource("temperature: 0.7")), warm);
}

TEST(ModelParametersTest, ExplainShowsWhatEachSourceIsSent) {
  auto p = MustLoad(R"(agents:
- name: a
  source: { model: openai/gpt-4o, temperature: 0.2 }
  fallback: [{ model: anthropic/claude-sonnet-4-5 }]
  temperature: 0.7
  stop: [END]
jobs: [{ name: j, plan: [{ agent: a, messages: [hi] }] }]
)");
  ASSERT_TRUE(p);
  const std::string text = Explain(ResolvedPlan(p), {});
  EXPECT_NE(text.find("temperature=0.2 stop=[\"END\"]"), std::string::npos)
      << text;
  EXPECT_NE(text.find("for openai/gpt-4o (source, line 3; agent entry, line "
                      "5)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("temperature=0.7 stop=[\"END\"]"), std::string::npos)
      << text;
  EXPECT_NE(text.find("for anthropic/claude-sonnet-4-5 (agent entry, line 5)"),
            std::string::npos)
      << text;
}

// A source's headers: their names in explain, never their values; what
// they say is part of the identity.
TEST(ModelParametersTest, SourceHeadersShowByNameAndKeyTheStep) {
  auto with = [](const std::string& value) {
    return std::string(R"(agents:
- name: a
  source:
    model: openai/gpt-4o
    headers: { X-Gateway-Token: ")") +
           value + R"(", HTTP-Referer: https://example.org }
jobs: [{ name: j, plan: [{ agent: a, messages: [hi] }] }]
)";
  };
  auto p = MustLoad(with("${GATEWAY_TOKEN}"));
  ASSERT_TRUE(p);
  const std::string text = Explain(ResolvedPlan(p), {});
  EXPECT_NE(text.find("HTTP-Referer, X-Gateway-Token"), std::string::npos)
      << text;
  EXPECT_NE(text.find("for openai/gpt-4o (source, line 4); values not shown"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("GATEWAY_TOKEN}"), std::string::npos) << text;
  EXPECT_EQ(text.find("example.org"), std::string::npos) << text;
  EXPECT_NE(IdentityOf(with("${GATEWAY_TOKEN}")),
            IdentityOf(with("${OTHER_TOKEN}")));
  EXPECT_EQ(IdentityOf(with("${GATEWAY_TOKEN}")),
            IdentityOf(with("${GATEWAY_TOKEN}")));
}

}  // namespace
}  // namespace steps::pipeline
