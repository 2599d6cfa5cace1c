#include "process/subreaper.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "process/proc_stat.h"

namespace steps {
namespace {

// How often a sweep looks again while something it killed is still dying.
constexpr std::chrono::milliseconds kSweepPoll{2};
// A tree deeper or wider than this is not walked further in one round; the
// rest is found in the next round, once re-parented.
constexpr size_t kMaxTreeSize = 100000;

std::atomic<bool> subreaper{false};
std::atomic<uint64_t> scope_counter{0};

// Held while a child is spawned and registered, and while a sweep looks at
// our children; guards launched().
std::mutex& RegistryMutex() {
  static std::mutex mu;
  return mu;
}

std::multiset<pid_t>& Launched() {
  static std::multiset<pid_t> pids;
  return pids;
}

// The scopes of runs still going.
std::set<std::string>& ActiveScopes() {
  static std::set<std::string> scopes;
  return scopes;
}

// SIGKILL to `root` and everything below it. A process that forks while
// this runs leaves a child that is re-parented to us and found next round.
void KillTree(pid_t root) {
  std::vector<pid_t> todo{root};
  std::vector<pid_t> tree;
  while (!todo.empty() && tree.size() < kMaxTreeSize) {
    pid_t pid = todo.back();
    todo.pop_back();
    tree.push_back(pid);
    for (pid_t child : ListChildren(pid)) todo.push_back(child);
  }
  for (pid_t pid : tree) kill(pid, SIGKILL);
}

// One look at our children: reaps the re-parented ones that have exited and
// kills those that belong to no run still going. True when it killed one
// (the caller looks again, to reap it and whatever it leaves).
bool SweepOnce() {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  bool killed = false;
  // Re-parented processes are children of the main thread (see
  // ListSweepCandidates); the launcher's children that other threads
  // started are not looked at.
  for (pid_t child : ListSweepCandidates()) {
    if (Launched().count(child) > 0) continue;  // Run's to reap.
    std::optional<ProcStat> stat = ReadProcStat(child);
    if (!stat) continue;
    if (stat->state == 'Z' || stat->state == 'X') {
      int status;
      waitpid(child, &status, WNOHANG);
      continue;
    }
    std::optional<std::string> owner = ReadProcEnv(child, kProcessScopeVar);
    if (owner && ActiveScopes().count(*owner) > 0) continue;  // Not over.
    KillTree(child);
    killed = true;
  }
  return killed;
}

}  // namespace

Status BecomeChildSubreaper() {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    return ErrnoStatus("prctl(PR_SET_CHILD_SUBREAPER)", errno);
  }
  subreaper.store(true);
  return Status::Ok();
}

bool IsChildSubreaper() { return subreaper.load(); }

std::string BeginProcessScope() {
  std::string scope = std::to_string(getpid()) + "." +
                      std::to_string(scope_counter.fetch_add(1) + 1);
  std::lock_guard<std::mutex> lock(RegistryMutex());
  ActiveScopes().insert(scope);
  return scope;
}

SpawnGuard::SpawnGuard() { RegistryMutex().lock(); }

SpawnGuard::~SpawnGuard() { RegistryMutex().unlock(); }

void SpawnGuard::Register(pid_t pid) { Launched().insert(pid); }

void UnregisterChild(pid_t pid) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto it = Launched().find(pid);
  if (it != Launched().end()) Launched().erase(it);
}

void SweepScope(const std::string& scope, pid_t pgid, Millis max_wait) {
  {
    std::lock_guard<std::mutex> lock(RegistryMutex());
    ActiveScopes().erase(scope);
  }
  if (!IsChildSubreaper()) return;
  const auto give_up = std::chrono::steady_clock::now() + max_wait;
  while (true) {
    bool again = SweepOnce();
    // A member of the run's group that is still dying has not yet handed
    // its children over to us.
    if (pgid > 0 && kill(-pgid, 0) == 0) again = true;
    if (!again || std::chrono::steady_clock::now() >= give_up) return;
    std::this_thread::sleep_for(kSweepPoll);
  }
}

}  // namespace steps
