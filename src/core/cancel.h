// Cancellation: a tree of tokens (run -> job -> step -> attempt). Cancelling
// a token cancels all of its descendants; a child never cancels its parent.
#ifndef STEPS_CORE_CANCEL_H_
#define STEPS_CORE_CANCEL_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace steps {

// Why a token was cancelled; the first reason wins.
enum class CancelReason {
  kNone,
  kAbort,     // SIGINT/SIGTERM or an explicit abort of the run.
  kDeadline,  // The step's (or attempt's) own deadline expired.
  kParent,    // An enclosing scope ended (e.g. fail_fast in a fan-out).
};

// A handle on one node of the tree. Cheap to copy; all copies share state.
// Thread-safe.
class CancelToken {
 public:
  // A new root token.
  CancelToken();

  // A child that is cancelled whenever this token is (immediately, if this
  // token already is).
  CancelToken Child() const;

  // Cancels this token and every descendant. Callbacks run on the calling
  // thread, outside the token's lock. Later calls are no-ops.
  void Cancel(CancelReason reason) const;

  bool cancelled() const;
  // Whether `other` is a copy of this very token.
  bool SameAs(const CancelToken& other) const { return state_ == other.state_; }
  CancelReason reason() const;

  // Runs `fn` once when the token is cancelled (at once, on this thread, if it
  // already is). Returns an id for RemoveCallback. `fn` must not block long:
  // it is meant to wake a waiter or kill a process group.
  uint64_t OnCancel(std::function<void()> fn) const;
  void RemoveCallback(uint64_t id) const;

  // Blocks until `until` (steady clock) or cancellation, whichever is first.
  // Returns true when the time was reached without cancellation.
  bool WaitUntil(std::chrono::steady_clock::time_point until) const;

 private:
  struct State;
  explicit CancelToken(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

// Removes a callback when it goes out of scope.
class CancelCallback {
 public:
  CancelCallback(const CancelToken& token, std::function<void()> fn)
      : token_(token), id_(token.OnCancel(std::move(fn))) {}
  ~CancelCallback() { token_.RemoveCallback(id_); }
  CancelCallback(const CancelCallback&) = delete;
  CancelCallback& operator=(const CancelCallback&) = delete;

 private:
  CancelToken token_;
  uint64_t id_;
};

}  // namespace steps

#endif  // STEPS_CORE_CANCEL_H_
