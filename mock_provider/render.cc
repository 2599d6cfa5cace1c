#include "mock_provider/render.h"

#include <ctime>
#include <nlohmann/json.hpp>

#include "core/json_text.h"

namespace steps {
namespace {

using nlohmann::json;

std::string Sse(const json& data, const std::string& event = "") {
  std::string out;
  if (!event.empty()) out += "event: " + event + "\n";
  out += "data: " + DumpJson(data) + "\n\n";
  return out;
}

// Splits text into a few pieces so streams really arrive in fragments.
std::vector<std::string> Pieces(const std::string& text, size_t n = 3) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t size = (text.size() + n - 1) / n;
  for (size_t i = 0; i < text.size(); i += size) {
    out.push_back(text.substr(i, size));
  }
  return out;
}

std::string CallId(const MockEntry& entry, const RenderInput& in, size_t i) {
  if (!entry.calls[i].id.empty()) return entry.calls[i].id;
  return "call_" + std::to_string(in.request_index) + "_" + std::to_string(i);
}

MockUsage UsageFor(const MockEntry& entry, const RenderInput& in) {
  if (entry.usage) return *entry.usage;
  MockUsage u;
  u.prompt_tokens = std::max<int64_t>(1, in.prompt_tokens);
  size_t out_chars = entry.text.size();
  for (const auto& c : entry.calls)
    out_chars += c.name.size() + c.arguments.size();
  u.completion_tokens = std::max<int64_t>(1, (out_chars + 3) / 4);
  return u;
}

json OpenAiUsage(const MockUsage& u) {
  json j{{"prompt_tokens", u.prompt_tokens},
         {"completion_tokens", u.completion_tokens},
         {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  if (u.cost) j["cost"] = *u.cost;
  return j;
}

json AnthropicInput(const std::string& arguments) {
  json j = json::parse(arguments, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return json::object();
  return j;
}

void RenderOpenAiSay(const MockEntry& entry, const RenderInput& in,
                     MockReply& reply) {
  const std::string id = "chatcmpl-mock-" + std::to_string(in.request_index);
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  const std::string finish = entry.calls.empty() ? "stop" : "tool_calls";
  const MockUsage usage = UsageFor(entry, in);
  if (!in.stream) {
    json message{{"role", "assistant"}, {"refusal", nullptr}};
    message["content"] = entry.text.empty() && !entry.calls.empty()
                             ? json(nullptr)
                             : json(entry.text);
    if (!entry.calls.empty()) {
      json calls = json::array();
      for (size_t i = 0; i < entry.calls.size(); ++i) {
        calls.push_back({{"id", CallId(entry, in, i)},
                         {"type", "function"},
                         {"function",
                          {{"name", entry.calls[i].name},
                           {"arguments", entry.calls[i].arguments}}}});
      }
      message["tool_calls"] = std::move(calls);
    }
    json body{{"id", id},
              {"object", "chat.completion"},
              {"created", created},
              {"model", in.model},
              {"system_fingerprint", "mock"},
              {"choices", json::array({{{"index", 0},
                                        {"message", std::move(message)},
                                        {"logprobs", nullptr},
                                        {"finish_reason", finish}}})},
              {"usage", OpenAiUsage(usage)}};
    reply.body = DumpJson(body);
    reply.headers.emplace_back("Content-Type", "application/json");
    return;
  }
  auto chunk = [&](json delta, json finish_reason) {
    return Sse(
        {{"id", id},
         {"object", "chat.completion.chunk"},
         {"created", created},
         {"model", in.model},
         {"system_fingerprint", "mock"},
         {"choices", json::array({{{"index", 0},
                                   {"delta", std::move(delta)},
                                   {"logprobs", nullptr},
                                   {"finish_reason", finish_reason}}})}});
  };
  reply.events.push_back(
      chunk({{"role", "assistant"}, {"content", ""}}, nullptr));
  for (const std::string& piece : Pieces(entry.text)) {
    reply.events.push_back(chunk({{"content", piece}}, nullptr));
  }
  for (size_t i = 0; i < entry.calls.size(); ++i) {
    const MockToolCall& c = entry.calls[i];
    reply.events.push_back(
        chunk({{"tool_calls",
                json::array(
                    {{{"index", i},
                      {"id", CallId(entry, in, i)},
                      {"type", "function"},
                      {"function", {{"name", c.name}, {"arguments", ""}}}}})}},
              nullptr));
    for (const std::string& piece : Pieces(c.arguments)) {
      reply.events.push_back(
          chunk({{"tool_calls",
                  json::array(
                      {{{"index", i}, {"function", {{"arguments", piece}}}}})}},
                nullptr));
    }
  }
  reply.events.push_back(chunk(json::object(), finish));
  if (in.include_usage) {
    reply.events.push_back(Sse({{"id", id},
                                {"object", "chat.completion.chunk"},
                                {"created", created},
                                {"model", in.model},
                                {"choices", json::array()},
                                {"usage", OpenAiUsage(usage)}}));
  }
  reply.events.push_back("data: [DONE]\n\n");
}

void RenderAnthropicSay(const MockEntry& entry, const RenderInput& in,
                        MockReply& reply) {
  const std::string id = "msg_mock_" + std::to_string(in.request_index);
  const std::string stop = entry.calls.empty() ? "end_turn" : "tool_use";
  const MockUsage usage = UsageFor(entry, in);
  if (!in.stream) {
    json content = json::array();
    if (!entry.text.empty() || entry.calls.empty()) {
      content.push_back({{"type", "text"}, {"text", entry.text}});
    }
    for (size_t i = 0; i < entry.calls.size(); ++i) {
      content.push_back({{"type", "tool_use"},
                         {"id", CallId(entry, in, i)},
                         {"name", entry.calls[i].name},
                         {"input", AnthropicInput(entry.calls[i].arguments)}});
    }
    json body{{"id", id},
              {"type", "message"},
              {"role", "assistant"},
              {"model", in.model},
              {"content", std::move(content)},
              {"stop_reason", stop},
              {"stop_sequence", nullptr},
              {"usage",
               {{"input_tokens", usage.prompt_tokens},
                {"output_tokens", usage.completion_tokens}}}};
    reply.body = DumpJson(body);
    reply.headers.emplace_back("Content-Type", "application/json");
    return;
  }
  reply.events.push_back(
      Sse({{"type", "message_start"},
           {"message",
            {{"id", id},
             {"type", "message"},
             {"role", "assistant"},
             {"model", in.model},
             {"content", json::array()},
             {"stop_reason", nullptr},
             {"stop_sequence", nullptr},
             {"usage",
              {{"input_tokens", usage.prompt_tokens}, {"output_tokens", 1}}}}}},
          "message_start"));
  int index = 0;
  if (!entry.text.empty()) {
    reply.events.push_back(
        Sse({{"type", "content_block_start"},
             {"index", index},
             {"content_block", {{"type", "text"}, {"text", ""}}}},
            "content_block_start"));
    for (const std::string& piece : Pieces(entry.text)) {
      reply.events.push_back(
          Sse({{"type", "content_block_delta"},
               {"index", index},
               {"delta", {{"type", "text_delta"}, {"text", piece}}}},
              "content_block_delta"));
    }
    reply.events.push_back(
        Sse({{"type", "content_block_stop"}, {"index", index}},
            "content_block_stop"));
    ++index;
  }
  for (size_t i = 0; i < entry.calls.size(); ++i, ++index) {
    reply.events.push_back(Sse({{"type", "content_block_start"},
                                {"index", index},
                                {"content_block",
                                 {{"type", "tool_use"},
                                  {"id", CallId(entry, in, i)},
                                  {"name", entry.calls[i].name},
                                  {"input", json::object()}}}},
                               "content_block_start"));
    std::string args = DumpJson(AnthropicInput(entry.calls[i].arguments));
    for (const std::string& piece : Pieces(args)) {
      reply.events.push_back(Sse(
          {{"type", "content_block_delta"},
           {"index", index},
           {"delta", {{"type", "input_json_delta"}, {"partial_json", piece}}}},
          "content_block_delta"));
    }
    reply.events.push_back(
        Sse({{"type", "content_block_stop"}, {"index", index}},
            "content_block_stop"));
  }
  reply.events.push_back(
      Sse({{"type", "message_delta"},
           {"delta", {{"stop_reason", stop}, {"stop_sequence", nullptr}}},
           {"usage", {{"output_tokens", usage.completion_tokens}}}},
          "message_delta"));
  reply.events.push_back(Sse({{"type", "message_stop"}}, "message_stop"));
}

std::string ErrorBody(const std::string& format, const std::string& message,
                      const std::string& type) {
  if (format == "anthropic") {
    return DumpJson(json{{"type", "error"},
                         {"error", {{"type", type}, {"message", message}}}});
  }
  return DumpJson(json{
      {"error", {{"message", message}, {"type", type}, {"code", nullptr}}}});
}

}  // namespace

MockReply RenderReply(const MockEntry& entry, const RenderInput& in) {
  MockReply reply;
  reply.delay = entry.delay;
  switch (entry.action) {
    case MockEntry::Action::kDefault:
    case MockEntry::Action::kSay:
      reply.stream = in.stream;
      if (in.stream) {
        reply.headers.emplace_back("Content-Type", "text/event-stream");
        reply.headers.emplace_back("Cache-Control", "no-cache");
      }
      if (in.format == "anthropic") {
        RenderAnthropicSay(entry, in, reply);
      } else {
        RenderOpenAiSay(entry, in, reply);
      }
      break;
    case MockEntry::Action::kHang:
      if (in.stream && (!entry.text.empty() || !entry.calls.empty())) {
        // A stream that starts, then goes silent: headers and the first
        // events, never the end.
        MockEntry say = entry;
        say.action = MockEntry::Action::kSay;
        say.headers.clear();  // Added below, once.
        reply = RenderReply(say, in);
        size_t keep = std::min<size_t>(2, reply.events.size());
        reply.events.resize(keep);
        reply.hang_after_events = true;
      } else if (in.stream) {
        reply.stream = true;
        reply.headers.emplace_back("Content-Type", "text/event-stream");
        reply.hang_after_events = true;
      } else {
        reply.kind = MockReply::Kind::kHang;
      }
      break;
    case MockEntry::Action::kDrop:
      reply.kind = MockReply::Kind::kDrop;
      break;
    case MockEntry::Action::kStatus:
      reply.status = entry.status;
      reply.body = entry.body.value_or(ErrorBody(
          in.format, "mock: scripted status " + std::to_string(entry.status),
          entry.status == 429 ? "rate_limit_error" : "api_error"));
      reply.headers.emplace_back("Content-Type", "application/json");
      break;
    case MockEntry::Action::kGarbage:
      if (in.stream) {
        reply.stream = true;
        reply.headers.emplace_back("Content-Type", "text/event-stream");
        reply.events.push_back("data: " + entry.text + "\n\n");
      } else {
        reply.body = entry.text;
        reply.headers.emplace_back("Content-Type", "application/json");
      }
      break;
    case MockEntry::Action::kErrorEvent:
      if (in.stream) {
        reply.stream = true;
        reply.headers.emplace_back("Content-Type", "text/event-stream");
        if (in.format == "anthropic") {
          reply.events.push_back(
              "event: error\ndata: " +
              ErrorBody(in.format, entry.text, "overloaded_error") + "\n\n");
        } else {
          reply.events.push_back(
              "data: " + ErrorBody(in.format, entry.text, "server_error") +
              "\n\n");
        }
      } else {
        reply.body = ErrorBody(in.format, entry.text, "server_error");
        reply.headers.emplace_back("Content-Type", "application/json");
      }
      break;
  }
  for (const auto& h : entry.headers) reply.headers.push_back(h);
  return reply;
}

}  // namespace steps
