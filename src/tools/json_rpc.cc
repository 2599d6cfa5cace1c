#include "tools/json_rpc.h"

#include <utility>

#include "core/json_text.h"

namespace steps {

std::optional<nlohmann::json> ParseJsonRpcLine(std::string_view line) {
  if (!JsonDepthWithin(line, kMaxJsonRpcDepth)) return std::nullopt;
  nlohmann::json j =
      nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

Status JsonLineReader::Feed(std::string_view data) {
  if (!error_.ok()) return error_;
  while (!data.empty()) {
    size_t newline = data.find('\n');
    std::string_view piece =
        newline == std::string_view::npos ? data : data.substr(0, newline);
    if (partial_.size() + piece.size() > max_line_bytes_) {
      partial_.clear();
      partial_.shrink_to_fit();
      error_ = InvalidArgument("a line of more than " +
                               std::to_string(max_line_bytes_) + " bytes");
      return error_;
    }
    partial_.append(piece);
    if (newline == std::string_view::npos) break;
    if (!partial_.empty() && partial_.back() == '\r') partial_.pop_back();
    lines_.push_back(std::move(partial_));
    partial_.clear();
    data.remove_prefix(newline + 1);
  }
  return Status::Ok();
}

std::optional<std::string> JsonLineReader::Next() {
  if (lines_.empty()) return std::nullopt;
  std::string line = std::move(lines_.front());
  lines_.pop_front();
  return line;
}

JsonRpcKind ClassifyJsonRpc(const nlohmann::json& message) {
  if (!message.is_object()) return JsonRpcKind::kInvalid;
  auto method = message.find("method");
  bool has_id = message.contains("id") && !message["id"].is_null();
  if (method != message.end()) {
    if (!method->is_string()) return JsonRpcKind::kInvalid;
    return has_id ? JsonRpcKind::kRequest : JsonRpcKind::kNotification;
  }
  if (message.contains("id") &&
      (message.contains("result") || message.contains("error"))) {
    return JsonRpcKind::kResponse;
  }
  return JsonRpcKind::kInvalid;
}

std::optional<int64_t> JsonRpcIntId(const nlohmann::json& message) {
  auto id = message.find("id");
  if (id == message.end() || !id->is_number_integer()) return std::nullopt;
  return id->get<int64_t>();
}

std::string JsonRpcRequest(int64_t id, std::string_view method,
                           const nlohmann::json& params) {
  nlohmann::json m = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
  if (!params.is_null()) m["params"] = params;
  return DumpJson(m);
}

std::string JsonRpcNotification(std::string_view method,
                                const nlohmann::json& params) {
  nlohmann::json m = {{"jsonrpc", "2.0"}, {"method", method}};
  if (!params.is_null()) m["params"] = params;
  return DumpJson(m);
}

std::string JsonRpcResult(const nlohmann::json& id,
                          const nlohmann::json& result) {
  return DumpJson({{"jsonrpc", "2.0"}, {"id", id}, {"result", result}});
}

std::string JsonRpcError(const nlohmann::json& id, int code,
                         std::string_view message) {
  return DumpJson({{"jsonrpc", "2.0"},
               {"id", id},
               {"error", {{"code", code}, {"message", message}}}});
}

std::string DescribeJsonRpcError(const nlohmann::json& error) {
  if (!error.is_object()) return "a malformed error: " + DumpJson(error);
  std::string text = error.contains("message") && error["message"].is_string()
                         ? error["message"].get<std::string>()
                         : std::string("(no message)");
  if (error.contains("code") && error["code"].is_number_integer()) {
    text += " (code " + std::to_string(error["code"].get<int64_t>()) + ")";
  }
  return text;
}

}  // namespace steps
