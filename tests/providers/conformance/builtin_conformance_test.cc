// The built-in adapters through the conformance kit: openai, openrouter and
// ollama speak chat completions, anthropic the Messages API.
#include <nlohmann/json.hpp>

#include "conformance/adapter_conformance.h"

namespace steps {
void RegisterAdapter_openai(ProviderRegistry& registry);
void RegisterAdapter_anthropic(ProviderRegistry& registry);
}  // namespace steps

namespace steps::conformance {
namespace {

using nlohmann::json;

std::string Event(const json& data, const std::string& name = "") {
  return (name.empty() ? "" : "event: " + name + "\n") +
         "data: " + data.dump() + "\n\n";
}

bool HasHeader(const std::string& request, const std::string& line) {
  std::string lower = request.substr(0, request.find("\r\n\r\n"));
  for (char& c : lower) c = static_cast<char>(std::tolower(c));
  return lower.find(line) != std::string::npos;
}

WireFormat OpenAiWire() {
  WireFormat w;
  w.path = "/chat/completions";
  w.carries_key = [](const std::string& request, const std::string& key) {
    return request.find("Authorization: Bearer " + key) != std::string::npos;
  };
  auto usage = [](int64_t in, int64_t out) {
    return json{{"prompt_tokens", in}, {"completion_tokens", out}};
  };
  w.text_answer = [usage](const std::string& text, int64_t in, int64_t out) {
    return json{{"id", "c1"},
                {"choices",
                 {{{"message", {{"role", "assistant"}, {"content", text}}},
                   {"finish_reason", "stop"}}}},
                {"usage", usage(in, out)}}
        .dump();
  };
  w.tool_call_answer = [](const ToolCall& c) {
    json call{{"id", c.id},
              {"type", "function"},
              {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
    return json{{"choices",
                 {{{"message",
                    {{"role", "assistant"},
                     {"content", nullptr},
                     {"tool_calls", {call}}}},
                   {"finish_reason", "tool_calls"}}}}}
        .dump();
  };
  w.text_stream = [usage](const std::vector<std::string>& pieces, int64_t in,
                          int64_t out) {
    std::string s;
    for (const std::string& p : pieces) {
      s += Event({{"choices", {{{"delta", {{"content", p}}}}}}});
    }
    s += Event({{"choices",
                 {{{"delta", json::object()}, {"finish_reason", "stop"}}}}});
    s += Event({{"choices", json::array()}, {"usage", usage(in, out)}});
    return s + "data: [DONE]\n\n";
  };
  w.tool_call_stream = [](const ToolCall& c,
                          const std::vector<std::string>& pieces) {
    std::string s = Event(
        {{"choices",
          {{{"delta",
             {{"tool_calls",
               {{{"index", 0},
                 {"id", c.id},
                 {"function", {{"name", c.name}, {"arguments", ""}}}}}}}}}}}});
    for (const std::string& p : pieces) {
      s += Event(
          {{"choices",
            {{{"delta",
               {{"tool_calls",
                 {{{"index", 0}, {"function", {{"arguments", p}}}}}}}}}}}});
    }
    s += Event(
        {{"choices",
          {{{"delta", json::object()}, {"finish_reason", "tool_calls"}}}}});
    return s + "data: [DONE]\n\n";
  };
  w.stream_start = [] {
    return Event({{"choices", {{{"delta", {{"content", "Hel"}}}}}}});
  };
  w.error_stream = [] {
    return Event({{"error", {{"message", "overloaded"}}}});
  };
  w.bad_usage_answer = [](const std::string& raw_in) {
    return R"({"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":)" +
           raw_in + R"(,"completion_tokens":1}})";
  };
  w.parameters = {
      {"temperature", {"/temperature", 0.25}},
      {"top_p", {"/top_p", 0.5}},
      {"seed", {"/seed", 42}},
      {"max_output_tokens", {"/max_tokens", 77}},
      {"stop", {"/stop", {"END", "HALT"}}},
      {"response_format",
       {"/response_format",
        {{"type", "json_schema"},
         {"json_schema",
          {{"name", "answer"},
           {"schema", json::parse(*KitParameters().json_schema)}}}}}}};
  return w;
}

WireFormat AnthropicWire() {
  WireFormat w;
  w.path = "/messages";
  w.carries_key = [](const std::string& request, const std::string& key) {
    return HasHeader(request, "x-api-key: " + key) &&
           HasHeader(request, "anthropic-version: ");
  };
  w.text_answer = [](const std::string& text, int64_t in, int64_t out) {
    return json{{"id", "m1"},
                {"content", {{{"type", "text"}, {"text", text}}}},
                {"stop_reason", "end_turn"},
                {"usage", {{"input_tokens", in}, {"output_tokens", out}}}}
        .dump();
  };
  w.tool_call_answer = [](const ToolCall& c) {
    return json{{"content",
                 {{{"type", "tool_use"},
                   {"id", c.id},
                   {"name", c.name},
                   {"input", json::parse(c.arguments)}}}},
                {"stop_reason", "tool_use"}}
        .dump();
  };
  auto start = [](int64_t in) {
    return Event({{"type", "message_start"},
                  {"message",
                   {{"id", "m1"},
                    {"usage", {{"input_tokens", in}, {"output_tokens", 0}}}}}},
                 "message_start");
  };
  auto stop = [](const std::string& reason, int64_t out) {
    return Event({{"type", "message_delta"},
                  {"delta", {{"stop_reason", reason}}},
                  {"usage", {{"output_tokens", out}}}},
                 "message_delta") +
           Event({{"type", "message_stop"}}, "message_stop");
  };
  w.text_stream = [start, stop](const std::vector<std::string>& pieces,
                                int64_t in, int64_t out) {
    std::string s = start(in);
    s += Event({{"type", "content_block_start"},
                {"index", 0},
                {"content_block", {{"type", "text"}, {"text", ""}}}},
               "content_block_start");
    for (const std::string& p : pieces) {
      s += Event({{"type", "content_block_delta"},
                  {"index", 0},
                  {"delta", {{"type", "text_delta"}, {"text", p}}}},
                 "content_block_delta");
    }
    return s + stop("end_turn", out);
  };
  w.tool_call_stream = [start, stop](const ToolCall& c,
                                     const std::vector<std::string>& pieces) {
    std::string s = start(1);
    s += Event({{"type", "content_block_start"},
                {"index", 0},
                {"content_block",
                 {{"type", "tool_use"},
                  {"id", c.id},
                  {"name", c.name},
                  {"input", json::object()}}}},
               "content_block_start");
    for (const std::string& p : pieces) {
      s += Event(
          {{"type", "content_block_delta"},
           {"index", 0},
           {"delta", {{"type", "input_json_delta"}, {"partial_json", p}}}},
          "content_block_delta");
    }
    return s + stop("tool_use", 1);
  };
  w.stream_start = [start] {
    return start(1) +
           Event({{"type", "content_block_start"},
                  {"index", 0},
                  {"content_block", {{"type", "text"}, {"text", "Hel"}}}},
                 "content_block_start");
  };
  w.error_stream = [] {
    return Event(
        {{"type", "error"},
         {"error", {{"type", "overloaded_error"}, {"message", "Overloaded"}}}},
        "error");
  };
  w.bad_usage_answer = [](const std::string& raw_in) {
    return R"({"content":[{"type":"text","text":"x"}],"stop_reason":"end_turn","usage":{"input_tokens":)" +
           raw_in + R"(,"output_tokens":1}})";
  };
  w.parameters = {
      {"temperature", {"/temperature", 0.25}},
      {"top_p", {"/top_p", 0.5}},
      {"max_output_tokens", {"/max_tokens", 77}},
      {"stop", {"/stop_sequences", {"END", "HALT"}}}};
  return w;
}

INSTANTIATE_TEST_SUITE_P(
    Builtin, AdapterConformanceTest,
    ::testing::Values(
        AdapterUnderTest{"openai", RegisterAdapter_openai, OpenAiWire()},
        AdapterUnderTest{"openrouter", RegisterAdapter_openai, OpenAiWire()},
        AdapterUnderTest{"ollama", RegisterAdapter_openai, OpenAiWire()},
        AdapterUnderTest{"anthropic", RegisterAdapter_anthropic,
                         AnthropicWire()}),
    AdapterConformanceName);

}  // namespace
}  // namespace steps::conformance
