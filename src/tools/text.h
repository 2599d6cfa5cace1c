// Text handed to a model must be valid UTF-8 (it travels inside JSON) and
// bounded. These helpers make it so.
#ifndef STEPS_TOOLS_TEXT_H_
#define STEPS_TOOLS_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace steps {

// `text` with every byte that does not start a well-formed UTF-8 sequence
// (overlong forms, surrogates and code points past U+10FFFF included)
// replaced by U+FFFD.
std::string SanitizeUtf8(std::string_view text);

// The longest prefix of `text` of at most `max_bytes` that does not end in
// the middle of a multi-byte sequence.
size_t Utf8PrefixLength(std::string_view text, size_t max_bytes);

// True when `text` holds a NUL byte: treated as binary, not shown to a model.
bool LooksBinary(std::string_view text);

// "1 byte", "123 bytes", "64 KiB (65536 bytes)".
std::string DescribeSize(uint64_t bytes);

}  // namespace steps

#endif  // STEPS_TOOLS_TEXT_H_
