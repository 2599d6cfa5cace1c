// Across cells on Slurm (`runner: slurm` on an across block): each cell is
// one Slurm job running `steps run FILE --cell -` on a node, which reads
// its task on stdin and writes its events as JSON lines on stdout
// (pipeline/event_stream.h). The job's output file, on the state folder
// the nodes share, is read as it grows and each event replayed into this
// run, which alone writes the run store.
#ifndef STEPS_CLI_SLURM_CELLS_H_
#define STEPS_CLI_SLURM_CELLS_H_

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/executor.h"
#include "process/process.h"

namespace steps::cli {

struct SlurmCellsOptions {
  // The steps binary the nodes run (this one: on a filesystem they share).
  std::string steps_binary;
  // Absolute paths: the pipeline file and the state folder, as this run
  // uses them; the cell's job starts in `working_dir` (this run's).
  std::string file;
  std::string state_dir;
  std::string working_dir;
  std::string run_id;
  // Passed on as they are: --mock, --prices FILE.
  std::vector<std::string> flags;
  // Provider keys the cell's agents need, handed over on its stdin (which
  // Slurm keeps in a 0600 file of the 0700 spool folder until the job
  // ends), never in its environment or on its command line.
  std::map<std::string, std::string> keys;
  // SHA-256 (hex) of the pipeline file's bytes as this run loaded them:
  // a node whose file differs refuses the cell. Empty: the pipeline was
  // read from stdin, and no cell can be sent.
  std::string file_sha256;
};

class SlurmCells : public pipeline::CellLauncher {
 public:
  // `slurm` runs the cells' jobs (a SlurmLauncher); not owned.
  // Removes the budget markers a run of the same id left (it was killed).
  SlurmCells(ProcessLauncher& slurm, SlurmCellsOptions options);
  // Removes the budget markers it wrote.
  ~SlurmCells() override;

  pipeline::CellEnd Run(const pipeline::RemoteCell& cell,
                        pipeline::RunObserver& events) override;
  // Writes the job's budget marker (JobBudgetMarker), which steps on the
  // nodes looks at before each model request.
  void JobBudgetSpent(const std::string& job, const std::string& why) override;

  // The request that runs `cell` (exposed for tests).
  ProcessRequest Request(const pipeline::RemoteCell& cell) const;

 private:
  ProcessLauncher& slurm_;
  const SlurmCellsOptions options_;
  std::mutex mu_;
  std::vector<std::string> markers_;
};

// The file, on the state folder the nodes share, that says a job's budget
// is spent (its text says how): STATE_DIR/slurm/budget-RUN_ID-HASH.
std::string JobBudgetMarker(const std::string& state_dir,
                            const std::string& run_id, const std::string& job);

// What the marker at `path` says (its first 4 KiB, control bytes made
// spaces, valid UTF-8), or nullopt when there is none or it is not a
// regular file.
std::optional<std::string> ReadJobBudgetMarker(const std::string& path);

// How a cell whose job ended without its last event ended: from what the
// launcher says of the job (`result`) and the last line it wrote to stderr.
pipeline::CellEnd CellEndFromJob(const ProcessResult& result,
                                 const std::string& last_stderr);

}  // namespace steps::cli

#endif  // STEPS_CLI_SLURM_CELLS_H_
