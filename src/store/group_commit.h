// Group commit: writes that arrive while a transaction is being committed
// wait, and are committed together in the next one. Each Submit returns
// once its own write is committed (or failed), exactly as if it had had a
// transaction of its own, so "stored before this returns" still holds;
// under concurrency (a fan-out of conversations, parallel tasks) many
// writes share one commit instead of queueing for one each.
#ifndef STEPS_STORE_GROUP_COMMIT_H_
#define STEPS_STORE_GROUP_COMMIT_H_

#include <cstddef>
#include <functional>
#include <mutex>
#include <vector>

#include "core/fiber.h"
#include "core/status.h"

namespace steps::store {

class Db;

class GroupCommit {
 public:
  struct Item {
    const std::function<Status(Db&)>* write = nullptr;
    Status status;
  };
  // Commits one batch, in order, setting each item's status; called by one
  // submitter at a time (the leader), never concurrently.
  using Committer = std::function<void(std::vector<Item*>& batch)>;

  explicit GroupCommit(Committer commit) : commit_(std::move(commit)) {}

  // Queues `write` and returns its status once a batch holding it was
  // committed. The caller whose item finds no batch running commits the
  // queue itself.
  Status Submit(const std::function<Status(Db&)>& write);

  // Blocks until at least `n` writes wait for the next batch (tests).
  void WaitForQueued(size_t n);

 private:
  // What a waiting write is woken with.
  static constexpr int kCommitted = 1;  // Its batch was committed.
  static constexpr int kLead = 2;       // It is to commit the next batch.
  // A waiting write, on its writer's stack.
  struct Entry {
    Item item;
    Waiter wake;
  };

  Committer commit_;
  std::mutex mu_;
  FiberCondVar queued_;             // For WaitForQueued.
  int watchers_ = 0;                // Callers in WaitForQueued.
  std::vector<Entry*> queue_;       // Under mu_.
  // A leader is committing or handing over; under mu_.
  bool committing_ = false;
};

}  // namespace steps::store

#endif  // STEPS_STORE_GROUP_COMMIT_H_
