#include "providers/openai.h"

#include <map>
#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "core/json_text.h"
#include "providers/exchange.h"
#include "providers/wire_json.h"

namespace steps {
namespace {

using nlohmann::json;

json ParametersOf(const ToolSchema& tool) {
  if (tool.parameters_json.empty()) {
    return json{{"type", "object"}, {"properties", json::object()}};
  }
  json p = json::parse(tool.parameters_json, nullptr, false);
  if (p.is_discarded()) {
    return json{{"type", "object"}, {"properties", json::object()}};
  }
  return p;
}

// One message as the chat completions API takes it, written as DumpJson
// would write the json value of it (keys in order, same escapes), without
// building one: a long conversation encodes every message it sends.
std::string MessageText(const Message& m) {
  std::string out = "{\"content\":";
  if (m.role == Role::kAssistant && !m.tool_calls.empty() &&
      m.content.empty()) {
    out += "null";
  } else {
    AppendJsonString(out, m.content);
  }
  out += ",\"role\":\"";
  out += RoleName(m.role);
  out += '"';
  if (m.role == Role::kAssistant && !m.tool_calls.empty()) {
    out += ",\"tool_calls\":[";
    for (size_t i = 0; i < m.tool_calls.size(); ++i) {
      const ToolCall& c = m.tool_calls[i];
      out += i == 0 ? "{\"function\":{\"arguments\":" : ",{\"function\":{\"arguments\":";
      AppendJsonString(out, c.arguments);
      out += ",\"name\":";
      AppendJsonString(out, c.name);
      out += "},\"id\":";
      AppendJsonString(out, c.id);
      out += ",\"type\":\"function\"}";
    }
    out += ']';
  } else if (m.role == Role::kTool) {
    out += ",\"tool_call_id\":";
    AppendJsonString(out, m.tool_call_id);
  }
  out += '}';
  return out;
}

json ToolChoiceJson(const ToolChoice& choice) {
  switch (choice.mode) {
    case ToolChoice::Mode::kAuto:
      return "auto";
    case ToolChoice::Mode::kNone:
      return "none";
    case ToolChoice::Mode::kRequired:
      return "required";
    case ToolChoice::Mode::kFunction:
      return {{"type", "function"}, {"function", {{"name", choice.function}}}};
  }
  return "auto";
}

std::string StringOr(const json& j, const char* key, std::string fallback) {
  auto it = j.find(key);
  if (it != j.end() && it->is_string()) return it->get<std::string>();
  return fallback;
}

// A tool call's arguments as JSON text, whether sent as a string (the
// standard) or as an object (some compatible servers).
std::string ArgumentsText(const json& function) {
  auto it = function.find("arguments");
  if (it == function.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  return DumpJson(*it);
}

// Reads `usage` when present. A count that is not a whole number in
// [0, kMaxTokenCount], or a cost that is negative or absurd, makes the
// answer malformed: budgets are charged from these numbers.
std::optional<ProviderError> ReadUsage(const json& j, Usage& usage) {
  auto it = j.find("usage");
  if (it == j.end() || !it->is_object()) return std::nullopt;
  const json& u = *it;
  for (auto [key, field] :
       {std::pair{"prompt_tokens", &usage.prompt_tokens},
        std::pair{"completion_tokens", &usage.completion_tokens}}) {
    auto count = ReadWholeNumber(u, key, *field, kMaxTokenCount);
    if (!count) {
      return MalformedAnswer(std::string("usage.") + key +
                             " is not a token count");
    }
    *field = *count;
  }
  if (auto cost = u.find("cost"); cost != u.end() && !cost->is_null()) {
    double v = cost->is_number() ? cost->get<double>() : -1;
    if (!(v >= 0 && v <= kMaxAnswerCostUsd)) {
      return MalformedAnswer("usage.cost is not a cost");
    }
    usage.cost_usd = v;
  }
  return std::nullopt;
}

// A 200 whose body is an error object (some proxies answer so).
std::optional<std::string> EmbeddedError(const json& j) {
  auto it = j.find("error");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_object()) return StringOr(*it, "message", DumpJson(*it));
  if (it->is_string()) return it->get<std::string>();
  return DumpJson(*it);
}

}  // namespace

// Stands for the messages in the body's JSON until they are spliced in
// (EncodedHistory keeps them encoded); "messages" sorts before every key
// but "max_tokens", a number, so the first match is the slot.
constexpr char kMessagesSlot[] = "\x01steps:messages\x01";

namespace {

// A hash of everything OpenAiFrame makes a frame from. A field that
// reaches the body must reach this hash too, or a changed value would be
// sent with the frame of the old one (wire_test changes each field).
uint64_t FrameKey(const ChatRequest& request, bool stream, bool request_cost) {
  uint64_t h = (stream ? 1 : 0) | (request_cost ? 2 : 0);
  auto text = [&h](std::string_view s) {
    h = FastHash64(s, h ^ (s.size() * 0x9E3779B97F4A7C15ULL));
  };
  auto number = [&text](auto v) {
    text(std::string_view(reinterpret_cast<const char*>(&v), sizeof v));
  };
  auto optional = [&number](const auto& v) {
    number(v.has_value());
    if (v) number(*v);
  };
  text(request.model);
  number(request.tools.size());
  for (const ToolSchema& t : request.tools) {
    text(t.name);
    text(t.description);
    text(t.parameters_json);
  }
  number(static_cast<int>(request.tool_choice.mode));
  text(request.tool_choice.function);
  optional(request.max_tokens);
  const ModelParameters& mp = request.params;
  optional(mp.temperature);
  optional(mp.top_p);
  optional(mp.seed);
  optional(mp.max_output_tokens);
  number(mp.stop.size());
  for (const std::string& s : mp.stop) text(s);
  number(mp.json_schema.has_value());
  if (mp.json_schema) text(*mp.json_schema);
  return h;
}

// The body without its messages, split where their list goes.
EncodedHistory::Frame OpenAiFrame(const ChatRequest& request, bool stream,
                                  bool request_cost) {
  json body{{"model", request.model}};
  body["messages"] = kMessagesSlot;
  if (!request.tools.empty()) {
    json tools = json::array();
    for (const ToolSchema& t : request.tools) {
      json function{{"name", t.name}, {"parameters", ParametersOf(t)}};
      if (!t.description.empty()) function["description"] = t.description;
      tools.push_back(
          {{"type", "function"}, {"function", std::move(function)}});
    }
    body["tools"] = std::move(tools);
    body["tool_choice"] = ToolChoiceJson(request.tool_choice);
  }
  const ModelParameters& mp = request.params;
  if (mp.max_output_tokens) {
    body["max_tokens"] = *mp.max_output_tokens;
  } else if (request.max_tokens) {
    body["max_tokens"] = *request.max_tokens;
  }
  if (mp.temperature) body["temperature"] = *mp.temperature;
  if (mp.top_p) body["top_p"] = *mp.top_p;
  if (mp.seed) body["seed"] = *mp.seed;
  if (!mp.stop.empty()) body["stop"] = mp.stop;
  if (mp.json_schema) {
    body["response_format"] = {
        {"type", "json_schema"},
        {"json_schema",
         {{"name", "answer"},
          {"schema", nlohmann::json::parse(*mp.json_schema, nullptr, false)}}}};
  }
  if (stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  if (request_cost) body["usage"] = {{"include", true}};
  const std::string rest = DumpJson(body);
  static const std::string slot = DumpJson(json(kMessagesSlot));
  const size_t at = rest.find(slot);
  return {rest.substr(0, at), rest.substr(at + slot.size())};
}

}  // namespace

std::string BuildOpenAiRequestBody(const ChatRequest& request, bool stream,
                                   bool request_cost, EncodedHistory* history) {
  EncodedHistory fresh;
  EncodedHistory& encoded = history != nullptr ? *history : fresh;
  return encoded.Body(
      FrameKey(request, stream, request_cost),
      [&] { return OpenAiFrame(request, stream, request_cost); },
      request.messages, request.history_id, "openai", MessageText);
}

ChatResult ParseOpenAiResponse(std::string_view body) {
  std::string why;
  std::optional<json> parsed = ParseWireJson(body, &why);
  if (!parsed || !parsed->is_object()) {
    return MalformedAnswer("body is not a JSON object" +
                           (why.empty() ? "" : " (" + why + ")"));
  }
  const json& j = *parsed;
  if (auto err = EmbeddedError(j)) {
    return MakeProviderError(ProviderErrorKind::kStreamError,
                             "error in answer: " + *err);
  }
  auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array() || choices->empty() ||
      !(*choices)[0].is_object()) {
    return MalformedAnswer("no choices");
  }
  const json& choice = (*choices)[0];
  auto message = choice.find("message");
  if (message == choice.end() || !message->is_object()) {
    return MalformedAnswer("choice without message");
  }
  ChatAnswer answer;
  answer.id = StringOr(j, "id", "");
  answer.model = StringOr(j, "model", "");
  answer.text = StringOr(*message, "content", "");
  if (auto calls = message->find("tool_calls");
      calls != message->end() && calls->is_array()) {
    if (calls->size() > kMaxToolCallsPerAnswer) {
      return MalformedAnswer("more than " +
                             std::to_string(kMaxToolCallsPerAnswer) +
                             " tool calls");
    }
    for (const json& c : *calls) {
      auto f = c.is_object() ? c.find("function") : c.end();
      if (!c.is_object() || f == c.end() || !f->is_object()) {
        return MalformedAnswer("tool call without function");
      }
      answer.tool_calls.push_back(
          {StringOr(c, "id", ""), StringOr(*f, "name", ""), ArgumentsText(*f)});
    }
  }
  answer.finish_reason = StringOr(choice, "finish_reason", "");
  if (answer.finish_reason.empty()) {
    answer.finish_reason = answer.tool_calls.empty() ? "stop" : "tool_calls";
  }
  if (auto bad = ReadUsage(j, answer.usage)) return *bad;
  if (auto bad = CheckAnswerLimits(answer)) return *bad;
  return answer;
}

bool OpenAiStreamAssembler::Fail(ProviderError error) {
  failed_ = true;
  error_ = std::move(error);
  return false;
}

bool OpenAiStreamAssembler::Add(const SseEvent& event) {
  if (done_ || failed_) return false;
  if (event.data == "[DONE]") {
    done_ = true;
    return false;
  }
  std::string why;
  std::optional<json> parsed = ParseWireJson(event.data, &why);
  if (!parsed || !parsed->is_object()) {
    return Fail(MalformedAnswer("stream event is not a JSON object" +
                                (why.empty() ? "" : " (" + why + ")")));
  }
  const json& j = *parsed;
  if (auto err = EmbeddedError(j); err || event.event == "error") {
    return Fail(MakeProviderError(
        ProviderErrorKind::kStreamError,
        std::string(any_output_ ? "error event mid-stream: "
                                : "error event before any output: ") +
            err.value_or(event.data)));
  }
  if (answer_.id.empty()) answer_.id = StringOr(j, "id", "");
  if (answer_.model.empty()) answer_.model = StringOr(j, "model", "");
  if (auto bad = ReadUsage(j, answer_.usage)) return Fail(std::move(*bad));
  auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array() || choices->empty() ||
      !(*choices)[0].is_object()) {
    return true;  // The closing usage chunk has no choices.
  }
  const json& choice = (*choices)[0];
  if (auto fr = choice.find("finish_reason");
      fr != choice.end() && fr->is_string()) {
    answer_.finish_reason = fr->get<std::string>();
  }
  auto delta = choice.find("delta");
  if (delta == choice.end() || !delta->is_object()) return true;
  if (auto c = delta->find("content"); c != delta->end() && c->is_string()) {
    answer_.text += c->get<std::string>();
    any_output_ = true;
  }
  if (auto calls = delta->find("tool_calls");
      calls != delta->end() && calls->is_array()) {
    for (const json& c : *calls) {
      if (c.is_object() && !AddToolCallDelta(c)) return false;
    }
  }
  return true;
}

