#include "tools/mcp_session.h"

#include "core/log.h"
#include "core/utf8.h"
#include "tools/json_rpc.h"

namespace steps {
namespace {

// Bytes of a line or a value quoted in a log or a message.
constexpr size_t kQuoteBytes = 200;

// o[key] when it is a string, else `fallback` (a server may send anything).
std::string StringOr(const nlohmann::json& o, const char* key,
                     const char* fallback) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : fallback;
}

LogLevel LevelOfMcpLog(const std::string& level) {
  if (level == "debug") return LogLevel::kDebug;
  if (level == "info" || level == "notice") return LogLevel::kInfo;
  return LogLevel::kWarn;  // warning, error, critical, alert, emergency.
}

}  // namespace

std::string QuoteMcpText(std::string_view text) {
  std::string cut(text.substr(0, kQuoteBytes));
  if (text.size() > kQuoteBytes) cut += "...";
  return SanitizeUtf8(cut);
}

void LogMcpNotification(const std::string& server, const nlohmann::json& n) {
  const std::string method = n["method"].get<std::string>();
  const nlohmann::json params = n.value("params", nlohmann::json::object());
  if (method == "notifications/message" && params.is_object()) {
    std::string level = StringOr(params, "level", "info");
    nlohmann::json data = params.value("data", nlohmann::json());
    std::string text =
        data.is_string() ? data.get<std::string>()
                         : data.dump(-1, ' ', false,
                                     nlohmann::json::error_handler_t::replace);
    LogEvent(LevelOfMcpLog(level), "mcp.log",
             {{"server", server},
              {"level", QuoteMcpText(level)},
              {"logger", QuoteMcpText(StringOr(params, "logger", ""))},
              {"data", QuoteMcpText(text)}});
    return;
  }
  LogEvent(LogLevel::kDebug, "mcp.notification",
           {{"server", server}, {"method", QuoteMcpText(method)}});
}

std::string AnswerMcpRequest(const std::string& server,
                             const nlohmann::json& request) {
  const std::string method = request["method"].get<std::string>();
  if (method == "ping") {
    return JsonRpcResult(request["id"], nlohmann::json::object());
  }
  LogEvent(LogLevel::kDebug, "mcp.request_refused",
           {{"server", server}, {"method", QuoteMcpText(method)}});
  return JsonRpcError(request["id"], kJsonRpcMethodNotFound,
                      "steps does not offer '" + method + "'");
}

Result<nlohmann::json> McpResponseResult(const std::string& method,
                                         nlohmann::json response) {
  if (response.contains("error")) {
    return Status(StatusCode::kUnavailable,
                  "the server answered '" + method + "' with an error: " +
                      DescribeJsonRpcError(response["error"]));
  }
  return std::move(response["result"]);
}

}  // namespace steps
