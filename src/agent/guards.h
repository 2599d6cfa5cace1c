// The guards that end a conversation which has stopped making progress:
// loop detection (the same tool call with the same result, over and over)
// and the text-answer guard of `required: tools` (a model that keeps
// answering with text although a tool call is required).
#ifndef STEPS_AGENT_GUARDS_H_
#define STEPS_AGENT_GUARDS_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace steps::agent {

// Watches the conversation's tool calls, in the order they ran, across
// turns. Not thread-safe (one conversation).
class LoopGuard {
 public:
  // The number of identical calls in a row that ends the conversation.
  static constexpr int kDefaultLimit = 3;
  explicit LoopGuard(int limit = kDefaultLimit) : limit_(limit) {}

  // Records one call and its result. Returns true when this call, with this
  // exact name, arguments and result, is the limit-th identical one in a
  // row. A call that differs in any of the three starts a new run.
  bool Record(std::string_view name, std::string_view arguments,
              std::string_view result);
  int repeats() const { return repeats_; }
  int limit() const { return limit_; }

 private:
  int limit_;
  int repeats_ = 0;
  std::string last_;  // Digest of the last call and its result.
};

// Counts consecutive text answers (answers without a tool call) while a
// tool call is required. Not thread-safe.
class TextAnswerGuard {
 public:
  static constexpr int kDefaultLimit = 5;
  explicit TextAnswerGuard(int limit = kDefaultLimit) : limit_(limit) {}

  // A text answer; returns true when it is the limit-th in a row.
  bool RecordText() { return ++streak_ >= limit_; }
  // An answer with tool calls: the streak is over.
  void RecordToolCall() { streak_ = 0; }
  int streak() const { return streak_; }
  int limit() const { return limit_; }

 private:
  int limit_;
  int streak_ = 0;
};

}  // namespace steps::agent

#endif  // STEPS_AGENT_GUARDS_H_
