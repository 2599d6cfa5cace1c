#include "pipeline/explain.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace steps::pipeline {
namespace {

struct Loaded {
  std::shared_ptr<const Pipeline> p;
  std::unique_ptr<ResolvedPlan> plan;
};

Loaded Load(const std::string& text) {
  Loaded l;
  l.p = MustLoad(text);
  if (l.p) l.plan = std::make_unique<ResolvedPlan>(l.p);
  return l;
}

TEST(ExplainTest, TaskBoundIsAttemptsTimesTimeoutPlusWaits) {
  Loaded l = Load(R"(jobs:
- name: j
  plan:
  - task: t
    run: x
    timeout: 30s
    retry: { max_attempts: 3, backoff: exponential, base_delay_ms: 1000, max_delay_ms: 5000 }
)");
  ASSERT_TRUE(l.p);
  Bound b = StepBound(*l.plan, *l.p->jobs[0].plan[0]);
  ASSERT_TRUE(b.bounded());
  // Each attempt may outlive its timeout by the 2s kill grace.
  EXPECT_EQ(*b.value, Millis(3 * (30000 + 2000) + 1000 + 2000));
}

TEST(ExplainTest, TotalTimeoutCapsTheBound) {
  Loaded l = Load(R"(jobs:
- name: j
  plan:
  - task: t
    run: x
    timeout: 30s
    retry: { max_attempts: 3, total_timeout_seconds: 45 }
)");
  ASSERT_TRUE(l.p);
  EXPECT_EQ(*StepBound(*l.plan, *l.p->jobs[0].plan[0]).value,
            Millis(45000 + 2000));
}

TEST(ExplainTest, TaskWithoutTimeoutIsUnboundedWithTheReason) {
  Loaded l = Load(
      "jobs:\n- name: j\n  timeout: 1h\n  plan:\n  - task: t\n    run: x\n");
  ASSERT_TRUE(l.p);
  Bound b = StepBound(*l.plan, *l.p->jobs[0].plan[0]);
  EXPECT_FALSE(b.bounded());
  EXPECT_NE(b.why.find("no default timeout"), std::string::npos) << b.why;
  Bound job = JobBound(*l.plan, l.p->jobs[0]);
  EXPECT_FALSE(job.bounded()) << "a job timeout never cuts a running step";
  EXPECT_NE(job.why.find("checked between steps"), std::string::npos)
      << job.why;
}

TEST(ExplainTest, AgentBoundIsItsDeadlineOrUnbounded) {
  Loaded l = Load(R"(agents:
- name: a
  source: { model: mock/a }
  attempts: 5
- name: m
  source: { model: mock/m }
  timeout: "0"
jobs:
- name: j
  plan:
  - agent: a
    messages: [x]
  - agent: m
    messages: [x]
)");
  ASSERT_TRUE(l.p);
  EXPECT_EQ(*StepBound(*l.plan, *l.p->jobs[0].plan[0]).value,
            std::chrono::minutes(30))
      << "attempts never multiply an agent's deadline";
  Bound m = StepBound(*l.plan, *l.p->jobs[0].plan[1]);
  EXPECT_FALSE(m.bounded());
  EXPECT_NE(m.why.find("no deadline"), std::string::npos);
}

TEST(ExplainTest, JobTimeoutBoundsAtTimeoutPlusLongestStep) {
  Loaded l = Load(R"(jobs:
- name: j
  timeout: 1m
  plan:
  - { task: a, run: x, timeout: 50s }
  - { task: b, run: x, timeout: 50s }
  - { task: c, run: x, timeout: 50s }
)");
  ASSERT_TRUE(l.p);
  Bound b = JobBound(*l.plan, l.p->jobs[0]);
  EXPECT_EQ(*b.value, Millis(60000 + 52000));
  Loaded loose = Load(R"(jobs:
- name: j
  timeout: 1h
  plan:
  - { task: a, run: x, timeout: 50s }
  - { task: b, run: x, timeout: 50s }
)");
  EXPECT_EQ(*JobBound(*loose.plan, loose.p->jobs[0]).value, Millis(104000));
}

TEST(ExplainTest, ParallelAndAcrossBounds) {
  Loaded l = Load(R"(jobs:
- name: j
  plan:
  - in_parallel:
    - { task: a, run: x, timeout: 10s }
    - { task: b, run: x, timeout: 20s }
    - { task: c, run: x, timeout: 30s }
  - in_parallel:
      limit: 1
      steps:
      - { task: a, run: x, timeout: 10s }
      - { task: b, run: x, timeout: 20s }
  - across:
    - { var: v, values: [1, 2, 3, 4], max_in_flight: 2 }
    do:
    - { task: cell, run: x, timeout: 10s }
)");
  ASSERT_TRUE(l.p);
  const auto& plan = l.p->jobs[0].plan;
  // Each task's bound is its timeout plus the 2s kill grace.
  EXPECT_EQ(*StepBound(*l.plan, *plan[0]).value, Millis(32000))
      << "all at once: the longest";
  EXPECT_EQ(*StepBound(*l.plan, *plan[1]).value, Millis(34000))
      << "one at a time: the sum";
  EXPECT_EQ(*StepBound(*l.plan, *plan[2]).value, Millis(36000))
      << "4 cells of 10s, 2 in flight: total/2 + longest";
}

TEST(ExplainTest, HooksAddToTheBound) {
  Loaded l = Load(R"(jobs:
- name: j
  plan:
  - task: t
    run: x
    timeout: 10s
    on_failure: { task: f, run: x, timeout: 3s }
    on_success: { task: s, run: x, timeout: 1s }
    ensure: { task: e, run: x, timeout: 2s }
)");
  ASSERT_TRUE(l.p);
  EXPECT_EQ(*StepBound(*l.plan, *l.p->jobs[0].plan[0]).value,
            Millis(12000 + 5000 + 4000));
}

TEST(ExplainTest, FixerRunsBetweenAttempts) {
  Loaded l = Load(R"(agents:
- name: fixer
  source: { model: mock/f }
  timeout: 2m
jobs:
- name: j
  plan:
  - task: t
    run: x
    timeout: 1m
    attempts: 2
    fix: fixer
)");
  ASSERT_TRUE(l.p);
  EXPECT_EQ(*StepBound(*l.plan, *l.p->jobs[0].plan[0]).value,
            Millis(2 * (2 * 62000 + 120000)));
}

// A judge grades each attempt's output after it: its deadline adds to every
// attempt, its rows say where each limit comes from, and a judge without a
// deadline leaves the step unbounded.
TEST(ExplainTest, AJudgeAddsItsDeadlineToEachAttempt) {
  const std::string head = R"(agents:
- name: grader
  source: { model: mock/g }
  timeout: 2m
  max_turns: 4
- name: endless
  source: { model: mock/e }
  timeout: "0"
- name: writer
  source: { model: mock/w }
  timeout: 5m
jobs:
- name: j
  plan:
  - task: t
    run: x
    timeout: 1m
    attempts: 2
    assert: { judge: { agent: grader, rubric: ok } }
  - agent: writer
    messages: [hi]
    assert: { judge: { agent: grader, rubric: ok } }
  - task: u
    run: x
    timeout: 1m
    assert: { judge: { agent: endless, rubric: ok } }
)";
  Loaded l = Load(head);
  ASSERT_TRUE(l.p);
  const auto& plan = l.p->jobs[0].plan;
  EXPECT_EQ(*StepBound(*l.plan, *plan[0]).value, Millis(2 * (62000 + 120000)));
  EXPECT_EQ(*StepBound(*l.plan, *plan[1]).value, Millis(300000 + 120000));
  Bound endless = StepBound(*l.plan, *plan[2]);
  EXPECT_FALSE(endless.bounded());
  EXPECT_EQ(endless.why, "its judge 'endless' has no deadline");
  const std::string text = Explain(*l.plan, {});
  for (const char* want :
       {"judge              grader        assert judge (line 19)",
        "judge timeout      2m            agent entry (line 4), its whole "
        "conversation",
        "judge max_turns    4             agent entry (line 5)",
        "judge attempts     3             default",
        "2 × (1m + kill grace 2s + judge 2m)",
        "the conversation's deadline 5m + judge 2m",
        "judge timeout      none          agent entry (line 8): the judge has "
        "no deadline"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
}

TEST(ExplainTest, TextShowsEveryDialWithItsOrigin) {
  Loaded l = Load(R"(agents:
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
    timeout: 45m
)");
  ASSERT_TRUE(l.p);
  std::string text = Explain(*l.plan, {});
  for (const char* want :
       {"job review", "agent deep-reviewer", "openrouter/qwen/qwen3.7-flash",
        "45m", "step (line 12)", "agent entry (line 4)", "agent entry (line 5)",
        "max_context_bytes", "256 KiB", "tool_timeout", "30s", "llm_timeout",
        "budget", "bound", "identity"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
  EXPECT_EQ(Explain(*l.plan, {"nope"}), "");
}

TEST(ExplainTest, ProviderProtectionsShowWhereTheyAreDeclared) {
  Loaded l = Load(R"(defaults:
  retry_budget: { ratio: 0.25, min_retries: 2 }
agents:
- name: a
  source:
    model: mock/a
    rate_limit: { max_concurrent: 4, requests_per_minute: 600 }
  fallback:
  - { model: mock/b, rate_limit: {} }
  circuit: { failures: 3, probe_after: 2s }
- name: plain
  source: { model: mock/p }
jobs:
- name: j
  plan:
  - agent: a
    messages: [x]
  - agent: plain
    messages: [x]
)");
  ASSERT_TRUE(l.p);
  const std::string text = Explain(*l.plan, {});
  EXPECT_NE(text.find("rate_limit         max_concurrent 4, "
                      "requests_per_minute 600  for mock/a (source, line 7)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rate_limit         the server's headers  for mock/b"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("retry_budget       ratio 0.25, min_retries 2  "
                      "defaults (line 2)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("circuit            failures 3, probe_after 2s  "
                      "agent entry (line 10)"),
            std::string::npos)
      << text;
  // The agent without a circuit of its own has the defaults' budget only.
  const std::string plain = text.substr(text.find("agent plain"));
  EXPECT_EQ(plain.find("circuit"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("rate_limit"), std::string::npos) << plain;
  EXPECT_NE(plain.find("retry_budget"), std::string::npos) << plain;
}

}  // namespace
}  // namespace steps::pipeline
