#include "agent/guards.h"

#include "core/hash.h"

namespace steps::agent {

bool LoopGuard::Record(std::string_view name, std::string_view arguments,
                       std::string_view result) {
  // A digest keeps memory flat whatever the results' size; the framing
  // keeps ("ab", "c") apart from ("a", "bc").
  std::string digest = FieldHasher()
                           .Add("name", name)
                           .Add("arguments", arguments)
                           .Add("result", result)
                           .HexDigest();
  if (digest == last_) {
    ++repeats_;
  } else {
    last_ = std::move(digest);
    repeats_ = 1;
  }
  return repeats_ >= limit_;
}

}  // namespace steps::agent
