// MCP servers at a `url:` (Streamable HTTP) through the real binary: what
// loading refuses (each with its line), `steps explain`'s row (header names,
// never values), runs whose mock model calls tools of our hostile HTTP
// server (tests/tools/mcp/hostile_mcp_http_server.h, served in this test
// process on loopback) and of the official server-everything, started by
// the test with node on a free port (skipped when tests/mcp is not
// installed).
//
// Timing: every run is bounded by kill_after (120s), far above what any
// case needs; cuts are configured at 1s and asserted only by message.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "common/steps_cli.h"
#include "common/temp_dir.h"
#include "mcp_pipeline.h"
#include "tools/mcp/hostile_mcp_http_server.h"

namespace {

using steps::test_support::Bounded;
using steps::test_support::CliResult;
using steps::test_support::Has;
using steps::test_support::HostileMcpHttpServer;
using steps::test_support::McpPipeline;
using steps::test_support::RunSteps;
using steps::test_support::StepsOptions;
using steps::test_support::TempDir;

const std::string kEverything =
    std::string(STEPS_SOURCE_DIR) +
    "/tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/"
    "index.js";

class McpHttpCliTest : public ::testing::Test {
 protected:
  // McpPipeline, written as p.yaml.
  void Write(const std::string& servers, const std::string& grant,
             const std::string& script = "  a: [{say: done}]\n") {
    dir_.Write("p.yaml", McpPipeline(servers, grant, script));
  }

  CliResult Steps(const std::string& args, const std::string& prefix = "") {
    return RunSteps(dir_.path(), args, Bounded(prefix));
  }

