// A conversation's messages encoded once each, for requests that carry the
// whole history: the next request costs the encoding of its new messages
// and a copy, not a re-encoding of everything before them.
//
// Each message's encoding is kept with a hash of the message; a request
// whose messages do not begin with the ones kept (another conversation, a
// history that was changed) is encoded from the first message that
// differs. So reuse never changes what is sent, only what it costs. A
// request that vouches for its history (ChatRequest::history_id, the same
// as the last one's) has only its last kept message compared, so a long
// conversation's check costs its new messages, not all of them again.
// Thread-safe; one per conversation (AdapterProvider keeps it).
#ifndef STEPS_PROVIDERS_ENCODED_HISTORY_H_
#define STEPS_PROVIDERS_ENCODED_HISTORY_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "providers/chat.h"

namespace steps {

class EncodedHistory {
 public:
  using Encoder = std::function<std::string(const Message&)>;

  // A request body without its messages: what comes before the list of
  // them and what comes after. It changes only when the model, the tools
  // or the parameters do, so it is kept too.
  struct Frame {
    std::string before;
    std::string after;
  };
  using FrameMaker = std::function<Frame()>;

  // A whole body: the frame kept for `frame_key` (a hash of everything
  // `make_frame` makes it from; made again when the key changes), then the
  // messages as AppendJoined writes them, in brackets. Built in the room
  // TakeBuffer gives.
  std::string Body(uint64_t frame_key, const FrameMaker& make_frame,
                   const std::vector<Message>& messages, uint64_t history_id,
                   std::string_view format, const Encoder& encode);

  // Appends to `out` the encodings of `messages`, in order, separated by
  // commas, as `encode` makes them. `format` names the encoding (an
  // adapter's wire format): what was kept for another format is dropped.
  // `history_id` as ChatRequest::history_id vouches for `messages`.
  void AppendJoined(const std::vector<Message>& messages, uint64_t history_id,
                    std::string_view format, const Encoder& encode,
                    std::string& out);

  // Messages whose encoding was reused / made, since construction.
  int64_t reused() const;
  int64_t encoded() const;
  // Kept messages compared with a request's, since construction.
  int64_t compared() const;
  // Frames made, since construction.
  int64_t frames_made() const;

  // A request body's buffer: an empty string with the room of the last
  // large one given back (64 KiB or more), so that a long conversation's
  // growing bodies do not each take fresh memory from the system (and fault
  // it in) and give it back.
  std::string TakeBuffer();
  // The body of a request that has been sent, for TakeBuffer.
  void GiveBack(std::string body);

 private:
  void AppendJoinedLocked(const std::vector<Message>& messages,
                          uint64_t history_id, std::string_view format,
                          const Encoder& encode, std::string& out);
  // How many of the kept encodings are those of the first of `messages`.
  size_t Kept(const std::vector<Message>& messages, uint64_t history_id);

  mutable std::mutex mu_;
  std::string format_;
  std::vector<uint64_t> hashes_;  // Of each message kept.
  std::vector<size_t> ends_;      // Where each one's encoding ends in joined_.
  std::string joined_;
  uint64_t history_id_ = 0;  // The vouch of the last request, 0 for none.
  int64_t reused_ = 0;
  int64_t compared_ = 0;
  int64_t encoded_ = 0;
  std::string buffer_;
  bool has_frame_ = false;
  uint64_t frame_key_ = 0;
  Frame frame_;
  int64_t frames_made_ = 0;
};

}  // namespace steps

#endif  // STEPS_PROVIDERS_ENCODED_HISTORY_H_
