// A step's `assert:`: what the loader refuses (with the line), and how each
// check judges a result.
#include "pipeline/step_assert.h"

#include <gtest/gtest.h>

#include "test_util.h"
#include "tools/json_schema.h"

namespace steps::pipeline {
namespace {

constexpr Severity kError = Severity::kError;

// A one-step pipeline whose step (an agent step when `agent`) has the
// assert block `body` (indented under `assert:`, starting on line 10).
std::string WithAssert(const std::string& body, bool agent = false) {
  return std::string(
             "agents:\n"
             "- name: a\n"
             "  source: { model: openai/m }\n"
             "jobs:\n"
             "- name: j\n"
             "  plan:\n") +
         (agent ? "  - agent: a\n    messages: [hi]\n"
                : "  - task: t\n    run: echo\n") +
         "    assert:\n" + body;
}
// The line of the first line of `body`.
constexpr int kBody = 10;

TEST(AssertLoaderTest, ReadsEveryKind) {
  auto p = MustLoad(WithAssert(R"(      equals: x
      contains_all: [a, b]
      contains_any: c
      not_contains: [d]
      regex: '^v\d+'
      json: { schema: { type: object } }
      tool_called: [read_file, { name: run_shell, arguments: { command: ls }, min: 1, max: 2 }]
      max_turns_used: 3
      max_tokens: 100
      max_cost: 0
      max_duration: 2m
      judge: { agent: a, rubric: good }
)",
                               true));
  ASSERT_TRUE(p);
  const StepAssert& a = *p->jobs[0].plan[0]->check;
  EXPECT_EQ(*a.equals, "x");
  EXPECT_EQ(a.contains_all->size(), 2u);
  EXPECT_EQ((*a.contains_any)[0], "c");
  EXPECT_TRUE(a.json);
  ASSERT_EQ(a.tool_called.size(), 2u);
  EXPECT_EQ(a.tool_called[1].arguments->at("command"), "ls");
  EXPECT_EQ(*a.tool_called[1].max, 2);
  EXPECT_EQ(*a.max_cost, 0);
  EXPECT_EQ(a.max_duration->count(), 120000);
  EXPECT_EQ(a.judge->agent, "a");
  EXPECT_TRUE(a.NeedsLiveRun());
}

TEST(AssertLoaderTest, UnknownKeyIsRefusedWithASuggestion) {
  ExpectDiag(WithAssert("      contains_al: [x]\n"), kError, kBody,
             "unknown key 'contains_al' in a step's assert (did you mean "
             "'contains_all'?)");
}

TEST(AssertLoaderTest, WrongTypesAreRefused) {
  ExpectDiag(WithAssert("      equals: [a]\n"), kError, kBody,
             "'assert.equals' must be a string");
  ExpectDiag(WithAssert("      contains_all: { a: b }\n"), kError, kBody,
             "'assert.contains_all' must be a list of strings");
  ExpectDiag(WithAssert("      json: maybe\n"), kError, kBody,
             "'assert.json' must be true or false");
  ExpectDiag(WithAssert("      max_tokens: lots\n", true), kError, kBody,
             "'assert.max_tokens' must be a positive integer");
  ExpectDiag(WithAssert("      judge: grader\n"), kError, kBody,
             "'assert.judge' must be a mapping {agent: NAME, rubric: TEXT}");
  ExpectDiag(WithAssert("      tool_called: [[x]]\n", true), kError, kBody,
             "each 'assert.tool_called' entry must be a tool name or a "
             "mapping");
}

TEST(AssertLoaderTest, EdgeValues) {
  ExpectDiag(WithAssert("      contains_all: []\n"), kError, kBody,
             "'assert.contains_all' must list at least one text");
  ExpectDiag(WithAssert("      not_contains: ['']\n"), kError, kBody,
             "must not hold an empty text");
  ExpectDiag(WithAssert("      regex: ''\n"), kError, kBody,
             "'assert.regex' must not be empty");
  ExpectDiag(WithAssert("      json: false\n"), kError, kBody,
             "'assert.json: false' checks nothing");
  ExpectDiag(WithAssert("      max_turns_used: 0\n", true), kError, kBody,
             "an agent that answers uses at least one turn");
  ExpectDiag(WithAssert("      max_tokens: 0\n", true), kError, kBody,
             "'assert.max_tokens' must be a positive integer");
  ExpectDiag(WithAssert("      max_cost: -1\n", true), kError, kBody,
             "'assert.max_cost' must be a number of USD, 0 or more");
  ExpectDiag(WithAssert("      max_duration: \"0\"\n"), kError, kBody,
             "'assert.max_duration' must be a positive duration");
  ExpectDiag(WithAssert("      max_duration: 30\n"), kError, kBody,
             "'assert.max_duration' needs a unit");
  ExpectDiag(WithAssert("      tool_called: { name: x, count: -1 }\n", true),
             kError, kBody, "'assert.tool_called.count' must be a count");
  ExpectDiag(
      WithAssert("      tool_called: { name: x, count: 1, max: 2 }\n", true),
      kError, kBody, "takes 'count' (exactly) or 'min'/'max', not both");
  ExpectDiag(
      WithAssert("      tool_called: { name: x, min: 3, max: 2 }\n", true),
      kError, kBody, "'min' (3) is above 'max' (2)");
  ExpectDiag(WithAssert("      tool_called: { count: 1 }\n", true), kError,
             kBody, "'assert.tool_called' needs the tool's 'name'");
  // count: 0 (never called) and max_cost: 0 (cost nothing) are allowed.
  MustLoad(
      WithAssert("      tool_called: { name: x, count: 0 }\n"
                 "      max_cost: 0\n",
                 true));
}

TEST(AssertLoaderTest, InvalidRegexIsRefusedAtLoad) {
  ExpectDiag(WithAssert("      regex: '([a-z'\n"), kError, kBody,
             "'assert.regex' is not a valid regular expression (missing ]");
  // What RE2 does not do is refused with a word on why.
  ExpectDiag(WithAssert("      regex: 'a(?=b)'\n"), kError, kBody,
             "(backreferences and lookaround are not supported)");
  ExpectDiag(WithAssert("      regex: '(a)\\1'\n"), kError, kBody,
             "(backreferences and lookaround are not supported)");
  ExpectDiag(WithAssert("      regex: '" +
                        std::string(kMaxPatternBytes + 1, 'a') + "'\n"),
             kError, kBody, "is longer than 1024 bytes");
  ExpectDiag(WithAssert("      regex: '\\pL{1000}'\n"), kError, kBody,
             "the pattern compiles too large");
}

TEST(AssertLoaderTest, InvalidSchemaIsRefusedAtLoad) {
  ExpectDiag(WithAssert("      json: { schema: { type: object, "
                        "properties: { n: { minimum: x } } } }\n"),
             kError, kBody, "assert.json.schema.properties.n.minimum");
  ExpectDiag(WithAssert("      json: { schema: { oneOf: [] } }\n"), kError,
             kBody, "unknown keyword 'oneOf'");
  ExpectDiag(WithAssert("      json: { schemas: {} }\n"), kError, kBody,
             "unknown key 'schemas' in assert.json");
}

TEST(AssertLoaderTest, AgentOnlyChecksAreRefusedOnATask) {
  for (const char* key : {"tool_called: x", "max_turns_used: 2",
                          "max_tokens: 10", "max_cost: 1"}) {
    SCOPED_TRACE(key);
    ExpectDiag(WithAssert(std::string("      ") + key + "\n"), kError, kBody,
               "applies to agent steps only, not to a task step");
  }
}

TEST(AssertLoaderTest, JudgeNeedsAKnownAgentAndARubric) {
  ExpectDiag(WithAssert("      judge: { agent: nobody, rubric: x }\n"), kError,
             kBody, "'assert.judge' names unknown agent 'nobody'");
  ExpectDiag(WithAssert("      judge: { agent: a }\n"), kError, kBody,
             "'assert.judge' needs a non-empty 'rubric'");
  ExpectDiag(WithAssert("      judge: { rubric: x }\n"), kError, kBody,
             "'assert.judge' needs 'agent'");
  ExpectDiag(WithAssert("      judge: { agent: a, rubric: x, model: y }\n"),
             kError, kBody, "unknown key 'model' in assert.judge");
}

TEST(AssertLoaderTest, AssertOnABlockIsRefused) {
  ExpectDiag(R"(jobs:
- name: j
  plan:
  - do:
    - task: t
      run: echo
    assert: { stdout: x }
)",
             kError, 7, "'assert' applies to task, get, put and agent steps");
}

