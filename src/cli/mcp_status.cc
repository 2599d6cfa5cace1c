// The `status` tool of `steps mcp` (declared in cli/mcp_runs.h).
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <utility>

#include "cli/mcp_runs.h"
#include "pipeline/executor.h"
#include "store/reader.h"
#include "store/store.h"

namespace steps::cli {
namespace {

// Lines of a failed step's log shown by `status`.
constexpr int kLogTailLines = 20;
// How often a waiting `status` reads the store again.
constexpr std::chrono::milliseconds kStatusPoll{200};

// The last `max_lines` lines of the file at `path` (at most 64 KiB read).
std::string FileTail(const std::string& path, int max_lines) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - 65536));
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (int n = 0; n < max_lines && pos != std::string::npos && pos > 0; ++n)
    pos = text.rfind('\n', pos - 1);
  return pos == std::string::npos ? text : text.substr(pos + 1);
}

bool Unsuccessful(const std::string& status) {
  return status == "failed" || status == "errored" || status == "aborted" ||
         status == "interrupted";
}

std::string Ms(const std::optional<int64_t>& ms) {
  return ms ? std::to_string(*ms) + "ms" : "running";
}

nlohmann::json OptionalMs(const std::optional<int64_t>& ms) {
  return ms ? nlohmann::json(*ms) : nlohmann::json();
}

// The step's last lines of output and log, for a step that did not succeed.
std::vector<std::string> LogTail(store::Store& st, const store::StoredRun& run,
                                 const store::StoredStep& step) {
  std::vector<std::string> lines;
  if (!Unsuccessful(step.status)) return lines;
  Result<store::StoredLog> log = store::LoadStepLog(
      st, run.id, step.id, std::max<int64_t>(0, step.log_lines - kLogTailLines),
      kLogTailLines);
  if (!log.ok()) return lines;
  for (const store::StoredLine& l : log->lines)
    lines.push_back((l.stream == "stdout" ? "" : "[" + l.stream + "] ") +
                    l.text);
  return lines;
}

// One step as a few lines of text and as JSON.
nlohmann::json AppendStep(std::string& text, store::Store& st,
                          const store::StoredRun& run,
                          const store::StoredStep& step, int number) {
  text += "  " + std::to_string(number) + ". " + step.name +
          (step.cell.empty() ? "" : " [" + step.cell + "]") + " (" + step.kind +
          ")  " + step.status + "\n";
  nlohmann::json attempts = nlohmann::json::array();
  for (const store::StoredAttempt& a : step.attempts) {
    text += "     attempt " + std::to_string(a.number) + "/" +
            std::to_string(a.of) + "  " + a.status + "  " + Ms(a.duration_ms) +
            "\n";
    if (!a.error.empty() && a.status != "succeeded")
      text += "       " + a.error.substr(0, a.error.find('\n')) + "\n";
    attempts.push_back({{"number", a.number},
                        {"of", a.of},
                        {"status", a.status},
                        {"duration_ms", OptionalMs(a.duration_ms)},
                        {"error", a.error}});
  }
  if (Unsuccessful(step.status) && !step.error.empty())
    text += "     error: " + step.error + "\n";
  std::vector<std::string> tail = LogTail(st, run, step);
  if (!tail.empty()) {
    text += "     last " + std::to_string(tail.size()) + " of " +
            std::to_string(step.log_lines) + " lines of its output:\n";
    for (const std::string& line : tail) text += "       | " + line + "\n";
  }
  return {{"id", step.id},         {"job", step.job},
          {"name", step.name},     {"kind", step.kind},
          {"status", step.status}, {"error", step.error},
          {"attempts", attempts},  {"log_tail", tail}};
}

McpToolResult FormatStatus(store::Store& st, const store::StoredRun& run) {
  const bool finished = run.status != "running";
  std::string text = "Run " + run.id + "  " + run.status + "  " +
                     (finished ? Ms(run.duration_ms) : "still running") + "  " +
                     run.file + "\nTaken by: " + run.taken_by + "\n";
  nlohmann::json jobs = nlohmann::json::array();
  for (const store::StoredJob& job : run.jobs) {
    text += "\nJob " + job.name + "  " + job.status + "\n";
    nlohmann::json step_list = nlohmann::json::array();
    int number = 0;
    for (const store::StoredStep& s : job.steps)
      step_list.push_back(AppendStep(text, st, run, s, ++number));
    if (Unsuccessful(job.status) && !job.error.empty())
      text += "  " + job.error + "\n";
    jobs.push_back({{"name", job.name},
                    {"status", job.status},
                    {"error", job.error},
                    {"steps", step_list}});
  }
  nlohmann::json structured = {{"run", run.id},
                               {"status", run.status},
                               {"finished", finished},
                               {"file", run.file},
                               {"taken_by", run.taken_by},
                               {"duration_ms", OptionalMs(run.duration_ms)},
                               {"jobs", jobs}};
  return {text, false, structured};
}

