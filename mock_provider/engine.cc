#include "mock_provider/engine.h"

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/utf8.h"
#include "mock_provider/render.h"

namespace steps {
namespace {

using nlohmann::json;

// What expectations look at, read from either wire format.
struct RequestView {
  std::string model;
  bool stream = false;
  bool include_usage = false;
  std::string system;
  std::string last;
  std::string last_part;   // The last part of the last message.
  std::string first_user;  // The first user message's text.
  bool seen_user = false;
  std::vector<std::string> tools;
  int messages = 0;
  bool tool_result = false;
  size_t chars = 0;
  json body;  // As parsed; discarded when not JSON.
};

// Text of the last part of a content field (the whole of a string).
std::string LastPartText(const json& content) {
  if (!content.is_array() || content.empty()) {
    return content.is_string() ? content.get<std::string>() : "";
  }
  const json& part = content.back();
  if (!part.is_object()) return "";
  if (part.value("type", "") == "tool_result" && part.contains("content")) {
    return LastPartText(part["content"]);
  }
  if (part.contains("text") && part["text"].is_string()) {
    return part["text"].get<std::string>();
  }
  return "";
}

// The names of the tools offered: OpenAI {function: {name}}, Anthropic
// {name}.
std::vector<std::string> ToolNames(const json& body) {
  std::vector<std::string> names;
  if (!body.contains("tools") || !body["tools"].is_array()) return names;
  for (const json& t : body["tools"]) {
    if (!t.is_object()) continue;
    const json& f =
        t.contains("function") && t["function"].is_object() ? t["function"] : t;
    if (f.contains("name") && f["name"].is_string()) {
      names.push_back(f["name"].get<std::string>());
    }
  }
  return names;
}

// Text of a content field: a string, or an array of parts/blocks.
std::string ContentText(const json& content, bool* saw_tool_result) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (!content.is_array()) return out;
  for (const json& part : content) {
    if (!part.is_object()) continue;
    std::string type = part.value("type", "");
    if (type == "tool_result") {
      if (saw_tool_result) *saw_tool_result = true;
      if (part.contains("content"))
        out += ContentText(part["content"], nullptr);
    } else if (part.contains("text") && part["text"].is_string()) {
      out += part["text"].get<std::string>();
    }
  }
  return out;
}

RequestView ReadRequest(const std::string& format, const std::string& body) {
  RequestView v;
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  v.body = j;
  if (!j.is_object()) return v;
  v.model = j.value("model", "");
  v.stream = j.value("stream", false);
  v.tools = ToolNames(j);
  if (j.contains("stream_options") && j["stream_options"].is_object()) {
    v.include_usage = j["stream_options"].value("include_usage", false);
  }
  if (format == "anthropic" && j.contains("system")) {
    v.system = ContentText(j["system"], nullptr);
    if (!v.system.empty()) ++v.messages;
  }
  if (j.contains("messages") && j["messages"].is_array()) {
    for (const json& m : j["messages"]) {
      if (!m.is_object()) continue;
      ++v.messages;
      std::string role = m.value("role", "");
      bool tool_result = role == "tool";
      std::string text =
          m.contains("content") ? ContentText(m["content"], &tool_result) : "";
      if (tool_result) v.tool_result = true;
      if (role == "system" || role == "developer") {
        if (!v.system.empty()) v.system += "\n";
        v.system += text;
      }
      if (role == "user" && !tool_result && !v.seen_user) {
        v.seen_user = true;
        v.first_user = text;
      }
      v.last = text;
      v.last_part = m.contains("content") ? LastPartText(m["content"]) : "";
      v.chars += text.size();
    }
  }
  v.chars += v.system.size();
  return v;
}

// `s` on one line: line breaks shown as \n, so a failure stays one line.
std::string OneLine(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Quote(const std::string& s) {
  std::string cut =
      s.size() > 120 ? s.substr(0, Utf8PrefixLength(s, 120)) + "..." : s;
  return "'" + OneLine(cut) + "'";
}

// `s` from byte `from` (moved back to a character start), at most `max`
// bytes, with "..." where it was cut.
std::string Window(const std::string& s, size_t from, size_t max) {
  while (from > 0 && from < s.size() && (s[from] & 0xC0) == 0x80) --from;
  std::string out = from > 0 ? "..." : "";
  std::string_view rest = std::string_view(s).substr(std::min(from, s.size()));
  size_t keep = Utf8PrefixLength(rest, max);
  out += OneLine(rest.substr(0, keep));
  if (keep < rest.size()) out += "...";
  return "'" + out + "'";
}

// Where two texts part: "expected 'A', now 'B' (they differ from byte N)",
// each shown shortened around the first difference.
std::string Difference(const std::string& expected, const std::string& now) {
  size_t i = 0;
  while (i < expected.size() && i < now.size() && expected[i] == now[i]) ++i;
  size_t from = i > 40 ? i - 40 : 0;
  return "expected " + Window(expected, from, 100) + ", now " +
         Window(now, from, 100) + " (they differ from byte " +
         std::to_string(i + 1) + ")";
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i ? ", " : "") + names[i];
  }
  return out + "]";
}

