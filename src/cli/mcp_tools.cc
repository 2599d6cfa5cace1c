#include "cli/mcp_tools.h"

#include <filesystem>
#include <memory>
#include <utility>

#include "cli/commands.h"
#include "cli/mcp_runs.h"
#include "pipeline/model.h"
#include "store/gates.h"
#include "store/listing.h"
#include "store/reader.h"
#include "store/store.h"

namespace steps::cli {

Result<std::string> ResolveUnderRoot(const std::string& root,
                                     const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return InvalidArgument("file: an empty path");
  if (path == "-") {
    return InvalidArgument(
        "file: '-' (standard input) cannot be read here; name a pipeline "
        "file under " +
        root);
  }
  if (path.find('\0') != std::string::npos)
    return InvalidArgument("file: a path with a NUL byte");
  const fs::path given(path);
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(
      given.is_absolute() ? given : fs::path(root) / given, ec);
  if (ec) return InvalidArgument("file '" + path + "': " + ec.message());
  const fs::path rel = real.lexically_relative(root);
  if (rel.empty() || *rel.begin() == "..") {
    return InvalidArgument("file '" + path + "' is outside " + root +
                           ", the folder this server serves; name a file "
                           "under it (or start `steps mcp --root DIR`)");
  }
  // Opening a FIFO blocks until a writer comes, and a device may never
  // end: either would hold the call (and the server's exit) forever.
  const fs::file_status st = fs::status(real, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st) &&
      !fs::is_directory(st)) {
    return InvalidArgument("file '" + path +
                           "' is not a regular file (a FIFO, socket or "
                           "device); name a pipeline file");
  }
  return path;
}

