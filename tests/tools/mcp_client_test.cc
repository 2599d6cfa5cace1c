// The MCP client against a real child process: tests/tools/mcp/
// hostile_mcp_server.cc, one mode per way a server can behave or
// misbehave. Timing bounds are generous (a loaded 2-core machine): a cut
// that should come after 300ms must come within 10s; nothing here sleeps
// to wait for something to happen.
#include "tools/mcp_client.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/log_capture.h"
#include "common/temp_dir.h"
#include "core/clock.h"
#include "process/local_launcher.h"
#include "tools/json_rpc.h"
#include "tools/mcp_tool.h"

namespace steps {
namespace {

using std::chrono::steady_clock;
using test_support::LogCapture;
using test_support::TempDir;

constexpr Millis kGenerous{10000};

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class McpClientTest : public ::testing::Test {
 protected:
  McpServerSpec Spec(const std::string& mode) {
    McpServerSpec spec;
    spec.name = "h";
    spec.argv = {HOSTILE_MCP_SERVER, mode};
    spec.env["MCP_TEST_LOG"] = dir_ / "server.log";
    spec.startup_timeout = kGenerous;
    return spec;
  }

  Result<std::shared_ptr<McpClient>> Start(const McpServerSpec& spec,
                                           Deadline deadline = {},
                                           McpClientOptions options = {}) {
    return McpClient::Start(spec, launcher_, dir_.path(), RealClock(), deadline,
                            cancel_, options);
  }

  std::shared_ptr<McpClient> StartGood(const std::string& mode = "good") {
    auto client = Start(Spec(mode));
    EXPECT_TRUE(client.ok()) << client.status().message();
    return client.ok() ? *client : nullptr;
  }

  std::string ServerLog() {
    std::ifstream in(dir_ / "server.log");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  Millis Since(steady_clock::time_point start) {
    return std::chrono::duration_cast<Millis>(steady_clock::now() - start);
  }

  TempDir dir_;
  LocalProcessLauncher launcher_;
  CancelToken cancel_;
};

std::string CallText(McpClient& client, const std::string& tool,
                     const nlohmann::json& args = nlohmann::json::object()) {
  Result<nlohmann::json> r = client.CallTool(
      tool, args, Deadline::After(RealClock(), kGenerous), CancelToken());
  if (!r.ok()) return "ERROR: " + r.status().message();
  return McpContentText(*r);
}

TEST(JsonLineReaderTest, SplitsLinesAndRefusesOneOverTheBound) {
  JsonLineReader reader(8);
  ASSERT_TRUE(reader.Feed("ab\r\ncd").ok());
  EXPECT_EQ(reader.Next(), "ab");
  EXPECT_EQ(reader.Next(), std::nullopt);
  ASSERT_TRUE(reader.Feed("efgh\n12345678\n").ok());  // Exactly 8: fine.
  EXPECT_EQ(reader.Next(), "cdefgh");
  EXPECT_EQ(reader.Next(), "12345678");
  Status s = reader.Feed("123456789");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(Has(s.message(), "more than 8 bytes")) << s.message();
  EXPECT_FALSE(reader.Feed("\n").ok());  // Stays broken.
}

TEST(JsonRpcTest, ClassifiesMessages) {
  using nlohmann::json;
  EXPECT_EQ(ClassifyJsonRpc(json::parse(R"({"id":1,"result":{}})")),
            JsonRpcKind::kResponse);
  EXPECT_EQ(ClassifyJsonRpc(json::parse(R"({"id":"a","error":{}})")),
            JsonRpcKind::kResponse);
  EXPECT_EQ(ClassifyJsonRpc(json::parse(R"({"id":1,"method":"ping"})")),
            JsonRpcKind::kRequest);
  EXPECT_EQ(ClassifyJsonRpc(json::parse(R"({"method":"notifications/x"})")),
            JsonRpcKind::kNotification);
  EXPECT_EQ(ClassifyJsonRpc(json::parse(R"({"id":1})")), JsonRpcKind::kInvalid);
  EXPECT_EQ(ClassifyJsonRpc(json::parse(R"([1])")), JsonRpcKind::kInvalid);
  EXPECT_EQ(JsonRpcRequest(7, "tools/list", json::object()),
            R"({"id":7,"jsonrpc":"2.0","method":"tools/list","params":{}})");
}

TEST(JsonRpcTest, RefusesLinesNestedPastTheBound) {
  std::string ok = std::string(128, '[') + std::string(128, ']');
  std::string deep = std::string(129, '[') + std::string(129, ']');
  EXPECT_TRUE(ParseJsonRpcLine(ok).has_value());
  EXPECT_FALSE(ParseJsonRpcLine(deep).has_value());
  EXPECT_TRUE(ParseJsonRpcLine(R"({"a":"[[[[[[[["})").has_value());
  EXPECT_FALSE(ParseJsonRpcLine("not json").has_value());
}

TEST(McpToolNameTest, KeepsValidNamesAndShortensOthersStably) {
  EXPECT_EQ(McpToolName("fs", "read_file"), "fs__read_file");
  std::string odd = McpToolName("w", "get.weather/now");
  EXPECT_EQ(odd.substr(0, 19), "w__get_weather_now_");
  EXPECT_EQ(odd.size(), 19u + 8u);
  EXPECT_EQ(odd, McpToolName("w", "get.weather/now"));  // Stable.
  EXPECT_NE(odd, McpToolName("w", "get_weather/now"));  // Still apart.
  std::string exact(64 - 3, 'x');
  EXPECT_EQ(McpToolName("a", exact), "a__" + exact);   // 64: kept.
  std::string longer = McpToolName("a", exact + "x");  // 65: cut.
  EXPECT_EQ(longer.size(), 64u);
  EXPECT_EQ(longer.substr(0, 55), ("a__" + exact).substr(0, 55));
}

TEST(McpContentTextTest, DescribesEveryKindOfBlock) {
  auto text = McpContentText(nlohmann::json::parse(R"({"content":[
    {"type":"text","text":"one"},{"type":"text","text":"two"},
    {"type":"image","mimeType":"image/png","data":"AAAAAAAA"},
    {"type":"resource","resource":{"uri":"file:///a","text":"inside"}},
    {"type":"resource_link","uri":"file:///c","name":"c"},
    {"type":"what"}]})"));
  EXPECT_EQ(text,
            "one\ntwo\n[image, image/png, 6 bytes — not shown]\n"
            "[resource file:///a]\ninside\n[resource link: file:///c (c)]\n"
            "[content of type 'what' — not shown]");
  EXPECT_EQ(McpContentText(nlohmann::json::parse(R"({"content":[]})")),
            "(no output)");
  EXPECT_EQ(McpContentText(nlohmann::json::parse(
                R"({"content":[],"structuredContent":{"a":1}})")),
            R"({"a":1})");
}

TEST_F(McpClientTest, HandshakeListsToolsAndCallsThem) {
  auto client = StartGood();
  ASSERT_TRUE(client);
  EXPECT_EQ(client->protocol_version(), "2025-06-18");
  ASSERT_EQ(client->tools().size(), 11u);
  EXPECT_EQ(client->tools()[0].name, "echo");
  EXPECT_EQ(client->tools()[0].description, "The echo tool.");
  EXPECT_EQ(CallText(*client, "echo", {{"text", "hello"}}), "hello");
  EXPECT_EQ(CallText(*client, "add", {{"a", 2}, {"b", 3}}), "5");
  EXPECT_TRUE(Has(CallText(*client, "nope"), "no tool nope (code -32602)"));
}

TEST_F(McpClientTest, FollowsEveryPageOfTheToolList) {
  auto client = StartGood("pages");
  ASSERT_TRUE(client);
  ASSERT_EQ(client->tools().size(), 11u);  // Pages of 4, 4 and 3.
  EXPECT_EQ(client->tools()[10].name, "env");
}

TEST_F(McpClientTest, AcceptsAnOlderProtocolVersionAndRefusesAnUnknownOne) {
  auto old = Start(Spec("version-2024"));
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ((*old)->protocol_version(), "2024-11-05");
  auto unknown = Start(Spec("old-version"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "mcp server 'h': it speaks MCP protocol version '1999-01-01', "
            "which steps does not (steps speaks 2025-06-18, 2025-03-26, "
            "2024-11-05)");
}

TEST_F(McpClientTest, AMissingCommandCannotStart) {
  McpServerSpec spec = Spec("good");
  spec.argv = {"no-such-mcp-server-for-steps"};
  auto client = Start(spec);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Has(client.status().message(),
                  "mcp server 'h': cannot start 'no-such-mcp-server-for-steps'"
                  ": no-such-mcp-server-for-steps: command not found"))
      << client.status().message();
}

TEST_F(McpClientTest, ACrashAtStartSaysHowItEndedAndQuotesItsStderr) {
  auto client = Start(Spec("crash"));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Has(client.status().message(),
                  "mcp server 'h': the server is gone: it exited with code 3; "
                  "the end of its stderr: fatal: no configuration found"))
      << client.status().message();
}

TEST_F(McpClientTest, AHangOnInitializeIsCutAtTheStartupTimeout) {
  McpServerSpec spec = Spec("hang");
  spec.startup_timeout = Millis(300);
  auto start = steady_clock::now();
  auto client = Start(spec);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(client.status().message(),
            "mcp server 'h': did not finish starting within 300ms "
            "(startup_timeout)");
  EXPECT_GE(Since(start), Millis(300));
  EXPECT_LT(Since(start), kGenerous);
}

TEST_F(McpClientTest, TheStepDeadlineBoundsTheStartToo) {
  auto client = Start(Spec("hang"), Deadline::After(RealClock(), Millis(200)));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().message(),
            "mcp server 'h': did not finish starting before the step's "
            "deadline");
}

TEST_F(McpClientTest, GarbageOnStdoutIsNamedWhenTheStartRunsOut) {
  McpServerSpec spec = Spec("garbage");
  spec.startup_timeout = Millis(500);
  LogCapture logs;
  auto client = Start(spec);
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(Has(client.status().message(),
                  "did not finish starting within 500ms (startup_timeout); it "
                  "wrote 1 line to stdout that is not JSON-RPC (the first: "
                  "'this is not json {')"))
      << client.status().message();
  EXPECT_EQ(logs.LinesWith("mcp.not_json_rpc").size(), 1u);
}

TEST_F(McpClientTest, ABannerLineBeforeTheProtocolIsSkipped) {
  auto client = StartGood("banner");
  ASSERT_TRUE(client);
  EXPECT_EQ(CallText(*client, "echo", {{"text", "x"}}), "x");
}

TEST_F(McpClientTest, ALineOverTheBoundEndsTheSession) {
  McpClientOptions options;
  options.max_line_bytes = 1024 * 1024;
  auto client = Start(Spec("huge-line"), {}, options);
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(Has(client.status().message(),
                  "mcp server 'h': the server is gone: it sent a line of "
                  "more than 1048576 bytes on stdout"))
      << client.status().message();
}

TEST_F(McpClientTest, AChattyStderrIsDrainedAndBounded) {
  LogCapture logs;
  SetMinLogLevel(LogLevel::kDebug);
  auto client = StartGood("chatty");  // 8 MiB of stderr before answering.
  SetMinLogLevel(LogLevel::kInfo);
  ASSERT_TRUE(client);
  size_t logged = logs.LinesWith("mcp.stderr ").size();
  EXPECT_GT(logged, 0u);
  EXPECT_LT(logged, 64u * 1024 / 4096 + 2);  // 64 KiB of 4 KiB lines.
  EXPECT_EQ(logs.LinesWith("mcp.stderr_cut").size(), 1u);
}

TEST_F(McpClientTest, AnExitMidCallFailsThatCallAndEveryLaterOne) {
  auto client = StartGood();
  ASSERT_TRUE(client);
  std::string first = CallText(*client, "exit");
  EXPECT_EQ(first, "ERROR: the server is gone: it exited with code 4");
  EXPECT_EQ(CallText(*client, "echo", {{"text", "x"}}),
            "ERROR: the server is gone: it exited with code 4");
}

TEST_F(McpClientTest, ASlowCallIsCutAndTheServerToldToCancelIt) {
  auto client = StartGood();
  ASSERT_TRUE(client);
  auto start = steady_clock::now();
  Result<nlohmann::json> r = client->CallTool(
      "slow", {{"ms", 60000}}, Deadline::After(RealClock(), Millis(300)),
      CancelToken());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_LT(Since(start), kGenerous);
  // The server reads in order: once echo is answered, it has seen the
  // notice (initialize was 1, tools/list 2, the slow call 3).
  EXPECT_EQ(CallText(*client, "echo", {{"text", "after"}}), "after");
  EXPECT_TRUE(Has(ServerLog(), "slow\ncancelled 3\n")) << ServerLog();
}

TEST_F(McpClientTest, CancellingTheTokenCutsACall) {
  auto client = StartGood();
  ASSERT_TRUE(client);
  CancelToken token;
  std::thread canceller([token] {
    token.WaitUntil(steady_clock::now() + std::chrono::milliseconds(200));
    token.Cancel(CancelReason::kAbort);
  });
  auto start = steady_clock::now();
  Result<nlohmann::json> r =
      client->CallTool("slow", {{"ms", 60000}}, Deadline(), token);
  canceller.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  EXPECT_LT(Since(start), kGenerous);
}

TEST_F(McpClientTest, ServerRequestsAreAnsweredAndNotificationsLogged) {
  auto client = StartGood();
  ASSERT_TRUE(client);
  LogCapture logs;
  std::string answers = CallText(*client, "chat");
  EXPECT_TRUE(Has(answers, R"({"id":"s1","jsonrpc":"2.0","result":{}})"))
      << answers;
  EXPECT_TRUE(Has(answers, R"("code":-32601,"message":"steps does not offer )"
                           R"('roots/list'")"))
      << answers;
  auto warned = logs.LinesWith("mcp.log");
  ASSERT_EQ(warned.size(), 1u);
  EXPECT_TRUE(Has(warned[0],
                  "WRN mcp.log server=h level=warning logger=test "
                  "data=careful"))
      << warned[0];
  EXPECT_EQ(CallText(*client, "echo", {{"text", "still"}}), "still");
}

TEST_F(McpClientTest, StopEndsTheServerEvenOneThatIgnoresSigterm) {
  for (const char* mode : {"good", "ignore-term"}) {
    auto client = StartGood(mode);
    ASSERT_TRUE(client);
    int pid = std::stoi(CallText(*client, "pid"));
    ASSERT_EQ(kill(pid, 0), 0);
    auto start = steady_clock::now();
    client->Stop();
    EXPECT_LT(Since(start), kGenerous);
    EXPECT_EQ(kill(pid, 0), -1) << mode;  // Reaped: the pid is gone.
    EXPECT_EQ(errno, ESRCH);
    EXPECT_TRUE(Has(CallText(*client, "echo"), "the server is gone"));
  }
}

class McpToolTest : public McpClientTest {
 protected:
  ToolResult Call(const McpTool& tool, const nlohmann::json& args,
                  ToolContext& context) {
    return tool.Execute(args, context);
  }
};

TEST_F(McpToolTest, ResultsAreBoundedErrorsMarkedAndTimeoutsNamed) {
  auto client = StartGood();
  ASSERT_TRUE(client);
  auto find = [&](const std::string& name) {
    for (const McpToolInfo& t : client->tools())
      if (t.name == name) return t;
    return McpToolInfo{};
  };
  McpTool big(McpToolName("h", "big"), client, find("big"));
  McpTool fail(McpToolName("h", "fail"), client, find("fail"));
  McpTool slow(McpToolName("h", "slow"), client, find("slow"));
  McpTool image(McpToolName("h", "image"), client, find("image"));
  EXPECT_EQ(big.name(), "h__big");
  EXPECT_EQ(big.description(), "The big tool.");
  ToolContext context(dir_.path(), RealClock(), launcher_);
  context.limits.max_output_bytes = 1000;
  context.tool_timeout = Millis(300);

  ToolResult r = big.Execute({{"bytes", 1000}}, context);  // At the bound.
  EXPECT_FALSE(r.is_error);
  EXPECT_EQ(r.content, std::string(1000, 'b'));
  r = big.Execute({{"bytes", 5000}}, context);
  EXPECT_FALSE(r.is_error);
  EXPECT_LT(r.content.size(), 1200u);
  EXPECT_TRUE(Has(r.content, "4000 bytes")) << r.content;

  r = fail.Execute(nlohmann::json::object(), context);
  EXPECT_TRUE(r.is_error);
  EXPECT_EQ(r.content, "it went wrong");

  r = image.Execute(nlohmann::json::object(), context);
  EXPECT_EQ(r.content,
            "a picture:\n[image, image/png, 6 bytes — not shown]\n"
            "[audio, audio/wav, 3 bytes — not shown]");

  r = slow.Execute({{"ms", 60000}}, context);
  EXPECT_TRUE(r.is_error);
  EXPECT_EQ(r.content,
            "h__slow: timed out after 300ms (tool_timeout); the call was "
            "cancelled");

  context.deadline = Deadline::After(RealClock(), Millis(200));
  context.tool_timeout = Millis(60000);
  r = slow.Execute({{"ms", 60000}}, context);
  EXPECT_EQ(r.content,
            "h__slow: stopped: the step's deadline was reached; the call was "
            "cancelled");
}

}  // namespace
}  // namespace steps
