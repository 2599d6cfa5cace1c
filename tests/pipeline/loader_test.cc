#include "pipeline/loader.h"

#include <gtest/gtest.h>

#include "core/clock.h"
#include "pipeline/resolve.h"
#include "test_util.h"

namespace steps::pipeline {
namespace {

constexpr Severity kError = Severity::kError;
constexpr Severity kWarning = Severity::kWarning;

TEST(LoaderTest, ReadsEveryStepKindAndKey) {
  auto p = MustLoad(R"(
agents:
- name: coder
  source: { model: openai/gpt-4.1-mini, base_url: "http://127.0.0.1:9/v1", api_key_env: KEY,
            price: { input: 0.4, output: 1.6 }, stream: true }
  fallback:
  - { model: anthropic/claude-sonnet-4-5 }
  - { cli: "coder-cli --yes" }
  persona: You write code.
  tools: [read_file, write_file]
  timeout: 20m
  attempts: 4
  max_turns: 40
  max_context_bytes: 1000
  budget: { tokens: 1000, usd: 2.5 }
  llm_timeout: 2m
  tool_timeout: 10s
  required: tools
defaults:
  env: { CI: "1" }
resource_types:
- name: tag
  config: { check: "echo '[]'", in: "true", out: "true" }
resources:
- name: repo
  type: tag
  source: { uri: "x", depth: 1 }
jobs:
- name: all
  timeout: 1h
  budget: { usd: 10 }
  max_visits: 3
  on_failure: { task: notify, run: echo failed }
  ensure: { task: tidy, run: echo tidy }
  plan:
  - get: repo
    attempts: 2
    timeout: 30s
    params: { depth: 2 }
  - task: build
    inputs: [repo]
    outputs: [dist]
    env: { MODE: release }
    fix: { agent: coder, attempts: 2 }
    run: make
    assert: { stdout: built, code: 0 }
  - agent: coder
    name: review
    messages: ["Review it."]
    context_paths: [dist/out.txt]
    max_turns: 5
    to: build
  - in_parallel:
      limit: 2
      fail_fast: true
      steps:
      - task: a
        run: echo a
      - task: b
        run: echo b
  - do:
    - try: { task: c, run: "false" }
  - across:
    - var: target
      values: [x, y, z]
      max_in_flight: 2
    fail_fast: true
    budget: { tokens: 500 }
    do:
    - task: cell
      run: echo {{ .target | shellquote }}
  - put: repo
    params: { tag: v2 }
  assert:
    execution: [repo, build]
    outcome: succeeded
)");
  ASSERT_TRUE(p);
  const AgentEntry& a = p->agents.at(0);
  EXPECT_EQ(a.source->model, "openai/gpt-4.1-mini");
  EXPECT_EQ(*a.source->base_url, "http://127.0.0.1:9/v1");
  EXPECT_EQ(*a.source->api_key_env, "KEY");
  EXPECT_DOUBLE_EQ(a.source->price->output_per_mtok, 1.6);
  EXPECT_TRUE(a.source->stream);
  ASSERT_EQ(a.fallback.size(), 2u);
  EXPECT_EQ(a.fallback[1].cli, "coder-cli --yes");
  EXPECT_EQ(*a.timeout, Millis(20 * 60000));
  EXPECT_EQ(*a.attempts, 4);
  EXPECT_EQ(*a.max_turns, 40);
  EXPECT_EQ(*a.budget->tokens, 1000);
  EXPECT_EQ(*a.llm_timeout, Millis(120000));
  EXPECT_TRUE(a.required_tools);
  EXPECT_EQ(p->defaults.env.at("CI"), "1");
  EXPECT_EQ(p->resources.at(0).source["depth"], 1);

  const Job& job = p->jobs.at(0);
  EXPECT_EQ(*job.timeout, Millis(3600000));
  EXPECT_EQ(*job.max_visits, 3);
  ASSERT_TRUE(job.hooks.on_failure);
  EXPECT_EQ(job.hooks.ensure->name, "tidy");
  ASSERT_EQ(job.plan.size(), 7u);
  EXPECT_EQ(job.plan[0]->kind, StepKind::kGet);
  EXPECT_EQ(job.plan[0]->params["depth"], 2);
  const Step& build = *job.plan[1];
  EXPECT_EQ(build.fix->agent, "coder");
  EXPECT_EQ(*build.fix->attempts, 2);
  EXPECT_EQ(build.env.at("MODE"), "release");
  EXPECT_EQ(*build.check->stdout_contains, "built");
  EXPECT_EQ(*build.check->code, 0);
  const Step& review = *job.plan[2];
  EXPECT_EQ(review.name, "review");
  EXPECT_EQ(review.agent, "coder");
  EXPECT_EQ(*review.route_to, "build");
  EXPECT_EQ(job.plan[3]->kind, StepKind::kInParallel);
  EXPECT_EQ(*job.plan[3]->limit, 2);
  EXPECT_TRUE(job.plan[3]->fail_fast);
  EXPECT_EQ(job.plan[3]->steps.size(), 2u);
  EXPECT_EQ(job.plan[4]->steps[0]->kind, StepKind::kTry);
  const Step& across = *job.plan[5];
  EXPECT_EQ(across.across.at(0).values.size(), 3u);
  EXPECT_EQ(*across.across.at(0).max_in_flight, 2);
  EXPECT_EQ(*across.budget->tokens, 500);
  EXPECT_EQ(job.plan[6]->kind, StepKind::kPut);
  EXPECT_EQ(*job.check->outcome, Outcome::kSucceeded);
  EXPECT_EQ(CountSteps(job.plan), 8);
}

TEST(LoaderTest, InParallelTakesAPlainList) {
  auto p = MustLoad(R"(
jobs:
- name: j
  plan:
  - in_parallel:
    - task: a
      run: echo a
    - task: b
      run: echo b
)");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->jobs[0].plan[0]->steps.size(), 2u);
}

TEST(LoaderTest, YamlSyntaxErrorHasItsLine) {
  ExpectDiag("jobs:\n- name: j\n  plan:\n  - task: x\n    run: a: b\n", kError,
             5, "YAML syntax");
}

TEST(LoaderTest, UnknownStepKindNamesWhatItFound) {
  ExpectDiag(R"(jobs:
- name: j
  plan:
  - taks: build
    run: make
)",
             kError, 4, "a step needs one of task, get, put, agent");
  ExpectDiag(R"(jobs:
- name: j
  plan:
  - taks: build
)",
             kError, 4, "(found 'taks')");
}