namespace {

nlohmann::json FileSchema(const char* what) {
  return {{"type", "string"},
          {"description", std::string(what) +
                              ": a path relative to the server's folder (or "
                              "an absolute path inside it)"}};
}

// Refused paths and failed reads are tool errors: the model reads them.
McpToolResult Refusal(const Status& s) { return {s.message(), true, nullptr}; }

McpTool ValidateTool(const McpToolsOptions& options) {
  McpTool tool;
  tool.name = "validate";
  tool.description =
      "Load a pipeline file and check it, as `steps validate`: every error "
      "and warning as FILE:LINE: message, then a summary line. isError when "
      "the file is refused (errors, or warnings with strict).";
  tool.input_schema = {{"type", "object"},
                       {"properties",
                        {{"file", FileSchema("The pipeline file (YAML)")},
                         {"strict",
                          {{"type", "boolean"},
                           {"description", "Treat warnings as failures"}}}}},
                       {"required", {"file"}},
                       {"additionalProperties", false}};
  tool.call = [root = options.root](const nlohmann::json& args,
                                    const CancelToken&) -> McpToolResult {
    Result<std::string> file =
        ResolveUnderRoot(root, args.at("file").get<std::string>());
    if (!file.ok()) return Refusal(file.status());
    ValidateReport r = ValidateFile(*file, args.value("strict", false));
    return {r.diagnostics + r.summary + "\n", r.refused, nullptr};
  };
  return tool;
}

McpTool ExplainTool(const McpToolsOptions& options) {
  McpTool tool;
  tool.name = "explain";
  tool.description =
      "Show, as `steps explain`, every step's resolved limits (timeout, "
      "attempts, max_turns, budget, retry schedule) with where each came "
      "from, and the worst-case wall-clock bound of each step and job.";
  tool.input_schema = {{"type", "object"},
                       {"properties",
                        {{"file", FileSchema("The pipeline file (YAML)")},
                         {"job",
                          {{"type", "string"},
                           {"description", "Only this job (default: all)"}}}}},
                       {"required", {"file"}},
                       {"additionalProperties", false}};
  tool.call = [root = options.root](const nlohmann::json& args,
                                    const CancelToken&) -> McpToolResult {
    Result<std::string> file =
        ResolveUnderRoot(root, args.at("file").get<std::string>());
    if (!file.ok()) return Refusal(file.status());
    std::vector<std::string> jobs;
    if (args.contains("job")) jobs.push_back(args.at("job").get<std::string>());
    ExplainReport r = ExplainFile(*file, jobs);
    std::string text = r.diagnostics + r.text;
    if (!r.error.empty()) text += r.error + "\n";
    if (r.exit_code == kExitRefused) text += "refused: the file has errors\n";
    return {text, r.exit_code != kExitOk, nullptr};
  };
  return tool;
}

McpTool ShowTool(const McpToolsOptions& options,
                 std::shared_ptr<LaunchedRuns> launched) {
  McpTool tool;
  tool.name = "show";
  tool.description =
      "Print a recorded run as `steps show` does: its jobs, numbered steps, "
      "each attempt's outcome, duration and cache hash, who took it, and "
      "agents' turns.";
  tool.input_schema = {{"type", "object"},
                       {"properties",
                        {{"run",
                          {{"type", "string"},
                           {"description",
                            "A run id or a unique prefix of one "
                            "(default: the newest run)"}}}}},
                       {"additionalProperties", false}};
  tool.call = [state_dir = options.state_dir, launched](
                  const nlohmann::json& args,
                  const CancelToken&) -> McpToolResult {
    launched->ReapEnded();  // A dead run of ours is no zombie "running".
    Result<std::unique_ptr<store::Store>> st =
        store::Store::OpenExisting(store::StorePath(state_dir));
    if (!st.ok()) return Refusal(st.status());
    Result<store::StoredRun> run =
        store::LoadRun(**st, args.value("run", std::string()));
    if (!run.ok()) return Refusal(run.status());
    return {store::FormatRun(*run), false, nullptr};
  };
  return tool;
}

McpTool RunsTool(const McpToolsOptions& options,
                 std::shared_ptr<LaunchedRuns> launched) {
  McpTool tool;
  tool.name = "runs";
  tool.description =
      "List recorded runs, newest first, as `steps runs`: id, outcome, "
      "duration, file.";
  tool.input_schema = {
      {"type", "object"},
      {"properties",
       {{"limit",
         {{"type", "integer"},
          {"minimum", 0},
          {"description", "At most this many (default 20; 0: all)"}}}}},
      {"additionalProperties", false}};
  tool.call = [state_dir = options.state_dir, launched](
                  const nlohmann::json& args,
                  const CancelToken&) -> McpToolResult {
    launched->ReapEnded();
    Result<std::unique_ptr<store::Store>> st =
        store::Store::OpenExisting(store::StorePath(state_dir));
    if (!st.ok()) return Refusal(st.status());
    Result<std::vector<store::StoredRun>> runs =
        store::ListRuns(**st, args.value("limit", 20));
    if (!runs.ok()) return Refusal(runs.status());
    return {store::FormatRunList(*runs), false, nullptr};
  };
  return tool;
}

McpTool DecideTool(const McpToolsOptions& options,
                   pipeline::GateDecision decision) {
  const bool approve = decision == pipeline::GateDecision::kApprove;
  McpTool tool;
  tool.name = approve ? "approve" : "reject";
  tool.description =
      std::string(approve ? "Approve" : "Reject") +
      " a gate a run waits on, as `steps " + tool.name +
      "`: recorded as taken by the OS user this server runs as (via mcp), "
      "whom the gate's approvers, if it names any, must include. isError "
      "when refused (no such run or gate, several gates of that name, the "
      "gate no longer waits, not an approver), saying why.";
  tool.input_schema = {
      {"type", "object"},
      {"properties",
       {{"run",
         {{"type", "string"},
          {"description",
           "A run id or a unique prefix of one (\"\": the newest run)"}}},
        {"step",
         {{"type", "string"},
          {"description",
           "The gate: its step id as show prints it (e.g. ship:1), or its "
           "name when one gate of the run has it"}}},
        {"reason",
         {{"type", "string"},
          {"description", "Why; kept with the decision"}}}}},
      {"required", {"run", "step"}},
      {"additionalProperties", false}};
  tool.call = [state_dir = options.state_dir, decision](
                  const nlohmann::json& args,
                  const CancelToken&) -> McpToolResult {
    Result<store::GateRow> gate =
        DecideAsThisUser(state_dir, args.at("run").get<std::string>(),
                         args.at("step").get<std::string>(), decision,
                         args.value("reason", std::string()), "mcp");
    if (!gate.ok()) return Refusal(gate.status());
    return {DecisionReport(*gate),
            false,
            {{"run", gate->run_id},
             {"step", gate->step_id},
             {"name", gate->name},
             {"state", gate->state},
             {"taken_by", store::DecidedBy(*gate)},
             {"reason", gate->reason}}};
  };
  return tool;
}

}  // namespace

std::vector<McpTool> StepsMcpTools(const McpToolsOptions& options) {
  auto launched = std::make_shared<LaunchedRuns>();
  return {ValidateTool(options),
          ExplainTool(options),
          RunTool(options, launched),
          StatusTool(options, launched),
          ShowTool(options, launched),
          RunsTool(options, launched),
          DecideTool(options, pipeline::GateDecision::kApprove),
          DecideTool(options, pipeline::GateDecision::kReject)};
}

std::string StepsMcpInstructions() {
  return "steps runs agent pipelines (YAML). validate and explain read a "
         "pipeline file; run starts one in the background and answers with "
         "its run id at once; status reports a run's progress (wait_seconds "
         "waits for its end); show prints its record; runs lists runs; "
         "approve and reject decide a gate a run waits on, as the user this "
         "server runs as. Paths are relative to the folder this server "
         "serves.";
}

}  // namespace steps::cli
