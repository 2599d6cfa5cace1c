#include "tools/command_tool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "process/local_launcher.h"
#include "tools/json_schema.h"
#include "tools_test_util.h"

namespace steps {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using nlohmann::json;
using namespace std::chrono_literals;

// Far below the 30s the sleeping commands would take.
constexpr auto kQuick = 5s;

TEST(ToolNameTest, PatternAtItsEdges) {
  EXPECT_TRUE(IsValidToolName("a"));
  EXPECT_TRUE(IsValidToolName("Word_count-2"));
  EXPECT_TRUE(IsValidToolName(std::string(64, 'x')));
  EXPECT_FALSE(IsValidToolName(std::string(65, 'x')));
  EXPECT_FALSE(IsValidToolName(""));
  EXPECT_FALSE(IsValidToolName("has space"));
  EXPECT_FALSE(IsValidToolName("dot.ted"));
  EXPECT_FALSE(IsValidToolName("caf\xC3\xA9"));
}

TEST(ArgumentEnvTest, NamesAndValues) {
  EXPECT_EQ(ArgumentEnvName("path"), "STEPS_ARG_PATH");
  EXPECT_EQ(ArgumentEnvName("max-lines"), "STEPS_ARG_MAX_LINES");
  EXPECT_EQ(ArgumentEnvName("a b=c"), "STEPS_ARG_A_B_C");
  EXPECT_EQ(ArgumentEnvName("\xC3\xA9"), "STEPS_ARG___");
  std::map<std::string, std::string> env = ArgumentEnv(
      {{"text", "hi"}, {"n", 3}, {"list", {1, "a"}}, {"none", nullptr}});
  EXPECT_EQ(env["STEPS_ARG_TEXT"], "hi");
  EXPECT_EQ(env["STEPS_ARG_N"], "3");
  EXPECT_EQ(env["STEPS_ARG_LIST"], "[1,\"a\"]");
  EXPECT_EQ(env["STEPS_ARG_NONE"], "null");
}

TEST(ArgumentEnvTest, CollisionsNulAndHugeValues) {
  // "A-B" sorts before "a_b": it is the one kept, on every run.
  std::map<std::string, std::string> env =
      ArgumentEnv({{"a_b", "second"}, {"A-B", "first"}});
  EXPECT_EQ(env.size(), 1u);
  EXPECT_EQ(env["STEPS_ARG_A_B"], "first");
  env = ArgumentEnv({{"nul", std::string("a\0b", 3)},
                     {"edge", std::string(kMaxArgumentEnvBytes, 'x')},
                     {"over", std::string(kMaxArgumentEnvBytes + 1, 'x')}});
  EXPECT_EQ(env.count("STEPS_ARG_NUL"), 0u);
  EXPECT_EQ(env.count("STEPS_ARG_OVER"), 0u);
  EXPECT_EQ(env["STEPS_ARG_EDGE"].size(), kMaxArgumentEnvBytes);
}

class CommandToolTest : public ::testing::Test {
 protected:
  CommandToolTest() : context_(tree_.root(), RealClock(), launcher_) {}

  ToolResult Call(const std::string& script, const json& arguments,
                  std::optional<Millis> timeout = std::nullopt,
                  json parameters = {{"type", "object"}}) {
    EXPECT_TRUE(CheckArgumentsSchema(parameters).ok());
    CommandToolSpec spec;
    spec.name = "probe";
    spec.description = "A test tool.";
    spec.parameters = std::move(parameters);
    spec.run = script;
    spec.timeout = timeout;
    spec.env = {{"FROM_SPEC", "spec"}};
    CommandTool tool(std::move(spec));
    return tool.Execute(arguments, context_);
  }