TEST(LoaderTest, TwoKindsInOneStep) {
  ExpectDiag(R"(jobs:
- name: j
  plan:
  - task: build
    get: repo
    run: make
)",
             kError, 4, "both 'task' and 'get'");
}

TEST(LoaderTest, UnknownAgentAndResource) {
  ExpectDiag(R"(jobs:
- name: j
  plan:
  - agent: ghost
    messages: [hi]
)",
             kError, 4, "unknown agent 'ghost'");
  ExpectDiag(R"(jobs:
- name: j
  plan:
  - get: nothing
)",
             kError, 4, "unknown resource 'nothing'");
  ExpectDiag(R"(resources:
- name: r
  type: nope
jobs:
- name: j
  plan:
  - get: r
)",
             kError, 3, "unknown type 'nope'");
  ExpectDiag(R"(jobs:
- name: j
  plan:
  - task: t
    run: "false"
    fix: ghost
)",
             kError, 6, "'fix' names unknown agent 'ghost'");
}

TEST(LoaderTest, DuplicateNames) {
  ExpectDiag(R"(agents:
- name: a
  source: { model: mock/a }
- name: a
  source: { model: mock/b }
jobs:
- name: j
  plan: [{ task: t, run: "true" }]
)",
             kError, 4, "duplicate agent 'a' (first at line 2)");
  ExpectDiag(R"(jobs:
- name: j
  plan: [{ task: t, run: "true" }]
- name: j
  plan: [{ task: t, run: "true" }]
)",
             kError, 4, "duplicate job 'j' (first at line 2)");
  ExpectDiag(R"(resource_types:
- name: t
  config: { in: "true" }
- name: t
  config: { out: "true" }
resources:
- name: r
  type: t
- name: r
  type: t
jobs:
- name: j
  plan: [{ task: t, run: "true" }]
)",
             kError, 4, "duplicate resource type 't' (first at line 2)");
  ExpectDiag(R"(resource_types:
- name: t
  config: { in: "true" }
resources:
- name: r
  type: t
- name: r
  type: t
jobs:
- name: j
  plan: [{ task: t, run: "true" }]
)",
             kError, 7, "duplicate resource 'r' (first at line 5)");
  ExpectDiag(R"(jobs:
- name: j
  name: k
  plan: [{ task: t, run: "true" }]
)",
             kError, 3, "duplicate key 'name'");
}

