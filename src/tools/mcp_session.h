// McpSession: the JSON-RPC exchange with one MCP server over one transport
// (a child's stdin and stdout, tools/mcp_stdio_session.h; Streamable HTTP,
// tools/mcp_http_session.h). McpClient (tools/mcp_client.h) speaks the
// protocol through it and knows nothing of the transport.
//
// A session never throws and never waits past the deadline and the cancel
// token it is given. Not thread-safe: McpClient holds its lock around every
// use. Messages here do not name the server; McpClient prefixes them.
#ifndef STEPS_TOOLS_MCP_SESSION_H_
#define STEPS_TOOLS_MCP_SESSION_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/cancel.h"
#include "core/clock.h"
#include "core/status.h"

namespace steps {

class McpSession {
 public:
  virtual ~McpSession() = default;

  // Sends a request and waits for its answer: the result, or why there is
  // none. A deadline or cancellation also tells the server
  // (notifications/cancelled). Errors: kDeadlineExceeded, kCancelled,
  // kUnavailable (the server answered with an error, is gone or broke the
  // protocol).
  virtual Result<nlohmann::json> Request(const std::string& method,
                                         const nlohmann::json& params,
                                         Deadline deadline,
                                         const CancelToken& cancel) = 0;

  // Queues a notification; it goes out before or with the next request.
  virtual void Notify(const std::string& method,
                      const nlohmann::json& params) = 0;

  // The protocol version agreed at initialize, called before the
  // notifications/initialized is queued. Streamable HTTP sends it with
  // every later request.
  virtual void SetProtocolVersion(const std::string& version) { (void)version; }

  // Why the server can take no more requests; "" while it can.
  virtual const std::string& gone() const = 0;

  // A note for an error message ("; ..."): what the server sent that was
  // not JSON-RPC, the end of its stderr. "" when there is nothing to add.
  virtual std::string Evidence() const = 0;
};

// Shared by the transports: what to do with what a server sends.

// At most 200 bytes of `text`, "..." when cut, valid UTF-8: for logs and
// messages.
std::string QuoteMcpText(std::string_view text);

// Logs a notification: notifications/message as `mcp.log` at the level the
// server gave, anything else as `mcp.notification` at debug.
void LogMcpNotification(const std::string& server,
                        const nlohmann::json& notification);

// The line answering a request from the server: ping gets its empty
// result; anything else (roots/list, sampling/createMessage, ...) is a
// capability steps does not declare: "method not found".
std::string AnswerMcpRequest(const std::string& server,
                             const nlohmann::json& request);

// A response to `method` as the session returns it: its result, or
// kUnavailable naming the JSON-RPC error.
Result<nlohmann::json> McpResponseResult(const std::string& method,
                                         nlohmann::json response);

}  // namespace steps

#endif  // STEPS_TOOLS_MCP_SESSION_H_
