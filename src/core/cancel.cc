#include "core/cancel.h"

#include "core/fiber.h"

namespace steps {

struct CancelToken::State {
  std::mutex mu;
  FiberCondVar cv;  // Parks a fiber that waits, or sleeps a thread.
  CancelReason reason = CancelReason::kNone;
  uint64_t next_id = 1;
  std::map<uint64_t, std::function<void()>> callbacks;
  // The parent's callback that cancels this node; dropped with this node so a
  // long-lived parent does not accumulate dead children.
  std::weak_ptr<State> parent;
  uint64_t id_in_parent = 0;

  ~State() {
    if (auto p = parent.lock()) {
      std::lock_guard<std::mutex> lock(p->mu);
      p->callbacks.erase(id_in_parent);
    }
  }
};

CancelToken::CancelToken() : state_(std::make_shared<State>()) {}
CancelToken::CancelToken(std::shared_ptr<State> state)
    : state_(std::move(state)) {}

CancelToken CancelToken::Child() const {
  auto child_state = std::make_shared<State>();
  std::weak_ptr<State> weak_child = child_state;
  CancelToken child(child_state);
  uint64_t id = OnCancel([weak_child] {
    if (auto s = weak_child.lock())
      CancelToken(s).Cancel(CancelReason::kParent);
  });
  child_state->parent = state_;
  child_state->id_in_parent = id;
  return child;
}

void CancelToken::Cancel(CancelReason reason) const {
  std::map<uint64_t, std::function<void()>> to_run;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->reason != CancelReason::kNone) return;
    state_->reason = reason;
    to_run.swap(state_->callbacks);
  }
  state_->cv.NotifyAll();
  for (auto& [id, fn] : to_run) fn();
}

bool CancelToken::cancelled() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->reason != CancelReason::kNone;
}

CancelReason CancelToken::reason() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->reason;
}

uint64_t CancelToken::OnCancel(std::function<void()> fn) const {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->reason == CancelReason::kNone) {
      uint64_t id = state_->next_id++;
      state_->callbacks.emplace(id, std::move(fn));
      return id;
    }
  }
  fn();
  return 0;
}

void CancelToken::RemoveCallback(uint64_t id) const {
  if (id == 0) return;
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->callbacks.erase(id);
}

bool CancelToken::WaitUntil(std::chrono::steady_clock::time_point until) const {
  std::unique_lock<std::mutex> lock(state_->mu);
  return !state_->cv.WaitUntil(
      lock, until, [&] { return state_->reason != CancelReason::kNone; });
}

}  // namespace steps