  TempDir dir_;
};

TEST_F(McpHttpCliTest, EachBadUrlDeclarationIsRefusedWithItsLine) {
  struct Case {
    std::string servers;
    std::string message;
  } cases[] = {
      {"mcp_servers:\n- name: s\n  command: x\n  url: http://h/mcp\n",
       "p.yaml:4: error: mcp server 's' has both 'command' (line 3) and "
       "'url' — give one"},
      {"mcp_servers:\n- name: s\n",
       "p.yaml:2: error: mcp server 's' has no 'command' and no 'url'"},
      {"mcp_servers:\n- name: s\n  url: ftp://h/mcp\n",
       "p.yaml:3: error: mcp server 's': 'url' must be an http:// or https:// "
       "address with a host and no spaces, e.g. http://127.0.0.1:3001/mcp, "
       "not 'ftp://h/mcp'"},
      {"mcp_servers:\n- name: s\n  url: 'http://'\n",
       "p.yaml:3: error: mcp server 's': 'url' must be an http:// or https://"},
      {"mcp_servers:\n- name: s\n  url: 'http://h/a b'\n",
       "p.yaml:3: error: mcp server 's': 'url' must be an http:// or https://"},
      {"mcp_servers:\n- name: s\n  url: http://h/mcp\n  env: {A: b}\n",
       "p.yaml:4: error: mcp server 's': 'env' is for a server steps starts "
       "('command:'); a server at a url runs on its own — to pass it a "
       "secret, use 'headers:'"},
      {"mcp_servers:\n- name: s\n  command: x\n  headers: {A: b}\n",
       "p.yaml:4: error: mcp server 's': 'headers' is for a server at a "
       "'url:'"},
      {"mcp_servers:\n- name: s\n  url: http://h/mcp\n  headers:\n"
       "    Mcp-Session-Id: x\n",
       "p.yaml:5: error: 's.headers.Mcp-Session-Id' is set by steps itself"},
      {"mcp_servers:\n- name: s\n  url: http://h/mcp\n  headers:\n"
       "    Accept: x\n",
       "p.yaml:5: error: 's.headers.Accept' is set by steps itself"},
      {"mcp_servers:\n- name: s\n  url: http://h/mcp\n  headers:\n"
       "    'a b': x\n",
       "p.yaml:5: error: 's.headers' names 'a b': a header name is letters"},
      {"mcp_servers:\n- name: s\n  url: http://h/mcp\n  headers:\n"
       "    X-Key: ${1BAD}\n",
       "p.yaml:5: error: 's.headers.X-Key': "},
      {"mcp_servers:\n- name: s\n  url: http://h/mcp\n  header: {A: b}\n",
       "p.yaml:4: error: unknown key 'header' in mcp server 's' (an mcp "
       "server has name, command or url, env (with a command), headers (with "
       "a url), startup_timeout, tool_timeout)"},
  };
  for (const Case& c : cases) {
    Write(c.servers, "read_file");
    CliResult r = Steps("validate p.yaml");
    EXPECT_EQ(r.exit_code, 65) << c.servers << r.out;
    EXPECT_TRUE(Has(r.out, c.message)) << c.servers << r.out;
  }
}

// A password in the url would be shown wherever the url is (explain,
// errors, logs, the run record): refused, and quoted nowhere.
TEST_F(McpHttpCliTest, AUrlWithCredentialsIsRefusedWithoutQuotingThem) {
  for (const char* url :
       {"http://user:hunter22@127.0.0.1:9/mcp", "https://hunter22@h/mcp",
        "HTTP://u:hunter22@[::1]:9/mcp?x=1"}) {
    Write(std::string("mcp_servers:\n- name: s\n  url: '") + url + "'\n", "s");
    for (const char* command : {"validate p.yaml", "explain p.yaml"}) {
      CliResult r = Steps(command);
      EXPECT_EQ(r.exit_code, 65) << url << r.out;
      EXPECT_TRUE(Has(r.out,
                      "p.yaml:3: error: mcp server 's': 'url' carries a user "
                      "name or password (before '@'), which explain, errors "
                      "and logs would show; send credentials in 'headers:' "
                      "instead, e.g. Authorization: \"Basic ${MCP_AUTH}\""))
          << url << r.out;
      EXPECT_FALSE(Has(r.out, "hunter22")) << url << r.out;
    }
  }
  // An '@' after the host is part of the path, not a user.
  Write("mcp_servers:\n- name: s\n  url: http://h/mcp/@me?to=a@b\n", "s");
  EXPECT_EQ(Steps("validate p.yaml").exit_code, 0);
}

TEST_F(McpHttpCliTest, AUrlServerWithHeadersLoads) {
  Write(
      "mcp_servers:\n"
      "- name: s\n"
      "  url: HTTPS://mcp.example.com/mcp\n"
      "  headers: {Authorization: 'Bearer ${MCP_TOKEN}', X-Team: blue}\n"
      "  startup_timeout: 5s\n"
      "  tool_timeout: 0\n",
      "s");
  CliResult r = Steps("validate p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST_F(McpHttpCliTest, ExplainNamesTheUrlAndTheHeadersButNoValue) {
  Write(
      "mcp_servers:\n"
      "- name: web\n"
      "  url: http://127.0.0.1:9/mcp\n"
      "  headers: {Authorization: 'Bearer very-secret', X-Team: blue}\n",
      "web.search");
  CliResult r = Steps("explain p.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "mcp web            30s           default startup_timeout, "
                  "inside the deadline; connects to http://127.0.0.1:9/mcp "
                  "with headers Authorization, X-Team (line 2); grants "
                  "search"))
      << r.out;
  EXPECT_FALSE(Has(r.out, "very-secret")) << r.out;
  EXPECT_FALSE(Has(r.out, "blue")) << r.out;
}

TEST_F(McpHttpCliTest, TheIdentityFollowsTheUrlAndTheHeadersAsWritten) {
  auto identity = [&](const std::string& servers, const std::string& env) {
    Write(servers, "s");
    CliResult r = Steps("explain p.yaml", env);
    size_t at = r.out.find("identity");
    return at == std::string::npos ? r.out : r.out.substr(at, 30);
  };
  const std::string base_servers =
      "mcp_servers:\n- name: s\n  url: http://h/mcp\n"
      "  headers: {Authorization: 'Bearer ${T}'}\n";
  std::string base = identity(base_servers, "T=one");
  EXPECT_NE(base, identity("mcp_servers:\n- name: s\n  url: http://h/mcp\n",
                           "T=one"));
  EXPECT_NE(base, identity("mcp_servers:\n- name: s\n  url: http://h/other\n"
                           "  headers: {Authorization: 'Bearer ${T}'}\n",
                           "T=one"));
  EXPECT_NE(base, identity("mcp_servers:\n- name: s\n  url: http://h/mcp\n"
                           "  headers: {Authorization: 'Token ${T}'}\n",
                           "T=one"));
  // The token itself is not part of it: it may change between runs.
  EXPECT_EQ(base, identity(base_servers, "T=two"));
}

// The hostile server's "good" mode: the tool's answer reaches the
// conversation; the header's value comes from the environment, reaches the
// server and is not in the output (with the case's log, -v).
TEST_F(McpHttpCliTest, AModelCallsAToolOverHttp) {
  HostileMcpHttpServer server("good");
  Write(
      "mcp_servers:\n"
      "- name: h\n"
      "  url: " +
          server.url() +
          "\n"
          "  headers: {Authorization: 'Bearer ${MCP_TOKEN}'}\n",
      "h",
      "  a:\n"
      "  - call: {name: h__echo, arguments: {text: over http}}\n"
      "  - expect: {last_contains: \"echo: over http\"}\n"
      "    say: done\n");
  CliResult r = Steps("test -v p.yaml", "MCP_TOKEN=tok-123");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "1 passed, 0 failed")) << r.out;
  EXPECT_FALSE(Has(r.out, "tok-123")) << r.out;
  bool deleted = false;
  for (const auto& g : server.received()) {
    EXPECT_EQ(g.authorization, "Bearer tok-123") << g.rpc_method;
    deleted = deleted || g.http_method == "DELETE";
  }
  EXPECT_TRUE(deleted);
}

