#include <gtest/gtest.h>

#include "pipeline/resolve.h"
#include "test_util.h"

namespace steps::pipeline {
namespace {

// Identity of the first step of a pipeline made of an agent entry and a step.
std::string AgentIdentity(const std::string& entry, const std::string& step) {
  auto p = MustLoad("agents:\n- name: a\n" + entry +
                    "jobs:\n- name: j\n  plan:\n  - agent: a\n" + step);
  if (!p) return "";
  return ResolvedPlan(p).For(*p->jobs[0].plan[0]).identity;
}

const std::string kEntry =
    "  source: { model: mock/one }\n  persona: careful\n  tools: [read_file, "
    "write_file]\n"
    "  max_turns: 10\n";
const std::string kStep = "    messages: [Review it.]\n";

TEST(IdentityTest, NeverHashedDialsKeepIt) {
  const std::string base = AgentIdentity(kEntry, kStep);
  ASSERT_EQ(base.size(), 64u);
  EXPECT_EQ(AgentIdentity(kEntry + "  timeout: 5m\n", kStep), base);
  EXPECT_EQ(AgentIdentity(kEntry, kStep + "    timeout: \"0\"\n"), base);
  EXPECT_EQ(AgentIdentity(kEntry + "  attempts: 7\n", kStep), base);
  EXPECT_EQ(AgentIdentity(kEntry, kStep + "    attempts: 1\n"), base);
  EXPECT_EQ(AgentIdentity(kEntry + "  max_context_bytes: 5\n", kStep), base);
  EXPECT_EQ(AgentIdentity(kEntry, kStep + "    max_context_bytes: 0\n"), base);
  EXPECT_EQ(AgentIdentity(kEntry, kStep + "    retry: { max_attempts: 3 }\n"),
            base);
  EXPECT_EQ(AgentIdentity(kEntry, kStep + "    llm_timeout: 1m\n"), base);
}

TEST(IdentityTest, WhatChangesTheWorkChangesIt) {
  const std::string base = AgentIdentity(kEntry, kStep);
  EXPECT_NE(AgentIdentity(kEntry, kStep + "    max_turns: 11\n"), base);
  EXPECT_NE(AgentIdentity(kEntry, kStep + "    max_turns: 0\n"), base);
  EXPECT_NE(AgentIdentity("  source: { model: mock/two }\n  persona: careful\n"
                          "  tools: [read_file, write_file]\n  max_turns: 10\n",
                          kStep),
            base);
  EXPECT_NE(AgentIdentity("  source: { model: mock/one }\n  persona: hasty\n"
                          "  tools: [read_file, write_file]\n  max_turns: 10\n",
                          kStep),
            base);
  EXPECT_NE(AgentIdentity("  source: { model: mock/one }\n  persona: careful\n"
                          "  tools: [read_file]\n  max_turns: 10\n",
                          kStep),
            base);
  EXPECT_NE(AgentIdentity(kEntry, "    messages: [Review it twice.]\n"), base);
  // Tool order is not part of the grant.
  EXPECT_EQ(AgentIdentity("  source: { model: mock/one }\n  persona: careful\n"
                          "  tools: [write_file, read_file]\n  max_turns: 10\n",
                          kStep),
            base);
}

TEST(IdentityTest, MaxTurnsDefaultVersusExplicitSameValue) {
  // Resolved max_turns is hashed: the default 30 and an explicit 30 are the
  // same work.
  std::string source = "  source: { model: mock/one }\n";
  EXPECT_EQ(AgentIdentity(source, kStep),
            AgentIdentity(source + "  max_turns: 30\n", kStep));
}

std::string TaskIdentity(const std::string& step) {
  auto p = MustLoad("jobs:\n- name: j\n  plan:\n  - task: t\n" + step);
  if (!p) return "";
  return ResolvedPlan(p).For(*p->jobs[0].plan[0]).identity;
}

TEST(IdentityTest, TaskCommandChangesItTimeoutAndAttemptsDoNot) {
  const std::string base = TaskIdentity("    run: make\n");
  EXPECT_EQ(TaskIdentity("    run: make\n    timeout: 5m\n"), base);
  EXPECT_EQ(TaskIdentity("    run: make\n    attempts: 3\n"), base);
  EXPECT_EQ(TaskIdentity(
                "    run: make\n    timeout: 5s\n    retry: { max_attempts: 3, "
                "backoff: linear, base_delay_ms: 9 }\n"),
            base);
  EXPECT_NE(TaskIdentity("    run: make test\n"), base);
  EXPECT_NE(TaskIdentity("    run: make\n    env: { A: b }\n"), base);
}

}  // namespace
}  // namespace steps::pipeline