// A name is carried in records, events and the task sent to a cell on a
// node, all UTF-8: bytes that are not are refused with the name's line.
TEST(LoaderTest, NamesThatAreNotUtf8AreRefused) {
  ExpectDiag("jobs:\n- name: j\xff\n  plan: [{ task: t, run: \"true\" }]\n",
             kError, 2, "'name' 'j\uFFFD' is not valid UTF-8");
  ExpectDiag(
      "agents:\n- name: a\xc3\n  source: { model: mock/a }\n"
      "jobs:\n- name: j\n  plan: [{ task: t, run: \"true\" }]\n",
      kError, 2, "is not valid UTF-8");
  // One error for one problem: not "job has no 'name'" too.
  LoadResult bad = LoadPipelineText(
      "jobs:\n- name: j\xff\n  plan: [{ task: t, run: \"true\" }]\n", "t.yaml");
  EXPECT_EQ(Find(bad.diagnostics, "has no 'name'"), nullptr)
      << bad.diagnostics.FormatAll();
  // Control characters (C0, DEL, C1) in a name of any kind are refused,
  // shown escaped.
  ExpectDiag(
      "jobs:\n- name: \"j\\e[31mRED\"\n  plan: [{ task: t, run: \"true\" }]\n",
      kError, 2, "'name' 'j\\x1b[31mRED' holds a control character");
  ExpectDiag(
      "jobs:\n- name: j\n  plan:\n  - task: \"t\\0x\"\n    run: \"true\"\n",
      kError, 4, "'task' 't\\x00x' holds a control character");
  ExpectDiag(
      "jobs:\n- name: j\n  plan:\n  - task: t\n    name: \"a\\u009bb\"\n"
      "    run: \"true\"\n",
      kError, 5, "'name' 'a\\u009bb' holds a control character");
  ExpectDiag(
      "agents:\n- name: \"a\\e]0;pwn\\a\"\n  source: { model: mock/a }\n"
      "jobs:\n- name: j\n  plan: [{ task: t, run: \"true\" }]\n",
      kError, 2, "holds a control character");
  // Valid UTF-8 beyond ASCII is a name like any other.
  EXPECT_TRUE(
      MustLoad("jobs:\n- name: caf\u00e9 \u2615\n"
               "  plan: [{ task: t, run: \"true\" }]\n"));
}

TEST(LoaderTest, WrongTypes) {
  ExpectDiag(R"(jobs:
- name: j
  plan:
  - task: t
    run: "true"
    attempts: three
)",
             kError, 6, "'attempts' must be a positive integer");
  ExpectDiag(R"(jobs:
- name: j
  plan:
  - task: t
    run: [not, a, string]
)",
             kError, 5, "'run' must be a string");
  ExpectDiag(R"(jobs:
- name: j
  plan:
  - task: t
    run: "true"
    idempotent: maybe
)",
             kError, 6, "'idempotent' must be true or false");
  ExpectDiag(R"(jobs:
- name: j
  plan: { task: t }
)",
             kError, 3, "'plan' must be a list of steps");
}