bool OpenAiStreamAssembler::AddToolCallDelta(const json& delta) {
  std::optional<int64_t> index =
      ReadWholeNumber(delta, "index", 0, kMaxStreamIndex);
  if (!index) {
    return Fail(MalformedAnswer("tool call index is not a whole number in 0.." +
                                std::to_string(kMaxStreamIndex)));
  }
  auto [slot, added] =
      tool_call_slots_.try_emplace(*index, answer_.tool_calls.size());
  if (added) {
    if (answer_.tool_calls.size() >= kMaxToolCallsPerAnswer) {
      return Fail(MalformedAnswer("more than " +
                                  std::to_string(kMaxToolCallsPerAnswer) +
                                  " tool calls"));
    }
    answer_.tool_calls.emplace_back();
  }
  ToolCall& call = answer_.tool_calls[slot->second];
  if (auto id = StringOr(delta, "id", ""); !id.empty()) call.id = id;
  if (auto f = delta.find("function"); f != delta.end() && f->is_object()) {
    call.name += StringOr(*f, "name", "");
    if (auto a = f->find("arguments"); a != f->end() && a->is_string()) {
      call.arguments += a->get<std::string>();
    }
  }
  any_output_ = true;
  return true;
}

ChatResult OpenAiStreamAssembler::Finish() {
  if (failed_) return error_;
  if (!done_ && answer_.finish_reason.empty()) {
    return MalformedAnswer("stream ended before its end");
  }
  if (answer_.finish_reason.empty()) {
    answer_.finish_reason = answer_.tool_calls.empty() ? "stop" : "tool_calls";
  }
  if (auto bad = CheckAnswerLimits(answer_)) return *bad;
  return answer_;
}

