// A small JSON Schema validator for the arguments of command tools
// (docs/tools.md). It knows a documented subset of the keywords: type
// (a name or a list of names), properties, required, additionalProperties
// (true/false), enum, items, minItems/maxItems, minimum/maximum,
// minLength/maxLength and pattern; description, title, default, examples
// and $comment are annotations and are ignored. Any other keyword is
// refused when the schema is checked, so a rule the author wrote is never
// silently skipped.
#ifndef STEPS_TOOLS_JSON_SCHEMA_H_
#define STEPS_TOOLS_JSON_SCHEMA_H_

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/pattern.h"
#include "core/status.h"

namespace steps {

// Schemas nest at most this deep (properties and items count a level each).
inline constexpr int kMaxSchemaDepth = 32;

// Checks that `schema` is a schema of this subset for a tool's arguments:
// an object with "type": "object" at the top, every keyword known and well
// formed, every pattern a valid regular expression (core/pattern.h; at most
// kMaxPatternBytes).
// kInvalidArgument names the keyword and where it stands, e.g.
// "parameters.properties.count.minimum: must be a number".
Status CheckArgumentsSchema(const nlohmann::json& schema);

// Checks that `schema` is a schema of this subset for any JSON value (no
// rule about the top's type); messages start with `where`, e.g.
// "assert.json.schema.properties.n.minimum: must be a number".
Status CheckSchema(const nlohmann::json& schema, const std::string& where);

// The ways `value` breaks `schema` (which passed CheckArgumentsSchema), at
// most `max_errors` of them, each naming where and which rule:
//   argument "count": expected integer, got string
//   argument "tags[2]": must be at most 20 characters long
//   the arguments: missing required argument "path"
// Empty when `value` conforms.
std::vector<std::string> ValidateArguments(const nlohmann::json& schema,
                                           const nlohmann::json& value,
                                           size_t max_errors = 10);

}  // namespace steps

#endif  // STEPS_TOOLS_JSON_SCHEMA_H_
