// The step cache seam: the executor asks it before running a task or agent
// step and tells it about each one that succeeded. The run store implements
// it (src/store); the executor knows only this interface.
//
// The key is the step's identity hash (resolve.cc: kind, command or
// messages, the source and fallback chain, persona, tools, max_turns; never
// timeout, attempts, retry or max_context_bytes) combined at run time with
// what the step sees: its environment, across variables, `to:` critique, the
// contents of the job's workspace (the artifacts folder that holds its
// inputs) and, for an agent step, what answers it (AgentRunner::
// CacheIdentity: real sources, or a mock script and its entries).
//
// `assert:` is not part of the key: an entry records the result (stdout,
// exit code), and the executor judges it by the step's current assert on
// every hit. A result the assert rejects is set aside and the step runs, so
// a step's outcome never depends on whether the cache had an entry.
#ifndef STEPS_PIPELINE_STEP_CACHE_H_
#define STEPS_PIPELINE_STEP_CACHE_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/run_record.h"

namespace steps::pipeline {

// What an earlier succeeded step left that a cached one restores.
struct CachedStep {
  std::string output;  // The step's stdout (an agent's answer).
  // A task's exit code (0, or the one its assert asked for); nullopt for
  // an agent step. Re-judged by the step's assert on a hit.
  std::optional<int> exit_code;
  // What the step printed, in order (a task's stdout and stderr lines; the
  // first kMaxCachedLines), replayed to the observers on a hit.
  std::vector<PrintedLine> lines;
  // Saved output folders: the name of each of the step's `outputs:` -> a
  // folder holding its contents, copied into the job's artifacts on a hit.
  // To Remember: where each folder is now.
  std::map<std::string, std::string> outputs;
  // Where the result came from (Find fills them): the run and the step id
  // ("JOB:2") that produced it.
  std::string from_run;
  std::string from_step;
};

// The most lines a step's record keeps for the cache to replay (as many as
// the run store keeps of a step's output).
inline constexpr size_t kMaxCachedLines = 10000;

class StepCache {
 public:
  virtual ~StepCache() = default;
  // The entry under `key`, or nullopt on a miss (or when lookups are off,
  // as under --no-cache). Thread-safe.
  virtual std::optional<CachedStep> Find(const std::string& key) = 0;
  // Records a step that succeeded with `result` (from_run and from_step
  // are the cache's to fill). `result.outputs` maps each output folder's
  // name to where its contents are now; the cache copies what it keeps
  // before returning. Thread-safe; failures are the cache's own business (a
  // step that cannot be remembered simply runs again next time).
  virtual void Remember(const std::string& key, const StepRef& step,
                        const CachedStep& result) = 0;
};

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_STEP_CACHE_H_