TEST(LoaderTest, MissingRequiredKeys) {
  ExpectDiag("jobs:\n- name: j\n  plan:\n  - task: t\n", kError, 4,
             "has no 'run'");
  ExpectDiag("jobs:\n- plan: [{ task: t, run: x }]\n", kError, 2,
             "job has no 'name'");
  ExpectDiag("jobs:\n- name: j\n", kError, 2, "has no 'plan'");
  ExpectDiag(
      "agents:\n- name: a\njobs:\n- name: j\n  plan: [{ task: t, run: x }]\n",
      kError, 2, "agent 'a' has no 'source'");
  ExpectDiag("agents: []\n", kError, 1, "no 'jobs:'");
  ExpectDiag("", kError, 1, "the file is empty");
  ExpectDiag(R"(agents:
- name: a
  source: { model: mock/a }
jobs:
- name: j
  plan:
  - agent: a
)",
             kError, 7, "has no 'messages'");
}

TEST(LoaderTest, DefaultSourceServesEntriesWithoutOne) {
  auto p = MustLoad(R"(defaults:
  source: { model: mock/default }
agents:
- name: a
jobs:
- name: j
  plan: [{ agent: a, messages: [hi] }]
)");
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->agents[0].source);
}

TEST(LoaderTest, ModelWithoutProviderIsRefused) {
  ExpectDiag(R"(agents:
- name: a
  source: { model: gpt-4 }
jobs:
- name: j
  plan: [{ agent: a, messages: [hi] }]
)",
             kError, 3, "names no provider");
}

TEST(LoaderTest, UnknownKeysWarnWithTheirLineEverywhere) {
  const std::string text = R"(colour: blue
agents:
- name: a
  source: { model: mock/a, flavour: x }
  sauce: hot
jobs:
- name: j
  priority: high
  plan:
  - task: t
    run: echo
    retries: 3
  assert:
    result: ok
)";
  LoadResult r = LoadPipelineText(text, "t.yaml");
  ASSERT_TRUE(r.pipeline) << "unknown keys warn, they do not refuse";
  for (auto [key, line] :
       std::vector<std::pair<std::string, int>>{{"colour", 1},
                                                {"flavour", 4},
                                                {"sauce", 5},
                                                {"priority", 8},
                                                {"retries", 12},
                                                {"result", 14}}) {
    const Diagnostic* d = Find(r.diagnostics, "unknown key '" + key + "'");
    ASSERT_NE(d, nullptr) << key;
    EXPECT_EQ(d->severity, kWarning);
    EXPECT_EQ(d->line, line) << key;
  }
}

TEST(LoaderTest, KeyOfAnotherKindIsNamed) {
  ExpectDiag(R"(resource_types:
- name: t
  config: { in: "true" }
resources:
- name: r
  type: t
jobs:
- name: j
  plan:
  - get: r
    run: echo
)",
             kWarning, 11,
             "'run' belongs to task steps; on a get step it is ignored");
}

TEST(LoaderTest, TimeoutUnderDefaultsIsRefused) {
  ExpectDiag(R"(defaults:
  timeout: 10m
jobs:
- name: j
  plan: [{ task: t, run: x }]
)",
             kError, 2, "put it on the agent entry or on the step");
}

// Spec text 002, "Zero means no limit", per step kind.
TEST(LoaderTest, ZeroTimeoutIsNoDeadlineOnAgentsOnly) {
  auto p = MustLoad(R"(agents:
- name: a
  source: { model: mock/a }
jobs:
- name: j
  plan:
  - agent: a
    timeout: "0"
    messages: [hi]
  - agent: a
    timeout: 0
    messages: [hi]
)");
  ASSERT_TRUE(p);
  EXPECT_EQ(*p->jobs[0].plan[0]->timeout, Millis(0));
  EXPECT_EQ(*p->jobs[0].plan[1]->timeout, Millis(0));
  for (const char* kind : {"task: t\n    run: x", "get: r", "put: r"}) {
    std::string text = std::string(R"(resource_types:
- name: ty
  config: { in: "true", out: "true" }
resources:
- name: r
  type: ty
jobs:
- name: j
  plan:
  - )") + kind + "\n    timeout: \"0\"\n";
    LoadResult r = LoadPipelineText(text, "t.yaml");
    EXPECT_FALSE(r.pipeline) << kind;
    EXPECT_NE(Find(r.diagnostics, "'timeout' must be a positive duration"),
              nullptr)
        << kind;
  }
  ExpectDiag("jobs:\n- name: j\n  timeout: 0s\n  plan: [{ task: t, run: x }]\n",
             kError, 3, "a job's 'timeout' must be a positive duration");
}

