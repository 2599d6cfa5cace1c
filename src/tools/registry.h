// ToolRegistry: the tools an agent may be granted, by name.
#ifndef STEPS_TOOLS_REGISTRY_H_
#define STEPS_TOOLS_REGISTRY_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tools/tool.h"

namespace steps {

// Owns tools and finds them by name. Fill it first, then share it: lookups
// on a registry nobody adds to any more are thread-safe.
class ToolRegistry {
 public:
  // A registry holding read_file, write_file, list_files and run_shell.
  static ToolRegistry WithBuiltInTools();
  // The process-wide registry of built-in tools (immutable).
  static const ToolRegistry& BuiltIn();

  ToolRegistry() = default;
  ToolRegistry(ToolRegistry&&) = default;
  ToolRegistry& operator=(ToolRegistry&&) = default;

  // Adds a tool; kInvalidArgument when its name is taken.
  Status Add(std::unique_ptr<Tool> tool);
  // nullptr when there is no such tool.
  const Tool* Find(std::string_view name) const;
  // The tools named, in the order named, duplicates dropped. An unknown name
  // is kInvalidArgument: "unknown tool 'x' (known tools: a, b, c)".
  Result<std::vector<const Tool*>> Grant(
      const std::vector<std::string>& names) const;
  // Names of all tools, in the order added.
  std::vector<std::string> Names() const;

 private:
  std::vector<std::unique_ptr<Tool>> tools_;
};

// The "tools" array of a chat-completions request for these tools.
nlohmann::json OpenAiTools(const std::vector<const Tool*>& tools);

}  // namespace steps

#endif  // STEPS_TOOLS_REGISTRY_H_
