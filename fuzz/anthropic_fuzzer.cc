// Fuzz target: one answer from an Anthropic Messages API, as a plain message
// body and as an event stream (fuzz/answer_fuzzer.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "answer_fuzzer.h"
#include "providers/anthropic.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  steps::fuzz::ReadAnswer<steps::AnthropicStreamAssembler>(
      body, [](std::string_view b) { steps::ParseAnthropicResponse(b); });
  return 0;
}