  ScratchTree tree_;
  LocalProcessLauncher launcher_;
  ToolContext context_;
};

TEST_F(CommandToolTest, ArgumentsOnStdinAndInTheEnvironment) {
  ToolResult r = Call(
      "cat; echo \"$STEPS_ARG_TEXT|$STEPS_ARG_N|$STEPS_ARG_A_B_C|$FROM_SPEC\"; "
      "pwd -P",
      {{"text", "two words"}, {"n", 2}, {"a b=c", true}});
  EXPECT_FALSE(r.is_error) << r.content;
  EXPECT_EQ(r.content, "{\"a b=c\":true,\"n\":2,\"text\":\"two words\"}\n"
                       "two words|2|true|spec\n" +
                           tree_.root() + "\n");
}

TEST_F(CommandToolTest, SuccessIsTheOutputAndFailureCarriesTheExitCode) {
  ToolResult ok = Call("echo out; echo err >&2", json::object());
  EXPECT_FALSE(ok.is_error);
  EXPECT_EQ(ok.content, "out\nerr\n");
  EXPECT_EQ(Call("true", json::object()).content, "(no output)\n");
  ToolResult failed = Call("echo why >&2; exit 3", json::object());
  EXPECT_TRUE(failed.is_error);
  EXPECT_EQ(failed.content, "exit code: 3\nwhy\n");
}

TEST_F(CommandToolTest, SchemaMismatchIsAnErrorAndNothingRuns) {
  json schema = {{"type", "object"},
                 {"properties", {{"count", {{"type", "integer"}}}}},
                 {"required", {"count"}},
                 {"additionalProperties", false}};
  ToolResult r =
      Call("touch ran", {{"count", "3"}, {"x y", 1}}, std::nullopt, schema);
  EXPECT_TRUE(r.is_error);
  EXPECT_EQ(r.content,
            "probe: the arguments do not match the tool's schema; the command "
            "did not run:\n"
            "- argument \"count\": expected integer, got string\n"
            "- argument \"x y\": unexpected argument (allowed: count)\n");
  EXPECT_FALSE(std::filesystem::exists(tree_.root() + "/ran"));
  EXPECT_FALSE(Call("touch ran", {{"count", 3}}, std::nullopt, schema).is_error);
  EXPECT_TRUE(std::filesystem::exists(tree_.root() + "/ran"));
}

TEST_F(CommandToolTest, OwnTimeoutReplacesToolTimeout) {
  context_.tool_timeout = 30s;
  auto start = std::chrono::steady_clock::now();
  ToolResult r = Call("sleep 30", json::object(), 300ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, kQuick);
  EXPECT_TRUE(r.is_error);
  EXPECT_THAT(r.content, StartsWith("timed out after 300ms (the tool's "
                                    "timeout); the command was killed\n"));
  // A command inside its own timeout is not cut by a shorter tool_timeout.
  context_.tool_timeout = 1ms;
  EXPECT_FALSE(Call("sleep 0.2; echo done", json::object(), 10s).is_error);
}

TEST_F(CommandToolTest, NoTimeoutOfItsOwnFallsBackToToolTimeout) {
  context_.tool_timeout = 300ms;
  ToolResult r = Call("sleep 30", json::object());
  EXPECT_TRUE(r.is_error);
  EXPECT_THAT(r.content, StartsWith("timed out after 300ms (tool_timeout)"));
  // Zero: no limit of its own, and tool_timeout does not apply either.
  EXPECT_FALSE(Call("sleep 0.5; echo done", json::object(), 0ms).is_error);
}

TEST_F(CommandToolTest, StepDeadlineBoundsEveryTimeout) {
  context_.deadline = Deadline::After(RealClock(), 300ms);
  auto start = std::chrono::steady_clock::now();
  ToolResult r = Call("sleep 30", json::object(), 0ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, kQuick);
  EXPECT_THAT(r.content, StartsWith("stopped: the step's deadline was reached"));
}

TEST_F(CommandToolTest, OutputIsBoundedLikeRunShell) {
  context_.limits.max_output_bytes = 1000;
  ToolResult r = Call("seq 1 100000", json::object());
  EXPECT_FALSE(r.is_error);
  EXPECT_THAT(r.content, StartsWith("1\n2\n3\n"));
  EXPECT_THAT(r.content, HasSubstr(" bytes cut ...]\n"));
  EXPECT_THAT(r.content, EndsWith("100000\n"));
  EXPECT_LT(r.content.size(), 1100u);
}

TEST_F(CommandToolTest, HugeAndHostileValuesReachStdinIntact) {
  std::string huge(1 << 20, 'x');  // Far over what a variable may hold.
  ToolResult r = Call(
      "wc -c | tr -d ' '; echo \"${STEPS_ARG_BIG-unset}\"",
      {{"big", huge}});
  EXPECT_FALSE(r.is_error) << r.content;
  // {"big":"...."}\n is 11 bytes around the value.
  EXPECT_EQ(r.content, std::to_string(huge.size() + 11) + "\nunset\n");
  r = Call("printf '%s' \"$STEPS_ARG_Q\"",
           {{"q", "$(touch pwned); `id` ' \" \\"}});
  EXPECT_EQ(r.content, "$(touch pwned); `id` ' \" \\\n");
  EXPECT_FALSE(std::filesystem::exists(tree_.root() + "/pwned"));
}

TEST_F(CommandToolTest, NonUtf8OutputIsMadeValid) {
  ToolResult r = Call("printf 'a\\377b'", json::object());
  EXPECT_FALSE(r.is_error);
  EXPECT_EQ(r.content, "a\xEF\xBF\xBD" "b\n");
  // Arguments holding invalid UTF-8 (from Execute, not from JSON text) are
  // replaced on stdin, never a crash.
  r = Call("cat", {{"s", "\xff"}});
  EXPECT_FALSE(r.is_error);
  EXPECT_EQ(r.content, "{\"s\":\"\xEF\xBF\xBD\"}\n");
}

}  // namespace
}  // namespace steps