TEST_F(McpHttpCliTest, AServerAnswering500FailsTheStepWithTheStatus) {
  HostileMcpHttpServer server("status-500");
  Write("mcp_servers:\n- name: h\n  url: " + server.url() + "\n", "h");
  CliResult r = Steps("run --mock p.yaml");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "mcp server 'h': it answered 'initialize' with HTTP 500: "
                  "'internal trouble second line'"))
      << r.out;
}

TEST_F(McpHttpCliTest, ToolTimeoutCutsASilentStream) {
  HostileMcpHttpServer server("sse-silent");
  Write("mcp_servers:\n- name: h\n  url: " + server.url() +
            "\n  tool_timeout: 1s\n",
        "h",
        "  a:\n"
        "  - call: {name: h__echo, arguments: {text: x}}\n"
        "  - expect: {last_contains: \"h__echo: timed out after 1s (the "
        "server's tool_timeout); the call was cancelled\"}\n"
        "    say: done\n");
  CliResult r = Steps("test p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(server.WaitFor("notifications/cancelled", 10000));
}

// server-everything's Streamable HTTP transport, started here on a free
// port and stopped after.
class EverythingOverHttpTest : public McpHttpCliTest {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kEverything)) {
      GTEST_FAIL() << "server-everything is not installed under tests/mcp: "
                      "run scripts/install-deps";
    }
    port_ = FreePort();
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      int out = open((dir_ / "server.log").c_str(),
                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(out, 1);
      dup2(out, 2);
      setenv("PORT", std::to_string(port_).c_str(), 1);
      execlp("node", "node", kEverything.c_str(), "streamableHttp",
             static_cast<char*>(nullptr));
      _exit(127);
    }
    ASSERT_GT(pid_, 0);
    ASSERT_TRUE(WaitUntilListening()) << "server-everything did not listen";
  }

  void TearDown() override {
    if (pid_ <= 0) return;
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }

  static int FreePort() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    close(fd);
    return ntohs(addr.sin_port);
  }

  // Polls a connect to the port (60s at most) while the server lives.
  bool WaitUntilListening() {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < until) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(port_));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      bool up =
          connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
      close(fd);
      if (up) return true;
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      poll(nullptr, 0, 20);  // The next attempt.
    }
    return false;
  }

  std::string Url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/mcp";
  }

  int port_ = 0;
  pid_t pid_ = -1;
};

TEST_F(EverythingOverHttpTest, EchoesAndAddsOverStreamableHttp) {
  Write(
      "mcp_servers:\n"
      "- name: ev\n"
      "  url: " +
          Url() + "\n",
      "ev.echo, ev__get-sum",
      "  a:\n"
      "  - call: {name: ev__echo, arguments: {message: hello over http}}\n"
      "  - expect: {last_contains: \"Echo: hello over http\"}\n"
      "    call: {name: ev__get-sum, arguments: {a: 2, b: 40}}\n"
      "  - expect: {last_contains: \"The sum of 2 and 40 is 42.\"}\n"
      "    say: done\n");
  CliResult r = Steps("test p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "1 passed, 0 failed")) << r.out;
}

// A call cut by its limit is cancelled; the session carries on.
TEST_F(EverythingOverHttpTest, ACutCallLeavesTheSessionUsable) {
  Write(
      "mcp_servers:\n"
      "- name: ev\n"
      "  url: " +
          Url() +
          "\n"
          "  tool_timeout: 1s\n",
      "ev",
      "  a:\n"
      "  - call: {name: ev__trigger-long-running-operation, arguments: "
      "{duration: 60, steps: 2}}\n"
      "  - expect: {last_contains: \"timed out after 1s (the server's "
      "tool_timeout); the call was cancelled\"}\n"
      "    call: {name: ev__echo, arguments: {message: still here}}\n"
      "  - expect: {last_contains: \"Echo: still here\"}\n"
      "    say: done\n");
  CliResult r = Steps("test p.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "1 passed, 0 failed")) << r.out;
}

}  // namespace
