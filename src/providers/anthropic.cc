#include "providers/anthropic.h"

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "providers/exchange.h"
#include "providers/wire_json.h"

namespace steps {
namespace {

using nlohmann::json;

std::string StringOr(const json& j, const char* key, std::string fallback) {
  auto it = j.find(key);
  if (it != j.end() && it->is_string()) return it->get<std::string>();
  return fallback;
}

json InputOf(const std::string& arguments) {
  if (arguments.empty()) return json::object();
  // The model's own arguments, sent back: bounded like any wire JSON.
  std::optional<json> j = ParseWireJson(arguments);
  if (!j || !j->is_object()) return json::object();
  return *std::move(j);
}

std::string FinishReason(const std::string& stop_reason) {
  if (stop_reason == "end_turn" || stop_reason == "stop_sequence") {
    return "stop";
  }
  if (stop_reason == "tool_use") return "tool_calls";
  if (stop_reason == "max_tokens") return "length";
  return stop_reason;
}

// Reads a usage object when present. A count that is not a whole number in
// [0, kMaxTokenCount] makes the answer malformed: budgets are charged from
// these numbers.
std::optional<ProviderError> ReadUsage(const json& u, Usage& usage) {
  if (!u.is_object()) return std::nullopt;
  for (auto [key, field] :
       {std::pair{"input_tokens", &usage.prompt_tokens},
        std::pair{"output_tokens", &usage.completion_tokens}}) {
    auto count = ReadWholeNumber(u, key, *field, kMaxTokenCount);
    if (!count) {
      return MalformedAnswer(std::string("usage.") + key +
                             " is not a token count");
    }
    *field = *count;
  }
  return std::nullopt;
}

std::string ErrorMessage(const json& j) {
  auto e = j.find("error");
  return e == j.end() ? "" : StringOr(*e, "message", "");
}

}  // namespace

std::string BuildAnthropicRequestBody(const ChatRequest& request, bool stream,
                                      int64_t default_max_tokens) {
  json body{
      {"model", request.model},
      {"max_tokens", request.params.max_output_tokens.value_or(
                         request.max_tokens.value_or(default_max_tokens))}};
  const ModelParameters& mp = request.params;
  if (mp.temperature) body["temperature"] = *mp.temperature;
  if (mp.top_p) body["top_p"] = *mp.top_p;
  if (!mp.stop.empty()) body["stop_sequences"] = mp.stop;
  std::string system;
  json messages = json::array();
  for (const Message& m : request.messages) {
    switch (m.role) {
      case Role::kSystem:
        if (!system.empty()) system += "\n\n";
        system += m.content;
        break;
      case Role::kUser:
        messages.push_back({{"role", "user"}, {"content", m.content}});
        break;
      case Role::kAssistant: {
        json blocks = json::array();
        if (!m.content.empty()) {
          blocks.push_back({{"type", "text"}, {"text", m.content}});
        }
        for (const ToolCall& c : m.tool_calls) {
          blocks.push_back({{"type", "tool_use"},
                            {"id", c.id},
                            {"name", c.name},
                            {"input", InputOf(c.arguments)}});
        }
        messages.push_back({{"role", "assistant"}, {"content", blocks}});
        break;
      }
      case Role::kTool: {
        json block{{"type", "tool_result"},
                   {"tool_use_id", m.tool_call_id},
                   {"content", m.content}};
        // Results of one turn's calls travel in one user message.
        if (!messages.empty() && messages.back()["role"] == "user" &&
            messages.back()["content"].is_array()) {
          messages.back()["content"].push_back(std::move(block));
        } else {
          messages.push_back(
              {{"role", "user"}, {"content", json::array({block})}});
        }
        break;
      }
    }
  }
  if (!system.empty()) body["system"] = system;
  body["messages"] = std::move(messages);
  if (!request.tools.empty() &&
      request.tool_choice.mode != ToolChoice::Mode::kNone) {
    json tools = json::array();
    for (const ToolSchema& t : request.tools) {
      json schema =
          t.parameters_json.empty()
              ? json{{"type", "object"}, {"properties", json::object()}}
              : json::parse(t.parameters_json, nullptr, false);
      if (schema.is_discarded()) schema = json{{"type", "object"}};
      json tool{{"name", t.name}, {"input_schema", std::move(schema)}};
      if (!t.description.empty()) tool["description"] = t.description;
      tools.push_back(std::move(tool));
    }
    body["tools"] = std::move(tools);
    switch (request.tool_choice.mode) {
      case ToolChoice::Mode::kRequired:
        body["tool_choice"] = {{"type", "any"}};
        break;
      case ToolChoice::Mode::kFunction:
        body["tool_choice"] = {{"type", "tool"},
                               {"name", request.tool_choice.function}};
        break;
      default:
        body["tool_choice"] = {{"type", "auto"}};
    }
  }
  if (stream) body["stream"] = true;
  return DumpJson(body);
}

ChatResult ParseAnthropicResponse(std::string_view body) {
  std::string why;
  std::optional<json> parsed = ParseWireJson(body, &why);
  if (!parsed || !parsed->is_object()) {
    return MalformedAnswer("body is not a JSON object" +
                           (why.empty() ? "" : " (" + why + ")"));
  }
  const json& j = *parsed;
  if (StringOr(j, "type", "") == "error") {
    return MakeProviderError(ProviderErrorKind::kStreamError,
                             "error in answer: " + ErrorMessage(j));
  }
  auto content = j.find("content");
  if (content == j.end() || !content->is_array()) {
    return MalformedAnswer("no content blocks");
  }
  ChatAnswer answer;
  answer.id = StringOr(j, "id", "");
  answer.model = StringOr(j, "model", "");
  for (const json& block : *content) {
    std::string type = StringOr(block, "type", "");
    if (type == "text") {
      answer.text += StringOr(block, "text", "");
    } else if (type == "tool_use") {
      if (answer.tool_calls.size() >= kMaxToolCallsPerAnswer) {
        return MalformedAnswer("more than " +
                               std::to_string(kMaxToolCallsPerAnswer) +
                               " tool calls");
      }
      auto input = block.find("input");
      answer.tool_calls.push_back(
          {StringOr(block, "id", ""), StringOr(block, "name", ""),
           input == block.end() ? "{}" : DumpJson(*input)});
    }
  }
  answer.finish_reason = FinishReason(StringOr(j, "stop_reason", ""));
  if (answer.finish_reason.empty()) {
    answer.finish_reason = answer.tool_calls.empty() ? "stop" : "tool_calls";
  }
  if (auto u = j.find("usage"); u != j.end()) {
    if (auto bad = ReadUsage(*u, answer.usage)) return *bad;
  }
  if (auto bad = CheckAnswerLimits(answer)) return *bad;
  return answer;
}

bool AnthropicStreamAssembler::Fail(ProviderError error) {
  failed_ = true;
  error_ = std::move(error);
  return false;
}

bool AnthropicStreamAssembler::Add(const SseEvent& event) {
  if (done_ || failed_) return false;
  std::string why;
  std::optional<json> parsed = ParseWireJson(event.data, &why);
  if (!parsed || !parsed->is_object()) {
    return Fail(MalformedAnswer("stream event is not a JSON object" +
                                (why.empty() ? "" : " (" + why + ")")));
  }
  const json& j = *parsed;
  std::string type = StringOr(j, "type", event.event);
  if (type == "error") {
    return Fail(MakeProviderError(
        ProviderErrorKind::kStreamError,
        std::string(any_output_ ? "error event mid-stream: "
                                : "error event before any output: ") +
            ErrorMessage(j)));
  }
  if (type == "message_stop") {
    done_ = true;
    return false;
  }
  if (type == "message_start") return AddMessageStart(j);
  if (type == "message_delta") return AddMessageDelta(j);
  if (type == "content_block_start" || type == "content_block_delta") {
    std::optional<int64_t> index =
        ReadWholeNumber(j, "index", 0, kMaxStreamIndex);
    if (!index) {
      return Fail(
          MalformedAnswer("content block index is not a whole number in 0.." +
                          std::to_string(kMaxStreamIndex)));
    }
    return type == "content_block_start" ? AddBlockStart(j, *index)
                                         : AddBlockDelta(j, *index);
  }
  return true;
}

bool AnthropicStreamAssembler::AddMessageStart(const json& j) {
  auto m = j.find("message");
  if (m == j.end() || !m->is_object()) return true;
  answer_.id = StringOr(*m, "id", "");
  answer_.model = StringOr(*m, "model", "");
  if (auto u = m->find("usage"); u != m->end()) {
    if (auto bad = ReadUsage(*u, answer_.usage)) return Fail(std::move(*bad));
  }
  return true;
}

bool AnthropicStreamAssembler::AddMessageDelta(const json& j) {
  if (auto d = j.find("delta"); d != j.end()) {
    answer_.finish_reason = FinishReason(StringOr(*d, "stop_reason", ""));
  }
  if (auto u = j.find("usage"); u != j.end()) {
    if (auto bad = ReadUsage(*u, answer_.usage)) return Fail(std::move(*bad));
  }
  return true;
}

bool AnthropicStreamAssembler::AddBlockStart(const json& j, int64_t index) {
  auto block = j.find("content_block");
  if (block == j.end()) return true;
  std::string kind = StringOr(*block, "type", "");
  if (kind == "tool_use") {
    if (answer_.tool_calls.size() >= kMaxToolCallsPerAnswer) {
      return Fail(MalformedAnswer("more than " +
                                  std::to_string(kMaxToolCallsPerAnswer) +
                                  " tool calls"));
    }
    tool_blocks_[index] = answer_.tool_calls.size();
    answer_.tool_calls.push_back(
        {StringOr(*block, "id", ""), StringOr(*block, "name", ""), ""});
    any_output_ = true;
  } else if (kind == "text") {
    answer_.text += StringOr(*block, "text", "");
  }
  return true;
}

bool AnthropicStreamAssembler::AddBlockDelta(const json& j, int64_t index) {
  auto d = j.find("delta");
  if (d == j.end()) return true;
  std::string kind = StringOr(*d, "type", "");
  if (kind == "text_delta") {
    answer_.text += StringOr(*d, "text", "");
    any_output_ = true;
  } else if (kind == "input_json_delta") {
    auto it = tool_blocks_.find(index);
    if (it != tool_blocks_.end()) {
      answer_.tool_calls[it->second].arguments +=
          StringOr(*d, "partial_json", "");
    }
  }
  return true;
}

ChatResult AnthropicStreamAssembler::Finish() {
  if (failed_) return error_;
  if (!done_) return MalformedAnswer("stream ended before message_stop");
  for (ToolCall& c : answer_.tool_calls) {
    if (c.arguments.empty()) c.arguments = "{}";
  }
  if (answer_.finish_reason.empty()) {
    answer_.finish_reason = answer_.tool_calls.empty() ? "stop" : "tool_calls";
  }
  if (auto bad = CheckAnswerLimits(answer_)) return *bad;
  return answer_;
}

AnthropicAdapter::AnthropicAdapter(AdapterInfo info, std::string version,
                                   int64_t default_max_tokens)
    : info_(std::move(info)),
      version_(std::move(version)),
      default_max_tokens_(default_max_tokens) {}

Result<HttpRequest> AnthropicAdapter::BuildRequest(
    const ChatRequest& request, const AdapterConfig& config) const {
  HttpRequest http;
  http.url = config.base_url + "/messages";
  http.headers = {{"Content-Type", "application/json"},
                  {"anthropic-version", version_}};
  if (!config.api_key.empty()) {
    http.headers.emplace_back("x-api-key", config.api_key);
  }
  if (config.stream) http.headers.emplace_back("Accept", "text/event-stream");
  http.body =
      BuildAnthropicRequestBody(request, config.stream, default_max_tokens_);
  return http;
}

ChatResult AnthropicAdapter::ParseAnswer(const HttpResponse& response,
                                         const AdapterConfig&) const {
  return ParseAnthropicResponse(response.body);
}

std::unique_ptr<StreamParser> AnthropicAdapter::NewStreamParser(
    const AdapterConfig&) const {
  return std::make_unique<AnthropicStreamAssembler>();
}

std::vector<std::string> AnthropicParameters() {
  return {"temperature", "top_p", "max_output_tokens", "stop"};
}

AnthropicProvider::AnthropicProvider(AnthropicConfig config,
                                     HttpTransport& transport)
    : AdapterProvider(
          std::make_shared<AnthropicAdapter>(
              AdapterInfo{"anthropic", config.base_url, "", false, true,
                          MockWireFormat::kAnthropic, AnthropicParameters()},
              config.version, config.default_max_tokens),
          AdapterConfig{config.base_url, config.api_key, {}, config.stream},
          transport,
          AdapterLimits{config.stream_idle_limit, config.max_response_bytes}) {}

}  // namespace steps
