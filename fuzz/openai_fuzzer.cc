// Fuzz target: one answer from an OpenAI-compatible server, read both as a
// plain chat.completion body and as a server-sent-event stream (whole, and
// cut into small pieces as a slow network delivers it).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "providers/openai.h"
#include "providers/sse.h"

namespace {

void ReadStream(std::string_view body, size_t piece_size) {
  steps::SseParser parser;
  steps::OpenAiStreamAssembler assembler;
  for (size_t at = 0; at < body.size(); at += piece_size) {
    for (const steps::SseEvent& e : parser.Feed(body.substr(at, piece_size))) {
      if (!assembler.Add(e)) return (void)assembler.Finish();
    }
  }
  assembler.Finish();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  steps::ParseOpenAiResponse(body);
  ReadStream(body, body.size() + 1);
  ReadStream(body, 7);
  return 0;
}
