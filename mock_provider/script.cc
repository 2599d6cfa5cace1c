#include "mock_provider/script.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/json_text.h"
#include "core/yaml_limits.h"

namespace steps {
namespace {

using nlohmann::json;

int LineOf(const YAML::Node& node) {
  YAML::Mark mark = node.Mark();
  return mark.is_null() ? 0 : mark.line + 1;
}

Status Error(const YAML::Node& node, const std::string& message) {
  return InvalidArgument(std::to_string(LineOf(node)) + ": " + message);
}

// A YAML value as JSON: plain scalars become numbers, booleans or null
// where they read as such; quoted scalars stay strings.
json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& item : node) a.push_back(YamlToJson(item));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : node) {
        o[kv.first.as<std::string>()] = YamlToJson(kv.second);
      }
      return o;
    }
    case YAML::NodeType::Scalar:
      break;
  }
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;  // Quoted.
  if (s == "true" || s == "True") return true;
  if (s == "false" || s == "False") return false;
  if (s == "null" || s == "~") return nullptr;
  json number = json::parse(s, nullptr, /*allow_exceptions=*/false);
  if (!number.is_discarded() && number.is_number()) return number;
  return s;
}

// JSON text of `value`; bytes that are not UTF-8 (a script may hold any)
// become U+FFFD instead of an exception.
std::string DumpJson(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<std::string> ScalarString(const YAML::Node& node, const char* key) {
  if (!node.IsScalar()) {
    return Error(node, std::string("'") + key + "' must be a string");
  }
  return node.Scalar();
}

Result<bool> Bool(const YAML::Node& node, const char* key) {
  if (node.IsScalar()) {
    const std::string& s = node.Scalar();
    if (s == "true" || s == "yes") return true;
    if (s == "false" || s == "no") return false;
  }
  return Error(node, std::string("'") + key + "' must be true or false");
}

Result<int64_t> Integer(const YAML::Node& node, const char* key) {
  if (node.IsScalar()) {
    try {
      size_t used = 0;
      int64_t v = std::stoll(node.Scalar(), &used);
      if (used == node.Scalar().size()) return v;
    } catch (...) {
    }
  }
  return Error(node, std::string("'") + key + "' must be an integer");
}

Result<MockToolCall> ParseCall(const YAML::Node& node) {
  MockToolCall call;
  if (node.IsScalar()) {
    call.name = node.Scalar();
    return call;
  }
  if (!node.IsMap()) {
    return Error(node, "a call is a tool name or {name, arguments, id}");
  }
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    if (key == "name") {
      auto v = ScalarString(kv.second, "name");
      if (!v.ok()) return v.status();
      call.name = *v;
    } else if (key == "id") {
      auto v = ScalarString(kv.second, "id");
      if (!v.ok()) return v.status();
      call.id = *v;
    } else if (key == "arguments") {
      // A string is sent verbatim (malformed on purpose, if so written).
      if (kv.second.IsScalar() && kv.second.Tag() == "!") {
        call.arguments = kv.second.Scalar();
      } else if (kv.second.IsMap() || kv.second.IsNull()) {
        json args = YamlToJson(kv.second);
        call.arguments = args.is_null() ? "{}" : DumpJson(args);
      } else if (kv.second.IsScalar()) {
        call.arguments = kv.second.Scalar();
      } else {
        return Error(kv.second, "'arguments' must be a mapping or a string");
      }
    } else {
      return Error(kv.first, "unknown key '" + key +
                                 "' in a call (known: name, arguments, id)");
    }
  }
  if (call.name.empty()) return Error(node, "a call needs a 'name'");
  return call;
}

