#include "tools/tool.h"

#include <exception>

#include "tools/text.h"

namespace steps {

nlohmann::json Tool::OpenAiFunction() const {
  return {{"type", "function"},
          {"function",
           {{"name", name_},
            {"description", description_},
            {"parameters", parameters_}}}};
}

ToolResult Tool::Execute(const nlohmann::json& arguments,
                         const ToolContext& context) const {
  if (!arguments.is_object()) {
    return ToolResult::Error(name_ +
                             ": the arguments must be a JSON object, not " +
                             std::string(arguments.type_name()));
  }
  ToolResult result;
  try {
    result = Run(arguments, context);
  } catch (const std::exception& e) {
    result = ToolResult::Error(name_ + ": internal error: " + e.what());
  }
  // Paths and output come from outside; the model's JSON needs UTF-8.
  result.content = SanitizeUtf8(result.content);
  return result;
}

ToolResult Tool::ExecuteJson(std::string_view arguments_text,
                             const ToolContext& context) const {
  // An empty string is how some models send "no arguments".
  if (arguments_text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return Execute(nlohmann::json::object(), context);
  }
  nlohmann::json arguments = nlohmann::json::parse(arguments_text, nullptr,
                                                   /*allow_exceptions=*/false);
  if (arguments.is_discarded()) {
    return ToolResult::Error(name_ + ": the arguments are not valid JSON");
  }
  return Execute(arguments, context);
}

nlohmann::json StringArgumentsSchema(
    const std::vector<std::pair<std::string, std::string>>& properties) {
  nlohmann::json props = nlohmann::json::object();
  nlohmann::json required = nlohmann::json::array();
  for (const auto& [name, description] : properties) {
    props[name] = {{"type", "string"}, {"description", description}};
    required.push_back(name);
  }
  return {{"type", "object"},
          {"properties", props},
          {"required", required},
          {"additionalProperties", false}};
}

}  // namespace steps
