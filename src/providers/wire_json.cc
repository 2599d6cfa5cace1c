#include "providers/wire_json.h"

#include <cmath>

#include "providers/exchange.h"

namespace steps {

using nlohmann::json;

std::optional<json> ParseWireJson(std::string_view text, std::string* why) {
  if (!JsonDepthWithin(text, kMaxWireJsonDepth)) {
    if (why) {
      *why =
          "nested deeper than " + std::to_string(kMaxWireJsonDepth) + " levels";
    }
    return std::nullopt;
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    if (why) *why = "not JSON";
    return std::nullopt;
  }
  return j;
}

std::optional<int64_t> WholeNumberIn(const json& value, int64_t max) {
  if (value.is_number_unsigned()) {
    uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(max)) return std::nullopt;
    return static_cast<int64_t>(v);
  }
  if (value.is_number_integer()) {
    int64_t v = value.get<int64_t>();
    if (v < 0 || v > max) return std::nullopt;
    return v;
  }
  if (value.is_number_float()) {
    double v = value.get<double>();
    // The range check comes before the cast: casting 1e300 is undefined.
    if (!std::isfinite(v) || v < 0 || v > static_cast<double>(max) ||
        std::trunc(v) != v) {
      return std::nullopt;
    }
    return static_cast<int64_t>(v);
  }
  return std::nullopt;
}

std::optional<int64_t> ReadWholeNumber(const json& j, const char* key,
                                       int64_t fallback, int64_t max) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return WholeNumberIn(*it, max);
}

ProviderError MalformedAnswer(std::string what) {
  return MakeProviderError(ProviderErrorKind::kMalformed,
                           "malformed answer: " + what);
}

std::optional<ProviderError> CheckAnswerLimits(const ChatAnswer& answer) {
  if (answer.tool_calls.size() > kMaxToolCallsPerAnswer) {
    return MalformedAnswer(
        "more than " + std::to_string(kMaxToolCallsPerAnswer) + " tool calls");
  }
  // Adapters outside this folder fill Usage themselves.
  const Usage& u = answer.usage;
  if (u.prompt_tokens < 0 || u.prompt_tokens > kMaxTokenCount ||
      u.completion_tokens < 0 || u.completion_tokens > kMaxTokenCount) {
    return MalformedAnswer("a token count outside 0.." +
                           std::to_string(kMaxTokenCount));
  }
  if (u.cost_usd && !(*u.cost_usd >= 0 && *u.cost_usd <= kMaxAnswerCostUsd)) {
    return MalformedAnswer(
        "a cost outside 0.." +
        std::to_string(static_cast<int64_t>(kMaxAnswerCostUsd)));
  }
  for (const ToolCall& call : answer.tool_calls) {
    if (!JsonDepthWithin(call.arguments, kMaxWireJsonDepth)) {
      return MalformedAnswer("arguments of tool call '" + call.name +
                             "' nested deeper than " +
                             std::to_string(kMaxWireJsonDepth) + " levels");
    }
  }
  return std::nullopt;
}

}  // namespace steps
