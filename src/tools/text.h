// Text handed to a model must be valid UTF-8 (it travels inside JSON) and
// bounded. These helpers make it so.
#ifndef STEPS_TOOLS_TEXT_H_
#define STEPS_TOOLS_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/utf8.h"  // SanitizeUtf8, Utf8PrefixLength

namespace steps {

// True when `text` holds a NUL byte: treated as binary, not shown to a model.
bool LooksBinary(std::string_view text);

// "1 byte", "123 bytes", "64 KiB (65536 bytes)".
std::string DescribeSize(uint64_t bytes);

}  // namespace steps

#endif  // STEPS_TOOLS_TEXT_H_
