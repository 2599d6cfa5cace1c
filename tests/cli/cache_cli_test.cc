// The step cache as a user meets it through `steps run`, `steps show` and
// `steps cache`: what may answer a step is part of its key, a cached result
// is judged by the step's current assert, a cached step replays what it
// printed and names where it came from, and entries can be listed and
// cleared.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace {

namespace fs = std::filesystem;

namespace test_support = steps::test_support;
using Result = test_support::CliResult;

class CacheCliTest : public ::testing::Test {
 protected:
  void Write(const std::string& name, const std::string& text) {
    dir_.Write(name, text);
  }

  // Runs `env steps args` in the temporary folder; stdout+stderr captured.
  Result Steps(const std::string& args, const std::string& env = "") {
    test_support::StepsOptions options;
    options.prefix = env;
    return test_support::RunSteps(dir_.path(), args, options);
  }

  static bool Has(const Result& r, const std::string& text) {
    return test_support::Has(r.out, text);
  }
  // The first line of the output that starts with `start` ("" if none).
  static std::string LineOf(const Result& r, const std::string& start) {
    for (size_t at = 0; at < r.out.size();) {
      size_t end = r.out.find('\n', at);
      if (end == std::string::npos) end = r.out.size();
      if (r.out.compare(at, start.size(), start) == 0)
        return r.out.substr(at, end - at);
      at = end + 1;
    }
    return "";
  }
  // Whether the step's end line says it came from the cache (and `from`).
  static bool CachedLine(const Result& r, const std::string& label,
                         const std::string& from = "") {
    const std::string line = LineOf(r, label + " succeeded in ");
    return line.find(" (cached from run " + from) != std::string::npos;
  }

  test_support::TempDir dir_;
};

// The judge's source is a real endpoint that refuses every connection: a
// run that really asks it fails; only a scripted answer succeeds.
constexpr const char* kJudge = R"(
agents:
- name: judge
  source: { model: openai/gpt-4o-mini, base_url: "http://127.0.0.1:9/v1" }
  attempts: 1
jobs:
- name: j
  plan:
  - agent: judge
    messages: ["Is it good?"]
mock:
  judge:
  - say: SCRIPTED ANSWER
)";

TEST_F(CacheCliTest, AMockedAnswerIsNeverServedToARealRun) {
  Write("p.yml", kJudge);
  Result mocked = Steps("run p.yml --mock --plain");
  ASSERT_EQ(mocked.exit_code, 0) << mocked.out;
  // The same script again: the scripted answer may be reused.
  Result again = Steps("run p.yml --mock --plain");
  EXPECT_EQ(again.exit_code, 0) << again.out;
  EXPECT_TRUE(CachedLine(again, "agent: judge")) << again.out;
  // A real run asks the source (which refuses), never the scripted entry.
  Result real = Steps("run p.yml --plain", "OPENAI_API_KEY=sk-test");
  EXPECT_EQ(real.exit_code, 2) << real.out;
  EXPECT_FALSE(Has(real, "cached")) << real.out;
  EXPECT_FALSE(Has(real, "SCRIPTED ANSWER")) << real.out;
  Result shown = Steps("show --json");
  ASSERT_EQ(shown.exit_code, 0) << shown.out;
  nlohmann::json run = nlohmann::json::parse(shown.out);
  EXPECT_EQ(run["jobs"][0]["steps"][0]["cached"], false);
  EXPECT_NE(run["jobs"][0]["steps"][0]["output"], "SCRIPTED ANSWER");
}

TEST_F(CacheCliTest, AChangedMockScriptForTheAgentRunsTheStep) {
  Write("p.yml", kJudge);
  ASSERT_EQ(Steps("run p.yml --mock --plain").exit_code, 0);
  std::string other = kJudge;
  other.replace(other.find("SCRIPTED ANSWER"), 15, "ANOTHER ANSWER");
  Write("p.yml", other);
  Result r = Steps("run p.yml --mock --plain");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(Has(r, "cached")) << r.out;
  EXPECT_TRUE(Has(r, "ANOTHER ANSWER")) << r.out;
  // A script for another agent changes nothing for this one.
  Write("p.yml", other + "  someone_else:\n  - say: unrelated\n");
  Result same = Steps("run p.yml --mock --plain");
  EXPECT_TRUE(Has(same, "(cached from run")) << same.out;
}

