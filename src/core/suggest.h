// "Did you mean": the closest of a few known words to one a user typed.
#ifndef STEPS_CORE_SUGGEST_H_
#define STEPS_CORE_SUGGEST_H_

#include <optional>
#include <string>
#include <vector>

namespace steps {

// The word of `known` nearest to `typed` by edit distance (insertions,
// deletions, substitutions, and swaps of two neighbours), when it is near
// enough to be a likely slip: at most 2 edits, and fewer than the typed
// word's length; or a known word that `typed` is a prefix of. nullopt when
// nothing is close.
std::optional<std::string> ClosestWord(const std::string& typed,
                                       const std::vector<std::string>& known);

}  // namespace steps

#endif  // STEPS_CORE_SUGGEST_H_
