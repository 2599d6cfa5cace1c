#include "process/output_capture.h"

#include <algorithm>
#include <utility>

namespace steps {

BoundedCapture::BoundedCapture(size_t max_bytes, OutputKeep keep)
    : max_(max_bytes), keep_(keep) {
  switch (keep_) {
    case OutputKeep::kHead:
      tail_limit_ = 0;
      break;
    case OutputKeep::kTail:
      tail_limit_ = max_;
      break;
    case OutputKeep::kHeadAndTail:
      tail_limit_ = max_ / 2;
      break;
  }
}

void BoundedCapture::Append(std::string_view data) {
  total_ += data.size();
  size_t head_limit = max_ - tail_limit_;
  if (head_.size() < head_limit) {
    size_t n = std::min(data.size(), head_limit - head_.size());
    head_.append(data.substr(0, n));
    data.remove_prefix(n);
  }
  if (!data.empty() && tail_limit_ > 0) AppendTail(data, tail_limit_);
}

void BoundedCapture::AppendTail(std::string_view data, size_t limit) {
  if (data.size() >= limit) {
    tail_.assign(data.substr(data.size() - limit));
    return;
  }
  tail_.append(data);
  if (tail_.size() > 2 * limit) tail_.erase(0, tail_.size() - limit);
}

CapturedOutput BoundedCapture::Finish() const {
  CapturedOutput out;
  out.total_bytes = total_;
  std::string_view tail = tail_;
  if (tail.size() > tail_limit_) tail.remove_prefix(tail.size() - tail_limit_);
  uint64_t kept = head_.size() + tail.size();
  out.truncated = total_ > kept;
  out.text = head_;
  if (out.truncated && keep_ == OutputKeep::kHeadAndTail) {
    if (!out.text.empty() && out.text.back() != '\n') out.text += '\n';
    out.text += "[... " + std::to_string(total_ - kept) + " bytes cut ...]\n";
  }
  out.text.append(tail);
  return out;
}

LineSplitter::LineSplitter(size_t max_line, Emit emit)
    : max_line_(std::max<size_t>(max_line, 1)), emit_(std::move(emit)) {}

void LineSplitter::Feed(std::string_view data) {
  while (!data.empty()) {
    size_t nl = data.find('\n');
    std::string_view piece = data.substr(0, nl);
    if (partial_.size() + piece.size() > max_line_) {
      // Over-long: emit a full piece; the rest starts the next one.
      size_t take = max_line_ - partial_.size();
      partial_.append(piece.substr(0, take));
      emit_(partial_);
      partial_.clear();
      data.remove_prefix(take);
      continue;
    }
    if (nl == std::string_view::npos) {
      partial_.append(piece);
      return;
    }
    if (partial_.empty()) {
      emit_(piece);
    } else {
      partial_.append(piece);
      emit_(partial_);
      partial_.clear();
    }
    data.remove_prefix(nl + 1);
  }
}

void LineSplitter::Flush() {
  if (partial_.empty()) return;
  emit_(partial_);
  partial_.clear();
}

}  // namespace steps