Result<MockExpect> ParseExpect(const YAML::Node& node) {
  if (!node.IsMap()) return Error(node, "'expect' must be a mapping");
  MockExpect e;
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    if (key == "system_contains") {
      auto v = ScalarString(kv.second, "system_contains");
      if (!v.ok()) return v.status();
      e.system_contains = *v;
    } else if (key == "last_contains") {
      auto v = ScalarString(kv.second, "last_contains");
      if (!v.ok()) return v.status();
      e.last_contains = *v;
    } else if (key == "tool_result") {
      auto v = Bool(kv.second, "tool_result");
      if (!v.ok()) return v.status();
      e.tool_result = *v;
    } else if (key == "request") {
      auto v = Integer(kv.second, "request");
      if (!v.ok()) return v.status();
      if (*v < 1) return Error(kv.second, "'request' counts from 1");
      e.request = static_cast<int>(*v);
    } else if (key == "messages") {
      auto v = Integer(kv.second, "messages");
      if (!v.ok()) return v.status();
      e.messages = static_cast<int>(*v);
    } else if (key == "body") {
      if (!kv.second.IsMap()) {
        return Error(kv.second,
                     "'body' must be a mapping of the keys the request's "
                     "wire body must hold, e.g. {temperature: 0.2}");
      }
      e.body = DumpJson(YamlToJson(kv.second));
    } else if (key == "model" || key == "last_is") {
      auto v = ScalarString(kv.second, key.c_str());
      if (!v.ok()) return v.status();
      (key == "model" ? e.model : e.last_is) = *v;
    } else if (key == "tools") {
      if (!kv.second.IsSequence()) {
        return Error(kv.second,
                     "'tools' must be a list of tool names, e.g. [read_file]");
      }
      std::vector<std::string> names;
      for (const auto& item : kv.second) {
        auto v = ScalarString(item, "tools");
        if (!v.ok()) return v.status();
        names.push_back(*v);
      }
      e.tools = std::move(names);
    } else {
      return Error(kv.first,
                   "unknown key '" + key +
                       "' in expect (known: system_contains, last_contains, "
                       "last_is, tool_result, request, messages, model, "
                       "tools, body)");
    }
  }
  return e;
}

Result<MockUsage> ParseUsage(const YAML::Node& node) {
  if (!node.IsMap()) return Error(node, "'usage' must be a mapping");
  MockUsage u;
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    if (key == "prompt_tokens" || key == "completion_tokens") {
      auto v = Integer(kv.second, key.c_str());
      if (!v.ok()) return v.status();
      (key == "prompt_tokens" ? u.prompt_tokens : u.completion_tokens) = *v;
    } else if (key == "cost") {
      json c = YamlToJson(kv.second);
      if (!c.is_number()) return Error(kv.second, "'cost' must be a number");
      u.cost = c.get<double>();
    } else {
      return Error(kv.first,
                   "unknown key '" + key +
                       "' in usage (known: prompt_tokens, completion_tokens, "
                       "cost)");
    }
  }
  return u;
}

const std::set<std::string>& KnownEntryKeys() {
  static const std::set<std::string> keys = {
      "say",  "call", "status",  "headers", "body",   "delay",
      "hang", "drop", "garbage", "usage",   "expect", "error_event"};
  return keys;
}

Result<MockEntry> ParseEntry(const YAML::Node& node) {
  MockEntry entry;
  entry.line = LineOf(node);
  if (!node.IsMap()) {
    return Error(node,
                 "an entry is a mapping such as {say: TEXT} or {status: 500}");
  }
  // The answer keys present, to refuse combinations that mean nothing.
  std::vector<std::string> answers;
  bool has_say = false;
  bool has_body = false;
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (!KnownEntryKeys().count(key)) {
      return Error(kv.first,
                   "unknown key '" + key +
                       "' (known: say, call, status, headers, body, delay, "
                       "hang, drop, garbage, usage, expect, error_event)");
    }
    if (key == "say") {
      auto s = ScalarString(v, "say");
      if (!s.ok()) return s.status();
      entry.text = *s;
      has_say = true;
    } else if (key == "call") {
      if (v.IsSequence()) {
        if (v.size() == 0) return Error(v, "'call' lists no calls");
        for (const auto& item : v) {
          auto c = ParseCall(item);
          if (!c.ok()) return c.status();
          entry.calls.push_back(*c);
        }
      } else {
        auto c = ParseCall(v);
        if (!c.ok()) return c.status();
        entry.calls.push_back(*c);
      }
      has_say = true;
    } else if (key == "status") {
      auto s = Integer(v, "status");
      if (!s.ok()) return s.status();
      if (*s < 100 || *s > 599) {
        return Error(v, "'status' must be an HTTP status (100-599)");
      }
      entry.status = static_cast<int>(*s);
      answers.push_back("status");
    } else if (key == "headers") {
      if (!v.IsMap()) return Error(v, "'headers' must be a mapping");
      for (const auto& h : v) {
        entry.headers.emplace_back(h.first.as<std::string>(),
                                   h.second.as<std::string>());
      }
    } else if (key == "body") {
      entry.body = v.IsScalar() ? v.Scalar() : DumpJson(YamlToJson(v));
      has_body = true;
    } else if (key == "delay") {
      auto s = ScalarString(v, "delay");
      if (!s.ok()) return s.status();
      auto d = ParseDuration(*s);
      if (!d.ok()) return Error(v, "'delay': " + d.status().message());
      if (d->count() < 0) return Error(v, "'delay' must not be negative");
      entry.delay = *d;
    } else if (key == "hang" || key == "drop") {
      auto b = Bool(v, key.c_str());
      if (!b.ok()) return b.status();
      if (*b) answers.push_back(key);
      if (*b) {
        entry.action =
            key == "hang" ? MockEntry::Action::kHang : MockEntry::Action::kDrop;
      }
    } else if (key == "garbage") {
      if (v.IsScalar() && (v.Scalar() == "true" || v.Scalar() == "false") &&
          v.Tag() != "!") {
        if (v.Scalar() == "false") continue;
        entry.text = "{\"choices\": [ this is not json";
      } else {
        auto s = ScalarString(v, "garbage");
        if (!s.ok()) return s.status();
        entry.text = *s;
      }
      answers.push_back("garbage");
      entry.action = MockEntry::Action::kGarbage;
    } else if (key == "error_event") {
      auto s = ScalarString(v, "error_event");
      if (!s.ok()) return s.status();
      entry.text = *s;
      answers.push_back("error_event");
      entry.action = MockEntry::Action::kErrorEvent;
    } else if (key == "usage") {
      auto u = ParseUsage(v);
      if (!u.ok()) return u.status();
      entry.usage = *u;
    } else if (key == "expect") {
      auto e = ParseExpect(v);
      if (!e.ok()) return e.status();
      entry.expect = *e;
    }
  }
  if (answers.size() > 1) {
    return Error(node, "an entry answers one way; it has both '" + answers[0] +
                           "' and '" + answers[1] + "'");
  }
  if (has_say && !answers.empty() && answers[0] != "hang") {
    return Error(node,
                 "'say'/'call' cannot be combined with '" + answers[0] + "'");
  }
  if (has_body && (answers.empty() || answers[0] != "status")) {
    return Error(node, "'body' belongs with 'status'");
  }
  if (!answers.empty() && answers[0] == "status") {
    entry.action = MockEntry::Action::kStatus;
  } else if (has_say && answers.empty()) {
    entry.action = MockEntry::Action::kSay;
  }
  return entry;
}

}  // namespace

