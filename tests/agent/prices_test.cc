// Prices tables in LiteLLM's format: what is read, what is refused, and
// which entry a source's model finds.
#include "agent/prices.h"

#include <gtest/gtest.h>

namespace steps::agent {
namespace {

// Entries shaped as LiteLLM's model_prices_and_context_window.json has
// them, its sample_spec included.
constexpr const char* kTable = R"json({
  "sample_spec": {
    "max_tokens": "LEGACY parameter. set to max_output_tokens if provider specifies it.",
    "input_cost_per_token": 0.0000,
    "output_cost_per_token": 0.000,
    "litellm_provider": "one of https://docs.litellm.ai/docs/providers",
    "mode": "one of: chat, embedding, completion, image_generation"
  },
  "gpt-4o": {
    "max_tokens": 16384,
    "input_cost_per_token": 2.5e-06,
    "output_cost_per_token": 1e-05,
    "cache_read_input_token_cost": 1.25e-06,
    "litellm_provider": "openai",
    "mode": "chat",
    "supports_function_calling": true
  },
  "openrouter/openai/gpt-4o": {
    "input_cost_per_token": 5e-06,
    "output_cost_per_token": 1.5e-05,
    "litellm_provider": "openrouter"
  },
  "text-embedding-3-small": {
    "input_cost_per_token": 2e-08,
    "litellm_provider": "openai",
    "mode": "embedding"
  },
  "dall-e-3": {"mode": "image_generation", "input_cost_per_pixel": 1e-08}
})json";

TEST(PriceTableTest, ReadsLiteLlmEntriesAsUsdPerMillionTokens) {
  Result<PriceTable> t = PriceTable::Parse(kTable, "prices.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  // Not sample_spec (LiteLLM's description of an entry), nor the image
  // model, which has no per-token cost.
  EXPECT_EQ(t->size(), 3u);
  EXPECT_FALSE(t->Find("sample_spec").has_value());
  std::optional<SourcePrice> p = t->Find("openai/gpt-4o");
  ASSERT_TRUE(p.has_value());
  EXPECT_DOUBLE_EQ(p->input_per_mtok, 2.5);
  EXPECT_DOUBLE_EQ(p->output_per_mtok, 10.0);
  // A cost left out is 0.
  p = t->Find("openai/text-embedding-3-small");
  ASSERT_TRUE(p.has_value());
  EXPECT_DOUBLE_EQ(p->input_per_mtok, 0.02);
  EXPECT_DOUBLE_EQ(p->output_per_mtok, 0.0);
  EXPECT_FALSE(t->Find("openai/dall-e-3").has_value());
}

TEST(PriceTableTest, FindsTheExactNameFirstThenWithoutItsProvider) {
  Result<PriceTable> t = PriceTable::Parse(kTable, "prices.json");
  ASSERT_TRUE(t.ok());
  // Exact: OpenRouter's own price for the model.
  EXPECT_DOUBLE_EQ(t->Find("openrouter/openai/gpt-4o")->input_per_mtok, 5.0);
  // Without the provider, then the last part.
  EXPECT_DOUBLE_EQ(t->Find("azure/gpt-4o")->input_per_mtok, 2.5);
  EXPECT_DOUBLE_EQ(t->Find("other/openai/gpt-4o")->input_per_mtok, 2.5);
  EXPECT_DOUBLE_EQ(t->Find("gpt-4o")->input_per_mtok, 2.5);
  EXPECT_FALSE(t->Find("openai/gpt-4o-mini").has_value());
  EXPECT_FALSE(t->Find("").has_value());
  EXPECT_FALSE(t->Find("openai/").has_value());
}

TEST(PriceTableTest, RefusesWhatIsNotAPricesTable) {
  struct Case {
    const char* text;
    const char* says;
  };
  const Case cases[] = {
      {"", "prices.json: not JSON"},
      {"{\"gpt-4o\": ", "prices.json: not JSON"},
      {"[1, 2]", "one JSON object of models, not array"},
      {"{\"m\": {\"input_cost_per_token\": \"0.1\"}}",
       "prices.json: \"m\": input_cost_per_token is string"},
      {"{\"m\": {\"output_cost_per_token\": -1e-06}}",
       "prices.json: \"m\": output_cost_per_token is -1e-06; a cost is a "
       "number of USD per token from 0 to 1"},
      // Finite, but priced so that an answer's cost would overflow.
      {"{\"m\": {\"input_cost_per_token\": 1.7e308}}",
       "input_cost_per_token is 1.7e+308"},
      {"{\"m\": {\"input_cost_per_token\": 1.5}}",
       "input_cost_per_token is 1.5"},
      {"{\"gpt-4o\": 5}", "prices.json: \"gpt-4o\" is number; an entry is"},
      {"{\"gpt-4o\": null}", "\"gpt-4o\" is null"},
      // A control byte in a key is shown escaped.
      {"{\"a\\u001b[31mb\": 1}", "prices.json: \"a\\u001b[31mb\" is number"},
      {"{\"m\": {\"input_cost_per_token\": true}}",
       "input_cost_per_token is boolean"},
      {"{\"m\": {\"input_cost_per_token\": 1e999}}", "prices.json: not JSON"},
  };
  for (const Case& c : cases) {
    Result<PriceTable> t = PriceTable::Parse(c.text, "prices.json");
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_NE(t.status().message().find(c.says), std::string::npos)
        << c.text << "\n"
        << t.status().message();
  }
}

TEST(PriceTableTest, AnEmptyTableAndNullCostsPriceNothing) {
  Result<PriceTable> t = PriceTable::Parse("{}", "p");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->size(), 0u);
  t = PriceTable::Parse("{\"m\": {\"input_cost_per_token\": null}, \"n\": {}}",
                        "p");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->size(), 0u);
  EXPECT_FALSE(t->Find("x/m").has_value());
  // $1 a token is the most a table may say.
  t = PriceTable::Parse("{\"m\": {\"output_cost_per_token\": 1}}", "p");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_DOUBLE_EQ(t->Find("m")->output_per_mtok, kMaxPricePerMtok);
}

}  // namespace
}  // namespace steps::agent
