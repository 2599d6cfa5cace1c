#include "tools/mcp_tool.h"

#include <utility>

#include "core/hash.h"
#include "process/output_capture.h"
#include "tools/command_tool.h"
#include "tools/text.h"

namespace steps {
namespace {

constexpr size_t kMaxNameBytes = 64;
constexpr size_t kHashDigits = 8;

std::string StringField(const nlohmann::json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

// Bytes a base64 text decodes to (padding taken off).
uint64_t Base64Bytes(const std::string& data) {
  size_t n = data.size();
  while (n > 0 && (data[n - 1] == '=' || data[n - 1] == '\n')) --n;
  return static_cast<uint64_t>(n) * 3 / 4;
}

std::string DescribeBinary(const std::string& kind, const nlohmann::json& b,
                           const std::string& data_key) {
  std::string mime = StringField(b, "mimeType");
  std::string text = "[" + kind + (mime.empty() ? "" : ", " + mime);
  std::string uri = StringField(b, "uri");
  if (!uri.empty()) text += ", " + uri;
  if (b.contains(data_key) && b[data_key].is_string()) {
    text += ", " + DescribeSize(Base64Bytes(b[data_key].get<std::string>()));
  }
  return text + " — not shown]";
}

std::string BlockText(const nlohmann::json& b) {
  if (!b.is_object()) return "[a content block that is not an object]";
  std::string type = StringField(b, "type");
  if (type == "text") return StringField(b, "text");
  if (type == "image" || type == "audio")
    return DescribeBinary(type, b, "data");
  if (type == "resource_link") {
    std::string name = StringField(b, "name");
    std::string mime = StringField(b, "mimeType");
    return "[resource link: " + StringField(b, "uri") +
           (name.empty() ? "" : " (" + name + ")") +
           (mime.empty() ? "" : ", " + mime) + "]";
  }
  if (type == "resource") {
    nlohmann::json r = b.value("resource", nlohmann::json::object());
    if (!r.is_object()) return "[resource: malformed]";
    if (r.contains("text") && r["text"].is_string()) {
      std::string mime = StringField(r, "mimeType");
      return "[resource " + StringField(r, "uri") +
             (mime.empty() ? "" : ", " + mime) + "]\n" +
             r["text"].get<std::string>();
    }
    return DescribeBinary("resource", r, "blob");
  }
  return "[content of type '" + (type.empty() ? "?" : type) + "' — not shown]";
}

}  // namespace

std::string McpToolName(const std::string& server, const std::string& tool) {
  const std::string joined = server + "__" + tool;
  if (IsValidToolName(joined)) return joined;
  std::string name;
  for (char c : joined) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '-';
    name += ok ? c : '_';
  }
  if (name.size() > kMaxNameBytes - kHashDigits - 1) {
    name.resize(kMaxNameBytes - kHashDigits - 1);
  }
  return name + "_" + Sha256Hex(joined).substr(0, kHashDigits);
}

std::string McpContentText(const nlohmann::json& result) {
  std::string text;
  auto content = result.find("content");
  if (content != result.end() && content->is_array()) {
    for (const nlohmann::json& block : *content) {
      if (!text.empty()) text += "\n";
      text += BlockText(block);
    }
  }
  if (text.empty() && result.contains("structuredContent")) {
    text = result["structuredContent"].dump(
        -1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return text.empty() ? "(no output)" : text;
}

McpTool::McpTool(std::string exposed_name, std::shared_ptr<McpClient> client,
                 McpToolInfo info)
    : Tool(std::move(exposed_name),
           info.description.empty()
               ? "Tool '" + info.name + "' of MCP server '" +
                     client->spec().name + "'."
               : info.description,
           info.input_schema),
      client_(std::move(client)),
      remote_name_(std::move(info.name)) {}

ToolResult McpTool::Run(const nlohmann::json& arguments,
                        const ToolContext& context) const {
  std::optional<Millis> left = context.deadline.Remaining(context.clock);
  if (left && *left <= Millis(0)) {
    return ToolResult::Error(name() +
                             ": not run: the step's deadline has passed");
  }
  const std::optional<Millis>& own = client_->spec().tool_timeout;
  const Millis limit = own.value_or(context.tool_timeout);
  const bool limited = limit > Millis(0);
  const bool by_tool_timeout = limited && (!left || limit < *left);
  Deadline deadline = context.deadline;
  if (limited) {
    deadline = deadline.Earlier(Deadline::After(context.clock, limit));
  }
  Result<nlohmann::json> result =
      client_->CallTool(remote_name_, arguments, deadline, context.cancel);
  if (!result.ok()) {
    switch (result.status().code()) {
      case StatusCode::kDeadlineExceeded:
        return ToolResult::Error(
            name() + ": " +
            (by_tool_timeout
                 ? "timed out after " + FormatDuration(limit) + " (" +
                       (own ? "the server's tool_timeout" : "tool_timeout") +
                       "); the call was cancelled"
                 : "stopped: the step's deadline was reached; the call was "
                   "cancelled"));
      case StatusCode::kCancelled:
        return ToolResult::Error(name() + ": cancelled");
      default:
        return ToolResult::Error(name() + ": mcp server '" + server() +
                                 "': " + result.status().message());
    }
  }
  BoundedCapture capture(context.limits.max_output_bytes,
                         OutputKeep::kHeadAndTail);
  capture.Append(McpContentText(*result));
  std::string text = capture.Finish().text;
  auto is_error = result->find("isError");
  if (is_error != result->end() && is_error->is_boolean() &&
      is_error->get<bool>()) {
    return ToolResult::Error(std::move(text));
  }
  return ToolResult::Ok(std::move(text));
}

}  // namespace steps
