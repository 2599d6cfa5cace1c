#include "providers/anthropic.h"

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "providers/exchange.h"
#include "providers/registry.h"

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
  json j = json::parse(arguments, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return json::object();
  return j;
}

std::string FinishReason(const std::string& stop_reason) {
  if (stop_reason == "end_turn" || stop_reason == "stop_sequence") {
    return "stop";
  }
  if (stop_reason == "tool_use") return "tool_calls";
  if (stop_reason == "max_tokens") return "length";
  return stop_reason;
}

void ReadUsage(const json& u, Usage& usage) {
  if (!u.is_object()) return;
  if (u.contains("input_tokens") && u["input_tokens"].is_number()) {
    usage.prompt_tokens = u["input_tokens"].get<int64_t>();
  }
  if (u.contains("output_tokens") && u["output_tokens"].is_number()) {
    usage.completion_tokens = u["output_tokens"].get<int64_t>();
  }
}

ProviderError Malformed(std::string what) {
  return MakeProviderError(ProviderErrorKind::kMalformed,
                           "malformed answer: " + what);
}

}  // namespace

std::string BuildAnthropicRequestBody(const ChatRequest& request, bool stream,
                                      int64_t default_max_tokens) {
  json body{{"model", request.model},
            {"max_tokens", request.max_tokens.value_or(default_max_tokens)}};
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
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Malformed("body is not a JSON object");
  }
  if (StringOr(j, "type", "") == "error") {
    std::string message =
        j.contains("error") ? StringOr(j["error"], "message", "") : "";
    return MakeProviderError(ProviderErrorKind::kStreamError,
                             "error in answer: " + message);
  }
  auto content = j.find("content");
  if (content == j.end() || !content->is_array()) {
    return Malformed("no content blocks");
  }
  ChatAnswer answer;
  answer.id = StringOr(j, "id", "");
  answer.model = StringOr(j, "model", "");
  for (const json& block : *content) {
    std::string type = StringOr(block, "type", "");
    if (type == "text") {
      answer.text += StringOr(block, "text", "");
    } else if (type == "tool_use") {
      answer.tool_calls.push_back(
          {StringOr(block, "id", ""), StringOr(block, "name", ""),
           block.contains("input") ? DumpJson(block["input"]) : "{}"});
    }
  }
  answer.finish_reason = FinishReason(StringOr(j, "stop_reason", ""));
  if (answer.finish_reason.empty()) {
    answer.finish_reason = answer.tool_calls.empty() ? "stop" : "tool_calls";
  }
  if (j.contains("usage")) ReadUsage(j["usage"], answer.usage);
  return answer;
}

bool AnthropicStreamAssembler::Add(const SseEvent& event) {
  if (done_ || failed_) return false;
  json j = json::parse(event.data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    failed_ = true;
    error_ = Malformed("stream event is not JSON");
    return false;
  }
  std::string type = StringOr(j, "type", event.event);
  if (type == "error") {
    failed_ = true;
    std::string message =
        j.contains("error") ? StringOr(j["error"], "message", "") : "";
    error_ = MakeProviderError(
        ProviderErrorKind::kStreamError,
        std::string(any_output_ ? "error event mid-stream: "
                                : "error event before any output: ") +
            message);
    return false;
  }
  if (type == "message_start" && j.contains("message")) {
    const json& m = j["message"];
    answer_.id = StringOr(m, "id", "");
    answer_.model = StringOr(m, "model", "");
    if (m.contains("usage")) ReadUsage(m["usage"], answer_.usage);
  } else if (type == "content_block_start" && j.contains("content_block")) {
    const json& block = j["content_block"];
    int index = j.value("index", 0);
    if (StringOr(block, "type", "") == "tool_use") {
      tool_blocks_[index] = answer_.tool_calls.size();
      answer_.tool_calls.push_back(
          {StringOr(block, "id", ""), StringOr(block, "name", ""), ""});
      any_output_ = true;
    } else if (StringOr(block, "type", "") == "text") {
      answer_.text += StringOr(block, "text", "");
    }
  } else if (type == "content_block_delta" && j.contains("delta")) {
    const json& delta = j["delta"];
    std::string kind = StringOr(delta, "type", "");
    if (kind == "text_delta") {
      answer_.text += StringOr(delta, "text", "");
      any_output_ = true;
    } else if (kind == "input_json_delta") {
      auto it = tool_blocks_.find(j.value("index", 0));
      if (it != tool_blocks_.end()) {
        answer_.tool_calls[it->second].arguments +=
            StringOr(delta, "partial_json", "");
      }
    }
  } else if (type == "message_delta") {
    if (j.contains("delta")) {
      answer_.finish_reason =
          FinishReason(StringOr(j["delta"], "stop_reason", ""));
    }
    if (j.contains("usage") && j["usage"].contains("output_tokens")) {
      answer_.usage.completion_tokens =
          j["usage"]["output_tokens"].get<int64_t>();
    }
  } else if (type == "message_stop") {
    done_ = true;
    return false;
  }
  return true;
}

