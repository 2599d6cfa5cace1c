// MCP's Streamable HTTP transport (spec 2025-03-26 and 2025-06-18): each
// JSON-RPC message is a POST to the server's URL; the answer to a request
// is either one JSON message (application/json) or an event stream
// (text/event-stream) whose events carry JSON-RPC messages, read until the
// response to the request arrives. Notifications and responses POSTed get
// 202 Accepted.
//
// The Mcp-Session-Id the server gives at initialize is sent with every
// later request, MCP-Protocol-Version once the version is agreed; a 404 to
// a request that carries the session id means the session expired (the
// server can take no more requests). Ending the session sends DELETE with
// the id, best effort within options.kill_grace. Redirects are refused, not
// followed; header values are never logged.
#ifndef STEPS_TOOLS_MCP_HTTP_SESSION_H_
#define STEPS_TOOLS_MCP_HTTP_SESSION_H_

#include <memory>

#include "core/clock.h"
#include "tools/mcp_client.h"
#include "tools/mcp_session.h"

namespace steps {

// A session with the server at spec.url, sending spec.headers with every
// request. Nothing is sent until the first request. `clock` must outlive
// the session.
std::unique_ptr<McpSession> MakeMcpHttpSession(const McpServerSpec& spec,
                                               Clock& clock,
                                               const McpClientOptions& options);

}  // namespace steps

#endif  // STEPS_TOOLS_MCP_HTTP_SESSION_H_
