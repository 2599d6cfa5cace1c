#include "ui/write_guard.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>

namespace steps::ui {

Result<WriteToken> WriteToken::Generate() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof bytes) {
    // Blocks only until the kernel's pool is first seeded, at boot.
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoStatus("getrandom for the UI's token", errno);
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  for (unsigned char b : bytes) {
    text += kHex[b >> 4];
    text += kHex[b & 15];
  }
  return WriteToken(std::move(text));
}

bool WriteToken::Matches(std::string_view presented) const {
  if (presented.size() != text_.size()) return false;
  // volatile: the compiler may not turn the loop into an early exit.
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < text_.size(); ++i) {
    diff = diff | static_cast<uint8_t>(text_[i] ^ presented[i]);
  }
  return diff == 0;
}

bool OriginAllowed(std::string_view origin, const HostAllowList& hosts) {
  std::string_view rest;
  const char* default_port;
  if (origin.substr(0, 7) == "http://") {
    rest = origin.substr(7);
    default_port = "80";
  } else if (origin.substr(0, 8) == "https://") {
    rest = origin.substr(8);
    default_port = "443";
  } else {
    return false;
  }
  if (rest.empty() || rest.find_first_of("/@?#") != std::string_view::npos) {
    return false;
  }
  // The host part ends at the port's colon, after an IPv6 address's ']'.
  const size_t bracket = rest.rfind(']');
  const size_t colon = rest.rfind(':');
  const bool has_port = colon != std::string_view::npos &&
                        (bracket == std::string_view::npos || colon > bracket);
  std::string host_port(rest);
  if (!has_port) host_port += std::string(":") + default_port;
  return hosts.Allows(host_port);
}

}  // namespace steps::ui