struct Snapshot {
  std::unique_ptr<store::Store> store;
  std::optional<store::StoredRun> run;
  Status error;
};

Snapshot ReadRun(const std::string& state_dir, const std::string& id) {
  Snapshot snap;
  Result<std::unique_ptr<store::Store>> st =
      store::Store::OpenExisting(store::StorePath(state_dir));
  if (!st.ok()) {
    snap.error = st.status();
    return snap;
  }
  snap.store = std::move(*st);
  Result<store::StoredRun> run = store::LoadRun(*snap.store, id);
  if (run.ok()) {
    snap.run = std::move(*run);
  } else {
    snap.error = run.status();
  }
  return snap;
}

// The answer for a run this server started that is not in the store yet;
// nullopt while its process runs and the caller may still wait.
std::optional<McpToolResult> NotRecordedYet(const std::string& id,
                                            const LaunchedRuns::Launch& launch,
                                            bool last) {
  if (launch.ended) {
    return McpToolResult{"run " + id + " never started: steps run " +
                             *launch.ended + ". Its output (" +
                             launch.log_path + "):\n" +
                             FileTail(launch.log_path, kLogTailLines),
                         true, nullptr};
  }
  if (!last) return std::nullopt;
  return McpToolResult{
      "run " + id +
          " is starting: steps run has not "
          "recorded it yet; ask again",
      false,
      {{"run", id}, {"status", "starting"}, {"finished", false}}};
}

McpToolResult StatusCall(const McpToolsOptions& options, LaunchedRuns& launched,
                         const nlohmann::json& args,
                         const CancelToken& cancel) {
  const std::string id = args.value("run", std::string());
  const double wait = args.value("wait_seconds", 0.0);
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(wait));
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    const bool last = now >= deadline;
    // Before reading: a run of ours that died unrecorded must not pass for
    // alive as an unreaped zombie.
    launched.ReapEnded();
    Snapshot snap = ReadRun(options.state_dir, id);
    if (snap.run && (snap.run->status != "running" || last))
      return FormatStatus(*snap.store, *snap.run);
    if (!snap.run) {
      std::optional<LaunchedRuns::Launch> launch = launched.Find(id);
      // A run id not recorded yet may be a run another server started a
      // moment ago: waited for like a running one.
      const bool may_come =
          pipeline::IsRunId(id) && snap.error.code() == StatusCode::kNotFound;
      if (!launch && (last || !may_come))
        return {snap.error.message(), true, nullptr};
      // Ended between the read and now: read the store once more.
      if (launch && launch->ended) snap = ReadRun(options.state_dir, id);
      if (snap.run) return FormatStatus(*snap.store, *snap.run);
      if (launch) {
        if (std::optional<McpToolResult> r = NotRecordedYet(id, *launch, last))
          return *r;
      }
    }
    if (!cancel.WaitUntil(std::min(now + kStatusPoll, deadline)) &&
        cancel.cancelled()) {
      return {"cancelled", true, nullptr};
    }
  }
}

}  // namespace

McpTool StatusTool(const McpToolsOptions& options,
                   std::shared_ptr<LaunchedRuns> launched) {
  McpTool tool;
  tool.name = "status";
  tool.description =
      "A run's outcome so far: each job and step with its attempts and "
      "outcomes, and for a step that did not succeed its error and the last "
      "lines of its output. With wait_seconds, waits until the run has "
      "ended or that time has passed, whichever is first.";
  tool.input_schema = {{"type", "object"},
                       {"properties",
                        {{"run",
                          {{"type", "string"},
                           {"description",
                            "A run id (as run answered) or a unique "
                            "prefix of one (default: the newest run)"}}},
                         {"wait_seconds",
                          {{"type", "number"},
                           {"minimum", 0},
                           {"maximum", options.max_wait_seconds},
                           {"description",
                            "Wait up to this long for the run to end "
                            "(default 0: answer at once)"}}}}},
                       {"additionalProperties", false}};
  tool.call = [options, launched](const nlohmann::json& args,
                                  const CancelToken& cancel) {
    return StatusCall(options, *launched, args, cancel);
  };
  return tool;
}

}  // namespace steps::cli
