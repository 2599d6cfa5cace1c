#include "tools/text.h"

#include <cstdint>

namespace steps {

bool LooksBinary(std::string_view text) {
  return text.find('\0') != std::string_view::npos;
}

std::string DescribeSize(uint64_t bytes) {
  if (bytes == 1) return "1 byte";
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  std::string exact = " (" + std::to_string(bytes) + " bytes)";
  if (bytes < 1024 * 1024) return std::to_string(bytes / 1024) + " KiB" + exact;
  return std::to_string(bytes / (1024 * 1024)) + " MiB" + exact;
}

}  // namespace steps
