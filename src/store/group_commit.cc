#include "store/group_commit.h"

#include <algorithm>

namespace steps::store {

Status LockHeldPastWriteTime() {
  return IoError(
      "another process held the store's write lock until this write's time "
      "(its step's) was up: database is locked");
}

Status GroupCommit::Submit(
    const std::function<Status(Db&)>& write,
    std::optional<std::chrono::steady_clock::time_point> wait_until) {
  Entry me;
  me.item.write = &write;
  me.item.wait_until = wait_until;
  bool lead = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(&me);
    if (watchers_ > 0) queued_.NotifyAll();
    if (!committing_) committing_ = lead = true;
  }
  while (true) {
    // Woken when its write is committed, or to lead the next batch.
    if (!lead) {
      int woken = wait_until ? me.wake.WaitUntil(*wait_until) : me.wake.Wait();
      if (woken == 0) {
        if (LeftQueue(me)) {
          return LockHeldPastWriteTime();
        }
        woken = me.wake.Wait();  // Taken into a batch, or told to lead.
      }
      if (woken == kCommitted) return me.item.status;
    }
    const Led led = LeadOneBatch(me);
    if (led == Led::kDone) return me.item.status;
    lead = led == Led::kLeadAgain;  // Else queued again, behind another.
  }
}

GroupCommit::Led GroupCommit::LeadOneBatch(Entry& me) {
  // Commit everything queued so far, this write among it.
  std::vector<Entry*> entries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    entries.swap(queue_);
    next_leader_ = nullptr;
  }
  std::vector<Item*> batch;
  batch.reserve(entries.size());
  for (Entry* e : entries) {
    e->item.again = false;
    batch.push_back(&e->item);
  }
  commit_(batch);
  // The writes to try again go back to the front of the queue, in order.
  // One waiter, the oldest, leads the next batch; the rest sleep until
  // theirs is committed (no herd of wakeups).
  Entry* next = nullptr;
  bool lead_again = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Entry*> again;
    for (Entry* e : entries) {
      if (e->item.again) again.push_back(e);
    }
    if (me.item.again) me.wake.Reset();  // It may have been told to lead.
    queue_.insert(queue_.begin(), again.begin(), again.end());
    if (queue_.empty()) {
      committing_ = false;
    } else if (queue_.front() == &me) {
      lead_again = true;  // No hand-over: it takes the queue at once.
    } else {
      next = next_leader_ = queue_.front();
    }
  }
  // Each waiter is woken through a Waiter of its own, outside the
  // queue's lock: a batch of thousands wakes them without each one queueing
  // again for the lock the next arrivals need. A waiter may return as soon
  // as it is given its answer: nothing of an entry is read after that.
  for (Entry* e : entries) {
    if (e != &me && !e->item.again) e->wake.Give(kCommitted);
  }
  if (next != nullptr) next->wake.Give(kLead);
  if (!me.item.again) return Led::kDone;
  return lead_again ? Led::kLeadAgain : Led::kQueued;
}

bool GroupCommit::LeftQueue(Entry& me) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find(queue_.begin(), queue_.end(), &me);
  if (it == queue_.end() || next_leader_ == &me) return false;
  queue_.erase(it);
  return true;
}

void GroupCommit::WaitForQueued(size_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  ++watchers_;
  queued_.Wait(lock, [&] { return queue_.size() >= n; });
  --watchers_;
}

}  // namespace steps::store