TEST_F(CacheCliTest, TimeoutAttemptsAndMaxContextBytesStillNeverInvalidate) {
  Write("p.yml", kJudge);
  ASSERT_EQ(Steps("run p.yml --mock --plain").exit_code, 0);
  std::string dials = kJudge;
  dials.replace(dials.find("  attempts: 1\n"), 14,
                "  attempts: 2\n  timeout: 5m\n  max_context_bytes: 5000\n");
  Write("p.yml", dials);
  Result r = Steps("run p.yml --mock --plain");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(r, "(cached from run")) << r.out;
}

constexpr const char* kHello = R"(
jobs:
- name: j
  plan:
  - task: a
    run: echo hello
)";

TEST_F(CacheCliTest, ACachedResultIsJudgedByTheCurrentAssert) {
  Write("p.yml", kHello);
  ASSERT_EQ(Steps("run p.yml --plain").exit_code, 0);
  for (const char* check :
       {"    assert: { stdout: goodbye }\n", "    assert: { code: 7 }\n"}) {
    Write("p.yml", std::string(kHello) + check);
    Result r = Steps("run p.yml --plain");
    EXPECT_EQ(r.exit_code, 1) << check << r.out;
    EXPECT_TRUE(Has(r, "task: a failed")) << check << r.out;
    EXPECT_FALSE(Has(r, "cached")) << check << r.out;
    EXPECT_TRUE(Has(r, "INF cache.set_aside step=j:1")) << check << r.out;
    // Exactly what --no-cache says.
    Result forced = Steps("run p.yml --plain --no-cache");
    EXPECT_EQ(forced.exit_code, 1) << check << forced.out;
  }
  // An assert the recorded result meets: served from the cache.
  Write("p.yml", std::string(kHello) + "    assert: { stdout: hello }\n");
  Result met = Steps("run p.yml --plain");
  EXPECT_EQ(met.exit_code, 0) << met.out;
  EXPECT_TRUE(CachedLine(met, "task: a")) << met.out;
}

TEST_F(CacheCliTest, AnAssertedExitCodeIsRejudgedWhenTheAssertGoes) {
  const std::string seven =
      "jobs:\n- name: j\n  plan:\n  - task: a\n    run: echo out; exit 7\n";
  Write("p.yml", seven + "    assert: { code: 7 }\n");
  ASSERT_EQ(Steps("run p.yml --plain").exit_code, 0);
  Result again = Steps("run p.yml --plain");
  EXPECT_TRUE(Has(again, "(cached from run")) << again.out;
  // Without the assert, exit 7 is a failure, cached or not.
  Write("p.yml", seven);
  Result r = Steps("run p.yml --plain");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(Has(r, "task: a failed")) << r.out;
  EXPECT_TRUE(Has(r, "exited with code 7")) << r.out;
}

TEST_F(CacheCliTest, ACachedStepReplaysItsOutputAndNamesItsOrigin) {
  Write("p.yml", R"(
jobs:
- name: j
  plan:
  - task: a
    run: echo hello; echo warning >&2
  - task: b
    run: echo hello; echo warning >&2
)");
  Result r = Steps("run p.yml --plain");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // `b` shares `a`'s entry: it replays what `a` printed, on both streams.
  EXPECT_TRUE(Has(r, "  b | hello\n  b ! warning\n")) << r.out;
  Result shown = Steps("show --json");
  ASSERT_EQ(shown.exit_code, 0) << shown.out;
  nlohmann::json run = nlohmann::json::parse(shown.out);
  const std::string run_id = run["id"];
  EXPECT_TRUE(CachedLine(r, "task: b", run_id + ", step j:1)")) << r.out;
  const nlohmann::json& b = run["jobs"][0]["steps"][1];
  EXPECT_EQ(b["name"], "b");
  EXPECT_EQ(b["cached"], true);
  EXPECT_EQ(b["cached_from"]["run"], run_id);
  EXPECT_EQ(b["cached_from"]["step"], "j:1");
  EXPECT_EQ(b["output"], "hello\n");
  Result text = Steps("show");
  EXPECT_TRUE(Has(text, "Cached from: run " + run_id + ", step j:1"))
      << text.out;

  // A later run replays the same, and still names the first run.
  Result later = Steps("run p.yml --plain");
  EXPECT_TRUE(Has(later, "  a | hello\n  a ! warning\n")) << later.out;
  EXPECT_TRUE(CachedLine(later, "task: a", run_id + ", step j:1)"))
      << later.out;
}

