#include "tools/command_tool.h"

#include <utility>

#include "tools/json_schema.h"
#include "tools/shell_tool.h"

namespace steps {

bool IsValidToolName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string ArgumentEnvName(const std::string& argument) {
  std::string name = "STEPS_ARG_";
  for (char c : argument) {
    if (c >= 'a' && c <= 'z') {
      name += static_cast<char>(c - 'a' + 'A');
    } else if ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
      name += c;
    } else {
      name += '_';
    }
  }
  return name;
}

std::map<std::string, std::string> ArgumentEnv(
    const nlohmann::json& arguments) {
  std::map<std::string, std::string> env;
  if (!arguments.is_object()) return env;
  // nlohmann keeps object keys in byte order: the first of two names that
  // map to one variable is the same on every run.
  for (const auto& [name, value] : arguments.items()) {
    std::string text =
        value.is_string()
            ? value.get<std::string>()
            : value.dump(-1, ' ', false,
                         nlohmann::json::error_handler_t::replace);
    if (text.size() > kMaxArgumentEnvBytes ||
        text.find('\0') != std::string::npos) {
      continue;
    }
    env.emplace(ArgumentEnvName(name), std::move(text));
  }
  return env;
}

CommandTool::CommandTool(CommandToolSpec spec)
    : Tool(spec.name, spec.description, spec.parameters),
      spec_(std::move(spec)) {}

ToolResult CommandTool::Run(const nlohmann::json& arguments,
                            const ToolContext& context) const {
  std::vector<std::string> errors =
      ValidateArguments(spec_.parameters, arguments);
  if (!errors.empty()) {
    std::string content = name() + ": the arguments do not match the tool's "
                                   "schema; the command did not run:\n";
    for (const std::string& e : errors) content += "- " + e + "\n";
    return ToolResult::Error(std::move(content));
  }
  BashScript run;
  run.script = spec_.run;
  run.stdin_text = arguments.dump(-1, ' ', false,
                                  nlohmann::json::error_handler_t::replace) +
                   "\n";
  run.env = spec_.env;
  for (auto& [k, v] : ArgumentEnv(arguments)) run.env[k] = std::move(v);
  run.timeout = spec_.timeout.value_or(context.tool_timeout);
  run.timeout_name =
      spec_.timeout ? "the tool's timeout" : std::string("tool_timeout");
  run.status_on_success = false;
  return RunBashScript(name(), run, context);
}

}  // namespace steps
