// Server-sent events: splits a byte stream into events as pieces arrive.
#ifndef STEPS_CORE_SSE_H_
#define STEPS_CORE_SSE_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace steps {

struct SseEvent {
  // The `event:` field; empty when the server sent none ("message").
  std::string event;
  // The `data:` lines joined with '\n'.
  std::string data;
};

// Incremental parser. Not thread-safe; one per stream.
class SseParser {
 public:
  // Consumes a piece of the stream and returns the events it completed.
  // Pieces may split lines and events anywhere. A line ends at CRLF, LF or
  // a lone CR.
  std::vector<SseEvent> Feed(std::string_view piece);

  // Bytes held for an event not yet complete (its data so far and the
  // unfinished line): what a caller bounds to keep memory bounded.
  size_t buffered_bytes() const {
    return partial_.size() + pending_.data.size();
  }

 private:
  void Line(std::string_view line, std::vector<SseEvent>& out);
  std::string partial_;
  SseEvent pending_;
  bool has_fields_ = false;
  bool has_data_ = false;
  bool after_cr_ = false;  // The last piece ended with a CR.
  // Bytes of partial_ already searched for a line end: each byte is
  // searched once, however small the pieces.
  size_t scanned_ = 0;
};

}  // namespace steps

#endif  // STEPS_CORE_SSE_H_
