// Bounded capture of one output stream, and splitting a byte stream into
// lines for live callbacks.
#ifndef STEPS_PROCESS_OUTPUT_CAPTURE_H_
#define STEPS_PROCESS_OUTPUT_CAPTURE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "process/process.h"

namespace steps {

// Keeps at most `max_bytes` of what is appended, choosing the part by
// `keep`; counts everything. Memory stays O(max_bytes). Not thread-safe.
class BoundedCapture {
 public:
  BoundedCapture(size_t max_bytes, OutputKeep keep);

  void Append(std::string_view data);
  uint64_t total_bytes() const { return total_; }
  // The kept text; for kHeadAndTail with a cut, head + a line naming the
  // number of bytes cut + tail.
  CapturedOutput Finish() const;

 private:
  void AppendTail(std::string_view data, size_t limit);

  size_t max_;
  OutputKeep keep_;
  uint64_t total_ = 0;
  std::string head_;
  // For kTail and kHeadAndTail: the last bytes seen, at most tail_limit_.
  // Trimmed lazily (when it grows past twice the limit) to stay linear.
  std::string tail_;
  size_t tail_limit_ = 0;
};

// Cuts a stream into lines and hands each to `emit` without its '\n'.
// A line longer than `max_line` is emitted in pieces of that size.
class LineSplitter {
 public:
  using Emit = std::function<void(std::string_view)>;
  LineSplitter(size_t max_line, Emit emit);

  void Feed(std::string_view data);
  // Emits a last line that had no newline, if any.
  void Flush();

 private:
  size_t max_line_;
  Emit emit_;
  std::string partial_;
};

}  // namespace steps

#endif  // STEPS_PROCESS_OUTPUT_CAPTURE_H_