Result<MockScript> ParseMockScript(const YAML::Node& node) {
  if (!node.IsMap()) {
    return Error(node,
                 "a mock script is a mapping of agent or model names to lists "
                 "of entries (and an optional 'default')");
  }
  MockScript script;
  try {
    for (const auto& kv : node) {
      std::string key = kv.first.as<std::string>();
      script.written[key] = YAML::Dump(kv.second);
      if (key == "default") {
        auto e = ParseEntry(kv.second);
        if (!e.ok()) return e.status();
        if (e->action == MockEntry::Action::kDefault) {
          return Error(kv.second,
                       "'default' needs an answer (say, call, status, hang, "
                       "drop, garbage or error_event)");
        }
        script.default_entry = *e;
        continue;
      }
      std::vector<MockEntry> entries;
      if (kv.second.IsSequence()) {
        for (const auto& item : kv.second) {
          auto e = ParseEntry(item);
          if (!e.ok()) return e.status();
          entries.push_back(*e);
        }
      } else if (kv.second.IsMap()) {
        auto e = ParseEntry(kv.second);
        if (!e.ok()) return e.status();
        entries.push_back(*e);
      } else {
        return Error(kv.second,
                     "the script for '" + key + "' must be a list of entries");
      }
      script.scripts[key] = std::move(entries);
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::to_string(e.mark.line + 1) + ": " + e.msg);
  } catch (const json::exception& e) {
    return InvalidArgument(std::to_string(LineOf(node)) + ": " + e.what());
  }
  return script;
}

std::string MockScriptFingerprint(const MockScript& script,
                                  const std::string& agent) {
  // Each part framed by its key and length, so no two scripts read alike.
  std::string out;
  auto add = [&](const std::string& key) {
    auto it = script.written.find(key);
    if (it == script.written.end()) return;
    out += key + "\n" + std::to_string(it->second.size()) + "\n" + it->second +
           "\n";
  };
  if (script.scripts.count(agent)) {
    add(agent);
    add("default");
    return out;
  }
  for (const auto& [key, text] : script.written) add(key);
  return out;
}

Result<MockScript> ParseMockScriptText(const std::string& text) {
  if (auto problem = CheckYamlLimits(text)) {
    return InvalidArgument(std::to_string(problem->line) + ": " +
                           problem->message);
  }
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return ParseMockScript(node);
}

Result<MockScript> LoadMockScriptFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot read the script");
  std::stringstream text;
  text << in.rdbuf();
  auto script = ParseMockScriptText(text.str());
  if (!script.ok()) {
    return InvalidArgument(path + ":" + script.status().message());
  }
  return script;
}

}  // namespace steps
