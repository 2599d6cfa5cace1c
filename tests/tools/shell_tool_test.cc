#include "tools/shell_tool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "process/local_launcher.h"
#include "tools_test_util.h"

namespace steps {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;

// Far below the 30s the sleeping commands would take.
constexpr auto kQuick = 5s;

// Dead: no /proc entry, or a zombie waiting for init.
bool ProcessDiesWithin(pid_t pid, std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (true) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string content;
    if (!std::getline(stat, content)) return true;
    size_t close = content.rfind(')');
    if (close != std::string::npos && close + 2 < content.size() &&
        (content[close + 2] == 'Z' || content[close + 2] == 'X')) {
      return true;
    }
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
}

class RunShellTest : public ::testing::Test {
 protected:
  RunShellTest() : context_(tree_.root(), RealClock(), launcher_) {}

  ToolResult Shell(const std::string& command) {
    return tool_.Execute({{"command", command}}, context_);
  }

  ScratchTree tree_;
  LocalProcessLauncher launcher_;
  ToolContext context_;
  RunShellTool tool_;
};

TEST_F(RunShellTest, ExitCodeAndInterleavedOutput) {
  ToolResult ok = Shell("echo out; echo err >&2; echo more");
  EXPECT_FALSE(ok.is_error);
  EXPECT_EQ(ok.content, "exit code: 0\nout\nerr\nmore\n");
  ToolResult failed = Shell("echo nope; exit 3");
  EXPECT_TRUE(failed.is_error);
  EXPECT_EQ(failed.content, "exit code: 3\nnope\n");
  EXPECT_EQ(Shell("true").content, "exit code: 0\n(no output)\n");
  EXPECT_EQ(Shell("printf partial").content, "exit code: 0\npartial\n");
}

TEST_F(RunShellTest, RunsInTheWorkingDirectoryWithTheContextEnv) {
  context_.env["STEPS_TOOL_VAR"] = "set";
  ToolResult r = Shell("pwd -P; echo $STEPS_TOOL_VAR; echo hi > made.txt");
  EXPECT_EQ(r.content, "exit code: 0\n" + tree_.root() + "\nset\n");
  EXPECT_EQ(ScratchTree::Read(tree_.root() + "/made.txt"), "hi\n");
}

TEST_F(RunShellTest, ToolTimeoutKillsTheProcessGroup) {
  context_.tool_timeout = 300ms;
  auto start = std::chrono::steady_clock::now();
  ToolResult r = Shell("sleep 1000 & echo $!; sleep 30");
  EXPECT_LT(std::chrono::steady_clock::now() - start, kQuick);
  EXPECT_TRUE(r.is_error);
  EXPECT_THAT(r.content,
              StartsWith("timed out after 300ms (tool_timeout); the command "
                         "was killed\n"));
  pid_t background = std::stoi(r.content.substr(r.content.find('\n') + 1));
  EXPECT_TRUE(ProcessDiesWithin(background, kQuick));
}

TEST_F(RunShellTest, StepDeadlineBoundsTheCommand) {
  context_.tool_timeout = 30s;
  context_.deadline = Deadline::After(RealClock(), 300ms);
  auto start = std::chrono::steady_clock::now();
  ToolResult r = Shell("sleep 30");
  EXPECT_LT(std::chrono::steady_clock::now() - start, kQuick);
  EXPECT_TRUE(r.is_error);
  EXPECT_EQ(r.content,
            "stopped: the step's deadline was reached; the command was "
            "killed\n(no output)\n");
}

TEST_F(RunShellTest, PassedDeadlineRunsNothing) {
  context_.deadline = Deadline::At(RealClock().Now() - 1ms);
  ToolResult r = Shell("touch should_not_exist");
  EXPECT_TRUE(r.is_error);
  EXPECT_EQ(r.content, "run_shell: not run: the step's deadline has passed");
  EXPECT_FALSE(std::filesystem::exists(tree_.root() + "/should_not_exist"));
}

TEST_F(RunShellTest, CancelledStepStopsTheCommand) {
  context_.cancel.Cancel(CancelReason::kAbort);
  ToolResult r = Shell("sleep 30");
  EXPECT_TRUE(r.is_error);
  EXPECT_THAT(r.content, StartsWith("cancelled"));
}

TEST_F(RunShellTest, OutputKeepsHeadAndTail) {
  context_.limits.max_output_bytes = 1000;
  ToolResult r = Shell("seq 1 100000");
  EXPECT_FALSE(r.is_error);
  EXPECT_THAT(r.content, StartsWith("exit code: 0\n1\n2\n3\n"));
  EXPECT_THAT(r.content, HasSubstr(" bytes cut ...]\n"));
  EXPECT_THAT(r.content, EndsWith("99999\n100000\n"));
  EXPECT_LT(r.content.size(), 1100u);
}

TEST_F(RunShellTest, EndlessOutputStaysBounded) {
  context_.tool_timeout = 300ms;
  context_.limits.max_output_bytes = 4096;
  ToolResult r = Shell("yes steps");
  EXPECT_TRUE(r.is_error);
  EXPECT_THAT(r.content, StartsWith("timed out after 300ms"));
  EXPECT_THAT(r.content, HasSubstr(" bytes cut ...]\n"));
  EXPECT_LT(r.content.size(), 4096u + 200u);
}

TEST_F(RunShellTest, HostileArguments) {
  EXPECT_THAT(tool_.Execute(nlohmann::json::object(), context_).content,
              HasSubstr("missing required argument 'command'"));
  EXPECT_THAT(tool_.Execute({{"command", 5}}, context_).content,
              HasSubstr("must be a string, not number"));
  EXPECT_THAT(Shell("   ").content, HasSubstr("the command is empty"));
  EXPECT_THAT(Shell(std::string("echo a\0b", 8)).content,
              HasSubstr("NUL byte"));
  ToolResult invalid_utf8 = Shell("printf 'caf\\351'");
  EXPECT_NO_THROW(nlohmann::json(invalid_utf8.content).dump());
}

// The request run_shell hands to the launcher, on a fake clock.
class RecordingLauncher : public ProcessLauncher {
 public:
  ProcessResult Run(const ProcessRequest& request) override {
    last = request;
    ProcessResult result;
    result.end = end;
    result.exit_code = 0;
    return result;
  }
  ProcessRequest last;
  ProcessEnd end = ProcessEnd::kExited;
};

TEST(RunShellRequestTest, TimeIsTheEarlierOfToolTimeoutAndDeadline) {
  ScratchTree tree;
  FakeClock clock;
  RecordingLauncher launcher;
  ToolContext context(tree.root(), clock, launcher);
  RunShellTool tool;

  context.tool_timeout = 30s;
  context.deadline = Deadline::After(clock, 10s);
  tool.Execute({{"command", "make"}}, context);
  EXPECT_EQ(launcher.last.command, "make");
  EXPECT_EQ(launcher.last.working_dir, tree.root());
  EXPECT_TRUE(launcher.last.merge_stderr);
  EXPECT_FALSE(launcher.last.stdin_text.has_value());
  EXPECT_EQ(launcher.last.deadline.at(), clock.Now() + 10s);

  context.tool_timeout = 2s;
  tool.Execute({{"command", "make"}}, context);
  EXPECT_EQ(launcher.last.deadline.at(), clock.Now() + 2s);

  context.deadline = Deadline::None();
  context.tool_timeout = Millis(0);
  tool.Execute({{"command", "make"}}, context);
  EXPECT_FALSE(launcher.last.deadline.is_set());

  launcher.end = ProcessEnd::kTimedOut;
  context.tool_timeout = 2s;
  EXPECT_THAT(tool.Execute({{"command", "make"}}, context).content,
              StartsWith("timed out after 2s (tool_timeout)"));
}

}  // namespace
}  // namespace steps
