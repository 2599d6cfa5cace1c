// `steps show` and `steps runs` through the real binary, against the
// listing format of spec text 000:
//   "  1. fetch"
//   "     (attempt 1/3)  error   1ms   hash: 44136fa3"
//   "       Taken by: ops@server-1"
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "store_test_util.h"

namespace steps::store {
namespace {

using namespace store_testing;

// Fails twice, then succeeds (the attempts share a working folder); then an
// agent step served by the file's mock block.
constexpr const char* kPipeline = R"(
agents:
- name: reviewer
  source: { model: mock/reviewer }
jobs:
- name: build
  plan:
  - task: fetch
    attempts: 3
    run: |
      n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n
      echo "try $n"
      [ "$n" -ge 3 ]
  - agent: reviewer
    messages: ["Review it."]
mock:
  reviewer:
  - say: LGTM
    usage: { prompt_tokens: 120, completion_tokens: 30 }
)";

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class ShowTest : public ::testing::Test {
 protected:
  void SetUp() override { WriteFile(file_, kPipeline); }

  CommandResult Run(const std::string& extra = "") {
    return RunSteps("run " + Quote(file_) + " --mock --plain --state-dir " +
                    Quote(state_.path()) + " " + extra + " >/dev/null");
  }
  CommandResult Show(const std::string& args = "") {
    return RunSteps("show --state-dir " + Quote(state_.path()) + " " + args);
  }

  TempDir dir_;
  TempDir state_;
  std::string file_ = dir_ / "pipeline.yaml";
};

TEST_F(ShowTest, TheListingNumbersStepsAndShowsEveryAttempt) {
  ASSERT_EQ(Run().exit_code, 0);
  CommandResult show = Show();
  ASSERT_EQ(show.exit_code, 0) << show.out;
  std::vector<std::string> lines = Lines(show.out);
  const std::regex attempt(
      R"(     \(attempt (\d)/(\d)\)  (\w+)   \d+ms   hash: [0-9a-f]{8})");
  const std::regex taken(R"(       Taken by: [^@ ]+@[^@ ]+)");
  std::vector<std::string> outcomes;
  auto fetch = std::find(lines.begin(), lines.end(), "  1. fetch");
  ASSERT_NE(fetch, lines.end()) << show.out;
  for (auto it = fetch + 1; it != lines.end(); ++it) {
    std::smatch m;
    if (!std::regex_match(*it, m, attempt)) continue;
    EXPECT_EQ(m[2], "3") << *it;
    outcomes.push_back(m[3]);
    ASSERT_NE(it + 1, lines.end());
    EXPECT_TRUE(std::regex_match(*(it + 1), taken)) << *(it + 1);
    if (outcomes.size() == 3) break;
  }
  EXPECT_EQ(outcomes,
            (std::vector<std::string>{"failed", "failed", "succeeded"}))
      << show.out;
  EXPECT_NE(show.out.find("  2. reviewer  (agent)\n"), std::string::npos)
      << show.out;
  EXPECT_TRUE(std::regex_search(
      show.out, std::regex(R"(       Agent: 1 turn, 1 request, 150 tokens)")))
      << show.out;
}

TEST_F(ShowTest, JsonCarriesTheSameRecord) {
  ASSERT_EQ(Run().exit_code, 0);
  CommandResult show = Show("--json");
  ASSERT_EQ(show.exit_code, 0);
  nlohmann::json j = nlohmann::json::parse(show.out);
  EXPECT_EQ(j["outcome"], "succeeded");
  const auto& fetch = j["jobs"][0]["steps"][0];
  EXPECT_EQ(fetch["name"], "fetch");
  ASSERT_EQ(fetch["attempts"].size(), 3u);
  EXPECT_EQ(fetch["attempts"][0]["outcome"], "failed");
  EXPECT_EQ(fetch["attempts"][0]["exit_code"], 1);
  EXPECT_TRUE(fetch["attempts"][0]["clipped_to_ms"].is_null());
  EXPECT_EQ(fetch["attempts"][2]["identity"], fetch["identity"]);
  const auto& review = j["jobs"][0]["steps"][1];
  EXPECT_EQ(review["prompt_tokens"], 120);
  EXPECT_EQ(review["agent"]["turns"], 1);
  EXPECT_EQ(review["turns"].size(), 1u);
}

TEST_F(ShowTest, ASecondRunIsCachedAndNoCacheRunsAgain) {
  ASSERT_EQ(Run().exit_code, 0);
  ASSERT_EQ(Run().exit_code, 0);
  CommandResult cached = Show();
  EXPECT_NE(cached.out.find("  1. fetch  (cached)\n"), std::string::npos)
      << cached.out;
  EXPECT_NE(cached.out.find("(attempt 1/1)  cached   "), std::string::npos);
  EXPECT_NE(cached.out.find("  2. reviewer  (agent, cached)\n"),
            std::string::npos)
      << cached.out;
  ASSERT_EQ(Run("--no-cache").exit_code, 0);
  CommandResult forced = Show();
  EXPECT_EQ(forced.out.find("cached"), std::string::npos) << forced.out;
  EXPECT_NE(forced.out.find("(attempt 3/3)  succeeded"), std::string::npos);
}

TEST_F(ShowTest, RunsListsEveryRunNewestFirstAndShowTakesAnId) {
  ASSERT_EQ(Run().exit_code, 0);
  ASSERT_EQ(Run().exit_code, 0);
  CommandResult runs =
      RunSteps("runs --json --state-dir " + Quote(state_.path()));
  ASSERT_EQ(runs.exit_code, 0);
  nlohmann::json list = nlohmann::json::parse(runs.out);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_GE(list[0]["started"], list[1]["started"]);
  const std::string older = list[1]["id"];
  CommandResult show = Show(older);
  EXPECT_EQ(show.exit_code, 0);
  EXPECT_EQ(show.out.rfind("Run " + older + "  succeeded", 0), 0u) << show.out;
  CommandResult text = RunSteps("runs --state-dir " + Quote(state_.path()));
  EXPECT_NE(text.out.find(older), std::string::npos);
  EXPECT_EQ(Lines(text.out).size(), 3u) << text.out;
}

TEST_F(ShowTest, NothingRecordedIsAnError) {
  EXPECT_EQ(Show().exit_code, 1);
  EXPECT_EQ(Show("no-such-run").exit_code, 1);
  // No store: `steps runs` agrees with `steps show`.
  CommandResult runs = RunSteps("runs --state-dir " + Quote(state_.path()));
  EXPECT_EQ(runs.exit_code, 1);
}

}  // namespace
}  // namespace steps::store
