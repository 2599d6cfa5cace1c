#include "providers/encoded_history.h"

#include <utility>

#include "core/hash.h"

namespace steps {
namespace {

uint64_t HashOf(const Message& m) {
  uint64_t h = static_cast<uint64_t>(m.role) + 1;
  h = FastHashChain(h, m.content);
  h = FastHashChain(h, m.tool_call_id);
  h = FastHashChain(h, m.tool_name);
  for (const ToolCall& c : m.tool_calls) {
    h = FastHashChain(h, c.id);
    h = FastHashChain(h, c.name);
    h = FastHashChain(h, c.arguments);
  }
  return h ^ (m.tool_calls.size() * 0xC2B2AE3D27D4EB4FULL);
}

}  // namespace

void EncodedHistory::AppendJoined(const std::vector<Message>& messages,
                                  uint64_t history_id, std::string_view format,
                                  const Encoder& encode, std::string& out) {
  std::lock_guard<std::mutex> lock(mu_);
  AppendJoinedLocked(messages, history_id, format, encode, out);
}

std::string EncodedHistory::Body(uint64_t frame_key,
                                 const FrameMaker& make_frame,
                                 const std::vector<Message>& messages,
                                 uint64_t history_id, std::string_view format,
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
  AppendJoinedLocked(messages, history_id, format, encode, out);
  out += ']';
  out += frame_.after;
  return out;
}

size_t EncodedHistory::Kept(const std::vector<Message>& messages,
                            uint64_t history_id) {
  const size_t kept = hashes_.size();
  const bool vouched = history_id != 0 && history_id == history_id_ &&
                       kept <= messages.size();
  history_id_ = history_id;
  if (vouched) {
    // The last kept one is still compared: a history changed without a new
    // vouch is most likely changed at its end.
    if (kept == 0) return 0;
    ++compared_;
    if (hashes_[kept - 1] == HashOf(messages[kept - 1])) return kept;
  }
  size_t same = 0;
  while (same < kept && same < messages.size()) {
    ++compared_;
    if (hashes_[same] != HashOf(messages[same])) break;
    ++same;
  }
  return same;
}

void EncodedHistory::AppendJoinedLocked(const std::vector<Message>& messages,
                                        uint64_t history_id,
                                        std::string_view format,
                                        const Encoder& encode,
                                        std::string& out) {
  if (format != format_) {
    format_ = std::string(format);
    hashes_.clear();
    ends_.clear();
    joined_.clear();
  }
  const size_t keep = Kept(messages, history_id);
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

int64_t EncodedHistory::compared() const {
  std::lock_guard<std::mutex> lock(mu_);
  return compared_;
}

int64_t EncodedHistory::frames_made() const {
  std::lock_guard<std::mutex> lock(mu_);
  return frames_made_;
}

}  // namespace steps
