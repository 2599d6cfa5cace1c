#include "cli/slurm_cells.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>

#include "core/hash.h"
#include "core/json_text.h"
#include "core/log.h"
#include "core/redact.h"
#include "core/utf8.h"
#include "pipeline/event_stream.h"
#include "process/unique_fd.h"

namespace steps::cli {

std::string JobBudgetMarker(const std::string& state_dir,
                            const std::string& run_id, const std::string& job) {
  return (std::filesystem::path(state_dir) / "slurm" /
          ("budget-" + run_id + "-" + Sha256Hex(job).substr(0, 16)))
      .string();
}

std::optional<std::string> ReadJobBudgetMarker(const std::string& path) {
  // Opened without blocking and read only if it is a regular file: a FIFO
  // or device put at its path must not stop the cell.
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  struct stat st;
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  std::string text(4096, '\0');
  ssize_t n;
  do {
    n = read(fd.get(), text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  // Shown in the step's error and on terminals: printable text only.
  for (char& c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) c = ' ';
  }
  return SanitizeUtf8(text);
}

SlurmCells::SlurmCells(ProcessLauncher& slurm, SlurmCellsOptions options)
    : slurm_(slurm), options_(std::move(options)) {
  // A run that was killed left its markers behind: the run resumed under
  // its id starts without them (its store says what the job has spent).
  const std::string prefix = "budget-" + options_.run_id + "-";
  std::error_code ec;
  std::filesystem::directory_iterator it(
      std::filesystem::path(options_.state_dir) / "slurm", ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (it->path().filename().string().starts_with(prefix)) {
      std::error_code gone;
      std::filesystem::remove(it->path(), gone);
    }
  }
}

SlurmCells::~SlurmCells() {
  std::error_code ec;
  for (const std::string& path : markers_) std::filesystem::remove(path, ec);
}

void SlurmCells::JobBudgetSpent(const std::string& job,
                                const std::string& why) {
  const std::string path =
      JobBudgetMarker(options_.state_dir, options_.run_id, job);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(),
                                      ec);
  // Written whole, then renamed: a node never reads half of it.
  const std::string tmp = path + ".tmp";
  bool written = false;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << why << ", counting the job's cells on other nodes";
    written = static_cast<bool>(out.flush());
  }
  if (written) std::filesystem::rename(tmp, path, ec);
  if (!written || ec) {
    std::filesystem::remove(tmp, ec);
    LogEvent(LogLevel::kWarn, "cell.budget_marker_failed",
             {{"job", job},
              {"path", path},
              {"effect",
               "cells running on nodes see only what the job had spent when "
               "each was sent"}});
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  markers_.push_back(path);
}

ProcessRequest SlurmCells::Request(const pipeline::RemoteCell& cell) const {
  std::vector<std::string> argv = {options_.steps_binary,
                                   "run",
                                   options_.file,
                                   "--cell",
                                   "-",
                                   "--state-dir",
                                   options_.state_dir,
                                   "--run-id",
                                   options_.run_id};
  argv.insert(argv.end(), options_.flags.begin(), options_.flags.end());
  ProcessRequest r = ProcessRequest::Exec(std::move(argv));
  r.working_dir = options_.working_dir;
  nlohmann::json keys = nlohmann::json::object();
  for (const auto& [name, value] : options_.keys) keys[name] = value;
  pipeline::CellTask task = cell.task;
  task.sent = RealClock().WallNow();
  r.stdin_text = DumpJson({{"task", pipeline::CellTaskToJson(task)},
                           {"keys", keys},
                           {"file_sha256", options_.file_sha256}});
  r.cancel = cell.cancel;
  // steps on the node ends its own steps on TERM (each within the grace)
  // and runs the cell's on_abort and ensure hooks: it gets twice the grace
  // and some before Slurm kills it.
  r.kill_grace = cell.kill_grace * 2 + Millis(5000);
  r.cluster = cell.placement;
  r.cluster->job_name = "steps " + cell.label;
  // The cell's time is the job's deadline, queue included, which steps on
  // the node keeps between steps as a job does here: no time limit of its
  // own.
  r.cluster->run_timeout.reset();
  // Events are read as they come; only stderr's end is kept, to say why a
  // cell died without its last event.
  r.max_captured_bytes = 0;
  return r;
}

pipeline::CellEnd CellEndFromJob(const ProcessResult& result,
                                 const std::string& last_stderr) {
  const std::string job = result.cluster && !result.cluster->job_id.empty()
                              ? "its Slurm job " + result.cluster->job_id
                              : "its Slurm job";
  std::string said =
      last_stderr.empty() ? "" : " (last said: " + last_stderr + ")";
  switch (result.end) {
    case ProcessEnd::kCancelled:
      return {Outcome::kAborted, "aborted", false};
    case ProcessEnd::kFailedToStart:
      if (result.cluster && result.cluster->start_by_passed) {
        pipeline::CellEnd end{Outcome::kFailed, result.error, false};
        end.queued_past_job_deadline = true;
        return end;
      }
      return {Outcome::kErrored, "the cell did not start: " + result.error,
              true};
    case ProcessEnd::kLost:
      return {Outcome::kErrored, "the cell was lost: " + result.error, true};
    case ProcessEnd::kTimedOut:
      return {Outcome::kErrored,
              "the cell was ended by " + job + "'s time limit" + said, true};
    case ProcessEnd::kExited:
    case ProcessEnd::kSignaled:
      break;
  }
  return {Outcome::kErrored,
          "steps on the node ended (" + result.Describe() +
              ") before the cell said how it ended" + said,
          true};
}

pipeline::CellEnd SlurmCells::Run(const pipeline::RemoteCell& cell,
                                  pipeline::RunObserver& events) {
  if (options_.file_sha256.empty()) {
    return {Outcome::kErrored,
            "a pipeline read from stdin cannot send its cells to Slurm: the "
            "nodes read the file (name a file)",
            true};
  }
  ProcessRequest r = Request(cell);
  pipeline::EventReader reader(events, RealClock());
  std::string last_stderr;
  bool said_bad = false;
  r.on_line = [&](OutputStream stream, std::string_view line) {
    if (stream == OutputStream::kStderr) {
      // steps' own log lines on the node, named by their cell.
      // Masked again here (the node masks what it knows), and written in
      // one piece, as cells write at the same time.
      const std::string masked = ProcessRedactor()->Redact(line);
      if (!masked.empty()) last_stderr = masked.substr(0, 500);
      std::cerr << ("[" + cell.label + "] " + masked + "\n") << std::flush;
      return;
    }
    Status s = reader.FeedPiece(line);
    if (!s.ok() && !said_bad) {
      // Said once per cell: the rest of a broken stream would say the same.
      said_bad = true;
      LogEvent(LogLevel::kWarn, "cell.bad_event",
               {{"cell", cell.label}, {"error", s.message()}});
    }
  };
  const ProcessResult result = slurm_.Run(r);
  if (reader.end()) return *reader.end();
  return CellEndFromJob(result, last_stderr);
}

}  // namespace steps::cli
