// One incarnation of a chaos trial: `steps run --resume-if-interrupted`
// started in the trial's folder, killed with SIGKILL by plan (after its
// k-th store commit, by `steps` itself through
// STEPS_CHAOS_KILL_AFTER_COMMITS, or by the harness after a time), and
// waited for together with its guardian.
#ifndef STEPS_TESTS_CHAOS_CHAOS_PROCESS_H_
#define STEPS_TESTS_CHAOS_CHAOS_PROCESS_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace steps::chaos {

struct KillPlan {
  enum class Kind { kNone, kAfterCommits, kAfterTime };
  Kind kind = Kind::kNone;
  int64_t commits = 0;                // kAfterCommits: the k-th commit.
  std::chrono::microseconds time{0};  // kAfterTime: after this long.

  std::string Describe() const;
};

struct Incarnation {
  enum class End { kExited, kKilled, kHung, kNotStarted };
  End end = End::kNotStarted;
  int exit_code = -1;  // kExited.
  std::string log;     // The path of its merged output.
};

// Writes OUT/p.yaml: three tasks side by side, the worker's conversation of
// kWorkerCalls tool calls, a task that fails until the fixer has run, and a
// last task; agents are served by the model at 127.0.0.1:`port`.
void WritePipeline(const std::string& out, int port);

// Runs incarnation `n` of the trial in `out` with `steps` at `steps_binary`
// under `plan`. A process still running after `bound` is killed and
// reported hung. Returns once the process and its guardian are gone (the
// run's lock is free).
Incarnation RunIncarnation(const std::string& steps_binary,
                           const std::string& out, int n, const KillPlan& plan,
                           std::chrono::seconds bound);

}  // namespace steps::chaos

#endif  // STEPS_TESTS_CHAOS_CHAOS_PROCESS_H_
