#include "store/group_commit.h"

namespace steps::store {

Status GroupCommit::Submit(const std::function<Status(Db&)>& write) {
  Entry me;
  me.item.write = &write;
  bool lead = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(&me);
    if (watchers_ > 0) queued_.NotifyAll();
    if (!committing_) committing_ = lead = true;
  }
  // Woken when its write is committed, or to lead the next batch.
  if (!lead && me.wake.Wait() == kCommitted) return me.item.status;
  // Lead: commit everything queued so far, this write among it.
  std::vector<Entry*> entries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    entries.swap(queue_);
  }
  std::vector<Item*> batch;
  batch.reserve(entries.size());
  for (Entry* e : entries) batch.push_back(&e->item);
  commit_(batch);
  // One waiter, the oldest, leads the writes that queued meanwhile; the
  // rest sleep until their batch is committed (no herd of wakeups).
  Entry* next = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.empty()) {
      committing_ = false;
    } else {
      next = queue_.front();
    }
  }
  // Each waiter is woken through a Waiter of its own, outside the
  // queue's lock: a batch of thousands wakes them without each one queueing
  // again for the lock the next arrivals need. A waiter may return as soon
  // as it is given its answer: nothing of an entry is read after that.
  for (Entry* e : entries) {
    if (e != &me) e->wake.Give(kCommitted);
  }
  if (next != nullptr) next->wake.Give(kLead);
  return me.item.status;
}

void GroupCommit::WaitForQueued(size_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  ++watchers_;
  queued_.Wait(lock, [&] { return queue_.size() >= n; });
  --watchers_;
}

}  // namespace steps::store
