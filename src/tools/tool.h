// An agent tool: a name, a description and a JSON schema of its arguments
// (as OpenAI function tools describe them), and Execute, which turns parsed
// arguments into a result for the model. Whatever a model sends, Execute
// answers with a result (is_error set when the tool could not do what was
// asked); it never throws and never crashes the step.
#ifndef STEPS_TOOLS_TOOL_H_
#define STEPS_TOOLS_TOOL_H_

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/cancel.h"
#include "core/clock.h"
#include "core/duration.h"
#include "process/sandbox_bwrap.h"

namespace steps {

class ProcessLauncher;

// What a tool hands back to the model.
struct ToolResult {
  // Valid UTF-8, bounded by the ToolLimits in effect.
  std::string content;
  // True when the tool could not do what was asked: bad arguments, a
  // refused path, a missing file, a timeout, a command that did not exit 0.
  bool is_error = false;

  static ToolResult Ok(std::string content) {
    return {std::move(content), false};
  }
  static ToolResult Error(std::string content) {
    return {std::move(content), true};
  }
};

// Bounds on what tools read, write and return.
struct ToolLimits {
  // Bytes of a file read_file returns; a larger file is cut, and the result
  // says so and how large the file is. Default: 64 KiB.
  size_t max_read_bytes = 64 * 1024;
  // Bytes of command output run_shell returns (the first and last halves of
  // a larger output, with a line saying how much was cut). Default: 64 KiB.
  size_t max_output_bytes = 64 * 1024;
  // Entries list_files returns; more are cut, with a note. Default: 1000.
  size_t max_list_entries = 1000;
  // Largest content write_file accepts; larger content is refused.
  // Default: 16 MiB.
  size_t max_write_bytes = 16 * 1024 * 1024;
  // Time run_shell gives a command between SIGTERM and SIGKILL. Kept short:
  // it can run past the step's deadline. Default: 500ms.
  Millis shell_kill_grace{500};
};

// Everything a tool may touch. The clock and the launcher are borrowed and
// must outlive every Execute call that uses this context.
struct ToolContext {
  ToolContext(std::string working_dir, Clock& clock, ProcessLauncher& launcher)
      : working_dir(std::move(working_dir)), clock(clock), launcher(launcher) {}

  // The sandbox root: every path is relative to it, nothing outside is
  // reachable, and run_shell starts here.
  std::string working_dir;
  // The step's deadline (one point for the whole conversation). run_shell
  // gets at most the time left to it. Default: none.
  Deadline deadline;
  // The step's token: cancelling it stops a running command.
  CancelToken cancel;
  // The clock `deadline` is a point of; the launcher must measure on it too.
  Clock& clock;
  // How long one run_shell command may take (also bounded by `deadline`).
  // Zero or negative: no limit of its own. Default: 30s.
  Millis tool_timeout{30000};
  // Runs run_shell's commands.
  ProcessLauncher& launcher;
  // Variables set for run_shell's commands over the launcher's environment.
  std::map<std::string, std::string> env;
  ToolLimits limits;
  // When set, run_shell runs its commands under bwrap
  // (process/sandbox_bwrap.h) with the working directory as the one writable
  // directory (writable_dir here is ignored). nullopt: commands run with the
  // user's own access; the file tools are confined either way.
  std::optional<SandboxOptions> sandbox;
};

class Tool {
 public:
  Tool(std::string name, std::string description, nlohmann::json parameters)
      : name_(std::move(name)),
        description_(std::move(description)),
        parameters_(std::move(parameters)) {}
  virtual ~Tool() = default;
  Tool(const Tool&) = delete;
  Tool& operator=(const Tool&) = delete;

  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  // JSON schema of the arguments object.
  const nlohmann::json& parameters() const { return parameters_; }
  // Whether running the tool can change anything outside the conversation
  // (files, processes, other servers). A call to a tool without effects can
  // run again after an interruption with nothing to warn about, so its start
  // needs no durable point of its own. True unless a tool knows better.
  virtual bool has_effects() const { return true; }
  // {"type": "function", "function": {"name", "description", "parameters"}}
  nlohmann::json OpenAiFunction() const;

  // Checks that `arguments` is an object and runs the tool. Exceptions from
  // inside (they should not happen) become an error result. Thread-safe.
  ToolResult Execute(const nlohmann::json& arguments,
                     const ToolContext& context) const;
  // The same from the arguments' JSON text, as a model sends it; malformed
  // JSON is an error result.
  ToolResult ExecuteJson(std::string_view arguments_text,
                         const ToolContext& context) const;

 protected:
  // REQUIRES: arguments.is_object().
  virtual ToolResult Run(const nlohmann::json& arguments,
                         const ToolContext& context) const = 0;

 private:
  std::string name_;
  std::string description_;
  nlohmann::json parameters_;
};

// A schema for an object of string properties, all of them required:
// {"type": "object", "properties": {...}, "required": [...],
//  "additionalProperties": false}. `properties` maps names to descriptions.
nlohmann::json StringArgumentsSchema(
    const std::vector<std::pair<std::string, std::string>>& properties);

}  // namespace steps

#endif  // STEPS_TOOLS_TOOL_H_
