// McpClient: one Model Context Protocol server, either started as a child
// process and spoken to over its stdin and stdout (the stdio transport,
// tools/mcp_stdio_session.h) or reached at a URL (Streamable HTTP,
// tools/mcp_http_session.h); JSON-RPC 2.0 either way, see docs/mcp.md. It
// performs the handshake (initialize, then notifications/initialized),
// lists the server's tools (every page) and calls them.
//
// One client serves one agent step: it is started before the conversation
// and stopped when the step ends (a child's process group gets SIGTERM,
// then SIGKILL after a short grace; an HTTP session is ended with DELETE). It
// never hangs and never throws: every wait is bounded by a deadline and a
// cancel token, every failure is a Status whose message starts "mcp server
// 'NAME': ".
#ifndef STEPS_TOOLS_MCP_CLIENT_H_
#define STEPS_TOOLS_MCP_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/cancel.h"
#include "core/clock.h"
#include "core/duration.h"
#include "core/status.h"

namespace steps {

class ProcessLauncher;

// The protocol version asked for, and those accepted from a server.
inline constexpr char kMcpProtocolVersion[] = "2025-06-18";
inline constexpr const char* kMcpAcceptedVersions[] = {
    "2025-06-18", "2025-03-26", "2024-11-05"};

// A server as declared (`mcp_servers:`, docs/mcp.md), its `env:` expanded.
struct McpServerSpec {
  std::string name;
  // Streamable HTTP: the endpoint (http:// or https://). When set, argv,
  // command and env are unused.
  std::string url;
  // Sent with every HTTP request, values expanded. They may hold secrets:
  // never logged. A value with a line break or NUL byte is refused by Start
  // (kInvalidArgument), nothing sent.
  std::vector<std::pair<std::string, std::string>> headers;
  // stdio: argv run directly (argv[0] looked up in PATH) when not empty;
  // otherwise `command` through `bash -c`.
  std::vector<std::string> argv;
  std::string command;
  // Set over the launcher's environment (which withholds provider keys).
  std::map<std::string, std::string> env;
  // The handshake and the tool list must be done within this (and within
  // the step's deadline). Default: 30s.
  Millis startup_timeout{30000};
  // Per tools/call. nullopt: the step's tool_timeout; zero: none of its own.
  std::optional<Millis> tool_timeout;
};

struct McpClientOptions {
  // A line from the server's stdout, an HTTP answer of JSON or one event of
  // an HTTP event stream longer than this is an error (memory stays
  // bounded). Default: 16 MiB.
  size_t max_line_bytes = 16 * 1024 * 1024;
  // Bytes of the server's stderr logged (at debug) in all; the rest is
  // read and counted, never kept. Default: 64 KiB.
  size_t max_stderr_log_bytes = 64 * 1024;
  // The last bytes of stderr quoted in an error about a failed start or a
  // server that died. Default: 2 KiB.
  size_t stderr_tail_bytes = 2048;
  // Tools accepted from tools/list; more are an error. Default: 1000.
  size_t max_tools = 1000;
  // Pages of tools/list followed. Default: 100.
  int max_pages = 100;
  // Between SIGTERM and SIGKILL when the server is stopped; for HTTP, the
  // limit on the DELETE that ends the session. Default: 500ms.
  Millis kill_grace{500};
  // Sent as clientInfo.version. Default: the build's version.
  std::string client_version;
};

// One tool as the server lists it.
struct McpToolInfo {
  std::string name;
  std::string description;
  // The tool's inputSchema (an object schema; {"type": "object"} when the
  // server gave none).
  nlohmann::json input_schema;
};

class McpSession;

// Thread-safe: calls are serialised (one request in flight at a time).
class McpClient {
 public:
  // Starts the server in `working_dir` through `launcher` (or, for a url,
  // opens an HTTP session; launcher and working_dir are unused), performs the
  // handshake and lists the tools, all before the earlier of
  // spec.startup_timeout and `deadline`. Errors: kDeadlineExceeded (the
  // time ran out), kCancelled (`cancel` fired), kUnavailable (it could not
  // start, it exited, it broke the protocol, it answered with an error or a
  // protocol version this client does not speak), kInvalidArgument (a
  // header value that cannot be sent).
  static Result<std::shared_ptr<McpClient>> Start(
      const McpServerSpec& spec, ProcessLauncher& launcher,
      const std::string& working_dir, Clock& clock, Deadline deadline,
      const CancelToken& cancel, const McpClientOptions& options = {});

  // Stops the server (see Stop).
  ~McpClient();
  McpClient(const McpClient&) = delete;
  McpClient& operator=(const McpClient&) = delete;

  const McpServerSpec& spec() const { return spec_; }
  // What the server listed, in its order.
  const std::vector<McpToolInfo>& tools() const { return tools_; }
  // The version the server agreed to.
  const std::string& protocol_version() const { return protocol_version_; }

  // One tools/call: the result object ({content: [...], isError, ...}).
  // At the deadline or on cancellation the server is sent
  // notifications/cancelled for the call and kDeadlineExceeded or
  // kCancelled comes back. kUnavailable when the server answered with a
  // JSON-RPC error, is gone, or broke the protocol (a stdio server is then
  // gone for later calls; an HTTP server is gone only once its session
  // expired, and is tried again otherwise).
  Result<nlohmann::json> CallTool(const std::string& tool,
                                  const nlohmann::json& arguments,
                                  Deadline deadline, const CancelToken& cancel);

  // Stops the server (SIGTERM, SIGKILL after options.kill_grace), or ends
  // an HTTP session (DELETE, within options.kill_grace). Later calls fail
  // with "the server is gone". Idempotent.
  void Stop();

 private:
  McpClient(McpServerSpec spec, McpClientOptions options);
  Status Handshake(Deadline deadline, const CancelToken& cancel);
  Status ListTools(Deadline deadline, const CancelToken& cancel);

  McpServerSpec spec_;
  McpClientOptions options_;
  std::mutex mu_;
  std::unique_ptr<McpSession> session_;
  std::vector<McpToolInfo> tools_;
  std::string protocol_version_;
};

}  // namespace steps

#endif  // STEPS_TOOLS_MCP_CLIENT_H_
