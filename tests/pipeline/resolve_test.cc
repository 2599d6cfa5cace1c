#include "pipeline/resolve.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace steps::pipeline {
namespace {

// A pipeline with one agent entry whose dials are `entry` and one step whose
// dials are `step` (YAML lines, each indented for its place).
ResolvedDials AgentDials(const std::string& entry, const std::string& step,
                         const std::string& source = "{ model: mock/a }") {
  std::string text =
      "agents:\n- name: a\n  source: " + source + "\n" + entry +
      "jobs:\n- name: j\n  plan:\n  - agent: a\n    messages: [x]\n" + step;
  auto p = MustLoad(text);
  if (!p) return {};
  ResolvedPlan plan(p);
  return plan.For(*p->jobs[0].plan[0]).dials;
}

TEST(ResolveTest, AgentPackageDefaults) {
  ResolvedDials d = AgentDials("", "");
  EXPECT_EQ(*d.timeout.value, std::chrono::minutes(30))
      << "the one implicit deadline";
  EXPECT_EQ(d.timeout.origin, DialOrigin::kPackageDefault);
  EXPECT_EQ(d.attempts.value, 3);
  EXPECT_EQ(d.attempts.origin, DialOrigin::kPackageDefault);
  EXPECT_EQ(*d.max_turns.value, 30);
  EXPECT_EQ(*d.max_context_bytes.value, kDefaultMaxContextBytes);
  EXPECT_FALSE(d.llm_timeout.value.has_value());
  EXPECT_EQ(*d.tool_timeout.value, std::chrono::seconds(30));
  EXPECT_FALSE(d.budget.value.has_value());
}

TEST(ResolveTest, ProviderProtectionsAreOffUntilDeclared) {
  ResolvedDials d = AgentDials("", "");
  EXPECT_FALSE(d.retry_budget.value);
  EXPECT_FALSE(d.circuit.value);
  EXPECT_EQ(d.retry_budget.origin, DialOrigin::kPackageDefault);
}

TEST(ResolveTest, ProviderProtectionsComeFromTheEntryThenDefaults) {
  auto load = [](const std::string& defaults, const std::string& entry) {
    auto p =
        MustLoad("defaults:\n  env: {}\n" + defaults +
                 "agents:\n- name: a\n  source: { model: mock/a }\n" + entry +
                 "jobs:\n- name: j\n  plan:\n  - agent: a\n"
                 "    messages: [x]\n");
    ResolvedPlan plan(p);
    return plan.For(*p->jobs[0].plan[0]).dials;
  };
  ResolvedDials d = load(
      "  retry_budget: { ratio: 0.5, min_retries: 1 }\n"
      "  circuit: {}\n",
      "");
  ASSERT_TRUE(d.retry_budget.value);
  EXPECT_EQ(d.retry_budget.value->ratio, 0.5);
  EXPECT_EQ(d.retry_budget.value->min_retries, 1);
  EXPECT_EQ(d.retry_budget.origin, DialOrigin::kDefaults);
  EXPECT_EQ(d.retry_budget.line, 3);
  ASSERT_TRUE(d.circuit.value);  // Empty: every default.
  EXPECT_EQ(d.circuit.value->failures, 5);
  EXPECT_EQ(d.circuit.value->probe_after, Millis(5000));
  d = load("  retry_budget: { ratio: 0.5 }\n",
           "  retry_budget: { min_retries: 0 }\n"
           "  circuit: { failures: 2, probe_after: \"0\" }\n");
  ASSERT_TRUE(d.retry_budget.value);
  EXPECT_EQ(d.retry_budget.value->ratio, 0.2);  // The entry's, whole.
  EXPECT_EQ(d.retry_budget.value->min_retries, 0);
  EXPECT_EQ(d.retry_budget.origin, DialOrigin::kAgentEntry);
  EXPECT_EQ(d.circuit.value->failures, 2);
  EXPECT_EQ(d.circuit.value->probe_after, Millis(0));
}

TEST(ResolveTest, CliSourceHasNoTurnCapByDefault) {
  ResolvedDials d = AgentDials("", "", "{ cli: my-agent }");
  EXPECT_FALSE(d.max_turns.value.has_value());
  EXPECT_EQ(d.max_turns.origin, DialOrigin::kPackageDefault);
}

TEST(ResolveTest, EntryBeatsDefault) {
  ResolvedDials d = AgentDials(
      "  timeout: 20m\n  attempts: 5\n  max_turns: 50\n  max_context_bytes: "
      "100\n"
      "  llm_timeout: 1m\n  tool_timeout: 5s\n  budget: { tokens: 9 }\n",
      "");
  EXPECT_EQ(*d.timeout.value, std::chrono::minutes(20));
  EXPECT_EQ(d.timeout.origin, DialOrigin::kAgentEntry);
  EXPECT_EQ(d.timeout.line, 4);
  EXPECT_EQ(d.attempts.value, 5);
  EXPECT_EQ(d.attempts.origin, DialOrigin::kAgentEntry);
  EXPECT_EQ(*d.max_turns.value, 50);
  EXPECT_EQ(d.max_turns.origin, DialOrigin::kAgentEntry);
  EXPECT_EQ(*d.max_context_bytes.value, 100);
  EXPECT_EQ(*d.llm_timeout.value, std::chrono::minutes(1));
  EXPECT_EQ(*d.tool_timeout.value, std::chrono::seconds(5));
  EXPECT_EQ(*d.budget.value->tokens, 9);
  EXPECT_EQ(d.budget.origin, DialOrigin::kAgentEntry);
}

TEST(ResolveTest, StepBeatsEntry) {
  ResolvedDials d = AgentDials(
      "  timeout: 20m\n  attempts: 5\n  max_turns: 50\n  max_context_bytes: "
      "100\n"
      "  llm_timeout: 1m\n  tool_timeout: 5s\n  budget: { tokens: 9 }\n",
      "    timeout: 45m\n    attempts: 2\n    max_turns: 7\n    "
      "max_context_bytes: 200\n"
      "    llm_timeout: 2m\n    tool_timeout: 6s\n    budget: { usd: 1 }\n");
  EXPECT_EQ(*d.timeout.value, std::chrono::minutes(45));
  EXPECT_EQ(d.timeout.origin, DialOrigin::kStep);
  EXPECT_EQ(d.attempts.value, 2);
  EXPECT_EQ(d.attempts.origin, DialOrigin::kStep);
  EXPECT_EQ(*d.max_turns.value, 7);
  EXPECT_EQ(d.max_turns.origin, DialOrigin::kStep);
  EXPECT_EQ(*d.max_context_bytes.value, 200);
  EXPECT_EQ(*d.llm_timeout.value, std::chrono::minutes(2));
  EXPECT_EQ(*d.tool_timeout.value, std::chrono::seconds(6));
  EXPECT_EQ(*d.budget.value->usd, 1.0);
  EXPECT_EQ(d.budget.origin, DialOrigin::kStep);
}

TEST(ResolveTest, ZeroMeansNoLimitAtEachLevel) {
  ResolvedDials entry = AgentDials(
      "  timeout: \"0\"\n  max_turns: 0\n  max_context_bytes: 0\n  "
      "tool_timeout: \"0\"\n",
      "");
  EXPECT_FALSE(entry.timeout.value.has_value())
      << "\"0\" is no deadline, not the 30m default";
  EXPECT_EQ(entry.timeout.origin, DialOrigin::kAgentEntry);
  EXPECT_FALSE(entry.max_turns.value.has_value());
  EXPECT_FALSE(entry.max_context_bytes.value.has_value());
  EXPECT_FALSE(entry.tool_timeout.value.has_value());
  // A step's "0" beats an entry's value; a step's value beats an entry's "0".
  ResolvedDials step_zero =
      AgentDials("  timeout: 20m\n", "    timeout: \"0\"\n");
  EXPECT_FALSE(step_zero.timeout.value.has_value());
  EXPECT_EQ(step_zero.timeout.origin, DialOrigin::kStep);
  ResolvedDials step_value =
      AgentDials("  timeout: \"0\"\n", "    timeout: 1m\n");
  EXPECT_EQ(*step_value.timeout.value, std::chrono::minutes(1));
}

TEST(ResolveTest, DeletingATimeoutFallsBackToThirtyMinutes) {
  // Spec text 002: removing timeout: 45m leaves 30m, not "no limit".
  ResolvedDials d = AgentDials("", "");
  EXPECT_EQ(*d.timeout.value, std::chrono::minutes(30));
}

TEST(ResolveTest, SpecDeepReviewerExample) {
  auto p = MustLoad(R"(agents:
- name: deep-reviewer
  timeout: 20m
  attempts: 5
  max_turns: 50
  source: { model: openrouter/qwen/qwen3.7-flash }
jobs:
- name: review
  plan:
  - agent: deep-reviewer
    messages: ["Review the diff for correctness."]
  - agent: deep-reviewer
    messages: ["Now review it for security."]
    timeout: 45m
)");
  ASSERT_TRUE(p);
  ResolvedPlan plan(p);
  const ResolvedDials& first = plan.For(*p->jobs[0].plan[0]).dials;
  const ResolvedDials& second = plan.For(*p->jobs[0].plan[1]).dials;
  for (const ResolvedDials* d : {&first, &second}) {
    EXPECT_EQ(d->attempts.value, 5);
    EXPECT_EQ(*d->max_turns.value, 50);
  }
  EXPECT_EQ(*first.timeout.value, std::chrono::minutes(20));
  EXPECT_EQ(*second.timeout.value, std::chrono::minutes(45));
}

TEST(ResolveTest, TasksHaveNoDefaultDeadlineAndOneAttempt) {
  auto p = MustLoad(R"(jobs:
- name: j
  plan:
  - task: plain
    run: x
  - task: bounded
    run: x
    timeout: 5m
    attempts: 2
  - task: retried
    run: x
    timeout: 1s
    retry: { max_attempts: 4, backoff: linear, base_delay_ms: 100, total_timeout_seconds: 9 }
)");
  ASSERT_TRUE(p);
  ResolvedPlan plan(p);
  const ResolvedStep& plain = plan.For(*p->jobs[0].plan[0]);
  EXPECT_FALSE(plain.dials.timeout.value.has_value());
  EXPECT_EQ(plain.dials.attempts.value, 1);
  EXPECT_EQ(plain.dials.attempts.origin, DialOrigin::kPackageDefault);
  const ResolvedStep& bounded = plan.For(*p->jobs[0].plan[1]);
  EXPECT_EQ(*bounded.dials.timeout.value, std::chrono::minutes(5));
  EXPECT_EQ(bounded.dials.attempts.value, 2);
  EXPECT_EQ(bounded.dials.attempts.origin, DialOrigin::kStep);
  const ResolvedStep& retried = plan.For(*p->jobs[0].plan[2]);
  EXPECT_EQ(retried.dials.attempts.value, 4);
  EXPECT_EQ(retried.dials.attempts.origin, DialOrigin::kRetryBlock);
  EXPECT_EQ(retried.retry_waits,
            (std::vector<Millis>{Millis(100), Millis(200), Millis(300)}));
  EXPECT_EQ(*retried.total_timeout, std::chrono::seconds(9));
}

// A fixer's attempts: fix: {attempts}, then its agent entry's, then 1 (not
// an agent step's 3); its timeout comes from the entry the same way.
TEST(ResolveTest, FixerHasItsOwnAttempts) {
  auto p = MustLoad(R"(agents:
- name: fixer
  source: { model: mock/f }
  attempts: 4
- name: plain
  source: { model: mock/p }
jobs:
- name: j
  plan:
  - task: one
    run: x
    fix: fixer
  - task: two
    run: x
    fix: { agent: fixer, attempts: 2 }
  - task: three
    run: x
    fix: plain
)");
  ASSERT_TRUE(p);
  ResolvedPlan plan(p);
  const ResolvedStep& one = plan.For(*p->jobs[0].plan[0]);
  ASSERT_TRUE(one.fix_dials);
  EXPECT_EQ(one.fix_dials->attempts.value, 4);
  EXPECT_EQ(one.fix_dials->attempts.origin, DialOrigin::kAgentEntry);
  EXPECT_EQ(*one.fix_dials->timeout.value, std::chrono::minutes(30));
  const ResolvedStep& two = plan.For(*p->jobs[0].plan[1]);
  EXPECT_EQ(two.fix_dials->attempts.value, 2);
  EXPECT_EQ(two.fix_dials->attempts.origin, DialOrigin::kFix);
  const ResolvedStep& three = plan.For(*p->jobs[0].plan[2]);
  ASSERT_TRUE(three.fix_dials);
  EXPECT_EQ(three.fix_dials->attempts.value, 1);
  EXPECT_EQ(three.fix_dials->attempts.origin, DialOrigin::kPackageDefault);
}

TEST(ResolveTest, HooksAndNestedStepsAreResolved) {
  auto p = MustLoad(R"(jobs:
- name: j
  plan:
  - do:
    - task: inner
      run: x
      timeout: 3s
      on_failure: { task: hook, run: x, timeout: 2s }
  ensure: { task: tidy, run: x, timeout: 1s }
)");
  ASSERT_TRUE(p);
  ResolvedPlan plan(p);
  const Step& inner = *p->jobs[0].plan[0]->steps[0];
  EXPECT_EQ(*plan.For(inner).dials.timeout.value, std::chrono::seconds(3));
  EXPECT_EQ(*plan.For(*inner.hooks.on_failure).dials.timeout.value,
            std::chrono::seconds(2));
  EXPECT_EQ(*plan.For(*p->jobs[0].hooks.ensure).dials.timeout.value,
            std::chrono::seconds(1));
}

}  // namespace
}  // namespace steps::pipeline