// --- judging -------------------------------------------------------------

AssertSubject Task(const std::string& output, int code = 0) {
  AssertSubject s;
  s.output = output;
  s.exit_code = code;
  s.duration = Millis(10);
  return s;
}

TEST(CheckAssertTest, EveryMissIsReported) {
  StepAssert a;
  a.equals = "x";
  a.contains_all = std::vector<std::string>{"a", "z"};
  a.not_contains = std::vector<std::string>{"bad"};
  auto results = CheckAssert(a, Task("a bad day"));
  ASSERT_EQ(results.size(), 3u);
  EXPECT_FALSE(results[0].passed);
  EXPECT_FALSE(results[1].passed);
  EXPECT_EQ(results[1].detail, "the output lacks \"z\"");
  EXPECT_FALSE(results[2].passed);
  EXPECT_EQ(*DescribeMisses(results),
            "assert: the output is \"a bad day\", not \"x\"; the output lacks "
            "\"z\"; the output contains \"bad\"");
}

TEST(CheckAssertTest, RegexSearchesEveryLineWhateverItsLength) {
  StepAssert a;
  a.regex = "^ok$";
  EXPECT_TRUE(CheckAssert(a, Task("first\nok\nlast"))[0].passed);
  EXPECT_TRUE(CheckAssert(a, Task("first\nok"))[0].passed);
  auto r = CheckAssert(a, Task("not ok\nok!"))[0];
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.detail, "no line of the output matches /^ok$/");
  // A line of 4 MiB is searched (a backtracking engine would overflow its
  // stack), and a pattern that backtracks exponentially stays linear.
  a.regex = "o+$";
  EXPECT_TRUE(CheckAssert(a, Task(std::string(4 << 20, 'o')))[0].passed);
  a.regex = "^(a+)+$";
  EXPECT_FALSE(CheckAssert(a, Task(std::string(100000, 'a') + "!"))[0].passed);
  // Bytes that are not UTF-8 neither crash nor hide the rest of the line.
  a.regex = "end$";
  EXPECT_TRUE(CheckAssert(a, Task("\xff\xfe the end"))[0].passed);
}

