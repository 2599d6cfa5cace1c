// MCP servers through the real binary: what loading refuses (each with its
// line), `steps explain`'s rows, the step identity following the server's
// declaration, runs whose mock model calls SERVER__TOOL names of our
// hostile server (tests/tools/mcp/hostile_mcp_server.cc) in each of its
// failure modes, an abort by SIGTERM mid-call, and the official reference
// servers (server-everything, server-filesystem) installed under
// tests/mcp by scripts/install-deps.
//
// Timing: every run is bounded by kill_after (120s), far above what any
// case needs; cuts are configured at 1-2s and asserted only by message.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/steps_cli.h"
#include "common/temp_dir.h"
#include "mcp_pipeline.h"

namespace {

using steps::test_support::Bounded;
using steps::test_support::CliResult;
using steps::test_support::Has;
using steps::test_support::McpPipeline;
using steps::test_support::RunSteps;
using steps::test_support::SpawnSteps;
using steps::test_support::StepsOptions;
using steps::test_support::TempDir;

const std::string kHostile = HOSTILE_MCP_SERVER;
const std::string kNodeModules =
    std::string(STEPS_SOURCE_DIR) + "/tests/mcp/node_modules";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class McpCliTest : public ::testing::Test {
 protected:
  // McpPipeline, written as p.yaml.
  void Write(const std::string& servers, const std::string& grant,
             const std::string& script = "  a: [{say: done}]\n",
             const std::string& assert = "") {
    dir_.Write("p.yaml", McpPipeline(servers, grant, script, assert));
  }

  // The mcp_servers: block for one hostile server named h.
  std::string Hostile(const std::string& mode, const std::string& extra = "") {
    return "mcp_servers:\n"
           "- name: h\n"
           "  command: [" +
           kHostile + ", " + mode +
           "]\n"
           "  env: { MCP_TEST_LOG: " +
           (dir_ / "server.log") + " }\n" + extra;
  }

  CliResult Steps(const std::string& args) {
    return RunSteps(dir_.path(), args, Bounded());
  }

  TempDir dir_;
};

TEST_F(McpCliTest, EachBadDeclarationIsRefusedWithItsLine) {
  struct Case {
    std::string servers;
    std::string grant;
    std::string message;
  } cases[] = {
      {"mcp_servers:\n- name: a__b\n  command: x\n", "read_file",
       "p.yaml:2: error: mcp server name 'a__b' is not allowed"},
      {"mcp_servers:\n- name: " + std::string(33, 's') + "\n  command: x\n",
       "read_file", "is not allowed: use 1 to 32 letters"},
      {"mcp_servers:\n- name: 'a b'\n  command: x\n", "read_file",
       "p.yaml:2: error: mcp server name 'a b' is not allowed"},
      {"mcp_servers:\n- name: run_shell\n  command: x\n", "read_file",
       "p.yaml:2: error: mcp server 'run_shell' has the name of a tool"},
      {"mcp_servers:\n- name: s\n  command: x\n- name: s\n  command: y\n",
       "read_file",
       "p.yaml:4: error: duplicate mcp server 's' (first at line 2)"},
      {"mcp_servers:\n- name: s\n", "read_file",
       "p.yaml:2: error: mcp server 's' has no 'command'"},
      {"mcp_servers:\n- name: s\n  command: []\n", "read_file",
       "p.yaml:3: error: mcp server 's': 'command' must start with the "
       "program"},
      {"mcp_servers:\n- name: s\n  command: x\n  startup_timout: 5s\n",
       "read_file",
       "p.yaml:4: error: unknown key 'startup_timout' in mcp server 's'"},
      {"mcp_servers:\n- name: s\n  command: x\n  startup_timeout: 0\n",
       "read_file",
       "p.yaml:4: error: mcp server 's': 'startup_timeout' must be positive"},
      {"mcp_servers:\n- name: s\n  command: x\n  tool_timeout: -1s\n",
       "read_file",
       "p.yaml:4: error: mcp server 's': 'tool_timeout' must be 0"},
      {"mcp_servers: {name: s}\n", "read_file",
       "p.yaml:1: error: 'mcp_servers' must be a list"},
      {"mcp_servers:\n- name: s\n  command: x\n", "other.read",
       "error: agent 'a' grants tool 'other.read' of unknown mcp server "
       "'other' "
       "— declare it under the top-level 'mcp_servers:' (known: s)"},
      {"", "other__read",
       "error: agent 'a' grants tool 'other__read' of unknown mcp server "
       "'other' — declare it under the top-level 'mcp_servers:' (none are "
       "defined)"},
  };
  for (const Case& c : cases) {
    Write(c.servers, c.grant);
    CliResult r = Steps("validate p.yaml");
    EXPECT_EQ(r.exit_code, 65) << c.servers << r.out;
    EXPECT_TRUE(Has(r.out, c.message)) << c.servers << r.out;
  }
}

TEST_F(McpCliTest, ExplainShowsTheServersAnAgentUses) {
  Write(
      "mcp_servers:\n"
      "- name: fs\n"
      "  command: [node, server.js, .]\n"
      "  startup_timeout: 10s\n"
      "  tool_timeout: 20s\n"
      "- name: web\n"
      "  command: run-web-server --quiet\n",
      "read_file, fs.read_file, fs__list, web");
  CliResult r = Steps("explain p.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "mcp fs             10s           startup_timeout (line 4), "
                  "inside the deadline; runs `node server.js .` (line 2); "
                  "grants read_file, fs__list"))
      << r.out;
  EXPECT_TRUE(Has(r.out,
                  "mcp fs calls       20s           the server's tool_timeout "
                  "(line 5), per call, never past the deadline"))
      << r.out;
  EXPECT_TRUE(Has(r.out,
                  "mcp web            30s           default startup_timeout, "
                  "inside the deadline; runs `run-web-server --quiet` (line "
                  "6); grants every tool"))
      << r.out;
  EXPECT_TRUE(Has(r.out,
                  "mcp web calls      30s           tool_timeout, the "
                  "server has none of its own"))
      << r.out;
}

