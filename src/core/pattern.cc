#include "core/pattern.h"

#include <re2/re2.h>

#include <utility>

namespace steps {

namespace {

// Memory one compiled pattern may take (its program and its DFA cache). A
// pattern past it is refused; a search past its cache falls back to the
// slower linear engine, never to more memory.
constexpr int64_t kMaxPatternMemory = 8 << 20;

bool UsesUnsupported(const std::string& error) {
  return error.find("perl operator") != std::string::npos ||
         error.find("escape sequence") != std::string::npos;
}

}  // namespace

Pattern::Pattern(std::string text, std::shared_ptr<const re2::RE2> re)
    : text_(std::move(text)), re_(std::move(re)) {}

Result<Pattern> Pattern::Compile(const std::string& pattern) {
  if (pattern.size() > kMaxPatternBytes) {
    return InvalidArgument("is longer than " +
                           std::to_string(kMaxPatternBytes) + " bytes");
  }
  re2::RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(kMaxPatternMemory);
  auto re = std::make_shared<const re2::RE2>(pattern, options);
  if (!re->ok()) {
    std::string why = re->error();
    if (re->error_code() == re2::RE2::ErrorPatternTooLarge) {
      why = "the pattern compiles too large (" + why + ")";
    } else if (UsesUnsupported(why)) {
      why += " (backreferences and lookaround are not supported)";
    }
    return InvalidArgument(why);
  }
  return Pattern(pattern, std::move(re));
}

bool Pattern::Search(std::string_view text) const {
  return re2::RE2::PartialMatch(text, *re_);
}

}  // namespace steps