TEST(CheckAssertTest, JsonAndSchema) {
  StepAssert a;
  a.json = true;
  EXPECT_FALSE(CheckAssert(a, Task("{nope"))[0].passed);
  a.json_schema = nlohmann::json{{"type", "object"}, {"required", {"n"}}};
  auto r = CheckAssert(a, Task("{\"m\": 1}"))[0];
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.detail,
            "the output does not match the schema: the output: missing "
            "required argument \"n\"");
}

TEST(CheckAssertTest, ToolCallsTurnsAndSpending) {
  agent::AgentResult conv;
  conv.turns = 3;
  conv.prompt_tokens = 100;
  conv.completion_tokens = 50;
  conv.usd = 0.02;
  agent::AgentTurnRecord t;
  for (const char* args :
       {R"({"path":"a.txt","x":1})", R"({"path":"b.txt"})"}) {
    agent::ToolCallRecord call;
    call.name = "read_file";
    call.arguments = args;
    t.tool_calls.push_back(call);
  }
  conv.turn_records.push_back(t);
  StepAssert a;
  ToolCalledCheck once;
  once.name = "read_file";
  once.arguments = nlohmann::json{{"path", "a.txt"}};
  once.count = 1;
  a.tool_called.push_back(once);
  ToolCalledCheck thrice;
  thrice.name = "read_file";
  thrice.min = 3;
  a.tool_called.push_back(thrice);
  ToolCalledCheck never;
  never.name = "write_file";
  a.tool_called.push_back(never);
  a.max_turns_used = 3;
  a.max_tokens = 149;
  a.max_cost = 0.01;
  AssertSubject s;
  s.kind = StepKind::kAgent;
  s.conversation = &conv;
  auto r = CheckAssert(a, s);
  ASSERT_EQ(r.size(), 6u);
  EXPECT_TRUE(r[0].passed) << r[0].detail;
  EXPECT_EQ(r[1].detail,
            "tool 'read_file' was called 2 times, expected at least 3");
  EXPECT_EQ(r[2].detail,
            "tool 'write_file' was called 0 times, expected at least 1");
  EXPECT_TRUE(r[3].passed);  // 3 turns, at most 3: the edge holds.
  EXPECT_EQ(r[4].detail, "spent 150 tokens, at most 149 allowed");
  EXPECT_EQ(r[5].detail, "cost $0.0200, at most $0.0100 allowed");
}

TEST(JudgeVerdictTest, ReadsLinesAndJson) {
  EXPECT_TRUE(ParseJudgeVerdict("PASS\nfine").passed);
  EXPECT_TRUE(ParseJudgeVerdict("  **Pass**: fine").passed);
  AssertionResult f = ParseJudgeVerdict("FAIL: no version named\nmore");
  EXPECT_FALSE(f.passed);
  EXPECT_EQ(f.detail, "the judge says FAIL: no version named");
  EXPECT_EQ(ParseJudgeVerdict("fail\n\nIt is vague.").detail,
            "the judge says FAIL: It is vague.");
  EXPECT_TRUE(ParseJudgeVerdict(R"({"pass": true, "reason": "ok"})").passed);
  EXPECT_EQ(ParseJudgeVerdict("```json\n{\"pass\": false, \"reason\": "
                              "\"vague\"}\n```")
                .detail,
            "the judge says FAIL: vague");
}

TEST(JudgeVerdictTest, GarbageIsAMissThatSaysSo) {
  for (const char* answer :
       {"", "Looks fine to me", "PASSED", "{\"pass\": 1}", "maybe PASS"}) {
    SCOPED_TRACE(answer);
    AssertionResult r = ParseJudgeVerdict(answer);
    EXPECT_FALSE(r.passed);
    EXPECT_NE(r.detail.find("the judge answered no verdict"), std::string::npos)
        << r.detail;
  }
}

}  // namespace
}  // namespace steps::pipeline
