// Server-sent events: splits a byte stream into events as pieces arrive.
#ifndef STEPS_PROVIDERS_SSE_H_
#define STEPS_PROVIDERS_SSE_H_

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
  // Pieces may split lines and events anywhere.
  std::vector<SseEvent> Feed(std::string_view piece);

 private:
  void Line(std::string_view line, std::vector<SseEvent>& out);
  std::string partial_;
  SseEvent pending_;
  bool has_fields_ = false;
  bool has_data_ = false;
};

}  // namespace steps

#endif  // STEPS_PROVIDERS_SSE_H_