TEST(LoaderTest, NegativesAreLoadErrors) {
  const std::string head = "agents:\n- name: a\n  source: { model: mock/a }\n";
  ExpectDiag(head +
                 "  timeout: -5m\njobs:\n- name: j\n  plan: [{ agent: a, "
                 "messages: [x] }]\n",
             kError, 4, "'timeout' must not be negative");
  ExpectDiag(head +
                 "  max_turns: -1\njobs:\n- name: j\n  plan: [{ agent: a, "
                 "messages: [x] }]\n",
             kError, 4, "'max_turns' must be 0 (no cap) or a positive integer");
  ExpectDiag(head +
                 "  max_context_bytes: -1\njobs:\n- name: j\n  plan: [{ agent: "
                 "a, messages: "
                 "[x] }]\n",
             kError, 4,
             "'max_context_bytes' must be 0 (no cap) or a positive integer");
  ExpectDiag(
      "jobs:\n- name: j\n  plan:\n  - task: t\n    run: x\n    timeout: -1s\n",
      kError, 6, "'timeout' must not be negative");
  ExpectDiag(
      "jobs:\n- name: j\n  timeout: -1h\n  plan: [{ task: t, run: x }]\n",
      kError, 3, "must not be negative");
  ExpectDiag(
      head +
          "  budget: { tokens: -3 }\njobs:\n- name: j\n  plan: [{ agent: a, "
          "messages: [x] }]\n",
      kError, 4, "'budget.tokens' must be 0 (no limit)");
}

TEST(LoaderTest, RateLimitsOnASource) {
  auto p = MustLoad(R"(agents:
- name: a
  source:
    model: mock/a
    rate_limit: { max_concurrent: 0, requests_per_minute: 500 }
  fallback:
  - { model: mock/b, rate_limit: {} }
jobs:
- name: j
  plan: [{ agent: a, messages: [x] }]
)");
  ASSERT_TRUE(p);
  const auto& limit = p->agents[0].source->rate_limit;
  ASSERT_TRUE(limit);
  EXPECT_EQ(limit->max_concurrent, 0);  // 0: no cap of that kind.
  EXPECT_EQ(limit->requests_per_minute, 500);
  EXPECT_EQ(limit->tokens_per_minute, 0);
  EXPECT_EQ(p->agents[0].source->rate_limit_line, 5);
  ASSERT_TRUE(p->agents[0].fallback[0].rate_limit);  // Headers only.
  EXPECT_EQ(p->agents[0].fallback[0].rate_limit->requests_per_minute, 0);
}

TEST(LoaderTest, ProviderProtectionsRefuseBadValues) {
  const std::string tail =
      "jobs:\n- name: j\n  plan: [{ agent: a, messages: [x] }]\n";
  auto entry = [&](const std::string& lines) {
    return "agents:\n- name: a\n  source: { model: mock/a }\n" + lines + tail;
  };
  ExpectDiag(
      "agents:\n- name: a\n  source: { model: mock/a, rate_limit: { "
      "requests_per_minute: -1 } }\n" +
          tail,
      kError, 3,
      "'source.rate_limit.requests_per_minute' must be 0 (no limit) or "
      "a positive integer of at most 1099511627776");
  ExpectDiag(
      "agents:\n- name: a\n  source: { model: mock/a, rate_limit: { "
      "max_concurrent: 2000000000000 } }\n" +
          tail,
      kError, 3, "of at most 1099511627776");
  ExpectDiag(
      "agents:\n- name: a\n  source: { cli: my-agent, rate_limit: {} "
      "}\n" +
          tail,
      kError, 3, "'source.rate_limit' is for hosted models: a CLI source");
  ExpectDiag(
      "agents:\n- name: a\n  source: { model: mock/a, rate_limit: 5 "
      "}\n" +
          tail,
      kError, 3, "'source.rate_limit' must be a mapping such as");
  ExpectDiag(entry("  retry_budget: { ratio: 1.5 }\n"), kError, 4,
             "'retry_budget.ratio' must be a number from 0 to 1");
  ExpectDiag(entry("  retry_budget: { ratio: -0.1 }\n"), kError, 4,
             "'retry_budget.ratio' must be a number from 0 to 1");
  ExpectDiag(entry("  retry_budget: { min_retries: -1 }\n"), kError, 4,
             "'retry_budget.min_retries' must be 0 (no minimum)");
  ExpectDiag(entry("  circuit: { failures: 2000000000000 }\n"), kError, 4,
             "'circuit.failures' must be a positive integer of at most "
             "1099511627776");
  ExpectDiag(entry("  circuit: { failures: 0 }\n"), kError, 4,
             "'circuit.failures' must be a positive integer");
  ExpectDiag(entry("  circuit: { probe_after: -1s }\n"), kError, 4,
             "'circuit.probe_after' must not be negative");
  ExpectDiag("defaults:\n  circuit: [5]\n" + entry(""), kError, 2,
             "'defaults.circuit' must be a mapping such as { failures: 5, "
             "probe_after: 5s }");
  ExpectDiag(entry("  circuit: { failure: 3 }\n"), kWarning, 4,
             "unknown key 'failure'");
}

