// The template subset of resource scripts, task scripts and agent messages:
//   {{ .version.ref }}               the value, as text
//   {{ .version.ref | shellquote }}  quoted for bash, safe for any value
//   {{ .params | json }}             the value as JSON
//   {{ "{{" }}                       the text between the quotes, as written
// Paths walk a JSON context; strings render bare, other values as JSON.
// Where each form may stand (a shell script takes only quoted values) is
// the loader's rule: docs/pipeline.md#templates.
#ifndef STEPS_PIPELINE_TEMPLATE_H_
#define STEPS_PIPELINE_TEMPLATE_H_

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace steps::pipeline {

// Single-quotes `s` for bash: safe for spaces, quotes, $, backticks and
// newlines.
std::string ShellQuote(std::string_view s);

// Renders every {{ ... }} in `text` against `context`. A path that is not
// set, an unknown pipe or an unclosed {{ is an error naming it.
Result<std::string> RenderTemplate(std::string_view text,
                                   const nlohmann::json& context);

// Like RenderTemplate, but only literals and expressions whose first path
// element is in `roots` are rendered; every other {{ ... }} is left as
// written (a task's script may hold braces of its own; the loader has
// refused those that look like ours).
Result<std::string> RenderTemplateRoots(std::string_view text,
                                        const nlohmann::json& context,
                                        const std::set<std::string>& roots);

// One {{ ... }} of a text, as the loader checks it.
struct TemplateUse {
  std::string written;             // "{{ .v | json }}"
  std::vector<std::string> path;   // {"v"}; empty for a literal or "{{ . }}"
  std::vector<std::string> pipes;  // {"json"}
  bool literal = false;            // {{ "text" }}
  int line_offset = 0;             // Newlines in the text before it.
};

// Every expression of `text`; an error names the first malformed one
// (unknown pipe, bad path, unclosed '{{'). With `mixed` (a task script or an
// agent message, which may hold braces of their own) only expressions that
// start with '.' or '"' are ours: `{{ not ours }}` and an unclosed '{{' are
// left to the text.
Result<std::vector<TemplateUse>> ScanTemplate(std::string_view text,
                                              bool mixed);

// Checks syntax only (balanced braces, known pipes, paths starting with '.'),
// for the loader.
Status CheckTemplate(std::string_view text);

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_TEMPLATE_H_
