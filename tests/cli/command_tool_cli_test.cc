// Command tools through the real binary: what loading refuses (each with
// its line), `steps explain`'s row per tool, the step identity following
// the tool's definition, and a run whose model calls the tool with bad and
// good arguments.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace {

using steps::test_support::CliResult;
using steps::test_support::Has;
using steps::test_support::TempDir;

class CommandToolCliTest : public ::testing::Test {
 protected:
  // stdout and stderr together; a run past 120 s is killed.
  CliResult Steps(const std::string& args) {
    steps::test_support::StepsOptions options;
    options.kill_after = std::chrono::seconds(120);
    return steps::test_support::RunSteps(dir_.path(), args, options);
  }

  // A pipeline whose agent grants `grant`, after the given `tools:` block.
  void WritePipeline(const std::string& tools, const std::string& grant) {
    dir_.Write("p.yaml", tools +
                             "agents:\n"
                             "- name: a\n"
                             "  source: { model: mock/a }\n"
                             "  tools: [" + grant + "]\n"
                             "jobs:\n"
                             "- name: j\n"
                             "  plan:\n"
                             "  - agent: a\n"
                             "    messages: [hi]\n"
                             "mock:\n"
                             "  a: [{say: done}]\n");
  }

  TempDir dir_;
};

constexpr const char* kGoodTool =
    "tools:\n"
    "- name: greet\n"
    "  description: Greets.\n"
    "  parameters: { type: object, properties: { who: { type: string } } }\n"
    "  run: echo hi\n";

TEST_F(CommandToolCliTest, EachBadDefinitionIsRefusedWithItsLine) {
  struct Case {
    std::string tools;
    std::string message;
  } cases[] = {
      {"tools:\n- name: 'bad name'\n  description: d\n"
       "  parameters: {type: object}\n  run: x\n",
       "p.yaml:2: error: tool name 'bad name' is not allowed"},
      {"tools:\n- name: run_shell\n  description: d\n"
       "  parameters: {type: object}\n  run: x\n",
       "p.yaml:2: error: tool 'run_shell' has the name of a built-in tool"},
      {"tools:\n- name: finish\n  description: d\n"
       "  parameters: {type: object}\n  run: x\n",
       "p.yaml:2: error: tool 'finish' has the name of a built-in tool"},
      {std::string(kGoodTool) +
           "- name: greet\n  description: d\n"
           "  parameters: {type: object}\n  run: x\n",
       "p.yaml:6: error: duplicate tool 'greet' (first at line 2)"},
      {"tools:\n- name: t\n  description: d\n"
       "  parameters: {type: string}\n  run: x\n",
       "p.yaml:4: error: tool 't': parameters: must have 'type: object' at the "
       "top"},
      {"tools:\n- name: t\n  description: d\n"
       "  parameters: [1]\n  run: x\n",
       "p.yaml:4: error: tool 't': parameters: must be a mapping"},
      {"tools:\n- name: t\n  description: d\n  parameters:\n"
       "    type: object\n    properties: { u: { format: uri } }\n  run: x\n",
       "p.yaml:4: error: tool 't': parameters.properties.u: unknown keyword "
       "'format'"},
      {"tools:\n- name: t\n  description: d\n"
       "  parameters: {type: object}\n  run: x\n  timout: 5s\n",
       "p.yaml:6: error: unknown key 'timout' in tool 't'"},
      {"tools:\n- name: t\n  description: d\n"
       "  parameters: {type: object}\n  run: x\n  timeout: -1s\n",
       "p.yaml:6: error: tool 't': 'timeout' must not be negative"},
      {"tools:\n- name: t\n  description: d\n  run: x\n",
       "p.yaml:2: error: tool 't' has no 'parameters'"},
      {"tools:\n- name: t\n  parameters: {type: object}\n  run: x\n",
       "p.yaml:2: error: tool 't' has no 'description'"},
      {"tools:\n- name: t\n  description: d\n  parameters: {type: object}\n",
       "p.yaml:2: error: tool 't' has no 'run' script"},
      {"tools: {name: t}\n", "p.yaml:1: error: 'tools' must be a list"},
  };
  for (const Case& c : cases) {
    WritePipeline(c.tools, "read_file");
    CliResult r = Steps("validate p.yaml");
    EXPECT_EQ(r.exit_code, 65) << c.tools << r.out;
    EXPECT_TRUE(Has(r.out, c.message)) << c.tools << r.out;
  }
}

TEST_F(CommandToolCliTest, ZeroTimeoutIsAcceptedAndGrantingAnUndeclaredToolIsNot) {
  WritePipeline(std::string(kGoodTool) + "  timeout: 0\n", "greet");
  CliResult r = Steps("validate --strict p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  WritePipeline(kGoodTool, "greet, wave");
  r = Steps("validate p.yaml");
  EXPECT_EQ(r.exit_code, 65) << r.out;
  EXPECT_TRUE(Has(r.out, "p.yaml:9: error: agent 'a' grants unknown tool "
                            "'wave'"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "greet")) << "names the declared tools too";
}

TEST_F(CommandToolCliTest, ExplainShowsEachToolsLimit) {
  WritePipeline(std::string(kGoodTool) +
                    "- name: slow\n  description: d\n"
                    "  parameters: {type: object}\n  run: x\n  timeout: 2m\n",
                "greet, slow");
  CliResult r = Steps("explain p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "tool greet         30s           tool_timeout, "
                            "the tool has no timeout of its own"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "tool slow          2m            the tool's "
                            "timeout (line 10)"))
      << r.out;
}

// The identity `steps explain` prints is the step cache's key: a changed
// tool script must change it.
TEST_F(CommandToolCliTest, ToolDefinitionIsPartOfTheStepIdentity) {
  auto identity = [&](const std::string& tools) {
    WritePipeline(tools, "greet");
    CliResult r = Steps("explain p.yaml");
    size_t at = r.out.find("identity");
    EXPECT_NE(at, std::string::npos) << r.out;
    return at == std::string::npos ? "" : r.out.substr(at, 40);
  };
  std::string before = identity(kGoodTool);
  std::string again = identity(kGoodTool);
  std::string changed = identity(std::string(kGoodTool) + "  timeout: 5s\n");
  std::string script =
      "tools:\n- name: greet\n  description: Greets.\n"
      "  parameters: { type: object, properties: { who: { type: string } } }\n"
      "  run: echo hello\n";
  EXPECT_EQ(before, again);
  EXPECT_NE(before, changed);
  EXPECT_NE(before, identity(script));
}

}  // namespace