TEST(LoaderTest, AttemptsZeroIsALoadError) {
  ExpectDiag(
      "jobs:\n- name: j\n  plan:\n  - task: t\n    run: x\n    attempts: 0\n",
      kError, 6, "'attempts' must be a positive integer");
  ExpectDiag(
      "agents:\n- name: a\n  source: { model: mock/a }\n  attempts: "
      "0\njobs:\n- name: j\n  "
      "plan: [{ agent: a, messages: [x] }]\n",
      kError, 4, "'attempts' must be a positive integer");
}

TEST(LoaderTest, MaxTurnsAndContextZeroMeanNoCap) {
  auto p = MustLoad(R"(agents:
- name: a
  source: { model: mock/a }
  max_turns: 0
  max_context_bytes: 0
jobs:
- name: j
  plan: [{ agent: a, messages: [x] }]
)");
  ASSERT_TRUE(p);
  EXPECT_EQ(*p->agents[0].max_turns, 0);
  EXPECT_EQ(*p->agents[0].max_context_bytes, 0);
}

TEST(LoaderTest, DurationNeedsAUnitOnTimeout) {
  ExpectDiag(
      "jobs:\n- name: j\n  plan:\n  - task: t\n    run: x\n    timeout: 30\n",
      kError, 6, "'timeout' needs a unit: write e.g. 30s");
  ExpectDiag(
      "jobs:\n- name: j\n  plan:\n  - task: t\n    run: x\n    timeout: 1.5h\n",
      kError, 6, "invalid duration '1.5h'");
}

TEST(LoaderTest, RetryRefusalsUseTheSpecWording) {
  auto retry = [](const std::string& body) {
    return "jobs:\n- name: j\n  plan:\n  - task: fetch\n    run: x\n    "
           "timeout: 30s\n"
           "    retry:\n" +
           body;
  };
  ExpectDiag(retry("      max_attempts: 0\n"), kError, 8,
             "'retry.max_attempts' must be a positive integer");
  ExpectDiag(retry("      backoff: random\n"), kError, 8,
             "'retry.backoff' must be 'fixed', 'linear', or 'exponential'");
  ExpectDiag(retry("      base_delay_ms: -1\n"), kError, 8,
             "'retry.base_delay_ms' must be a non-negative number");
  ExpectDiag(retry("      total_timeout_seconds: 0\n"), kError, 8,
             "'retry.total_timeout_seconds' must be a positive integer");
  ExpectDiag(retry("      on_timeout: true\n"), kError, 8,
             "Step 'fetch': 'retry.on_timeout: true' requires 'idempotent: "
             "true' declared on "
             "the step — a timeout-retry can run concurrently with the "
             "still-in-flight "
             "original attempt, so the step must explicitly attest that any "
             "partial prior "
             "application is harmless to re-apply. Declare 'idempotent: true' "
             "or remove "
             "'on_timeout'. (step at line 4)");
}

