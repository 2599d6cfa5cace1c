// Trimming text at both ends, in the two senses the code needs.
#ifndef STEPS_CORE_TRIM_H_
#define STEPS_CORE_TRIM_H_

#include <string_view>

namespace steps {

// Without the spaces and tabs at either end: HTTP's optional whitespace
// (RFC 9110, OWS) and what templates allow around an expression.
inline std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// Without the white space (space, tab, line breaks, \v, \f) at either end.
inline std::string_view TrimSpace(std::string_view s) {
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
           c == '\f';
  };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace steps

#endif  // STEPS_CORE_TRIM_H_
