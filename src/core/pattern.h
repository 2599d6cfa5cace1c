// Pattern: a regular expression users write (an assert's `regex:`, a JSON
// Schema `pattern`), matched in time linear in the subject and in bounded
// memory, whatever the pattern and the text. The syntax is RE2's: Perl's
// without backreferences and lookaround (see docs/pipeline.md).
#ifndef STEPS_CORE_PATTERN_H_
#define STEPS_CORE_PATTERN_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace re2 {
class RE2;
}

namespace steps {

// Patterns longer than this (in bytes) are refused.
inline constexpr size_t kMaxPatternBytes = 1024;

class Pattern {
 public:
  // kInvalidArgument when `pattern` is empty-safe but malformed, uses what
  // RE2 does not (a backreference, a lookahead), is longer than
  // kMaxPatternBytes or compiles too large; the message says which, e.g.
  // "invalid perl operator: (?= (backreferences and lookaround are not
  // supported)".
  static Result<Pattern> Compile(const std::string& pattern);

  // True when some part of `text` matches (anchor with ^ and $ for all of
  // it). Text that is not UTF-8 is searched byte by byte where it is not.
  bool Search(std::string_view text) const;

  const std::string& text() const { return text_; }

 private:
  Pattern(std::string text, std::shared_ptr<const re2::RE2> re);
  std::string text_;
  std::shared_ptr<const re2::RE2> re_;
};

}  // namespace steps

#endif  // STEPS_CORE_PATTERN_H_
