// The `acme/` provider: the worked example of docs/providers.md. Copied to
// src/providers/adapters/acme.cc, it is a provider of `steps`: CMake finds
// the file and calls RegisterAdapter_acme, and nothing else changes.
//
// Acme's API (made up for the example):
//   POST {base_url}/generate, Authorization: Bearer KEY
//   {"model": M, "messages": [{"role", "text", "calls"?, "call_id"?}],
//    "tools": [{"name", "description", "schema"}], "max_tokens"?, "stream"?}
// answers
//   {"output": "...", "calls": [{"id", "name", "args"}],
//    "tokens": {"in": N, "out": M}}
// or, streamed, server-sent events whose data is one of
//   {"text": "..."}            more text
//   {"call": {"id", "name"}}   a tool call starts
//   {"args": "..."}            more of the last call's arguments
//   {"done": true, "tokens": {"in": N, "out": M}}
// and `event: error` with {"message": "..."} when the server fails midway.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "providers/adapter.h"
#include "providers/exchange.h"
#include "providers/registry.h"
#include "providers/wire_json.h"

namespace steps {
namespace {

using nlohmann::json;

std::string StringAt(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// Usage from {"tokens": {"in": N, "out": M}}. Checked reads: a count that
// is not a whole number in range makes the answer malformed, never a
// wrong number (budgets are charged from it).
std::optional<ProviderError> ReadTokens(const json& j, Usage& usage) {
  auto tokens = j.find("tokens");
  if (tokens == j.end() || !tokens->is_object()) return std::nullopt;
  auto in = ReadWholeNumber(*tokens, "in", 0, kMaxTokenCount);
  auto out = ReadWholeNumber(*tokens, "out", 0, kMaxTokenCount);
  if (!in || !out) return MalformedAnswer("tokens are not token counts");
  usage.prompt_tokens = *in;
  usage.completion_tokens = *out;
  return std::nullopt;
}

json MessageJson(const Message& m) {
  json j{{"role", RoleName(m.role)}, {"text", m.content}};
  if (!m.tool_calls.empty()) {
    j["calls"] = json::array();
    for (const ToolCall& c : m.tool_calls) {
      j["calls"].push_back(
          {{"id", c.id}, {"name", c.name}, {"args", c.arguments}});
    }
  }
  if (m.role == Role::kTool) j["call_id"] = m.tool_call_id;
  return j;
}

class AcmeStream : public StreamParser {
 public:
  bool Add(const SseEvent& event) override {
    auto j = ParseWireJson(event.data);
    if (!j || !j->is_object()) return Fail(MalformedAnswer("event not JSON"));
    if (event.event == "error") {
      return Fail(MakeProviderError(ProviderErrorKind::kStreamError,
                                    "acme: " + StringAt(*j, "message")));
    }
    if (j->contains("text")) answer_.text += StringAt(*j, "text");
    if (auto call = j->find("call"); call != j->end() && call->is_object()) {
      answer_.tool_calls.push_back(
          {StringAt(*call, "id"), StringAt(*call, "name"), ""});
    }
    if (j->contains("args")) {
      if (answer_.tool_calls.empty()) {
        return Fail(MalformedAnswer("args before any call"));
      }
      answer_.tool_calls.back().arguments += StringAt(*j, "args");
    }
    if (j->value("done", false)) {
      if (auto bad = ReadTokens(*j, answer_.usage)) return Fail(*bad);
      done_ = true;
      return false;
    }
    return true;
  }

  ChatResult Finish() override {
    if (error_) return *error_;
    if (!done_) return MalformedAnswer("stream ended before done");
    answer_.finish_reason = answer_.tool_calls.empty() ? "stop" : "tool_calls";
    return answer_;
  }

 private:
  bool Fail(ProviderError error) {
    error_ = std::move(error);
    return false;
  }
  ChatAnswer answer_;
  bool done_ = false;
  std::optional<ProviderError> error_;
};

class AcmeAdapter : public Adapter {
 public:
  const AdapterInfo& info() const override {
    static const AdapterInfo info{
        .name = "acme",
        .default_base_url = "https://api.acme.example/v1",
        .key_env = "ACME_API_KEY",
        .key_required = true,
        .can_stream = true,
        .mock_wire = MockWireFormat::kNone,
        // Sent below; a source setting any other model parameter (seed,
        // say) is refused when the pipeline loads.
        .parameters = {"temperature", "max_output_tokens"}};
    return info;
  }

  Result<HttpRequest> BuildRequest(const ChatRequest& request,
                                   const AdapterConfig& config) const override {
    json body{{"model", request.model}, {"messages", json::array()}};
    for (const Message& m : request.messages) {
      body["messages"].push_back(MessageJson(m));
    }
    for (const ToolSchema& t : request.tools) {
      json schema = json::parse(t.parameters_json, nullptr, false);
      if (schema.is_discarded()) schema = {{"type", "object"}};
      body["tools"].push_back({{"name", t.name},
                               {"description", t.description},
                               {"schema", schema}});
    }
    const ModelParameters& params = request.params;
    if (auto n = params.max_output_tokens ? params.max_output_tokens
                                          : request.max_tokens) {
      body["max_tokens"] = *n;
    }
    if (params.temperature) body["temperature"] = *params.temperature;
    if (config.stream) body["stream"] = true;
    HttpRequest http;
    http.url = config.base_url + "/generate";
    http.headers = {{"Content-Type", "application/json"}};
    if (!config.api_key.empty()) {
      http.headers.emplace_back("Authorization", "Bearer " + config.api_key);
    }
    if (config.stream) http.headers.emplace_back("Accept", "text/event-stream");
    http.body = body.dump();
    return http;
  }

  ChatResult ParseAnswer(const HttpResponse& response,
                         const AdapterConfig&) const override {
    auto j = ParseWireJson(response.body);
    if (!j || !j->is_object() || !j->contains("output")) {
      return MalformedAnswer("no output");
    }
    ChatAnswer answer;
    answer.text = StringAt(*j, "output");
    if (auto calls = j->find("calls"); calls != j->end() && calls->is_array()) {
      for (const json& c : *calls) {
        if (!c.is_object()) return MalformedAnswer("a call is not an object");
        answer.tool_calls.push_back(
            {StringAt(c, "id"), StringAt(c, "name"), StringAt(c, "args")});
      }
    }
    answer.finish_reason = answer.tool_calls.empty() ? "stop" : "tool_calls";
    if (auto bad = ReadTokens(*j, answer.usage)) return *bad;
    return answer;
  }

  std::unique_ptr<StreamParser> NewStreamParser(
      const AdapterConfig&) const override {
    return std::make_unique<AcmeStream>();
  }
};

}  // namespace

void RegisterAdapter_acme(ProviderRegistry& registry) {
  registry.RegisterAdapter(std::make_shared<AcmeAdapter>());
}

}  // namespace steps
