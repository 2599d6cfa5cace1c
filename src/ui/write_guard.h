// What a request that changes something (a decision on a gate) must show,
// beyond a Host header this server answers: the server's token, and, when
// the browser names the page it comes from (Origin), this server as that
// page.
//
// The token is a secret of whoever started the server: it is printed in
// the link `steps ui` gives (and `steps run --ui`), and the server never
// hands it out, so neither a process on this machine (a task of the very
// run the gate holds) nor a client on the network (a server listening
// beyond loopback) can decide a gate by asking for it. A page of another
// site can make a browser send a POST here (a form, a fetch in no-cors
// mode) but cannot set a custom header on it without a preflight this
// server never grants, and the Origin check refuses it even if it had
// guessed the token.
#ifndef STEPS_UI_WRITE_GUARD_H_
#define STEPS_UI_WRITE_GUARD_H_

#include <string>
#include <string_view>

#include "core/status.h"
#include "ui/http_guard.h"

namespace steps::ui {

// The header a write must carry the token in.
inline constexpr const char kTokenHeader[] = "X-Steps-Token";

// A secret drawn once per server start.
class WriteToken {
 public:
  // 32 bytes from the kernel's CSPRNG (getrandom), as 64 hex digits.
  // IoError when the kernel gives none.
  static Result<WriteToken> Generate();

  const std::string& text() const { return text_; }

  // Whether `presented` is the token. Compares every byte whatever the
  // first difference, so the time taken tells a guesser nothing about how
  // much of a guess was right (only whether its length was).
  bool Matches(std::string_view presented) const;

 private:
  explicit WriteToken(std::string text) : text_(std::move(text)) {}
  std::string text_;
};

// Whether the Origin header `origin` names a site `hosts` answers:
// "http://HOST[:PORT]" (port 80 when absent) or "https://HOST[:PORT]"
// (443), as a browser sends it: no path, no user. "null" (a sandboxed or
// file: page), another scheme or anything malformed: false.
bool OriginAllowed(std::string_view origin, const HostAllowList& hosts);

}  // namespace steps::ui

#endif  // STEPS_UI_WRITE_GUARD_H_
