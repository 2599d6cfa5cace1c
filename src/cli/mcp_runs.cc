#include "cli/mcp_runs.h"

#include <fcntl.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "pipeline/environment.h"
#include "pipeline/executor.h"
#include "pipeline/loader.h"
#include "pipeline/source_check.h"
#include "process/spawn.h"
#include "process/subreaper.h"

extern char** environ;

namespace steps::cli {
namespace {

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status))
    return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status));
  return "ended";
}

McpToolResult Failure(std::string text) {
  return {std::move(text), true, nullptr};
}

}  // namespace

void LaunchedRuns::Add(const std::string& run_id, Launch launch) {
  std::lock_guard<std::mutex> lock(mutex_);
  runs_[run_id] = std::move(launch);
}

void LaunchedRuns::ReapEnded() {
  std::lock_guard<std::mutex> lock(mutex_);
  ReapEndedLocked();
}

void LaunchedRuns::ReapEndedLocked() {
  for (auto& [id, launch] : runs_) {
    int status = 0;
    if (!launch.ended && waitpid(launch.pid, &status, WNOHANG) == launch.pid) {
      launch.ended = DescribeWaitStatus(status);
      UnregisterChild(launch.pid);
    }
  }
}

std::optional<LaunchedRuns::Launch> LaunchedRuns::Find(
    const std::string& run_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  ReapEndedLocked();
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return std::nullopt;
  return it->second;
}

namespace {

struct RunRequest {
  std::string file;
  std::string job;
  bool mock = false;
  bool no_cache = false;
};

// What `steps run` would refuse before its first step, checked here so the
// refusal is the call's answer rather than a line in a log. Empty when fine.
std::string Preflight(const RunRequest& req) {
  pipeline::LoadResult r = pipeline::LoadPipelineFile(req.file);
  if (!r.pipeline) {
    return r.diagnostics.FormatAll() +
           "refused: steps run does not start a pipeline with errors\n";
  }
  if (!req.job.empty() && !r.pipeline->FindJob(req.job))
    return "no job named '" + req.job + "' in " + req.file + "\n";
  if (req.mock && !r.pipeline->mock) {
    return "mock: true needs a 'mock:' block in " + req.file +
           " (see docs/mock.md)\n";
  }
  if (req.mock) return "";
  pipeline::ResolvedPlan plan(r.pipeline);
  std::vector<std::string> jobs;
  if (!req.job.empty()) jobs.push_back(req.job);
  std::string refused;
  for (const pipeline::SourceProblem& p : pipeline::CheckSourceEnvironment(
           plan, jobs, pipeline::ProcessEnvLookup())) {
    r.diagnostics.Error(p.line, p.message);
    refused += r.diagnostics.Format(r.diagnostics.all().back()) + "\n";
  }
  if (!refused.empty())
    refused +=
        "refused: an agent source cannot be served here; mock: true "
        "serves every source from the file's mock: block\n";
  return refused;
}

// Starts `steps run` for `req` in a session of its own, its output to
// `log_path`; the pid.
Result<pid_t> LaunchRun(const McpToolsOptions& options, const RunRequest& req,
                        const std::string& run_id,
                        const std::string& log_path) {
  // Values joined to their options and the file after "--": a file or job
  // name that starts with '-' is never read as an option.
  std::vector<std::string> argv = {"steps",
                                   "run",
                                   "--plain",
                                   "--via=mcp",
                                   "--run-id=" + run_id,
                                   "--state-dir=" + options.state_dir};
  if (!req.job.empty()) argv.push_back("--job=" + req.job);
  if (req.mock) argv.push_back("--mock");
  if (req.no_cache) argv.push_back("--no-cache");
  argv.insert(argv.end(), {"--", req.file});
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  SpawnSetup setup(SpawnGroup::kOwnSession);
  posix_spawn_file_actions_t* actions = setup.actions();
  posix_spawn_file_actions_addopen(actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(actions, 1, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(actions, 1, 2);
  posix_spawn_file_actions_addclosefrom_np(actions, 3);
  return setup.Spawn(options.steps_binary, std::move(argv), std::move(env),
                     "starting steps run");
}

McpToolResult StartRun(const McpToolsOptions& options, LaunchedRuns& launched,
                       const nlohmann::json& args, const CancelToken& cancel) {
  Result<std::string> file =
      ResolveUnderRoot(options.root, args.at("file").get<std::string>());
  if (!file.ok()) return Failure(file.status().message());
  RunRequest req{*file, args.value("job", std::string()),
                 args.value("mock", false), args.value("no_cache", false)};
  if (std::string why = Preflight(req); !why.empty()) return Failure(why);
  // A call cancelled while its file was checked gets no answer: starting
  // the run then would leave one its client never hears of.
  if (cancel.cancelled()) return Failure("cancelled: no run was started");
  const std::string run_id = pipeline::NewRunId(RealClock());
  const std::filesystem::path log_dir =
      std::filesystem::path(options.state_dir) / "mcp";
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  const std::string log_path = (log_dir / (run_id + ".log")).string();
  Result<pid_t> pid = LaunchRun(options, req, run_id, log_path);
  if (!pid.ok()) return Failure(pid.status().message());
  launched.Add(run_id, {*pid, log_path, std::nullopt});
  std::string text =
      "Started run " + run_id + " of " + req.file +
      (req.job.empty() ? "" : ", job " + req.job) +
      (req.mock ? ", under the mock" : "") +
      ". It runs in the background (it goes on if this server ends): "
      "status with run " +
      run_id +
      " reports its progress (wait_seconds waits for its end), show prints "
      "its record. Its console output goes to " +
      log_path + ".";
  return {text, false, {{"run", run_id}, {"log", log_path}}};
}

}  // namespace

McpTool RunTool(const McpToolsOptions& options,
                std::shared_ptr<LaunchedRuns> launched) {
  McpTool tool;
  tool.name = "run";
  tool.description =
      "Start `steps run` on a pipeline file in the background and answer at "
      "once with the run id; follow it with status (and show). The file is "
      "checked first: a refusal (errors, an unknown job, a source that "
      "cannot be served) is the answer, and nothing starts.";
  tool.input_schema = {
      {"type", "object"},
      {"properties",
       {{"file",
         {{"type", "string"},
          {"description",
           "The pipeline file (YAML), relative to "
           "the server's folder"}}},
        {"job",
         {{"type", "string"},
          {"description", "Run only this job (default: all)"}}},
        {"mock",
         {{"type", "boolean"},
          {"description",
           "Serve every agent source from the file's "
           "mock: block, as steps run --mock"}}},
        {"no_cache",
         {{"type", "boolean"},
          {"description", "Run every step, even unchanged ones"}}}}},
      {"required", {"file"}},
      {"additionalProperties", false}};
  tool.call = [options, launched](const nlohmann::json& args,
                                  const CancelToken& cancel) {
    return StartRun(options, *launched, args, cancel);
  };
  return tool;
}

}  // namespace steps::cli
