// Reading a step's `assert:` block: every kind of check, its type and edge
// values, and which step kinds it applies to (docs/pipeline.md "### assert").
#include "core/pattern.h"
#include "core/suggest.h"
#include "pipeline/loader_internal.h"
#include "tools/json_schema.h"

namespace steps::pipeline::internal {
namespace {

const std::vector<std::string>& AssertKeys() {
  static const std::vector<std::string> keys = {
      "stdout",       "code",           "equals",     "contains_all",
      "contains_any", "not_contains",   "regex",      "json",
      "tool_called",  "max_turns_used", "max_tokens", "max_cost",
      "max_duration", "judge"};
  return keys;
}

// Keys that judge what a conversation did: agent steps only.
constexpr const char* kAgentOnlyKeys[] = {"tool_called", "max_turns_used",
                                          "max_tokens", "max_cost"};

std::string KnownKeys() {
  std::string out;
  for (const std::string& k : AssertKeys())
    out += (out.empty() ? "" : ", ") + k;
  return out;
}

// An unknown key is an error, not a warning: a check the author wrote is
// never silently skipped.
void RefuseUnknownKeys(const MapReader& r, Diagnostics& d) {
  for (const std::string& key : r.Untaken()) {
    std::string msg = "unknown key '" + key + "' in a step's assert";
    if (std::optional<std::string> near = ClosestWord(key, AssertKeys()))
      msg += " (did you mean '" + *near + "'?)";
    d.Error(r.KeyLine(key), msg + "; an assert takes " + KnownKeys());
  }
}

// A list of non-empty strings, or one string; an empty list is refused.
std::optional<std::vector<std::string>> ReadTextList(const YAML::Node& n,
                                                     const std::string& key,
                                                     Diagnostics& d) {
  if (!n.IsDefined()) return std::nullopt;
  if (n.IsNull() || (n.IsSequence() && n.size() == 0)) {
    d.Error(LineOf(n), "'" + key +
                           "' must list at least one text; omit the key to "
                           "check nothing");
    return std::nullopt;
  }
  std::optional<std::vector<std::string>> list = ReadStringList(n, key, d);
  if (!list) return std::nullopt;
  for (const std::string& s : *list) {
    if (s.empty()) {
      d.Error(LineOf(n), "'" + key +
                             "' must not hold an empty text (every output "
                             "contains it)");
      return std::nullopt;
    }
  }
  return list;
}

void ReadRegex(const YAML::Node& n, StepAssert& a, Diagnostics& d) {
  std::optional<std::string> p = ReadString(n, "assert.regex", d);
  if (!p) return;
  if (p->empty()) {
    d.Error(LineOf(n),
            "'assert.regex' must not be empty (it matches any "
            "output); omit the key to check nothing");
    return;
  }
  if (Result<Pattern> re = Pattern::Compile(*p); !re.ok()) {
    d.Error(LineOf(n), "'assert.regex' is not a valid regular expression (" +
                           re.status().message() + "): " + *p);
    return;
  }
  a.regex = *p;
}

// `json: true` or `json: {schema: SCHEMA}`.
void ReadJsonCheck(const YAML::Node& n, StepAssert& a, Diagnostics& d) {
  if (!n.IsDefined()) return;
  if (n.IsMap()) {
    MapReader r(n, "assert.json", d);
    YAML::Node schema = r.Take("schema");
    for (const std::string& key : r.Untaken()) {
      d.Error(r.KeyLine(key), "unknown key '" + key +
                                  "' in assert.json; it takes only 'schema'");
      r.Take(key);
    }
    if (!schema.IsDefined()) {
      d.Error(LineOf(n),
              "'assert.json' as a mapping takes 'schema' (a JSON "
              "Schema the output must match)");
      return;
    }
    std::optional<nlohmann::json> j =
        ReadJson(schema, "assert.json.schema", d, 10000, kMaxSchemaDepth);
    if (!j) return;
    if (Status s = CheckSchema(*j, "assert.json.schema"); !s.ok()) {
      d.Error(LineOf(schema), s.message());
      return;
    }
    a.json = true;
    a.json_schema = *j;
    return;
  }
  std::optional<bool> b = ReadBool(n, "assert.json", d);
  if (!b) return;
  if (!*b) {
    d.Error(LineOf(n),
            "'assert.json: false' checks nothing; write 'json: "
            "true' (the output parses as JSON) or omit the key");
    return;
  }
  a.json = true;
}

std::optional<int64_t> ReadCount(const YAML::Node& n, const std::string& key,
                                 Diagnostics& d) {
  return ReadInt(n, key, 0, 1000000, "a count from 0 to 1000000", d);
}

std::optional<ToolCalledCheck> ReadToolCall(const YAML::Node& n,
                                            Diagnostics& d) {
  ToolCalledCheck c;
  c.line = LineOf(n);
  if (n.IsScalar()) {
    c.name = n.Scalar();
  } else if (n.IsMap()) {
    MapReader r(n, "assert.tool_called", d);
    if (auto name = ReadString(r.Take("name"), "assert.tool_called.name", d))
      c.name = *name;
    if (YAML::Node args = r.Take("arguments"); args.IsDefined()) {
      if (!args.IsMap()) {
        d.Error(LineOf(args),
                "'assert.tool_called.arguments' must be a "
                "mapping (the arguments the call must hold), "
                "not " +
                    DescribeNodeType(args));
        return std::nullopt;
      }
      c.arguments = ReadJson(args, "assert.tool_called.arguments", d);
      if (!c.arguments) return std::nullopt;
    }
    c.count = ReadCount(r.Take("count"), "assert.tool_called.count", d);
    c.min = ReadCount(r.Take("min"), "assert.tool_called.min", d);
    c.max = ReadCount(r.Take("max"), "assert.tool_called.max", d);
    for (const std::string& key : r.Untaken()) {
      std::string msg = "unknown key '" + key + "' in assert.tool_called";
      if (auto near =
              ClosestWord(key, {"name", "arguments", "count", "min", "max"}))
        msg += " (did you mean '" + *near + "'?)";
      d.Error(r.KeyLine(key), msg +
                                  "; it takes name, arguments, and count "
                                  "or min/max");
      r.Take(key);
    }
  } else {
    d.Error(c.line,
            "each 'assert.tool_called' entry must be a tool name or "
            "a mapping {name, arguments, count | min | max}, not " +
                DescribeNodeType(n));
    return std::nullopt;
  }
  if (c.name.empty()) {
    d.Error(c.line, "'assert.tool_called' needs the tool's 'name'");
    return std::nullopt;
  }
  if (c.count && (c.min || c.max)) {
    d.Error(c.line, "'assert.tool_called' for '" + c.name +
                        "' takes 'count' (exactly) or 'min'/'max', not both");
    return std::nullopt;
  }
  if (c.min && c.max && *c.min > *c.max) {
    d.Error(c.line, "'assert.tool_called' for '" + c.name + "': 'min' (" +
                        std::to_string(*c.min) + ") is above 'max' (" +
                        std::to_string(*c.max) + ")");
    return std::nullopt;
  }
  return c;
}

void ReadToolCalled(const YAML::Node& n, StepAssert& a, Diagnostics& d) {
  if (!n.IsDefined()) return;
  if (!n.IsSequence()) {
    if (auto c = ReadToolCall(n, d)) a.tool_called.push_back(*c);
    return;
  }
  if (n.size() == 0) {
    d.Error(LineOf(n),
            "'assert.tool_called' must name at least one tool; "
            "omit the key to check nothing");
  }
  for (const YAML::Node& item : n) {
    if (auto c = ReadToolCall(item, d)) a.tool_called.push_back(*c);
  }
}

void ReadJudge(const YAML::Node& n, StepAssert& a, Diagnostics& d) {
  if (!n.IsDefined()) return;
  if (!n.IsMap()) {
    d.Error(LineOf(n),
            "'assert.judge' must be a mapping {agent: NAME, "
            "rubric: TEXT}, not " +
                DescribeNodeType(n));
    return;
  }
  MapReader r(n, "assert.judge", d);
  JudgeSpec j;
  j.line = LineOf(n);
  if (auto s = ReadString(r.Take("agent"), "assert.judge.agent", d))
    j.agent = *s;
  if (auto s = ReadString(r.Take("rubric"), "assert.judge.rubric", d))
    j.rubric = *s;
  for (const std::string& key : r.Untaken()) {
    std::string msg = "unknown key '" + key + "' in assert.judge";
    if (auto near = ClosestWord(key, {"agent", "rubric"}))
      msg += " (did you mean '" + *near + "'?)";
    d.Error(r.KeyLine(key), msg + "; it takes agent and rubric");
    r.Take(key);
  }
  if (j.agent.empty()) {
    d.Error(j.line,
            "'assert.judge' needs 'agent': the agents: entry that "
            "grades the output");
    return;
  }
  if (j.rubric.find_first_not_of(" \t\r\n") == std::string::npos) {
    d.Error(j.line,
            "'assert.judge' needs a non-empty 'rubric': what the "
            "output must do to pass");
    return;
  }
  a.judge = j;
}

// The limits on what the step spent: positive, except max_cost, which may
// be 0 (the step cost nothing, e.g. a source without a price).
void ReadLimits(MapReader& r, StepAssert& a, Diagnostics& d) {
  a.max_turns_used =
      ReadInt(r.Take("max_turns_used"), "assert.max_turns_used", 1, 1000000,
              "a positive integer (an agent that answers uses at least one "
              "turn)",
              d);
  a.max_tokens = ReadInt(r.Take("max_tokens"), "assert.max_tokens", 1,
                         int64_t{1} << 50, "a positive integer", d);
  a.max_cost = ReadNumber(r.Take("max_cost"), "assert.max_cost", 0,
                          "a number of USD, 0 or more", d);
  YAML::Node dur = r.Take("max_duration");
  if (auto v = ReadDuration(dur, "assert.max_duration", std::nullopt, d)) {
    if (v->count() <= 0) {
      d.Error(LineOf(dur),
              "'assert.max_duration' must be a positive "
              "duration such as 30s (use the step's 'timeout' "
              "to stop it)");
    } else {
      a.max_duration = *v;
    }
  }
}

void RefuseAgentOnly(const MapReader& r, const Step& step, Diagnostics& d) {
  if (step.kind == StepKind::kAgent) return;
  for (const char* key : kAgentOnlyKeys) {
    if (!r.Has(key)) continue;
    d.Error(r.KeyLine(key), std::string("'assert.") + key +
                                "' judges a conversation and applies to "
                                "agent steps only, not to a " +
                                StepKindName(step.kind) + " step");
  }
}

}  // namespace

void ReadStepAssert(const YAML::Node& n, Step& step, Diagnostics& d) {
  if (!n.IsDefined()) return;
  if (!n.IsMap()) {
    d.Error(LineOf(n), "a step's 'assert' must be a mapping of checks (" +
                           KnownKeys() + ")");
    return;
  }
  MapReader r(n, "a step's assert", d);
  StepAssert a;
  a.line = LineOf(n);
  if (step.is_container()) {
    d.Error(a.line,
            "'assert' applies to task, get, put and agent steps; "
            "put it on the steps inside " +
                std::string(StepKindName(step.kind)));
  }
  a.stdout_contains = ReadString(r.Take("stdout"), "assert.stdout", d);
  if (auto c = ReadInt(r.Take("code"), "assert.code", 0, 255,
                       "an exit code from 0 to 255", d)) {
    a.code = static_cast<int>(*c);
  }
  a.equals = ReadString(r.Take("equals"), "assert.equals", d);
  a.contains_all =
      ReadTextList(r.Take("contains_all"), "assert.contains_all", d);
  a.contains_any =
      ReadTextList(r.Take("contains_any"), "assert.contains_any", d);
  a.not_contains =
      ReadTextList(r.Take("not_contains"), "assert.not_contains", d);
  ReadRegex(r.Take("regex"), a, d);
  ReadJsonCheck(r.Take("json"), a, d);
  RefuseAgentOnly(r, step, d);
  ReadToolCalled(r.Take("tool_called"), a, d);
  ReadLimits(r, a, d);
  ReadJudge(r.Take("judge"), a, d);
  RefuseUnknownKeys(r, d);
  step.check = a;
}

}  // namespace steps::pipeline::internal