// Where `actual` fails to hold `expected` ("temperature: 0.2 expected, the
// body has 1"), or empty when it holds it: mappings key by key, the rest
// whole.
std::string BodyMismatch(const json& expected, const json& actual,
                         const std::string& path) {
  if (expected.is_object()) {
    if (!actual.is_object()) {
      return (path.empty() ? "the body" : path) + " is not a mapping";
    }
    for (const auto& [key, value] : expected.items()) {
      const std::string at = path.empty() ? key : path + "." + key;
      if (!actual.contains(key)) return at + ": absent from the body";
      std::string why = BodyMismatch(value, actual[key], at);
      if (!why.empty()) return why;
    }
    return "";
  }
  if (expected == actual) return "";
  return path + ": " + Quote(expected.dump()) + " expected, the body has " +
         Quote(actual.dump());
}

std::vector<std::string> Check(const MockEntry& entry, const RequestView& v,
                               int script_request) {
  std::vector<std::string> failures;
  if (!entry.expect) return failures;
  const MockExpect& e = *entry.expect;
  std::string where = "line " + std::to_string(entry.line) + ": expect ";
  if (e.system_contains &&
      v.system.find(*e.system_contains) == std::string::npos) {
    failures.push_back(where + "system_contains " + Quote(*e.system_contains) +
                       ": the system message is " + Quote(v.system));
  }
  if (e.last_contains && v.last.find(*e.last_contains) == std::string::npos) {
    failures.push_back(where + "last_contains " + Quote(*e.last_contains) +
                       ": the last message is " + Quote(v.last));
  }
  if (e.tool_result && *e.tool_result != v.tool_result) {
    failures.push_back(where + "tool_result " +
                       (*e.tool_result ? "true" : "false") +
                       ": the request has " +
                       (v.tool_result ? "a tool result" : "no tool result"));
  }
  if (e.request && *e.request != script_request) {
    failures.push_back(where + "request " + std::to_string(*e.request) +
                       ": this is request " + std::to_string(script_request));
  }
  if (e.messages && *e.messages != v.messages) {
    failures.push_back(where + "messages " + std::to_string(*e.messages) +
                       ": the request has " + std::to_string(v.messages));
  }
  if (e.last_is && *e.last_is != v.last_part) {
    failures.push_back(where + "last_is: the last message " +
                       Difference(*e.last_is, v.last_part));
  }
  if (e.model && *e.model != v.model) {
    failures.push_back(where + "model: expected '" + *e.model + "', now '" +
                       v.model + "'");
  }
  if (e.tools && *e.tools != v.tools) {
    failures.push_back(where + "tools: expected " + JoinNames(*e.tools) +
                       ", now " + JoinNames(v.tools));
  }
  if (e.body) {
    std::string why =
        BodyMismatch(json::parse(*e.body, nullptr, false), v.body, "");
    if (!why.empty()) failures.push_back(where + "body " + why);
  }
  return failures;
}

const char* ActionName(MockEntry::Action a) {
  switch (a) {
    case MockEntry::Action::kDefault:
      return "default";
    case MockEntry::Action::kSay:
      return "say";
    case MockEntry::Action::kStatus:
      return "status";
    case MockEntry::Action::kHang:
      return "hang";
    case MockEntry::Action::kDrop:
      return "drop";
    case MockEntry::Action::kGarbage:
      return "garbage";
    case MockEntry::Action::kErrorEvent:
      return "error_event";
  }
  return "?";
}

}  // namespace

MockEngine::MockEngine(MockScript script, MockEngineOptions options)
    : script_(std::move(script)), options_(options) {}

