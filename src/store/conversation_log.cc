#include "store/conversation_log.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/json_text.h"

namespace steps::store {
namespace {

using nlohmann::json;
using Kind = agent::ConversationCheckpoint::Kind;

constexpr Kind kKinds[] = {Kind::kRequest, Kind::kAnswer, Kind::kToolStarted,
                           Kind::kToolFinished};

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// A stored number or flag, or `fallback` when it is missing or of another
// type (a damaged row reads as zero, never throws).
int64_t Int(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

double Real(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0;
}

bool Flag(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

Result<Message> MessageFrom(const json& j) {
  if (!j.is_object()) return InvalidArgument("a message is not an object");
  Message m;
  const std::string role = Str(j, "role");
  bool known = false;
  for (Role r : {Role::kSystem, Role::kUser, Role::kAssistant, Role::kTool}) {
    if (role == steps::RoleName(r)) {
      m.role = r;
      known = true;
    }
  }
  if (!known) return InvalidArgument("unknown message role '" + role + "'");
  m.content = Str(j, "content");
  if (auto calls = j.find("tool_calls"); calls != j.end()) {
    if (!calls->is_array()) return InvalidArgument("tool_calls is no list");
    for (const json& c : *calls) {
      m.tool_calls.push_back(
          {Str(c, "id"), Str(c, "name"), Str(c, "arguments")});
    }
  }
  m.tool_call_id = Str(j, "tool_call_id");
  m.tool_name = Str(j, "tool_name");
  return m;
}

Result<agent::ConversationCheckpoint> CheckpointFrom(const std::string& kind,
                                                     int turn,
                                                     const std::string& text) {
  agent::ConversationCheckpoint cp;
  bool known = false;
  for (Kind k : kKinds) {
    if (kind == CheckpointKindName(k)) {
      cp.kind = k;
      known = true;
    }
  }
  if (!known) return InvalidArgument("unknown checkpoint kind '" + kind + "'");
  cp.turn = turn;
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return InvalidArgument("the checkpoint is not JSON");
  if (auto ms = j.find("messages"); ms != j.end() && ms->is_array()) {
    for (const json& m : *ms) {
      Result<Message> message = MessageFrom(m);
      if (!message.ok()) return message.status();
      cp.messages.push_back(std::move(*message));
    }
  }
  cp.nudge = Flag(j, "nudge");
  cp.source = Str(j, "source");
  cp.provider_requests = static_cast<int>(
      std::clamp<int64_t>(Int(j, "provider_requests"), 0, 1 << 30));
  cp.prompt_tokens = Int(j, "prompt_tokens");
  cp.completion_tokens = Int(j, "completion_tokens");
  cp.usd = Real(j, "usd");
  cp.call_id = Str(j, "call_id");
  cp.tool = Str(j, "tool");
  cp.arguments = Str(j, "arguments");
  cp.is_error = Flag(j, "is_error");
  return cp;
}

}  // namespace

std::string_view CheckpointKindName(Kind kind) {
  switch (kind) {
    case Kind::kRequest:
      return "request";
    case Kind::kAnswer:
      return "answer";
    case Kind::kToolStarted:
      return "tool_started";
    case Kind::kToolFinished:
      return "tool_finished";
  }
  return "request";
}

namespace {

void AppendKey(std::string& out, std::string_view key) {
  out += ",\"";
  out += key;
  out += "\":";
}

void AppendMessage(std::string& out, const Message& m) {
  out += "{\"role\":\"";
  out += steps::RoleName(m.role);
  out += "\",\"content\":";
  AppendJsonString(out, m.content);
  if (!m.tool_calls.empty()) {
    AppendKey(out, "tool_calls");
    out += '[';
    for (size_t i = 0; i < m.tool_calls.size(); ++i) {
      const ToolCall& c = m.tool_calls[i];
      out += i == 0 ? "{\"id\":" : ",{\"id\":";
      AppendJsonString(out, c.id);
      AppendKey(out, "name");
      AppendJsonString(out, c.name);
      AppendKey(out, "arguments");
      AppendJsonString(out, c.arguments);
      out += '}';
    }
    out += ']';
  }
  if (!m.tool_call_id.empty()) {
    AppendKey(out, "tool_call_id");
    AppendJsonString(out, m.tool_call_id);
  }
  if (!m.tool_name.empty()) {
    AppendKey(out, "tool_name");
    AppendJsonString(out, m.tool_name);
  }
  out += '}';
}

void AppendNumber(std::string& out, std::string_view key, int64_t value) {
  AppendKey(out, key);
  out += std::to_string(value);
}

// The shortest text that reads back as the same double; JSON has no NaN
// or infinity, so those are null (read back as zero, as before).
void AppendNumber(std::string& out, std::string_view key, double value) {
  AppendKey(out, key);
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  char text[64];
  auto [end, ec] = std::to_chars(text, text + sizeof text, value);
  out.append(text, ec == std::errc() ? end : text);
}

}  // namespace

// Written field by field rather than through a json value: every turn of
// every conversation writes one, and the reader (CheckpointFrom) takes
// keys in any order.
std::string CheckpointJson(const agent::ConversationCheckpoint& cp) {
  std::string out = "{\"messages\":[";
  for (size_t i = 0; i < cp.messages.size(); ++i) {
    if (i > 0) out += ',';
    AppendMessage(out, cp.messages[i]);
  }
  out += ']';
  if (cp.nudge) out += ",\"nudge\":true";
  if (cp.kind == Kind::kAnswer) {
    AppendKey(out, "source");
    AppendJsonString(out, cp.source);
    AppendNumber(out, "provider_requests", int64_t{cp.provider_requests});
    AppendNumber(out, "prompt_tokens", cp.prompt_tokens);
    AppendNumber(out, "completion_tokens", cp.completion_tokens);
    AppendNumber(out, "usd", cp.usd);
  }
  if (cp.kind == Kind::kToolStarted || cp.kind == Kind::kToolFinished) {
    AppendKey(out, "call_id");
    AppendJsonString(out, cp.call_id);
    AppendKey(out, "tool");
    AppendJsonString(out, cp.tool);
    AppendKey(out, "arguments");
    AppendJsonString(out, cp.arguments);
    out += cp.is_error ? ",\"is_error\":true" : ",\"is_error\":false";
  }
  out += '}';
  return out;
}

Status WriteCheckpoint(Db& db, const std::string& run_id,
                       const std::string& step_id, int64_t seq, int64_t at_ms,
                       const agent::ConversationCheckpoint& cp) {
  Result<StatementUse> st = db.Prepared(
      "INSERT INTO conversation_log (run_id, step_id, seq, kind, turn, at_ms,"
      " checkpoint) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  if (!st.ok()) return st.status();
  Statement& s = **st;
  s.Bind(1, run_id);
  s.Bind(2, step_id);
  s.Bind(3, seq);
  s.Bind(4, CheckpointKindName(cp.kind));
  s.Bind(5, int64_t{cp.turn});
  s.Bind(6, at_ms);
  s.Bind(7, CheckpointJson(cp));
  return s.Run();
}

Result<std::vector<agent::ConversationCheckpoint>> ReadConversationLog(
    Db& db, const std::string& run_id, const std::string& step_id) {
  Result<StatementUse> st = db.Prepared(
      "SELECT seq, kind, turn, checkpoint FROM conversation_log"
      " WHERE run_id = ?1 AND step_id = ?2 ORDER BY seq");
  if (!st.ok()) return st.status();
  Statement& s = **st;
  s.Bind(1, run_id);
  s.Bind(2, step_id);
  std::vector<agent::ConversationCheckpoint> out;
  while (true) {
    Result<bool> row = s.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    Result<agent::ConversationCheckpoint> cp =
        CheckpointFrom(s.Text(1), static_cast<int>(s.Int(2)), s.Text(3));
    if (!cp.ok()) {
      return InvalidArgument("conversation log of step " + step_id + ", row " +
                             std::to_string(s.Int(0)) + ": " +
                             cp.status().message());
    }
    out.push_back(std::move(*cp));
  }
  return out;
}

}  // namespace steps::store