TEST_F(McpCliTest, TheIdentityFollowsTheServersDeclaration) {
  auto identity = [&](const std::string& servers) {
    Write(servers, "s");
    CliResult r = Steps("explain p.yaml");
    size_t at = r.out.find("identity");
    return at == std::string::npos ? r.out : r.out.substr(at, 30);
  };
  std::string base = identity("mcp_servers:\n- name: s\n  command: [a, b]\n");
  EXPECT_NE(base, identity("mcp_servers:\n- name: s\n  command: [a, c]\n"));
  EXPECT_NE(base, identity("mcp_servers:\n- name: s\n  command: [a, b]\n"
                           "  env: {X: y}\n"));
  EXPECT_EQ(base, identity("mcp_servers:\n- name: s\n  command: [a, b]\n"
                           "  startup_timeout: 9s\n"));
}

TEST_F(McpCliTest, TheModelCallsServerToolsByTheirNames) {
  Write(Hostile("good", "  tool_timeout: 1s\n"),
        "read_file, h.echo, h__fail, h__slow",
        "  a:\n"
        "  - call: {name: h__echo, arguments: {text: hello from mcp}}\n"
        "  - expect: {last_contains: hello from mcp}\n"
        "    call: {name: h__fail}\n"
        "  - expect: {last_contains: it went wrong}\n"
        "    call: {name: h__slow, arguments: {ms: 60000}}\n"
        "  - expect: {last_contains: \"h__slow: timed out after 1s (the "
        "server's tool_timeout); the call was cancelled\"}\n"
        "    call: {name: h__add, arguments: {a: 1, b: 2}}\n"
        "  - expect: {last_contains: \"no tool named 'h__add' is available "
        "(available: read_file, h__echo, h__fail, h__slow)\"}\n"
        "    say: done\n",
        "    assert: {stdout: done}\n");
  CliResult r = Steps("test p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "1 passed, 0 failed")) << r.out;
  // Its process was stopped with the step (and reaped): the pid is free.
  std::string text = ReadFile(dir_ / "server.log");
  ASSERT_TRUE(Has(text, "pid ")) << text;
  EXPECT_EQ(kill(std::stoi(text.substr(text.find("pid ") + 4)), 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(McpCliTest, OddToolNamesAreSanitisedAndACollisionErrorsTheStep) {
  Write(Hostile("odd-names"), "h",
        "  a:\n"
        "  - call: {name: nope}\n"
        "  - expect: {last_contains: \"h__get_weather_now_\"}\n"
        "    say: done\n");
  CliResult r = Steps("test p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;

  Write(
      "tools:\n"
      "- name: h__echo\n"
      "  description: d\n"
      "  parameters: {type: object}\n"
      "  run: echo\n" +
          Hostile("good"),
      "h, h__echo");
  r = Steps("run --mock p.yaml");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "mcp server 'h': its tool 'echo' would be offered as "
                  "'h__echo', the name of another tool"))
      << r.out;
}

TEST_F(McpCliTest, AGrantedToolTheServerLacksErrorsTheStep) {
  Write(Hostile("good"), "h.nope");
  CliResult r = Steps("run --mock p.yaml");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "mcp server 'h' has no tool 'nope' (its tools: echo, "
                  "add, slow"))
      << r.out;
}

TEST_F(McpCliTest, ProviderKeysAreWithheldUnlessEnvPassesThem) {
  Write(
      "mcp_servers:\n"
      "- name: h\n"
      "  command: [" +
          kHostile +
          ", good]\n"
          "  env: { PASSED: \"${FOO}\" }\n",
      "h",
      "  a:\n"
      "  - call: {name: h__env, arguments: {name: OPENAI_API_KEY}}\n"
      "  - expect: {last_contains: \"(unset)\"}\n"
      "    call: {name: h__env, arguments: {name: PASSED}}\n"
      "  - expect: {last_contains: \"set: bar\"}\n"
      "    say: done\n");
  StepsOptions o = Bounded();
  o.prefix = "OPENAI_API_KEY=sk-test-withheld FOO=bar";
  CliResult r = RunSteps(dir_.path(), "test p.yaml", o);
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST_F(McpCliTest, AServerThatCannotStartErrorsTheStep) {
  struct Case {
    std::string servers;
    std::string message;
  } cases[] = {
      {"mcp_servers:\n- name: h\n  command: [no-such-mcp-server-x]\n",
       "mcp server 'h': cannot start 'no-such-mcp-server-x': "
       "no-such-mcp-server-x: command not found in PATH"},
      {Hostile("crash"),
       "mcp server 'h': the server is gone: it exited with code 3; the end of "
       "its stderr: fatal: no configuration found"},
      {Hostile("hang", "  startup_timeout: 1s\n"),
       "mcp server 'h': did not finish starting within 1s (startup_timeout)"},
      {Hostile("garbage", "  startup_timeout: 1s\n"),
       "did not finish starting within 1s (startup_timeout); it wrote 1 line "
       "to stdout that is not JSON-RPC (the first: 'this is not json {')"},
      {Hostile("old-version"),
       "it speaks MCP protocol version '1999-01-01', which steps does not"},
  };
  for (const Case& c : cases) {
    Write(c.servers, "h");
    CliResult r = Steps("run --mock p.yaml");
    EXPECT_EQ(r.exit_code, 2) << c.servers << r.out;
    EXPECT_TRUE(Has(r.out, c.message)) << c.servers << r.out;
  }
}

TEST_F(McpCliTest, AStartCutByTheStepsDeadlineFailsTheStep) {
  Write(Hostile("hang"), "h");
  std::string p = ReadFile(dir_ / "p.yaml");
  p.replace(p.find("  tools: [h]\n"), 13, "  tools: [h]\n  timeout: 1s\n");
  dir_.Write("p.yaml", p);
  CliResult r = Steps("run --mock p.yaml");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "mcp server 'h': did not finish starting before the "
                  "step's deadline"))
      << r.out;
}

