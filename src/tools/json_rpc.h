// JSON-RPC 2.0 as MCP's stdio transport carries it: one message per line of
// UTF-8 JSON, no embedded newlines. Framing and classification only; the
// exchange itself is McpClient's (tools/mcp_client.h).
#ifndef STEPS_TOOLS_JSON_RPC_H_
#define STEPS_TOOLS_JSON_RPC_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace steps {

// Cuts a byte stream into lines (without the '\n'; a trailing '\r' is
// dropped too). A line longer than max_line_bytes is an error: the reader
// then holds no more than that, whatever the stream sends. Not thread-safe.
class JsonLineReader {
 public:
  explicit JsonLineReader(size_t max_line_bytes)
      : max_line_bytes_(max_line_bytes) {}

  // Takes in `data`; InvalidArgument once a line is over the bound (the
  // reader is then broken: later calls return the same error).
  Status Feed(std::string_view data);
  // The next complete line, if any.
  std::optional<std::string> Next();

 private:
  size_t max_line_bytes_;
  std::string partial_;
  std::deque<std::string> lines_;
  Status error_;
};

// Deepest nesting of arrays and objects accepted in a message: nlohmann's
// serialiser recurses once per level, and what a server sends is serialised
// again (tool schemas go to the model). Matches the providers' bound.
inline constexpr int kMaxJsonRpcDepth = 128;

// One received line as JSON; nullopt when it is not JSON or nests deeper
// than kMaxJsonRpcDepth (checked first, without recursion).
std::optional<nlohmann::json> ParseJsonRpcLine(std::string_view line);

// What one received message is.
enum class JsonRpcKind {
  kResponse,      // Has an id and a result or an error.
  kRequest,       // Has a method and an id: the peer wants an answer.
  kNotification,  // Has a method and no id.
  kInvalid,       // None of these.
};

JsonRpcKind ClassifyJsonRpc(const nlohmann::json& message);

// A request's id as we send them (integers); nullopt for any other id.
std::optional<int64_t> JsonRpcIntId(const nlohmann::json& message);

// One line (no newline inside) for a request, a notification, a result
// and an error answer. Invalid UTF-8 in strings is replaced.
std::string JsonRpcRequest(int64_t id, std::string_view method,
                           const nlohmann::json& params);
std::string JsonRpcNotification(std::string_view method,
                                const nlohmann::json& params);
std::string JsonRpcResult(const nlohmann::json& id,
                          const nlohmann::json& result);
std::string JsonRpcError(const nlohmann::json& id, int code,
                         std::string_view message);

// JSON-RPC's error codes that this client sends.
inline constexpr int kJsonRpcMethodNotFound = -32601;

// "message (code -32602)" for an error object; a description of anything
// else that stands where the error object should.
std::string DescribeJsonRpcError(const nlohmann::json& error);

}  // namespace steps

#endif  // STEPS_TOOLS_JSON_RPC_H_
