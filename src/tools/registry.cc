#include "tools/registry.h"

#include <algorithm>
#include <utility>

#include "tools/file_tools.h"
#include "tools/shell_tool.h"

namespace steps {

ToolRegistry ToolRegistry::WithBuiltInTools() {
  ToolRegistry registry;
  registry.Add(std::make_unique<ReadFileTool>());
  registry.Add(std::make_unique<WriteFileTool>());
  registry.Add(std::make_unique<ListFilesTool>());
  registry.Add(std::make_unique<RunShellTool>());
  return registry;
}

const ToolRegistry& ToolRegistry::BuiltIn() {
  static const ToolRegistry* registry =
      new ToolRegistry(WithBuiltInTools());  // Never destroyed: no exit races.
  return *registry;
}

Status ToolRegistry::Add(std::unique_ptr<Tool> tool) {
  if (Find(tool->name()) != nullptr) {
    return InvalidArgument("a tool named '" + tool->name() +
                           "' is already registered");
  }
  tools_.push_back(std::move(tool));
  return Status::Ok();
}

const Tool* ToolRegistry::Find(std::string_view name) const {
  for (const auto& tool : tools_) {
    if (tool->name() == name) return tool.get();
  }
  return nullptr;
}

Result<std::vector<const Tool*>> ToolRegistry::Grant(
    const std::vector<std::string>& names) const {
  std::vector<const Tool*> granted;
  for (const std::string& name : names) {
    const Tool* tool = Find(name);
    if (tool == nullptr) {
      std::string known;
      for (const std::string& n : Names()) {
        known += (known.empty() ? "" : ", ") + n;
      }
      return InvalidArgument("unknown tool '" + name +
                             "' (known tools: " + known + ")");
    }
    if (std::find(granted.begin(), granted.end(), tool) == granted.end()) {
      granted.push_back(tool);
    }
  }
  return granted;
}

std::vector<std::string> ToolRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& tool : tools_) names.push_back(tool->name());
  return names;
}

nlohmann::json OpenAiTools(const std::vector<const Tool*>& tools) {
  nlohmann::json array = nlohmann::json::array();
  for (const Tool* tool : tools) array.push_back(tool->OpenAiFunction());
  return array;
}

}  // namespace steps