OpenAiAdapter::OpenAiAdapter(AdapterInfo info, bool request_cost)
    : info_(std::move(info)), request_cost_(request_cost) {}

namespace {

HttpRequest OpenAiHttpRequest(const AdapterConfig& config, std::string body) {
  HttpRequest http;
  http.url = config.base_url + "/chat/completions";
  http.headers = {{"Content-Type", "application/json"}};
  if (!config.api_key.empty()) {
    http.headers.emplace_back("Authorization", "Bearer " + config.api_key);
  }
  if (config.stream) http.headers.emplace_back("Accept", "text/event-stream");
  http.body = std::move(body);
  return http;
}

}  // namespace

Result<HttpRequest> OpenAiAdapter::BuildRequest(
    const ChatRequest& request, const AdapterConfig& config) const {
  return OpenAiHttpRequest(
      config, BuildOpenAiRequestBody(request, config.stream, request_cost_));
}

Result<HttpRequest> OpenAiAdapter::BuildRequestReusing(
    const ChatRequest& request, const AdapterConfig& config,
    EncodedHistory& history) const {
  return OpenAiHttpRequest(
      config,
      BuildOpenAiRequestBody(request, config.stream, request_cost_, &history));
}

ChatResult OpenAiAdapter::ParseAnswer(const HttpResponse& response,
                                      const AdapterConfig&) const {
  return ParseOpenAiResponse(response.body);
}

std::unique_ptr<StreamParser> OpenAiAdapter::NewStreamParser(
    const AdapterConfig&) const {
  return std::make_unique<OpenAiStreamAssembler>();
}

namespace {

AdapterConfig ConfigOf(const OpenAiConfig& c) {
  return AdapterConfig{c.base_url, c.api_key, c.extra_headers, c.stream};
}

}  // namespace

OpenAiProvider::OpenAiProvider(OpenAiConfig config, HttpTransport& transport)
    : AdapterProvider(
          std::make_shared<OpenAiAdapter>(
              AdapterInfo{"openai", config.base_url, "", false, true,
                          MockWireFormat::kOpenAiChat,
                          ModelParameters::AllKeys()},
              config.request_cost),
          ConfigOf(config), transport,
          AdapterLimits{config.stream_idle_limit, config.max_response_bytes}) {}

}  // namespace steps
