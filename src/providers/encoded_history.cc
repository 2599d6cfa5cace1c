#include "providers/encoded_history.h"

#include <utility>

#include "core/hash.h"

namespace steps {
namespace {

uint64_t Mix(uint64_t h, std::string_view text) {
  // Seeded by what came before, length included: "ab"+"c" and "a"+"bc"
  // differ.
  return FastHash64(text, h ^ (text.size() * 0x9E3779B97F4A7C15ULL));
}

uint64_t HashOf(const Message& m) {
  uint64_t h = static_cast<uint64_t>(m.role) + 1;
  h = Mix(h, m.content);
  h = Mix(h, m.tool_call_id);
  h = Mix(h, m.tool_name);
  for (const ToolCall& c : m.tool_calls) {
    h = Mix(h, c.id);
    h = Mix(h, c.name);
    h = Mix(h, c.arguments);
  }
  return h ^ (m.tool_calls.size() * 0xC2B2AE3D27D4EB4FULL);
}

}  // namespace

void EncodedHistory::AppendJoined(const std::vector<Message>& messages,
                                  std::string_view format,
                                  const Encoder& encode, std::string& out) {
  std::lock_guard<std::mutex> lock(mu_);
  AppendJoinedLocked(messages, format, encode, out);
}

std::string EncodedHistory::Body(uint64_t frame_key,
                                 const FrameMaker& make_frame,
                                 const std::vector<Message>& messages,
                                 std::string_view format,
                                 const Encoder& encode) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!has_frame_ || frame_key != frame_key_) {
    frame_ = make_frame();
    frame_key_ = frame_key;
    has_frame_ = true;
    ++frames_made_;
  }
  std::string out = std::exchange(buffer_, std::string());
  out.clear();
  out += frame_.before;
  out += '[';
  AppendJoinedLocked(messages, format, encode, out);
  out += ']';
  out += frame_.after;
  return out;
}

void EncodedHistory::AppendJoinedLocked(const std::vector<Message>& messages,
                                        std::string_view format,
                                        const Encoder& encode,
                                        std::string& out) {
  if (format != format_) {
    format_ = std::string(format);
    hashes_.clear();
    ends_.clear();
    joined_.clear();
  }
  // How many of the kept encodings are those of these messages.
  size_t keep = 0;
  while (keep < hashes_.size() && keep < messages.size() &&
         hashes_[keep] == HashOf(messages[keep])) {
    ++keep;
  }
  hashes_.resize(keep);
  ends_.resize(keep);
  joined_.resize(keep == 0 ? 0 : ends_.back());
  reused_ += static_cast<int64_t>(keep);
  for (size_t i = keep; i < messages.size(); ++i) {
    if (i > 0) joined_ += ',';
    joined_ += encode(messages[i]);
    hashes_.push_back(HashOf(messages[i]));
    ends_.push_back(joined_.size());
    ++encoded_;
  }
  out += joined_;
}

std::string EncodedHistory::TakeBuffer() {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = std::exchange(buffer_, std::string());
  out.clear();
  return out;
}

void EncodedHistory::GiveBack(std::string body) {
  // Small bodies come cheaply from the allocator's free lists; keeping one
  // per conversation would cost a wide fan-out its memory for nothing.
  constexpr size_t kWorthKeeping = 64 * 1024;
  if (body.capacity() < kWorthKeeping) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (body.capacity() > buffer_.capacity()) buffer_ = std::move(body);
}

int64_t EncodedHistory::reused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reused_;
}

int64_t EncodedHistory::encoded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return encoded_;
}

int64_t EncodedHistory::frames_made() const {
  std::lock_guard<std::mutex> lock(mu_);
  return frames_made_;
}

}  // namespace steps
