// Fuzz target: one answer from an OpenAI-compatible server, as a plain
// chat.completion body and as an event stream (fuzz/answer_fuzzer.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "answer_fuzzer.h"
#include "providers/openai.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  steps::fuzz::ReadAnswer<steps::OpenAiStreamAssembler>(
      body, [](std::string_view b) { steps::ParseOpenAiResponse(b); });
  return 0;
}
