// The template subset of resource scripts and across cells:
//   {{ .version.ref }}               the value, as text
//   {{ .version.ref | shellquote }}  quoted for bash, safe for any value
//   {{ .params | json }}             the value as JSON
// Paths walk a JSON context; strings render bare, other values as JSON.
#ifndef STEPS_PIPELINE_TEMPLATE_H_
#define STEPS_PIPELINE_TEMPLATE_H_

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "core/status.h"

namespace steps::pipeline {

// Single-quotes `s` for bash: safe for spaces, quotes, $, backticks and
// newlines.
std::string ShellQuote(std::string_view s);

// Renders every {{ ... }} in `text` against `context`. A path that is not
// set, an unknown pipe or an unclosed {{ is an error naming it.
Result<std::string> RenderTemplate(std::string_view text,
                                   const nlohmann::json& context);

// Like RenderTemplate, but only expressions whose first path element is in
// `roots` are rendered; every other {{ ... }} is left as written (a task's
// script may hold braces of its own).
Result<std::string> RenderTemplateRoots(std::string_view text,
                                        const nlohmann::json& context,
                                        const std::set<std::string>& roots);

// Checks syntax only (balanced braces, known pipes, paths starting with '.'),
// for the loader.
Status CheckTemplate(std::string_view text);

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_TEMPLATE_H_
