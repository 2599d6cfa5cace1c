// Text from tasks, tools, models and scripts is bytes: it is stored as it
// came and made valid UTF-8 only where it is shown or serialised (JSON, XML,
// a request to a model). These helpers do that one way everywhere.
#ifndef STEPS_CORE_UTF8_H_
#define STEPS_CORE_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace steps {

// `text` with every byte that does not start a well-formed UTF-8 sequence
// (overlong forms, surrogates and code points past U+10FFFF included)
// replaced by U+FFFD. Valid text comes back unchanged.
std::string SanitizeUtf8(std::string_view text);

// True when `text` is well-formed UTF-8 (SanitizeUtf8 would not change it).
bool IsValidUtf8(std::string_view text);

// The length of the control character at `text[i]`: 1 for a C0 control or
// DEL, 2 for a C1 control (U+0080..U+009F, C2 80..C2 9F), which some
// terminals read as escape sequences; 0 when there is none there.
size_t ControlCharacterAt(std::string_view text, size_t i);

// The longest prefix of `text` of at most `max_bytes` that does not end in
// the middle of a multi-byte sequence.
size_t Utf8PrefixLength(std::string_view text, size_t max_bytes);

// `text` cut to at most `max_bytes` at a character boundary, with "..."
// after it when it was longer.
std::string CutText(std::string_view text, size_t max_bytes);

// Columns `text` takes on a terminal: East Asian wide characters and emoji
// take two, combining marks and zero-width characters none, everything else
// (a byte that starts no well-formed sequence included) one. It errs wide,
// so text fitted to it never wraps.
size_t TerminalColumns(std::string_view text);

// `text` as it fits in `columns` terminal columns: itself when it does,
// otherwise its longest prefix of whole characters that fits with a "…"
// after it. Never splits a multi-byte sequence.
std::string FitTerminalColumns(std::string_view text, size_t columns);

}  // namespace steps

#endif  // STEPS_CORE_UTF8_H_
