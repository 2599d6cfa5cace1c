#include "store/group_commit.h"

namespace steps::store {

Status GroupCommit::Submit(const std::function<Status(Db&)>& write) {
  Entry me;
  me.item.write = &write;
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&me);
  if (watchers_ > 0) queued_.notify_all();
  while (!me.done) {
    if (committing_) {
      // Woken when its write is committed, or to lead the next batch.
      me.wake.wait(lock);
      continue;
    }
    // Lead: commit everything queued so far, this write among it.
    committing_ = true;
    std::vector<Entry*> entries;
    entries.swap(queue_);
    lock.unlock();
    std::vector<Item*> batch;
    batch.reserve(entries.size());
    for (Entry* e : entries) batch.push_back(&e->item);
    commit_(batch);
    lock.lock();
    for (Entry* e : entries) {
      e->done = true;
      if (e != &me) e->wake.notify_one();
    }
    committing_ = false;
    // One waiter, the oldest, leads the writes that queued meanwhile; the
    // rest sleep until their batch is committed (no herd of wakeups).
    if (!queue_.empty()) queue_.front()->wake.notify_one();
  }
  return me.item.status;
}

void GroupCommit::WaitForQueued(size_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  ++watchers_;
  queued_.wait(lock, [&] { return queue_.size() >= n; });
  --watchers_;
}

}  // namespace steps::store
