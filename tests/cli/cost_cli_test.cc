// What runs cost, through the binary: --prices FILE and STEPS_PRICES, the
// order price: > the provider's reported cost > the prices table, the
// totals of `steps runs` and `steps show`, and `steps cost` over several
// recorded runs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace steps {
namespace {

using json = nlohmann::json;
using test_support::CliResult;
using test_support::RunSteps;
using test_support::StepsOptions;
using test_support::Streams;
using test_support::TempDir;

// writer: priced by the table only (1000 * 2.5 + 100 * 10 per million:
// $0.0035); checker (a step named otherwise): its provider reports $0.5,
// which the table's price does not override; fixed: its own price:
// (10 * 100 + 1 * 1000 per million: $0.002), over the table's.
constexpr const char* kDraft = R"(agents:
- name: writer
  source: { model: openai/gpt-4o }
- name: checker
  source: { model: openrouter/anthropic/claude-sonnet-4 }
- name: fixed
  source: { model: openai/gpt-4o, price: { input: 100, output: 1000 } }
jobs:
- name: draft
  plan:
  - agent: writer
    messages: [write]
  - agent: checker
    name: check-it
    messages: [check]
  - agent: fixed
    messages: [go]
mock:
  writer:
  - say: done
    usage: { prompt_tokens: 1000, completion_tokens: 100 }
  checker:
  - say: fine
    usage: { prompt_tokens: 2000, completion_tokens: 200, cost: 0.5 }
  fixed:
  - say: ok
    usage: { prompt_tokens: 10, completion_tokens: 1 }
)";

// A model no table lists: tokens, no dollars.
constexpr const char* kOther = R"(agents:
- name: scout
  source: { model: openai/unlisted-model }
jobs:
- name: other
  plan:
  - agent: scout
    messages: [look]
mock:
  scout:
  - say: seen
    usage: { prompt_tokens: 50, completion_tokens: 5 }
)";

constexpr const char* kPrices = R"({
  "sample_spec": {"input_cost_per_token": 0.0, "mode": "one of: chat"},
  "gpt-4o": {"input_cost_per_token": 2.5e-06, "output_cost_per_token": 1e-05,
             "litellm_provider": "openai", "mode": "chat"},
  "anthropic/claude-sonnet-4": {"input_cost_per_token": 3e-06,
                                "output_cost_per_token": 1.5e-05}
})";

class CostCliTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_.Write("a.yaml", kDraft);
    dir_.Write("b.yaml", kOther);
    dir_.Write("prices.json", kPrices);
  }

  CliResult Steps(const std::string& args, const std::string& prefix = "") {
    StepsOptions opts;
    opts.prefix = prefix;
    opts.kill_after = std::chrono::seconds(60);
    return RunSteps(dir_.path(), args, opts);
  }

  json Json(const std::string& args) {
    StepsOptions opts;
    opts.streams = Streams::kStdoutOnly;
    opts.kill_after = std::chrono::seconds(60);
    CliResult r = RunSteps(dir_.path(), args, opts);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.out;
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  }

  // Runs recorded: a.yaml priced by --prices, again by STEPS_PRICES, a
  // third time from the step cache (nothing spent), and b.yaml unpriced.
  void RecordRuns() {
    ASSERT_EQ(Steps("run a.yaml --mock --plain --prices prices.json").exit_code,
              0);
    ASSERT_EQ(Steps("run a.yaml --mock --plain --no-cache",
                    "STEPS_PRICES=prices.json")
                  .exit_code,
              0);
    ASSERT_EQ(Steps("run a.yaml --mock --plain").exit_code, 0);
    ASSERT_EQ(Steps("run b.yaml --mock --plain").exit_code, 0);
  }

  TempDir dir_;
};

const json* Group(const json& report, const std::string& key) {
  for (const json& g : report["groups"])
    if (g["key"] == key) return &g;
  return nullptr;
}

