// The MCP client over Streamable HTTP against real HTTP on loopback: our
// hostile server (tests/tools/mcp/hostile_mcp_http_server.h), one mode per
// way a server can behave or misbehave, and a port nobody listens on.
// Timing bounds are generous (a loaded 2-core machine): a cut that should
// come after 300ms must come within 10s; nothing here sleeps to wait for
// something to happen.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "common/log_capture.h"
#include "core/clock.h"
#include "process/local_launcher.h"
#include "tools/json_rpc.h"
#include "tools/mcp/hostile_mcp_http_server.h"
#include "tools/mcp_client.h"
#include "tools/mcp_tool.h"

namespace steps {
namespace {

using std::chrono::steady_clock;
using test_support::HostileMcpHttpServer;
using test_support::LogCapture;

constexpr Millis kGenerous{10000};
constexpr char kSecret[] = "Bearer s3cr3t-value";

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

Millis Since(steady_clock::time_point start) {
  return std::chrono::duration_cast<Millis>(steady_clock::now() - start);
}

// A port that was free a moment ago and is closed now: connecting to it is
// refused.
int ClosedPort() {
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

class McpHttpClientTest : public ::testing::Test {
 protected:
  McpServerSpec Spec(const std::string& url) {
    McpServerSpec spec;
    spec.name = "h";
    spec.url = url;
    spec.headers = {{"Authorization", kSecret}};
    spec.startup_timeout = kGenerous;
    return spec;
  }

  Result<std::shared_ptr<McpClient>> Start(const McpServerSpec& spec,
                                           McpClientOptions options = {}) {
    return McpClient::Start(spec, launcher_, "/", RealClock(), Deadline(),
                            cancel_, options);
  }

  LocalProcessLauncher launcher_;
  CancelToken cancel_;
};

TEST_F(McpHttpClientTest, HandshakeListsCallsAndEndsTheSession) {
  SetMinLogLevel(LogLevel::kDebug);
  LogCapture logs;
  HostileMcpHttpServer server("good");
  auto client = Start(Spec(server.url()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  EXPECT_EQ((*client)->protocol_version(), "2025-06-18");
  ASSERT_EQ((*client)->tools().size(), 1u);
  EXPECT_EQ((*client)->tools()[0].name, "echo");
  Result<nlohmann::json> r = (*client)->CallTool(
      "echo", {{"text", "hi"}}, Deadline::After(RealClock(), kGenerous),
      CancelToken());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(McpContentText(*r), "echo: hi");
  (*client)->Stop();
  ASSERT_TRUE(server.WaitFor("", 10000, "DELETE"));

  std::vector<HostileMcpHttpServer::Received> got = server.received();
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0].rpc_method, "initialize");
  EXPECT_EQ(got[0].session_id, "");
  EXPECT_EQ(got[0].protocol_version, "");
  EXPECT_EQ(got[1].rpc_method, "notifications/initialized");
  EXPECT_EQ(got[2].rpc_method, "tools/list");
  EXPECT_EQ(got[3].rpc_method, "tools/call");
  EXPECT_EQ(got[4].http_method, "DELETE");
  for (const auto& g : got) {
    EXPECT_EQ(g.accept, "application/json, text/event-stream");
    EXPECT_EQ(g.authorization, kSecret);
    if (g.rpc_method == "initialize") continue;
    EXPECT_EQ(g.session_id, "session-1") << g.rpc_method;
    EXPECT_EQ(g.protocol_version, "2025-06-18") << g.rpc_method;
  }
  // The event stream's notification is logged like stdio's; the header's
  // value appears in no log line.
  ASSERT_EQ(logs.LinesWith("mcp.log").size(), 1u);
  EXPECT_TRUE(Has(logs.LinesWith("mcp.log")[0], "listing tools"));
  EXPECT_FALSE(logs.lines().empty());
  EXPECT_TRUE(logs.LinesWith("s3cr3t").empty());
  SetMinLogLevel(LogLevel::kInfo);
}

TEST_F(McpHttpClientTest, ANobodyListeningPortIsAClearErrorAtOnce) {
  const std::string url =
      "http://127.0.0.1:" + std::to_string(ClosedPort()) + "/mcp";
  auto start = steady_clock::now();
  auto client = Start(Spec(url));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(
      Has(client.status().message(), "mcp server 'h': cannot reach " + url))
      << client.status().message();
  EXPECT_LT(Since(start), kGenerous);
}

TEST_F(McpHttpClientTest, StartupTimeoutCutsAServerThatNeverInitializes) {
  HostileMcpHttpServer server("hang-initialize");
  McpServerSpec spec = Spec(server.url());
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
  // An initialize is never cancelled (the spec forbids it): nothing but it
  // was sent.
  ASSERT_EQ(server.received().size(), 1u);
  EXPECT_EQ(server.received()[0].rpc_method, "initialize");
}

TEST_F(McpHttpClientTest, AnErrorStatusIsNamedWithAnExcerptOfItsBody) {
  HostileMcpHttpServer server("status-500");
  auto client = Start(Spec(server.url()));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().message(),
            "mcp server 'h': it answered 'initialize' with HTTP 500: "
            "'internal trouble second line'");
}

TEST_F(McpHttpClientTest, AnAnswerThatIsNotJsonIsQuoted) {
  HostileMcpHttpServer server("not-json");
  auto client = Start(Spec(server.url()));
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(Has(client.status().message(),
                  "mcp server 'h': its answer to 'initialize' is not "
                  "JSON-RPC (Content-Type 'application/json'): "
                  "'<html>not json</html>'"))
      << client.status().message();
}

// A well-formed response to another id is not "not JSON-RPC": the error
// says whose id it carries.
TEST_F(McpHttpClientTest, AnAnswerWithAnotherIdIsNamedAsSuch) {
  HostileMcpHttpServer server("wrong-id");
  auto client = Start(Spec(server.url()));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().message(),
            "mcp server 'h': its answer to 'initialize' is the response to "
            "another request (id \"1\"; the request's is 1)");
}

TEST_F(McpHttpClientTest, ARedirectIsRefusedNotFollowed) {
  HostileMcpHttpServer server("redirect");
  auto client = Start(Spec(server.url()));
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(Has(client.status().message(),
                  "mcp server 'h': it answered 'initialize' with HTTP 307, "
                  "a redirect to 'http://127.0.0.1:" +
                      std::to_string(server.port()) +
                      "/elsewhere'; steps does not follow redirects"))
      << client.status().message();
  EXPECT_EQ(server.received().size(), 1u);
}

TEST_F(McpHttpClientTest, ToolDeadlineCutsASilentStreamAndPostsCancelled) {
  HostileMcpHttpServer server("sse-silent");
  auto client = Start(Spec(server.url()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  auto start = steady_clock::now();
  Result<nlohmann::json> r = (*client)->CallTool(
      "echo", {{"text", "x"}}, Deadline::After(RealClock(), Millis(300)),
      CancelToken());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_GE(Since(start), Millis(300));
  EXPECT_LT(Since(start), kGenerous);
  ASSERT_TRUE(server.WaitFor("notifications/cancelled", 10000));
  for (const auto& g : server.received()) {
    if (g.rpc_method != "notifications/cancelled") continue;
    auto body = nlohmann::json::parse(g.body);
    EXPECT_EQ(body["params"]["requestId"], 3);  // initialize 1, list 2.
    EXPECT_EQ(g.session_id, "session-1");
  }
  // The session lives on: the next call is answered... by the same
  // silence, so only its start is checked here through a second cut.
  r = (*client)->CallTool("echo", {}, Deadline::After(RealClock(), Millis(50)),
                          CancelToken());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
}

TEST_F(McpHttpClientTest, CancellingACallAbandonsItAndTellsTheServer) {
  HostileMcpHttpServer server("sse-silent");
  auto client = Start(Spec(server.url()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  CancelToken cancel;
  std::thread canceller([&] {
    server.WaitFor("tools/call", 10000);
    cancel.Cancel(CancelReason::kAbort);
  });
  auto start = steady_clock::now();
  Result<nlohmann::json> r = (*client)->CallTool(
      "echo", {}, Deadline::After(RealClock(), kGenerous), cancel);
  canceller.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  EXPECT_LT(Since(start), kGenerous);
  EXPECT_TRUE(server.WaitFor("notifications/cancelled", 10000));
}

TEST_F(McpHttpClientTest, AnExpiredSessionEndsTheServer) {
  HostileMcpHttpServer server("session-404");
  auto client = Start(Spec(server.url()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  Result<nlohmann::json> r = (*client)->CallTool(
      "echo", {}, Deadline::After(RealClock(), kGenerous), CancelToken());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "the server is gone: its session expired (it answered "
            "'tools/call' with HTTP 404)");
  r = (*client)->CallTool("echo", {}, Deadline::After(RealClock(), kGenerous),
                          CancelToken());
  EXPECT_TRUE(Has(r.status().message(), "the server is gone"));
  (*client)->Stop();
  // No DELETE for a session the server no longer knows; no second call
  // went out.
  for (const auto& g : server.received()) {
    EXPECT_NE(g.http_method, "DELETE");
  }
  EXPECT_EQ(server.received().size(), 4u);
}

TEST_F(McpHttpClientTest, AServersRequestIsAnsweredWhileItsStreamIsOpen) {
  HostileMcpHttpServer server("ping-first");
  auto client = Start(Spec(server.url()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  Result<nlohmann::json> r = (*client)->CallTool(
      "echo", {{"text", "after a ping"}},
      Deadline::After(RealClock(), kGenerous), CancelToken());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(McpContentText(*r), "echo: after a ping");
  bool ponged = false;
  for (const auto& g : server.received()) {
    auto body = nlohmann::json::parse(g.body, nullptr, false);
    if (!body.is_object() || body.value("id", nlohmann::json()) != "srv-1") {
      continue;
    }
    ponged = true;
    EXPECT_EQ(body["result"], nlohmann::json::object());
    EXPECT_EQ(g.session_id, "session-1");
  }
  EXPECT_TRUE(ponged);
}

// The hostile server's answer in mode "huge" is this many bytes.
size_t HugeAnswerBytes() {
  nlohmann::json big = {
      {"jsonrpc", "2.0"},
      {"id", 3},
      {"result",
       {{"content",
         {{{"type", "text"}, {"text", std::string(2 * 1024 * 1024, 'x')}}}}}}};
  return big.dump().size();
}

TEST_F(McpHttpClientTest, AJsonAnswerIsBoundedAtExactlyTheLimit) {
  HostileMcpHttpServer server("huge");
  McpClientOptions options;
  options.max_line_bytes = HugeAnswerBytes();
  auto client = Start(Spec(server.url()), options);
  ASSERT_TRUE(client.ok()) << client.status().message();
  Result<nlohmann::json> r = (*client)->CallTool(
      "echo", {}, Deadline::After(RealClock(), kGenerous), CancelToken());
  EXPECT_TRUE(r.ok()) << r.status().message();

  options.max_line_bytes = HugeAnswerBytes() - 1;
  client = Start(Spec(server.url()), options);
  ASSERT_TRUE(client.ok()) << client.status().message();
  r = (*client)->CallTool("echo", {}, Deadline::After(RealClock(), kGenerous),
                          CancelToken());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "its answer is larger than " +
                                      std::to_string(options.max_line_bytes) +
                                      " bytes (the limit of a message)");
}

TEST_F(McpHttpClientTest, AnEventThatNeverEndsIsCutAtTheLimit) {
  HostileMcpHttpServer server("huge-event");
  McpClientOptions options;
  options.max_line_bytes = 1024 * 1024;
  auto client = Start(Spec(server.url()), options);
  ASSERT_TRUE(client.ok()) << client.status().message();
  auto start = steady_clock::now();
  Result<nlohmann::json> r = (*client)->CallTool(
      "echo", {}, Deadline::After(RealClock(), kGenerous), CancelToken());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "it sent an event larger than 1048576 bytes (the limit of a "
            "message)");
  EXPECT_LT(Since(start), kGenerous);
}

// Through McpTool, as an agent calls it: the server's tool_timeout names
// itself.
TEST_F(McpHttpClientTest, McpToolReportsTheToolTimeout) {
  HostileMcpHttpServer server("sse-silent");
  McpServerSpec spec = Spec(server.url());
  spec.tool_timeout = Millis(300);
  auto client = Start(spec);
  ASSERT_TRUE(client.ok()) << client.status().message();
  McpTool tool("h__echo", *client, (*client)->tools()[0]);
  ToolContext context("/", RealClock(), launcher_);
  ToolResult result = tool.Execute({{"text", "x"}}, context);
  EXPECT_TRUE(result.is_error);
  EXPECT_EQ(result.content,
            "h__echo: timed out after 300ms (the server's tool_timeout); the "
            "call was cancelled");
  EXPECT_TRUE(server.WaitFor("notifications/cancelled", 10000));
}

TEST_F(McpHttpClientTest, AnEventStreamIsKnownWhateverTheCaseOfItsType) {
  HostileMcpHttpServer server("odd-content-type");
  auto client = Start(Spec(server.url()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_EQ((*client)->tools().size(), 1u);
  EXPECT_EQ((*client)->tools()[0].name, "echo");
}

// A value whose ${NAME} expanded to a line break would end the header and
// start another: refused before anything is sent, the value not quoted.
TEST_F(McpHttpClientTest, AHeaderValueWithALineBreakIsRefusedUnsent) {
  HostileMcpHttpServer server("good");
  for (const std::string& value :
       {std::string("abc\r\nX-Injected: yes"), std::string("abc\n"),
        std::string("abc\0def", 7)}) {
    McpServerSpec spec = Spec(server.url());
    spec.headers.emplace_back("X-Token", value);
    auto client = Start(spec);
    ASSERT_FALSE(client.ok());
    EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(client.status().message(),
              "mcp server 'h': header 'X-Token' holds a line break or NUL "
              "byte once its ${NAME} references are expanded, so it is not "
              "sent (is there a trailing newline in the variable's value?)");
  }
  EXPECT_TRUE(server.received().empty());
}

// A notification is owed only a status (202). A server that answers one
// with an event stream it holds open must not hold the client: the start
// does not wait for that stream to end (it would until startup_timeout).
TEST_F(McpHttpClientTest,
       ANotificationAnsweredWithAStreamDoesNotHoldTheClient) {
  HostileMcpHttpServer server("notice-stream");
  auto client = Start(Spec(server.url()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  Result<nlohmann::json> r = (*client)->CallTool(
      "echo", {{"text", "hi"}}, Deadline::After(RealClock(), kGenerous),
      CancelToken());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(McpContentText(*r), "echo: hi");
}

}  // namespace
}  // namespace steps