TEST(LoaderTest, OnTimeoutWithIdempotentLoads) {
  auto p = MustLoad(
      "jobs:\n- name: j\n  plan:\n  - task: fetch\n    run: x\n    timeout: "
      "1s\n"
      "    idempotent: true\n    retry: { max_attempts: 2, on_timeout: true "
      "}\n");
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->jobs[0].plan[0]->retry->on_timeout);
}

TEST(LoaderTest, RetryWarningsOfTheSpec) {
  ExpectDiag(
      "jobs:\n- name: j\n  plan:\n  - task: fetch\n    run: x\n    retry:\n"
      "      max_attempts: 2\n",
      kWarning, 6, "declares 'retry' but no 'timeout'");
  ExpectDiag(
      "jobs:\n- name: j\n  plan:\n  - task: fetch\n    run: x\n    timeout: "
      "30s\n"
      "    retry:\n      total_timeout_seconds: 10\n",
      kWarning, 8,
      "'retry.total_timeout_seconds: 10' is at or below its per-attempt "
      "timeout (30s) — "
      "each attempt is bounded by what remains of the cap");
  ExpectDiag(
      "jobs:\n- name: j\n  plan:\n  - task: fetch\n    run: x\n    timeout: "
      "30s\n"
      "    retry:\n      total_timeout_seconds: 30\n",
      kWarning, 8, "at or below");
  {
    LoadResult r = LoadPipelineText(
        "jobs:\n- name: j\n  plan:\n  - task: fetch\n    run: x\n    timeout: "
        "30s\n"
        "    retry:\n      total_timeout_seconds: 31\n",
        "t.yaml");
    EXPECT_EQ(Find(r.diagnostics, "at or below"), nullptr)
        << "31s is above 30s";
  }
  ExpectDiag(
      "jobs:\n- name: j\n  plan:\n  - task: fetch\n    run: x\n    timeout: "
      "30s\n"
      "    retry:\n      max_attempts: 2\n      jitter: true\n",
      kWarning, 9,
      "unknown key 'jitter' (line 9) — ignored (not a recognized retry "
      "field).");
  ExpectDiag(
      "agents:\n- name: a\n  source: { model: mock/a }\njobs:\n- name: j\n  "
      "plan:\n"
      "  - agent: a\n    messages: [x]\n    retry: { max_attempts: 2 }\n",
      kWarning, 9, "'retry' is inert on agent steps");
}

TEST(LoaderTest, RetryOnEnsureIsRefused) {
  ExpectDiag(R"(jobs:
- name: j
  plan:
  - task: t
    run: x
    ensure:
      task: cleanup
      run: x
      retry: { max_attempts: 2 }
)",
             kError, 9, "'retry' is refused on an 'ensure' hook step");
  // The same hook on a job, and a step nested inside an ensure block.
  ExpectDiag(R"(jobs:
- name: j
  plan: [{ task: t, run: x }]
  ensure:
    do:
    - task: cleanup
      run: x
      retry: { max_attempts: 2 }
)",
             kError, 8, "'retry' is refused on an 'ensure' hook step");
  // Other hooks may retry.
  EXPECT_TRUE(MustLoad(R"(jobs:
- name: j
  plan: [{ task: t, run: x }]
  on_failure:
    task: notify
    run: x
    timeout: 5s
    retry: { max_attempts: 2 }
)"));
}

TEST(LoaderTest, AttemptsAndMaxAttemptsTogetherIsAnError) {
  ExpectDiag(
      "jobs:\n- name: j\n  plan:\n  - task: t\n    run: x\n    timeout: 1s\n"
      "    attempts: 2\n    retry: { max_attempts: 3 }\n",
      kError, 7, "both 'attempts' and 'retry.max_attempts'");
}

TEST(LoaderTest, StepLineIsAppendedAwayFromTheStep) {
  LoadResult r = LoadPipelineText(
      "jobs:\n- name: j\n  plan:\n  - task: t\n    run: x\n    attempts: 0\n",
      "t.yaml");
  const Diagnostic* d = Find(r.diagnostics, "'attempts'");
  ASSERT_NE(d, nullptr);
  EXPECT_NE(d->message.find("(step at line 4)"), std::string::npos)
      << d->message;
  EXPECT_EQ(r.diagnostics.Format(*d).rfind("t.yaml:6: error: ", 0), 0u);
}

