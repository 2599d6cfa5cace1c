#include "providers/encoded_history.h"

namespace steps {
namespace {

uint64_t Mix(uint64_t h, std::string_view text) {
  // Length first: "ab"+"c" and "a"+"bc" differ.
  h = (h ^ text.size()) * 0x9E3779B97F4A7C15ULL;
  return (h ^ std::hash<std::string_view>{}(text)) * 0xC2B2AE3D27D4EB4FULL;
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
  return Mix(h, std::to_string(m.tool_calls.size()));
}

}  // namespace

void EncodedHistory::AppendJoined(const std::vector<Message>& messages,
                                  std::string_view format,
                                  const Encoder& encode, std::string& out) {
  std::lock_guard<std::mutex> lock(mu_);
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

int64_t EncodedHistory::reused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reused_;
}

int64_t EncodedHistory::encoded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return encoded_;
}

}  // namespace steps
