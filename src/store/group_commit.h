// Group commit: writes that arrive while a transaction is being committed
// wait, and are committed together in the next one. Each Submit returns
// once its own write is committed (or failed), exactly as if it had had a
// transaction of its own, so "stored before this returns" still holds;
// under concurrency (a fan-out of conversations, parallel tasks) many
// writes share one commit instead of queueing for one each.
#ifndef STEPS_STORE_GROUP_COMMIT_H_
#define STEPS_STORE_GROUP_COMMIT_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <mutex>
#include <vector>

#include "core/fiber.h"
#include "core/status.h"

namespace steps::store {

class Db;

// The status of a write that waited for another process's lock until its
// time was up (GroupCommit::Submit's `wait_until`).
Status LockHeldPastWriteTime();

class GroupCommit {
 public:
  struct Item {
    const std::function<Status(Db&)>* write = nullptr;
    // The latest a write may wait for another process's lock.
    std::optional<std::chrono::steady_clock::time_point> wait_until;
    Status status;
    // Set by the committer: not tried this time (the batch waited for
    // another process's lock until another write's time was up), to be
    // queued again.
    bool again = false;
  };
  // Commits one batch, in order, setting each item's status (or `again`);
  // called by one submitter at a time (the leader), never concurrently.
  using Committer = std::function<void(std::vector<Item*>& batch)>;

  explicit GroupCommit(Committer commit) : commit_(std::move(commit)) {}

  // Queues `write` and returns its status once a batch holding it was
  // committed. The caller whose item finds no batch running commits the
  // queue itself. A write still queued at `wait_until` (the batch before
  // it waits for another process's lock) leaves the queue and fails,
  // busy, with nothing stored.
  Status Submit(const std::function<Status(Db&)>& write,
                std::optional<std::chrono::steady_clock::time_point>
                    wait_until = std::nullopt);

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
  // The queued write told to lead next, until it does; under mu_.
  Entry* next_leader_ = nullptr;
  // A queued write whose time is up leaves the queue, unless a leader
  // took it into its batch or told it to lead next (false: its answer
  // comes).
  bool LeftQueue(Entry& me);
  // Commits the queue, `me` among it, and wakes whom it answered and the
  // next leader: `me` is done, leads again, or waits in the queue again.
  enum class Led { kDone, kLeadAgain, kQueued };
  Led LeadOneBatch(Entry& me);
};

}  // namespace steps::store

#endif  // STEPS_STORE_GROUP_COMMIT_H_