MockReply MockEngine::Handle(const std::string& path,
                             const HttpHeaders& headers,
                             const std::string& body, int connection) {
  MockRequestRecord record;
  record.path = path;
  record.format = path.size() >= 9 && path.rfind("/messages") == path.size() - 9
                      ? "anthropic"
                      : "openai";
  record.agent = FindHeader(headers, "X-Steps-Agent").value_or("");
  record.step = FindHeader(headers, "X-Steps-Step").value_or("");
  record.body = body;
  record.connection = connection;
  RequestView view = ReadRequest(record.format, body);
  record.model = view.model;
  record.stream = view.stream;

  std::lock_guard<std::mutex> lock(mu_);
  record.index = static_cast<int>(requests_.size()) + 1;

  // The scripted entry, if any, then the default it may defer to.
  const MockEntry* scripted = nullptr;
  std::string key;
  const std::string step_key = record.agent + "@" + record.step;
  if (!record.agent.empty() && !record.step.empty() &&
      script_.scripts.count(step_key)) {
    key = step_key;
  } else if (script_.scripts.count(record.agent)) {
    key = record.agent;
  } else if (script_.scripts.count(record.model)) {
    key = record.model;
  }
  // Where the script stands: per key, or per conversation of the key.
  const std::string cursor =
      options_.by_conversation ? key + '\n' + view.first_user : key;
  int script_request = ++received_[cursor];
  if (!key.empty()) {
    const auto& entries = script_.scripts.at(key);
    size_t& next = next_[cursor];
    if (next < entries.size()) scripted = &entries[next++];
  }
  MockEntry effective;
  if (scripted && scripted->action != MockEntry::Action::kDefault) {
    effective = *scripted;
    record.script = key;
  } else {
    if (script_.default_entry) {
      effective = *script_.default_entry;
    } else {
      std::string ran_out;
      if (!key.empty()) {
        const size_t n = script_.scripts.at(key).size();
        ran_out = "; its script has " + std::to_string(n) +
                  (n == 1 ? " entry" : " entries");
      }
      effective.action = MockEntry::Action::kStatus;
      effective.status = 400;
      effective.body = DumpJson(json{
          {"error",
           {{"message", "mock: nothing scripted for agent '" + record.agent +
                            "', model '" + record.model + "' (request " +
                            std::to_string(script_request) + ran_out + ")"},
            {"type", "invalid_request_error"}}}});
    }
    if (scripted) {  // Modifiers only: they apply to the default answer.
      record.script = key;
      effective.line = scripted->line;
      if (scripted->delay.count() > 0) effective.delay = scripted->delay;
      if (scripted->usage) effective.usage = scripted->usage;
      if (scripted->expect) effective.expect = scripted->expect;
      for (const auto& h : scripted->headers) effective.headers.push_back(h);
    }
  }
  record.entry_line = effective.line;
  record.action = ActionName(effective.action);
  record.script_request = script_request;
  record.expect_failures = Check(effective, view, script_request);

  RenderInput in;
  in.format = record.format;
  in.stream = view.stream;
  in.include_usage = view.include_usage;
  in.model = view.model;
  in.request_index = record.index;
  in.prompt_tokens = static_cast<int64_t>((view.chars + 3) / 4);
  requests_.push_back(std::move(record));
  return RenderReply(effective, in);
}

std::string DescribeRequest(const MockRequestRecord& r) {
  std::string out =
      "request " + std::to_string(r.index) + ", agent '" + r.agent + "'";
  if (!r.step.empty()) out += ", step '" + r.step + "'";
  if (r.script_request != r.index && r.script_request > 0) {
    out += ", its request " + std::to_string(r.script_request);
  }
  return out;
}

size_t MockEngine::RequestCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_.size();
}

std::vector<MockRequestRecord> MockEngine::Requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

std::string MockEngine::RequestsJson() const {
  json out = json::array();
  for (const MockRequestRecord& r : Requests()) {
    json body = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    out.push_back({{"index", r.index},
                   {"path", r.path},
                   {"format", r.format},
                   {"agent", r.agent},
                   {"step", r.step},
                   {"model", r.model},
                   {"stream", r.stream},
                   {"script", r.script},
                   {"entry_line", r.entry_line},
                   {"action", r.action},
                   {"connection", r.connection},
                   {"expect_failures", r.expect_failures},
                   {"body", body.is_discarded() ? json(r.body) : body}});
  }
  return DumpJson(out, 2);
}

std::vector<std::string> MockEngine::ExpectationFailures() const {
  std::vector<std::string> out;
  for (const MockRequestRecord& r : Requests()) {
    for (const std::string& f : r.expect_failures) {
      out.push_back(f + " (" + DescribeRequest(r) + ")");
    }
  }
  return out;
}

}  // namespace steps
