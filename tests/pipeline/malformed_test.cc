// Truncated, random and hostile YAML: the loader answers with an error and
// never crashes or hangs (run under ASan/UBSan in CI).
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "pipeline/explain.h"
#include "pipeline/loader.h"
#include "pipeline/resolve.h"

namespace steps::pipeline {
namespace {

const char kValid[] = R"(agents:
- name: a
  source: { model: mock/a, price: { input: 1, output: 2 } }
  fallback: [{ cli: "x" }]
  budget: { tokens: 10 }
resource_types:
- name: t
  config: { check: "echo '[]'", in: "true", out: "true" }
resources:
- name: r
  type: t
  source: { a: [1, 2, { b: c }] }
jobs:
- name: j
  timeout: 1h
  on_failure: { task: f, run: x }
  plan:
  - get: r
    params: { x: 1 }
  - task: t
    run: "echo t"
    timeout: 1s
    retry: { max_attempts: 3, backoff: linear, base_delay_ms: 5, total_timeout_seconds: 2 }
  - agent: a
    messages: [hi]
  - in_parallel: { limit: 2, steps: [{ task: p, run: x }] }
  - across: [{ var: v, values: [1, 2] }]
    do: [{ task: c, run: "echo {{ .v | shellquote }}" }]
  assert: { execution: [r, t], outcome: succeeded }
)";

// Loading must end with either a pipeline or at least one error, and a
// loaded pipeline must resolve and explain without trouble.
void LoadAndUse(const std::string& text) {
  LoadResult r = LoadPipelineText(text, "fuzz.yaml");
  if (r.pipeline) {
    ResolvedPlan plan(r.pipeline);
    (void)Explain(plan, {});
  } else {
    EXPECT_TRUE(r.diagnostics.has_errors());
  }
  (void)r.diagnostics.FormatAll();
}

TEST(MalformedTest, ValidBaselineLoads) {
  LoadResult r = LoadPipelineText(kValid, "v.yaml");
  ASSERT_TRUE(r.pipeline) << r.diagnostics.FormatAll();
}

TEST(MalformedTest, EveryTruncation) {
  std::string text = kValid;
  for (size_t n = 0; n <= text.size(); ++n) LoadAndUse(text.substr(0, n));
}

TEST(MalformedTest, RandomByteMutations) {
  std::mt19937 rng(12345);  // Fixed seed: failures reproduce.
  const std::string base = kValid;
  const std::string alphabet = "{}[]:-,&*!|>'\"#%@` \n\t0aZ\\";
  for (int i = 0; i < 3000; ++i) {
    std::string t = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % t.size();
      switch (rng() % 3) {
        case 0:
          t[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          t.erase(pos, 1 + rng() % 8);
          break;
        default:
          t.insert(pos, 1, alphabet[rng() % alphabet.size()]);
      }
      if (t.empty()) t = "x";
    }
    LoadAndUse(t);
  }
}

TEST(MalformedTest, RandomGarbage) {
  std::mt19937 rng(999);
  for (int i = 0; i < 500; ++i) {
    std::string t(rng() % 400, ' ');
    for (char& c : t) c = static_cast<char>(1 + rng() % 255);
    LoadAndUse(t);
  }
}

TEST(MalformedTest, DeepNestingIsRefusedNotACrash) {
  for (int depth : {100, 1000, 100000}) {
    LoadResult flow = LoadPipelineText(
        "jobs: " + std::string(depth, '[') + std::string(depth, ']'), "d.yaml");
    EXPECT_FALSE(flow.pipeline);
    std::string maps =
        "resource_types: [{ name: t, config: { in: x } }]\nresources: [{ name: "
        "r, type: t }]\n"
        "jobs:\n- name: j\n  plan:\n  - get: r\n    params: ";
    for (int i = 0; i < depth; ++i) maps += "{a: ";
    maps += "1" + std::string(depth, '}') + "\n";
    LoadResult nested = LoadPipelineText(maps, "d.yaml");
    EXPECT_FALSE(nested.pipeline) << depth;
  }
}

TEST(MalformedTest, HugeScalarsAndFiles) {
  std::string big = "jobs:\n- name: j\n  plan:\n  - task: t\n    run: \"" +
                    std::string(1 << 20, 'x') + "\"\n";
  LoadResult r = LoadPipelineText(big, "big.yaml");
  EXPECT_TRUE(r.pipeline) << "a 1 MiB script is large but legitimate";
  LoadResult too_big =
      LoadPipelineText(std::string(kMaxPipelineBytes + 1, '#'), "huge.yaml");
  EXPECT_FALSE(too_big.pipeline);
  EXPECT_NE(too_big.diagnostics.FormatAll().find("limited to"),
            std::string::npos);
}

TEST(MalformedTest, AliasBombIsRefusedQuickly) {
  // Each level multiplies by ten: expanded, the last alias is 10^9 nodes.
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 9; ++i) {
    std::string prev = "*a" + std::to_string(i - 1);
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) bomb += (k ? ", " : "") + prev;
    bomb += "]\n";
  }
  auto start = std::chrono::steady_clock::now();
  // Where the loader expands values: params, resource source, messages.
  LoadResult params =
      LoadPipelineText(bomb +
                           "jobs:\n- name: j\n  plan:\n  - task: t\n    run: "
                           "x\n    params: *a9\n",
                       "b.yaml");
  LoadResult source =
      LoadPipelineText(bomb +
                           "resource_types: [{ name: t, config: { in: x } }]\n"
                           "resources: [{ name: r, type: t, source: { s: *a9 } "
                           "}]\njobs: [{ name: j, plan: "
                           "[{ get: r }] }]\n",
                       "b.yaml");
  LoadResult messages = LoadPipelineText(
      bomb +
          "agents: [{ name: a, source: { model: mock/a } }]\n"
          "jobs: [{ name: j, plan: [{ agent: a, messages: *a9 }] }]\n",
      "b.yaml");
  EXPECT_FALSE(source.pipeline);
  EXPECT_FALSE(messages.pipeline);
  EXPECT_FALSE(params.pipeline);
  // Refused as a document, at the first alias that passes the budget, before
  // any key reads a value.
  EXPECT_NE(source.diagnostics.FormatAll().find(
                "b.yaml:6: error: alias *a4 takes the document past"),
            std::string::npos)
      << source.diagnostics.FormatAll();
  // Generous bound: the refusal is immediate, expansion would take hours.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(MalformedTest, HostileScalarsInEveryTypedSlot) {
  const char* values[] = {"",      "~",
                          "-",     "0x10",
                          "1e400", "nan",
                          "-0",    "99999999999999999999",
                          "[]",    "{}",
                          "'0'",   "!!binary aGk=",
                          "&x 1",  "*undefined_alias"};
  for (const char* v : values) {
    for (const char* key :
         {"timeout", "attempts", "max_turns", "max_context_bytes",
          "llm_timeout", "tool_timeout", "budget"}) {
      LoadAndUse(
          std::string("agents:\n- name: a\n  source: { model: mock/a }\n  ") +
          key + ": " + v +
          "\njobs:\n- name: j\n  plan: [{ agent: a, messages: [x] }]\n");
    }
    for (const char* key :
         {"max_attempts", "backoff", "base_delay_ms", "max_delay_ms",
          "on_timeout", "total_timeout_seconds"}) {
      LoadAndUse(
          std::string("jobs:\n- name: j\n  plan:\n  - task: t\n    run: x\n    "
                      "timeout: 1s\n    retry:\n      ") +
          key + ": " + v + "\n");
    }
  }
}

}  // namespace
}  // namespace steps::pipeline
