// Command tools: tools a pipeline declares (top-level `tools:`, see
// docs/tools.md) whose work is a bash script. The arguments are checked
// against the tool's JSON Schema first; a mismatch is a tool error the model
// sees, and the script does not run.
#ifndef STEPS_TOOLS_COMMAND_TOOL_H_
#define STEPS_TOOLS_COMMAND_TOOL_H_

#include <map>
#include <optional>
#include <string>

#include "core/status.h"
#include "tools/tool.h"

namespace steps {

// A command tool as declared, its `env:` values already expanded.
struct CommandToolSpec {
  std::string name;
  std::string description;
  nlohmann::json parameters;  // Passed CheckArgumentsSchema.
  std::string run;            // The bash script.
  // The tool's own limit. nullopt: the step's tool_timeout applies; zero:
  // no limit but the step's deadline.
  std::optional<Millis> timeout;
  std::map<std::string, std::string> env;
};

// Values of an argument longer than this (in bytes) are not put into a
// STEPS_ARG_* variable (the environment of a process is bounded); the
// script reads them from stdin.
inline constexpr size_t kMaxArgumentEnvBytes = 32 * 1024;

// True when `name` can name a command tool: ^[a-zA-Z0-9_-]{1,64}$.
bool IsValidToolName(const std::string& name);

// STEPS_ARG_<NAME>: upper-cased, each byte other than A-Z and 0-9 made '_'.
std::string ArgumentEnvName(const std::string& argument);

// The STEPS_ARG_* variables for an arguments object: strings as they are,
// other values as compact JSON. Names that map to the same variable keep the
// first in byte order; values holding a NUL byte or longer than
// kMaxArgumentEnvBytes are left out (the whole arguments are on stdin).
std::map<std::string, std::string> ArgumentEnv(const nlohmann::json& arguments);

// Runs spec.run with bash like run_shell (context's working directory,
// sandbox, output bound and deadline), the arguments as JSON on stdin and
// as STEPS_ARG_* variables. Exit 0: the output (stdout and stderr
// interleaved) is the result. Otherwise an error result: a status line
// ("exit code: 3", "timed out after 2s (the tool's timeout) ...") and the
// output.
class CommandTool : public Tool {
 public:
  explicit CommandTool(CommandToolSpec spec);

  const CommandToolSpec& spec() const { return spec_; }

 protected:
  ToolResult Run(const nlohmann::json& arguments,
                 const ToolContext& context) const override;

 private:
  CommandToolSpec spec_;
};

}  // namespace steps

#endif  // STEPS_TOOLS_COMMAND_TOOL_H_
