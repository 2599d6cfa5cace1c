#include "store/group_commit.h"

namespace steps::store {

Status GroupCommit::Submit(const std::function<Status(Db&)>& write) {
  Entry me;
  me.item.write = &write;
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&me);
  changed_.notify_all();
  while (!me.done) {
    if (committing_) {
      changed_.wait(lock);
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
    for (Entry* e : entries) e->done = true;
    committing_ = false;
    changed_.notify_all();
  }
  return me.item.status;
}

void GroupCommit::WaitForQueued(size_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return queue_.size() >= n; });
}

}  // namespace steps::store
