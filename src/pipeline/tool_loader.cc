// The top-level `tools:` list: command tools an agent entry may grant by
// name beside the built-in ones (docs/tools.md).
#include "agent/conversation.h"
#include "pipeline/loader_internal.h"
#include "tools/command_tool.h"
#include "tools/json_schema.h"
#include "tools/registry.h"

namespace steps::pipeline::internal {
namespace {

// The name is checked here, where its line is known; an unusable name
// leaves `t.name` empty so the rest of the entry is still checked.
void ReadToolName(MapReader& r, ToolDef& t, const Pipeline& p, Diagnostics& d) {
  auto name = ReadString(r.Take("name"), "name", d);
  int line = r.KeyLine("name") ? r.KeyLine("name") : t.line;
  if (!name) {
    if (!r.Has("name")) d.Error(t.line, "tool has no 'name'");
    return;
  }
  if (!IsValidToolName(*name)) {
    d.Error(line, "tool name '" + *name +
                      "' is not allowed: use 1 to 64 letters, digits, '_' "
                      "or '-'");
    return;
  }
  if (ToolRegistry::BuiltIn().Find(*name) || *name == agent::kFinishToolName) {
    d.Error(line, "tool '" + *name +
                      "' has the name of a built-in tool (read_file, "
                      "write_file, list_files, run_shell, finish) — give it "
                      "another name");
    return;
  }
  if (const ToolDef* first = p.FindTool(*name)) {
    d.Error(line, "duplicate tool '" + *name + "' (first at line " +
                      std::to_string(first->line) + ")");
    return;
  }
  t.name = *name;
}

void ReadToolParameters(MapReader& r, ToolDef& t, Diagnostics& d) {
  YAML::Node n = r.Take("parameters");
  t.parameters_line = r.KeyLine("parameters");
  if (!n.IsDefined()) {
    d.Error(t.line, "tool '" + t.name +
                        "' has no 'parameters' — give the JSON Schema of its "
                        "arguments, e.g. { type: object, properties: {} }");
    return;
  }
  std::optional<nlohmann::json> schema = ReadJson(n, "parameters", d);
  if (!schema) return;
  if (Status s = CheckArgumentsSchema(*schema); !s.ok()) {
    d.Error(t.parameters_line, "tool '" + t.name + "': " + s.message());
    return;
  }
  t.parameters = std::move(*schema);
}

void ReadToolTimeout(MapReader& r, ToolDef& t, Diagnostics& d) {
  YAML::Node n = r.Take("timeout");
  if (!n.IsDefined()) return;
  t.timeout.line = r.KeyLine("timeout");
  auto v = ReadDuration(n, "timeout", std::nullopt, d);
  if (!v) return;
  if (v->count() < 0) {
    d.Error(t.timeout.line,
            "tool '" + t.name +
                "': 'timeout' must not be negative (write \"0\" for no limit "
                "but the step's deadline, or omit it for the step's "
                "tool_timeout)");
    return;
  }
  t.timeout.value = *v;
}

void ReadToolDef(const YAML::Node& n, Pipeline& p, Diagnostics& d) {
  if (!n.IsMap()) {
    d.Error(LineOf(n),
            "each entry of 'tools' must be a mapping with name, description, "
            "parameters and run, not " +
                DescribeNodeType(n));
    return;
  }
  MapReader r(n, "a tool", d);
  ToolDef t;
  t.line = LineOf(n);
  ReadToolName(r, t, p, d);
  if (auto s = ReadString(r.Take("description"), "description", d)) {
    t.description = *s;
  }
  if (t.description.find_first_not_of(" \t\r\n") == std::string::npos) {
    d.Error(t.line, "tool '" + t.name +
                        "' has no 'description' — the model reads it to know "
                        "when to call the tool");
  }
  ReadToolParameters(r, t, d);
  t.run_line = r.KeyLine("run");
  if (auto s = ReadString(r.Take("run"), "run", d)) t.run = *s;
  if (t.run.find_first_not_of(" \t\r\n") == std::string::npos) {
    d.Error(t.run_line ? t.run_line : t.line,
            "tool '" + t.name + "' has no 'run' script (bash)");
  }
  ReadToolTimeout(r, t, d);
  if (auto env = ReadEnv(r.Take("env"), "env", d)) t.env = *env;
  // Unknown keys are errors here, not warnings: a misspelt `timeout` would
  // otherwise leave a tool without the limit its author meant.
  for (const std::string& key : r.Untaken()) {
    r.Take(key);
    d.Error(r.KeyLine(key),
            "unknown key '" + key + "' in tool '" + t.name +
                "' (a tool has name, description, parameters, run, timeout, "
                "env)");
  }
  if (!t.name.empty()) p.tools.push_back(std::move(t));
}

}  // namespace

void ReadToolDefs(const YAML::Node& n, Pipeline& p, Diagnostics& d) {
  ReadList(n, "tools", "a list of command tools", d,
           [&](const YAML::Node& item) { ReadToolDef(item, p, d); });
}

}  // namespace steps::pipeline::internal