TEST(LoaderTest, RouteTargetAndInputsMustExist) {
  ExpectDiag(R"(agents:
- name: a
  source: { model: mock/a }
jobs:
- name: j
  plan:
  - agent: a
    messages: [x]
    to: nowhere
)",
             kError, 9, "'to: nowhere' names no step of job 'j'");
  ExpectDiag(
      "jobs:\n- name: j\n  plan:\n  - task: t\n    inputs: [missing]\n    run: "
      "x\n",
      kError, 4, "input 'missing' is produced by no step");
}

TEST(LoaderTest, AssertExecutionNamingNothingWarns) {
  ExpectDiag(R"(jobs:
- name: j
  plan: [{ task: t, run: x }]
  assert:
    execution: [t, ghost]
)",
             kWarning, 5, "names 'ghost'");
  ExpectDiag(
      "jobs:\n- name: j\n  plan: [{ task: t, run: x }]\n  assert: { outcome: "
      "errored }\n",
      kError, 4, "a job never ends 'errored'");
}

TEST(LoaderTest, FileErrors) {
  LoadResult r = LoadPipelineFile("/nonexistent/pipeline.yaml");
  EXPECT_FALSE(r.pipeline);
  EXPECT_NE(Find(r.diagnostics, "cannot open"), nullptr);
  LoadResult dir = LoadPipelineFile("/");
  EXPECT_FALSE(dir.pipeline);
}

TEST(LoaderTest, SeveralDocumentsAreRefused) {
  ExpectDiag("jobs: []\n---\njobs: []\n", kError, 2,
             "more than one YAML document");
}

// A price is USD per million tokens: up to $1 a token, so that no
// answer's cost overflows; 1000000 itself is allowed.
TEST(LoaderTest, APriceAboveADollarATokenIsRefused) {
  const char* text = R"(agents:
- name: a
  source: { model: openai/m, price: { input: 1000000, output: 1.7e308 } }
jobs:
- name: j
  plan:
  - agent: a
    messages: [go]
)";
  LoadResult r = LoadPipelineText(text, "t.yaml");
  EXPECT_FALSE(r.pipeline);
  const Diagnostic* d = Find(r.diagnostics, "'source.price.output' is USD");
  ASSERT_NE(d, nullptr) << r.diagnostics.FormatAll();
  EXPECT_EQ(d->line, 3);
  EXPECT_EQ(Find(r.diagnostics, "'source.price.input'"), nullptr)
      << r.diagnostics.FormatAll();
}

TEST(LoaderTest, ADurationPastAHundredYearsIsRefused) {
  auto text = [](const std::string& timeout) {
    return "jobs:\n- name: j\n  plan:\n  - task: t\n    run: 'true'\n"
           "    timeout: " +
           timeout + "\n";
  };
  for (const char* huge : {"99999999h", "876000h1ms", "-99999999h"}) {
    LoadResult r = LoadPipelineText(text(huge), "t.yaml");
    EXPECT_FALSE(r.pipeline) << huge;
    const Diagnostic* d = Find(r.diagnostics, "'timeout' is at most 876000h");
    ASSERT_NE(d, nullptr) << huge << "\n" << r.diagnostics.FormatAll();
    EXPECT_EQ(d->line, 6);
  }
  // The bound itself loads, and its deadline is a point in the future.
  LoadResult r = LoadPipelineText(text("876000h"), "t.yaml");
  ASSERT_TRUE(r.pipeline) << r.diagnostics.FormatAll();
  ResolvedPlan plan(r.pipeline);
  const Step& t = *r.pipeline->jobs[0].plan[0];
  ASSERT_TRUE(plan.For(t).dials.timeout.value);
  const SteadyTime now = RealClock().Now();
  EXPECT_GT(now + *plan.For(t).dials.timeout.value, now);
}

}  // namespace
}  // namespace steps::pipeline
