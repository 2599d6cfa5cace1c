// Fuzz target: a mock script, as `mock_provider --script FILE` reads it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "mock_provider/script.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  steps::ParseMockScriptText(text);
  return 0;
}