ChatResult AnthropicStreamAssembler::Finish() {
  if (failed_) return error_;
  if (!done_) return Malformed("stream ended before message_stop");
  for (ToolCall& c : answer_.tool_calls) {
    if (c.arguments.empty()) c.arguments = "{}";
  }
  if (answer_.finish_reason.empty()) {
    answer_.finish_reason = answer_.tool_calls.empty() ? "stop" : "tool_calls";
  }
  return answer_;
}

AnthropicProvider::AnthropicProvider(AnthropicConfig config,
                                     HttpTransport& transport)
    : config_(std::move(config)), transport_(transport) {}

ChatResult AnthropicProvider::Send(const ChatRequest& request,
                                   const CallContext& context) {
  HttpRequest http;
  http.url = config_.base_url + "/messages";
  http.headers = {{"Content-Type", "application/json"},
                  {"anthropic-version", config_.version}};
  if (!config_.api_key.empty()) {
    http.headers.emplace_back("x-api-key", config_.api_key);
  }
  if (config_.stream) http.headers.emplace_back("Accept", "text/event-stream");
  if (!context.agent.empty()) {
    http.headers.emplace_back("X-Steps-Agent", context.agent);
  }
  if (!context.step.empty()) {
    http.headers.emplace_back("X-Steps-Step", context.step);
  }
  http.body = BuildAnthropicRequestBody(request, config_.stream,
                                        config_.default_max_tokens);
  ExchangeOptions options;
  options.secret = config_.api_key;
  options.max_response_bytes = config_.max_response_bytes;
  SseParser parser;
  AnthropicStreamAssembler assembler;
  if (config_.stream) {
    options.idle_limit = config_.stream_idle_limit;
    options.reader = [&](std::string_view piece) {
      for (const SseEvent& e : parser.Feed(piece)) {
        if (!assembler.Add(e)) return false;
      }
      return true;
    };
  }
  ExchangeResult result = PostWithin(transport_, http, context, options);
  if (auto* error = std::get_if<ProviderError>(&result)) return *error;
  const HttpResponse& response = std::get<HttpResponse>(result);
  auto type = FindHeader(response.headers, "content-type");
  if (!config_.stream ||
      (type && type->find("application/json") != std::string::npos)) {
    return ParseAnthropicResponse(response.body);
  }
  return assembler.Finish();
}

}  // namespace steps

// Source factory (registered in registry.cc).
namespace steps {

Result<std::unique_ptr<Provider>> MakeAnthropicSource(
    const SourceSpec& spec, const std::string&,
    const ProviderEnvironment& env) {
  bool required = spec.base_url.empty() || !spec.api_key_env.empty();
  auto key = ReadApiKey(spec, "ANTHROPIC_API_KEY", required, env);
  if (!key.ok()) return key.status();
  AnthropicConfig config;
  if (!spec.base_url.empty()) config.base_url = spec.base_url;
  while (!config.base_url.empty() && config.base_url.back() == '/') {
    config.base_url.pop_back();
  }
  config.api_key = *key;
  config.stream = spec.stream;
  config.stream_idle_limit = spec.stream_idle_limit;
  return std::unique_ptr<Provider>(
      std::make_unique<AnthropicProvider>(std::move(config), *env.transport));
}

}  // namespace steps
