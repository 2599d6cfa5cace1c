// The step cache seam: the executor asks it before running a task or agent
// step and tells it about each one that succeeded. The run store implements
// it (src/store); the executor knows only this interface.
//
// The key is the step's identity hash (resolve.cc: kind, command or
// messages, model, persona, tools, max_turns; never timeout, attempts, retry
// or max_context_bytes) combined at run time with what the step sees: its
// environment, across variables, `to:` critique and the contents of the
// job's workspace (the artifacts folder that holds its inputs).
#ifndef STEPS_PIPELINE_STEP_CACHE_H_
#define STEPS_PIPELINE_STEP_CACHE_H_

#include <map>
#include <optional>
#include <string>

#include "pipeline/run_record.h"

namespace steps::pipeline {

// What an earlier succeeded step left that a cached one restores.
struct CachedStep {
  std::string output;  // The step's stdout (an agent's answer).
  // Saved output folders: the name of each of the step's `outputs:` -> a
  // folder holding its contents, copied into the job's artifacts on a hit.
  std::map<std::string, std::string> outputs;
};

class StepCache {
 public:
  virtual ~StepCache() = default;
  // The entry under `key`, or nullopt on a miss (or when lookups are off,
  // as under --no-cache). Thread-safe.
  virtual std::optional<CachedStep> Find(const std::string& key) = 0;
  // Records a step that succeeded. `outputs` maps each output folder's name
  // to where its contents are now; the cache copies what it keeps before
  // returning. Thread-safe; failures are the cache's own business (a step
  // that cannot be remembered simply runs again next time).
  virtual void Remember(const std::string& key, const StepRef& step,
                        const std::string& output,
                        const std::map<std::string, std::string>& outputs) = 0;
};

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_STEP_CACHE_H_