TEST_F(CostCliTest, EachAnswerIsPricedByItsSourceThenItsProviderThenTheTable) {
  ASSERT_EQ(Steps("run a.yaml --mock --plain --prices prices.json").exit_code,
            0);
  const json runs = Json("runs --json");
  ASSERT_EQ(runs.size(), 1u);
  const std::string id = runs[0]["id"];
  const json show = Json("show " + id + " --json");
  EXPECT_DOUBLE_EQ(show["usd"].get<double>(), 0.0035 + 0.5 + 0.002)
      << show.dump();
  // The text: a run's and a job's totals, the run list's columns.
  CliResult text = Steps("show " + id);
  const std::string spent =
      "Spent: 3311 tokens (3010 prompt, 301 completion), $0.5055\n";
  const size_t first = text.out.find(spent);
  ASSERT_NE(first, std::string::npos) << text.out;
  EXPECT_NE(text.out.find(spent, first + 1), std::string::npos) << text.out;
  CliResult list = Steps("runs");
  EXPECT_NE(list.out.find("TOKENS        COST"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("3311     $0.5055  a.yaml"), std::string::npos)
      << list.out;
  // Nothing was said of a.yaml's models: each was priced.
  EXPECT_EQ(Steps("run a.yaml --mock --plain --no-cache --prices prices.json")
                .out.find("agent.unpriced"),
            std::string::npos);
  // A model the table lacks is said, once however many answers it gives.
  dir_.Write("c.yaml",
             "agents:\n- name: scout\n  source: { model: "
             "openai/unlisted-model }\njobs:\n- name: other\n  plan:\n"
             "  - agent: scout\n    messages: [look]\n"
             "  - agent: scout\n    name: again\n    messages: [look]\n"
             "mock:\n  scout:\n  - say: seen\n  - say: again\n");
  CliResult other = Steps(
      "run c.yaml --mock --plain --prices prices.json; "
      "\"$STEPS\" run c.yaml --mock --plain --no-cache");
  const std::string said =
      "WRN agent.unpriced agent=scout model=openai/unlisted-model";
  EXPECT_NE(other.out.find(said), std::string::npos) << other.out;
  EXPECT_EQ(other.out.find(said), other.out.rfind(said)) << other.out;
}

TEST_F(CostCliTest, CostSumsRecordedRunsByModelAgentJobAndRun) {
  RecordRuns();
  const json by_model = Json("cost --by model --json");
  const json* gpt = Group(by_model, "openai/gpt-4o");
  ASSERT_NE(gpt, nullptr) << by_model.dump(2);
  // writer and fixed, twice each (the cached run spent nothing).
  EXPECT_EQ((*gpt)["turns"], 4);
  EXPECT_EQ((*gpt)["runs"], 2);
  EXPECT_EQ((*gpt)["prompt_tokens"], 2 * (1000 + 10));
  EXPECT_EQ((*gpt)["completion_tokens"], 2 * (100 + 1));
  EXPECT_NEAR((*gpt)["usd"].get<double>(), 2 * (0.0035 + 0.002), 1e-12);
  const json* claude = Group(by_model, "openrouter/anthropic/claude-sonnet-4");
  ASSERT_NE(claude, nullptr);
  EXPECT_NEAR((*claude)["usd"].get<double>(), 1.0, 1e-12);
  const json* unlisted = Group(by_model, "openai/unlisted-model");
  ASSERT_NE(unlisted, nullptr);
  EXPECT_EQ((*unlisted)["prompt_tokens"], 50);
  EXPECT_EQ((*unlisted)["usd"], 0.0);
  // Most expensive first.
  EXPECT_EQ(by_model["groups"][0]["key"],
            "openrouter/anthropic/claude-sonnet-4");
  EXPECT_EQ(by_model["groups"].size(), 3u);
  const json& total = by_model["total"];
  EXPECT_EQ(total["runs"], 3);
  EXPECT_EQ(total["turns"], 7);
  EXPECT_EQ(total["prompt_tokens"], 2 * 3010 + 50);
  EXPECT_NEAR(total["usd"].get<double>(), 2 * 0.5055, 1e-12);

  // By agent entry: the step named check-it talked to checker.
  const json by_agent = Json("cost --by agent --json");
  ASSERT_NE(Group(by_agent, "checker"), nullptr) << by_agent.dump(2);
  EXPECT_EQ(Group(by_agent, "check-it"), nullptr);
  EXPECT_NEAR((*Group(by_agent, "writer"))["usd"].get<double>(), 0.007, 1e-12);
  EXPECT_NEAR((*Group(by_agent, "fixed"))["usd"].get<double>(), 0.004, 1e-12);
  EXPECT_EQ((*Group(by_agent, "scout"))["turns"], 1);

  const json by_job = Json("cost --by job --json");
  ASSERT_EQ(by_job["groups"].size(), 2u) << by_job.dump(2);
  EXPECT_EQ((*Group(by_job, "draft (a.yaml)"))["steps"], 6);
  EXPECT_EQ((*Group(by_job, "other (b.yaml)"))["steps"], 1);

  const json by_run = Json("cost --by run --json");
  ASSERT_EQ(by_run["groups"].size(), 3u);
  // The run list's totals are the same sums.
  const json runs = Json("runs --json");
  double listed = 0;
  for (const json& r : runs) listed += r["usd"].get<double>();
  EXPECT_NEAR(listed, by_run["total"]["usd"].get<double>(), 1e-12);

  // The table: one line per group and a TOTAL.
  CliResult text = Steps("cost --by agent");
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_EQ(text.out.rfind("AGENT ", 0), 0u) << text.out;
  EXPECT_NE(text.out.find("\nchecker "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("\nTOTAL "), std::string::npos);
  EXPECT_NE(text.out.find("$1.0110"), std::string::npos) << text.out;
}

TEST_F(CostCliTest, SinceCountsRunsStartedFromADateOrSoLongAgo) {
  RecordRuns();
  EXPECT_EQ(Json("cost --since 2000-01-01 --json")["total"]["turns"], 7);
  EXPECT_EQ(Json("cost --since 1d --json")["total"]["turns"], 7);
  EXPECT_EQ(Json("cost --since 2099-12-31T23:59:59Z --json")["total"]["turns"],
            0);
  const json later = Json("cost --since 2099-01-01 --json");
  EXPECT_EQ(later["since"], "2099-01-01T00:00:00.000Z");
  EXPECT_EQ(later["total"]["usd"], 0.0);
  for (const char* bad :
       {"--since yesterday", "--since 2026-02-30", "--since 2026-12-01T25:00",
        "--since -1h", "--since 7d3", "--since ''", "--by step", "--by",
        "--by ''"}) {
    CliResult r = Steps(std::string("cost ") + bad);
    EXPECT_EQ(r.exit_code, 64) << bad << "\n" << r.out;
  }
  // Before 1970 is every run, said as 1970.
  const json all = Json("cost --since 99999999h --json");
  EXPECT_EQ(all["since"], "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(all["total"]["turns"], 7);
  EXPECT_EQ(Json("cost --since 1900-01-01 --json")["since"],
            "1970-01-01T00:00:00.000Z");
  CliResult r = Steps("cost --since 7x");
  EXPECT_NE(r.out.find("a date (2026-12-01"), std::string::npos) << r.out;
}

TEST_F(CostCliTest, ABadPricesFileIsRefusedBeforeAnythingRuns) {
  dir_.Write("bad.json", "{\"gpt-4o\": {\"input_cost_per_token\": \"cheap\"}}");
  CliResult r = Steps("run a.yaml --mock --plain --prices bad.json");
  EXPECT_EQ(r.exit_code, 64) << r.out;
  EXPECT_NE(r.out.find("--prices bad.json: \"gpt-4o\": input_cost_per_token "
                       "is string"),
            std::string::npos)
      << r.out;
  r = Steps("run a.yaml --mock --plain", "STEPS_PRICES=missing.json");
  EXPECT_EQ(r.exit_code, 64) << r.out;
  EXPECT_NE(r.out.find("missing.json: No such file"), std::string::npos)
      << r.out;
  // A FIFO nobody writes to is refused at once, not waited on.
  r = Steps("run a.yaml --mock --plain --prices fifo", "mkfifo fifo;");
  EXPECT_EQ(r.exit_code, 64) << r.out;
  EXPECT_NE(r.out.find("fifo: not a regular file"), std::string::npos) << r.out;
  r = Steps("test a.yaml --prices bad.json");
  EXPECT_EQ(r.exit_code, 64) << r.out;
  r = Steps("resume --prices bad.json");
  EXPECT_EQ(r.exit_code, 64) << r.out;
  EXPECT_NE(r.out.find("steps resume: --prices bad.json"), std::string::npos)
      << r.out;
  r = Steps("test a.yaml", "STEPS_PRICES=bad.json");
  EXPECT_EQ(r.exit_code, 64) << r.out;
  EXPECT_NE(r.out.find("steps test: --prices bad.json"), std::string::npos)
      << r.out;
  // Nothing ran.
  EXPECT_EQ(Steps("runs").exit_code, 1);
  EXPECT_EQ(Steps("cost").exit_code, 1);
}

}  // namespace
}  // namespace steps