TEST_F(McpCliTest, AServerThatExitsMidCallIsGoneForLaterCalls) {
  Write(Hostile("good"), "h",
        "  a:\n"
        "  - call: {name: h__exit}\n"
        "  - expect: {last_contains: \"h__exit: mcp server 'h': the server is "
        "gone: it exited with code 4\"}\n"
        "    call: {name: h__echo, arguments: {text: x}}\n"
        "  - expect: {last_contains: \"h__echo: mcp server 'h': the server is "
        "gone: it exited with code 4\"}\n"
        "    say: done\n");
  CliResult r = Steps("test p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST_F(McpCliTest, SigtermMidCallLeavesNoServerBehind) {
  Write(Hostile("good"), "h",
        "  a:\n"
        "  - call: {name: h__slow, arguments: {ms: 600000}}\n"
        "  - say: never\n");
  const std::string log = dir_ / "steps.log";
  pid_t steps = SpawnSteps(dir_.path(), {"run", "--mock", "p.yaml"}, log);
  ASSERT_GT(steps, 0);
  // Wait (bounded) until the server says the slow call has begun.
  const std::string server_log = dir_ / "server.log";
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!Has(ReadFile(server_log), "slow\n") &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(Has(ReadFile(server_log), "slow\n")) << ReadFile(log);
  std::string text = ReadFile(server_log);
  int server = std::stoi(text.substr(text.find("pid ") + 4));
  kill(steps, SIGTERM);
  int status = 0;
  waitpid(steps, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 143)
      << status << ReadFile(log);
  // steps reaped the server before it exited: the pid names nothing.
  EXPECT_EQ(kill(server, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_TRUE(Has(ReadFile(log), "aborted")) << ReadFile(log);
}

// The official reference servers, run with node from tests/mcp.
class McpReferenceServersTest : public McpCliTest {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kNodeModules + "/@modelcontextprotocol")) {
      // scripts/test installs them: missing, they fail, so CI can never
      // pass without the real servers.
      GTEST_FAIL() << "the reference MCP servers are not installed under "
                   << kNodeModules << ": run scripts/install-deps";
    }
  }
  std::string Server(const std::string& package) {
    return kNodeModules + "/@modelcontextprotocol/" + package +
           "/dist/index.js";
  }
};