TEST_F(CacheCliTest, CacheLsAndClear) {
  Write("p.yml", R"(
jobs:
- name: j
  plan:
  - task: first
    outputs: [out]
    run: echo one > out/f.txt; echo one
  - task: second
    run: echo two
)");
  // No store yet.
  Result none = Steps("cache ls --state-dir st");
  EXPECT_EQ(none.exit_code, 1) << none.out;
  ASSERT_EQ(Steps("run p.yml --plain --state-dir st").exit_code, 0);
  Result ls = Steps("cache ls", "STEPS_STATE_DIR=st");
  ASSERT_EQ(ls.exit_code, 0) << ls.out;
  EXPECT_TRUE(Has(ls, "j:1 (first)")) << ls.out;
  EXPECT_TRUE(Has(ls, "j:2 (second)")) << ls.out;
  EXPECT_TRUE(Has(ls, "2 entries")) << ls.out;
  Result json = Steps("cache ls --json --state-dir st");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  nlohmann::json entries = nlohmann::json::parse(json.out);
  ASSERT_EQ(entries.size(), 2u);
  for (const auto& e : entries) {
    EXPECT_EQ(e["key"].get<std::string>().size(), 64u);
    EXPECT_GT(e["size_bytes"].get<int64_t>(), 0);
    EXPECT_EQ(e["usable"], true);
  }
  const std::string first_key =
      entries[0]["name"] == "first" ? entries[0]["key"] : entries[1]["key"];
  EXPECT_TRUE(fs::is_directory(dir_ / "st/cache/" + first_key + "/out"));

  // By step name: only that one goes, folder and all.
  Result by_step = Steps("cache clear --step first --state-dir st");
  EXPECT_EQ(by_step.exit_code, 0) << by_step.out;
  EXPECT_TRUE(Has(by_step, "removed 1 entry")) << by_step.out;
  EXPECT_FALSE(fs::exists(dir_ / "st/cache/" + first_key));
  Result rerun = Steps("run p.yml --plain --state-dir st");
  EXPECT_TRUE(Has(rerun, "task: first succeeded in")) << rerun.out;
  EXPECT_FALSE(CachedLine(rerun, "task: first")) << rerun.out;
  EXPECT_TRUE(CachedLine(rerun, "task: second")) << rerun.out;

  // Older than an hour: none of these.
  Result old = Steps("cache clear --older-than 1h --state-dir st");
  EXPECT_TRUE(Has(old, "removed 0 entries")) << old.out;
  Result bad = Steps("cache clear --older-than soon --state-dir st");
  EXPECT_EQ(bad.exit_code, 64) << bad.out;
  EXPECT_TRUE(Has(bad, "--older-than soon")) << bad.out;
  // Everything.
  Result all = Steps("cache clear --state-dir st");
  EXPECT_TRUE(Has(all, "removed 2 entries")) << all.out;
  Result empty = Steps("cache ls --state-dir st");
  EXPECT_TRUE(Has(empty, "0 entries")) << empty.out;
  // The runs stay recorded.
  EXPECT_EQ(Steps("show --state-dir st").exit_code, 0);
}

TEST_F(CacheCliTest, CacheIsInHelpAndCompletion) {
  Result help = Steps("--help");
  EXPECT_TRUE(Has(help, "cache")) << help.out;
  Result sub = Steps("cache --help");
  EXPECT_TRUE(Has(sub, "ls")) << sub.out;
  EXPECT_TRUE(Has(sub, "clear")) << sub.out;
  Result completion = Steps("completion bash");
  EXPECT_TRUE(Has(completion, "cache) opts=\"ls clear ")) << completion.out;
  EXPECT_TRUE(Has(completion, "\"cache clear\") opts=\"")) << completion.out;
  EXPECT_TRUE(Has(completion, "--older-than")) << completion.out;
  EXPECT_EQ(Steps("cache").exit_code, 64);
}

TEST_F(CacheCliTest, AStepThatPrintedASecretIsNotRemembered) {
  // On stderr only: the stdout the cache keeps holds no secret.
  Write("p.yml", R"(
secrets: [DEPLOY_TOKEN]
jobs:
- name: j
  plan:
  - task: a
    env: { DEPLOY_TOKEN: "${DEPLOY_TOKEN}" }
    run: echo fine; echo "token $DEPLOY_TOKEN" >&2
)");
  const std::string env = "DEPLOY_TOKEN=s3cr3t-value";
  Result first = Steps("run p.yml --plain", env);
  ASSERT_EQ(first.exit_code, 0) << first.out;
  EXPECT_FALSE(Has(first, "s3cr3t-value")) << first.out;
  Result again = Steps("run p.yml --plain", env);
  EXPECT_FALSE(Has(again, "cached")) << again.out;
  EXPECT_TRUE(Has(again, "  a ! token ***")) << again.out;
  Result ls = Steps("cache ls");
  EXPECT_TRUE(Has(ls, "0 entries")) << ls.out;
}

}  // namespace
