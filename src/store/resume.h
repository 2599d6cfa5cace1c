// What `steps resume` reads back from the store to continue an interrupted
// or aborted run under the same id: the pipeline file it started from, the
// steps that ended (their records stand), the steps in flight, and the time
// the run was alive (docs/resume.md).
#ifndef STEPS_STORE_RESUME_H_
#define STEPS_STORE_RESUME_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "pipeline/resume_state.h"
#include "store/reader.h"
#include "store/run_lock.h"
#include "store/store.h"

namespace steps::store {

// An interrupted or aborted run, ready to continue.
struct ResumePoint {
  std::string run_id;
  std::string file;       // The pipeline file as the run named it.
  std::string file_hash;  // SHA-256 (hex) of its bytes at the run's start.
  std::string file_text;  // Those bytes.
  std::string status;     // "interrupted" or "aborted".
  // When the run died: the latest time its records hold.
  int64_t died_ms = 0;
  // The jobs the run was started with (its plan outline), in order.
  std::vector<std::string> jobs;
  pipeline::ResumeState state;
  // The run's lock, held by whoever resumes it (store/run_lock.h); null
  // until taken.
  std::shared_ptr<RunLock> lock;
};

// Which run LoadResumePoint would load (its id), with the same errors
// about which run that is and its status, without reading its steps'
// records.
Result<std::string> PickResumableRun(Store& store, const std::string& id,
                                     const std::string& file);

// The run to resume: `id` (a run id or a unique prefix), or when empty the
// newest interrupted or aborted run, or with `file` set the newest one of
// that pipeline file (the same path as recorded). NotFound when there is
// none; FailedPrecondition when the run is still running, ended otherwise,
// or was recorded before the store kept its pipeline file. With
// `fresh_deadlines`, no time spent is carried over.
Result<ResumePoint> LoadResumePoint(Store& store, const std::string& id,
                                    const std::string& file,
                                    bool fresh_deadlines);

// Why `text` (the pipeline file now) is not the file `point` started from,
// naming the first line that differs; empty when they are the same bytes.
std::string DescribeFileChange(const ResumePoint& point,
                               const std::string& text);

}  // namespace steps::store

#endif  // STEPS_STORE_RESUME_H_
