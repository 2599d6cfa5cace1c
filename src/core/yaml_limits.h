// Limits on what a YAML text may expand to, checked before the text is
// loaded into nodes. yaml-cpp resolves an alias into the very node its
// anchor names, so a few hundred bytes of nested aliases describe a
// document of 10^8 nodes (an "alias bomb"), and an alias inside the node it
// names makes a cycle that any walk over the document follows forever.
// Pipelines and mock scripts are checked here first; what passes can be
// walked naively, in bounded time and memory.
#ifndef STEPS_CORE_YAML_LIMITS_H_
#define STEPS_CORE_YAML_LIMITS_H_

#include <cstdint>
#include <optional>
#include <string>

namespace steps {

struct YamlLimits {
  // Nodes of the document with every alias expanded: each scalar, list and
  // mapping counts one (a mapping's keys too).
  // Default: 200,000 (a hand-written pipeline has a few thousand).
  int64_t max_nodes = 200'000;
  // Nesting of lists and mappings, aliases expanded; the top-level node is
  // level 1. Default: 64.
  int max_depth = 64;
};

struct YamlLimitProblem {
  int line = 0;  // 1-based line of the offending node or alias.
  std::string message;
};

// Reads the first document of `text` as a stream of parser events and
// reports the first node that passes a limit, or an alias that names a
// node it is inside (a recursive alias, refused whatever the limits).
// Returns nullopt when the document keeps within the limits, and also
// when the text is not valid YAML: loading it reports that, with its line.
std::optional<YamlLimitProblem> CheckYamlLimits(const std::string& text,
                                                const YamlLimits& limits = {});

}  // namespace steps

#endif  // STEPS_CORE_YAML_LIMITS_H_