TEST_F(McpReferenceServersTest, EverythingEchoesAddsAndDescribesAnImage) {
  Write(
      "mcp_servers:\n"
      "- name: ev\n"
      "  command: [node, " +
          Server("server-everything") + ", stdio]\n",
      "ev.echo, ev__get-sum, ev.get-tiny-image",
      "  a:\n"
      "  - call: {name: ev__echo, arguments: {message: hello there}}\n"
      "  - expect: {last_contains: \"Echo: hello there\"}\n"
      "    call: {name: ev__get-sum, arguments: {a: 2, b: 40}}\n"
      "  - expect: {last_contains: \"The sum of 2 and 40 is 42.\"}\n"
      "    call: {name: ev__get-tiny-image}\n"
      "  - expect: {last_contains: \"[image, image/png, \"}\n"
      "    call: {name: ev__echo, arguments: {}}\n"
      "  - expect: {last_contains: \"message\"}\n"
      "    say: done\n");
  CliResult r = Steps("test p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "1 passed, 0 failed")) << r.out;
}

TEST_F(McpReferenceServersTest, FilesystemReadsAndListsTheStepsFolder) {
  Write(
      "mcp_servers:\n"
      "- name: fs\n"
      "  command: [node, " +
          Server("server-filesystem") + ", .]\n",
      "write_file, fs.read_text_file, fs.list_directory",
      "  a:\n"
      "  - call: {name: write_file, arguments: {path: notes.txt, content: "
      "\"one TODO here\"}}\n"
      "  - call: {name: fs__read_text_file, arguments: {path: notes.txt}}\n"
      "  - expect: {last_contains: \"one TODO here\"}\n"
      "    call: {name: fs__list_directory, arguments: {path: .}}\n"
      "  - expect: {last_contains: \"[FILE] notes.txt\"}\n"
      "    call: {name: fs__read_text_file, arguments: {path: /etc/passwd}}\n"
      "  - expect: {last_contains: \"Access denied\"}\n"
      "    say: done\n");
  CliResult r = Steps("test p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "1 passed, 0 failed")) << r.out;
}

}  // namespace
