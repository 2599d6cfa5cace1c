// Reading a tool's arguments from what a model sent, with errors it can
// understand.
#ifndef STEPS_TOOLS_ARGUMENTS_H_
#define STEPS_TOOLS_ARGUMENTS_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace steps {

// The string under `key` of the arguments object. Errors (kInvalidArgument)
// name the key and what was wrong: missing, or of another JSON type.
Result<std::string> StringArgument(const nlohmann::json& arguments,
                                   std::string_view tool, std::string_view key);

// Like StringArgument, but a missing key or a null yields `fallback`.
Result<std::string> OptionalStringArgument(const nlohmann::json& arguments,
                                           std::string_view tool,
                                           std::string_view key,
                                           std::string fallback);

}  // namespace steps

#endif  // STEPS_TOOLS_ARGUMENTS_H_
