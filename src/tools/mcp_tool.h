// McpTool: one tool of an MCP server (tools/mcp_client.h) as an agent tool.
// The model sees it as SERVER__TOOL; a call is a tools/call on the server
// within the call's limits, its content blocks turned into text.
#ifndef STEPS_TOOLS_MCP_TOOL_H_
#define STEPS_TOOLS_MCP_TOOL_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tools/mcp_client.h"
#include "tools/tool.h"

namespace steps {

// The name the model sees for `tool` of `server`: SERVER__TOOL when that
// matches ^[a-zA-Z0-9_-]{1,64}$. Otherwise every other byte becomes '_',
// the name is cut to 55 bytes, and '_' and the first 8 hex digits of the
// SHA-256 of SERVER__TOOL are appended: stable from run to run, and two
// names that differ only in what was replaced still differ.
std::string McpToolName(const std::string& server, const std::string& tool);

// The text a model reads for a tools/call result's `content` (and
// `structuredContent` when there is no content): text blocks joined by
// newlines; image, audio and binary resource blocks described by type,
// MIME type and size, links and text resources by their URI; a block of a
// type this client does not know named by its type. Never empty:
// "(no output)".
std::string McpContentText(const nlohmann::json& result);

class McpTool : public Tool {
 public:
  // `client` must list `info` among its tools.
  McpTool(std::string exposed_name, std::shared_ptr<McpClient> client,
          McpToolInfo info);

  const std::string& server() const { return client_->spec().name; }
  const std::string& remote_name() const { return remote_name_; }

 protected:
  // A tools/call for at most the server's tool_timeout (else the context's
  // tool_timeout), never past the context's deadline, cancelled with the
  // context's token. The result's text is bounded like run_shell's output
  // (limits.max_output_bytes, head and tail). An error result when the
  // server says isError, answers with an error, is gone, or the call is
  // cut ("timed out after 20s (tool_timeout); the call was cancelled").
  ToolResult Run(const nlohmann::json& arguments,
                 const ToolContext& context) const override;

 private:
  std::shared_ptr<McpClient> client_;
  std::string remote_name_;
};

}  // namespace steps

#endif  // STEPS_TOOLS_MCP_TOOL_H_
