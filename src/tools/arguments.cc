#include "tools/arguments.h"

namespace steps {
namespace {

Result<std::string> Extract(const nlohmann::json& arguments,
                            std::string_view tool, std::string_view key,
                            const std::string* fallback) {
  auto it = arguments.find(key);
  if (it == arguments.end() || it->is_null()) {
    if (fallback != nullptr) return *fallback;
    return InvalidArgument(std::string(tool) + ": missing required argument '" +
                           std::string(key) + "' (a string)");
  }
  if (!it->is_string()) {
    return InvalidArgument(std::string(tool) + ": argument '" +
                           std::string(key) + "' must be a string, not " +
                           it->type_name());
  }
  return it->get<std::string>();
}

}  // namespace

Result<std::string> StringArgument(const nlohmann::json& arguments,
                                   std::string_view tool,
                                   std::string_view key) {
  return Extract(arguments, tool, key, nullptr);
}

Result<std::string> OptionalStringArgument(const nlohmann::json& arguments,
                                           std::string_view tool,
                                           std::string_view key,
                                           std::string fallback) {
  return Extract(arguments, tool, key, &fallback);
}

}  // namespace steps
