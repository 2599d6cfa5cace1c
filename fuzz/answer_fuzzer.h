// The body of an answer fuzz target: one answer from a model server, read
// both as a plain response body and as a server-sent-event stream (whole,
// and cut into small pieces as a slow network delivers it).
#ifndef STEPS_FUZZ_ANSWER_FUZZER_H_
#define STEPS_FUZZ_ANSWER_FUZZER_H_

#include <cstddef>
#include <string_view>

#include "core/sse.h"

namespace steps::fuzz {

template <typename Assembler>
void ReadStream(std::string_view body, size_t piece_size) {
  SseParser parser;
  Assembler assembler;
  for (size_t at = 0; at < body.size(); at += piece_size) {
    for (const SseEvent& e : parser.Feed(body.substr(at, piece_size))) {
      if (!assembler.Add(e)) return (void)assembler.Finish();
    }
  }
  assembler.Finish();
}

// `parse` reads a plain body; `Assembler` assembles a stream.
template <typename Assembler, typename Parse>
void ReadAnswer(std::string_view body, Parse parse) {
  parse(body);
  ReadStream<Assembler>(body, body.size() + 1);
  ReadStream<Assembler>(body, 7);
}

}  // namespace steps::fuzz

#endif  // STEPS_FUZZ_ANSWER_FUZZER_H_
