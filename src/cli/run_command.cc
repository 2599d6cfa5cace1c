// `steps run FILE [--job NAME]... [--mock] [--no-cache]
//   [--record [PATH] [--record-overwrite]]
//   [--ui [--ui-listen A] [--allow-host H]...] [--summary FILE]`
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>

#include "cli/ci_report.h"
#include "cli/commands.h"
#include "cli/prices_file.h"
#include "cli/run_support.h"
#include "cli/run_ui.h"
#include "cli/runner_option.h"
#include "cli/terminal_printer.h"
#include "core/hash.h"
#include "core/json_text.h"
#include "pipeline/event_stream.h"
#include "pipeline/loader.h"
#include "pipeline/source_check.h"
#include "store/resume.h"
#include "ui/address.h"

namespace steps::cli {
namespace {

struct RunOptions {
  std::string file;
  std::vector<std::string> jobs;
  bool mock = false;
  bool no_cache = false;
  std::string state_dir = ".steps";
  bool plain = false;
  bool ui = false;
  std::string ui_listen = "127.0.0.1:8080";
  std::vector<std::string> allow_hosts;
  std::string summary;  // --summary FILE
  // --record [PATH]: record_path empty means NAME.mock.yaml next to FILE.
  bool record = false;
  std::string record_path;
  bool record_overwrite = false;
  // Hidden; set by `steps mcp` for the runs it starts: the run's id (chosen
  // by the server, which answers with it at once) and the channel recorded
  // in `Taken by:`.
  std::string run_id;
  std::string via;
  // --resume-if-interrupted: continue the newest interrupted or aborted run
  // of the same file instead of starting a new one.
  bool resume_if_interrupted = false;
  std::string prices;  // --prices FILE (STEPS_PRICES); empty: none.
  std::string runner;  // --runner (STEPS_RUNNER); empty: as the file says.
  // Hidden; set by a run for the across cells it sends to Slurm nodes
  // (cli/slurm_cells.h): where the cell's task is, "-" for stdin.
  std::string cell;
};

// --resume-if-interrupted: the exit code of resuming the newest interrupted
// or aborted run of FILE, or nullopt when there is none to resume.
std::optional<int> ResumeIfInterrupted(
    const RunOptions& opts,
    const std::shared_ptr<const agent::PriceTable>& prices) {
  if (!opts.resume_if_interrupted) return std::nullopt;
  Result<store::ResumePoint> point =
      FindResumePoint(opts.state_dir, "", opts.file, false);
  if (!point.ok()) {
    if (point.status().code() != StatusCode::kNotFound) {
      std::cerr << "steps run: --resume-if-interrupted: "
                << point.status().message() << "; starting a new run\n";
    }
    return std::nullopt;
  }
  std::cerr << "steps run: resuming run " << point->run_id << " of "
            << opts.file << " (--resume-if-interrupted)\n";
  ResumeOptions resume;
  resume.state_dir = opts.state_dir;
  resume.mock = opts.mock;
  resume.plain = opts.plain;
  resume.runner = opts.runner;
  resume.price_table = prices;
  return ResumeRun(resume, *point);
}

// Where --record writes: PATH as given, or NAME.mock.yaml next to the
// pipeline NAME.yaml.
std::string RecordPath(const RunOptions& opts) {
  if (!opts.record_path.empty()) return opts.record_path;
  std::filesystem::path file(opts.file);
  return (file.parent_path() / (file.stem().string() + ".mock.yaml")).string();
}

// The recorded PATH as `mock: {file: ...}` in the pipeline names it:
// relative to the pipeline's folder.
std::string ReplayReference(const RunOptions& opts) {
  std::filesystem::path dir = std::filesystem::path(opts.file).parent_path();
  return std::filesystem::path(RecordPath(opts))
      .lexically_proximate(dir.empty() ? "." : dir)
      .string();
}

// Refuses what --record cannot do, before anything runs: with --mock, or
// onto an existing file without --record-overwrite. Empty when fine.
std::string CheckRecord(const RunOptions& opts) {
  if (!opts.record) {
    return opts.record_overwrite ? "--record-overwrite goes with --record" : "";
  }
  if (opts.mock) {
    return "--record records real sources; under --mock there is nothing to "
           "record";
  }
  if (opts.file == "-") return "--record needs a pipeline file, not stdin";
  const std::string path = RecordPath(opts);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return "--record " + path + ": a directory; name the script file";
  }
  if (std::filesystem::exists(path, ec) && !opts.record_overwrite) {
    return "--record " + path +
           ": the file exists; add --record-overwrite to replace it, or name "
           "another file";
  }
  return "";
}

// What the command line asks that the loaded pipeline cannot do (a job it
// does not have, --mock without a mock: block, a --record refused); empty
// when fine.
std::string CheckOptions(const RunOptions& opts,
                         const pipeline::Pipeline& pipeline) {
  for (const std::string& job : opts.jobs) {
    if (!pipeline.FindJob(job)) {
      return "no job named '" + job + "' in " + opts.file;
    }
  }
  if (std::string why = CheckRecord(opts); !why.empty()) return why;
  if (!opts.run_id.empty() && !pipeline::IsRunId(opts.run_id)) {
    return "--run-id '" + opts.run_id + "' is not a run id";
  }
  if (opts.mock && !pipeline.mock) {
    return "--mock needs a 'mock:' block in " + opts.file +
           " (see docs/mock.md)";
  }
  return "";
}

// Writes the recording (to a temporary file renamed into place) and says
// where it went and how to replay it.
int WriteRecording(const RunOptions& opts, const pipeline::Pipeline& pipeline,
                   const agent::MockRecorder& recording) {
  const std::string path = RecordPath(opts);
  if (recording.requests() == 0) {
    std::cerr << "steps run: --record: no agent request was sent; nothing "
                 "written to "
              << path << "\n";
    return kExitOk;
  }
  std::string header =
      "Mock script recorded by `steps run " + opts.file + " --record`.\n" +
      "Replay it: `mock: {file: " + ReplayReference(opts) + "}` in " +
      opts.file + ", then `steps test " + opts.file +
      "`.\n"
      "Each entry answers one request as the source did; its expect: checks\n"
      "that the replayed request still asks the same (docs/mock.md).";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << recording.Text(header);
    if (!out.flush()) {
      std::cerr << "steps run: --record: cannot write " << tmp << "\n";
      return kExitJobFailed;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::cerr << "steps run: --record: cannot write " << path << ": "
              << ec.message() << "\n";
    std::filesystem::remove(tmp, ec);
    return kExitJobFailed;
  }
  const int n = recording.requests();
  const size_t agents = recording.agents().size();
  std::cerr << "steps run: recorded " << n
            << (n == 1 ? " request" : " requests") << " of " << agents
            << (agents == 1 ? " agent" : " agents") << " to " << path << "\n";
  std::error_code same;
  if (pipeline.mock_file.empty() ||
      !std::filesystem::equivalent(pipeline.mock_file, path, same)) {
    std::cerr << "steps run: replay it with `mock: {file: "
              << ReplayReference(opts) << "}` in " << opts.file
              << " and `steps test " << opts.file << "`\n";
  }
  return kExitOk;
}

// A source that cannot be served refuses the run before any step starts
// (under --mock the mock: block serves every source): false, with each
// problem said where it is.
bool SourcesServable(const RunOptions& opts, const pipeline::ResolvedPlan& plan,
                     pipeline::Diagnostics& diagnostics) {
  auto problems = pipeline::CheckSourceEnvironment(
      plan, opts.jobs, pipeline::ProcessEnvLookup());
  for (const pipeline::SourceProblem& p : problems) {
    diagnostics.Error(p.line, p.message);
    std::cerr << diagnostics.Format(diagnostics.all().back()) << "\n";
  }
  if (problems.empty()) return true;
  std::cerr << "steps run: refused before the first step: " << problems.size()
            << (problems.size() == 1 ? " agent source" : " agent sources")
            << " cannot be served in this environment\n";
  return false;
}

// --ui: the web UI of this run, served while it runs (cli/run_ui.h). Names
// the run (when `run_id` is empty) so that the address printed points at
// it; false, said, when the UI cannot start.
bool StartRunUi(const RunOptions& opts, std::unique_ptr<RunUi>& ui,
                std::string& run_id) {
  Result<ui::ListenAddress> listen = ui::ParseListenAddress(opts.ui_listen);
  if (!listen.ok()) {
    std::cerr << "steps run: --ui-listen: " << listen.status().message()
              << "\n";
    return false;
  }
  Result<std::unique_ptr<RunUi>> started =
      RunUi::Start(opts.ui_listen, opts.state_dir, opts.allow_hosts);
  if (!started.ok()) {
    std::cerr << "steps run: --ui: " << started.status().message() << "\n";
    return false;
  }
  ui = std::move(*started);
  if (run_id.empty()) run_id = pipeline::NewRunId(RealClock());
  std::cerr << "steps run: watch this run at "
            << ui::PageUrl(listen->host, ui->port(), ui->token()) << "#"
            << run_id << std::endl;
  return true;
}

// What `steps run --cell` is given: JSON {"task": ..., "keys": {...},
// "file_sha256": "..."} from stdin ("-") or a file. Read from stdin, the
// file behind it is removed at once when there is one (Slurm's copy of the
// job's stdin): the keys it holds stay on disk no longer than needed.
struct CellInput {
  pipeline::CellTask task;
  std::map<std::string, std::string> keys;
  std::string file_sha256;
};

Result<CellInput> ReadCellInput(const std::string& from) {
  std::string text;
  if (from == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), {});
    std::error_code ec;
    const std::filesystem::path stdin_file =
        std::filesystem::read_symlink("/proc/self/fd/0", ec);
    if (!ec && stdin_file.is_absolute() &&
        std::filesystem::is_regular_file(stdin_file, ec))
      std::filesystem::remove(stdin_file, ec);
  } else {
    std::ifstream in(from, std::ios::binary);
    if (!in) return InvalidArgument("cannot read " + from);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  if (!JsonDepthWithin(text, 16)) return InvalidArgument("nested too deeply");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgument("not a JSON object");
  CellInput input;
  auto keys = j.find("keys");
  if (keys != j.end() && keys->is_object()) {
    for (const auto& [name, value] : keys->items()) {
      if (value.is_string()) input.keys[name] = value.get<std::string>();
    }
  }
  auto sha = j.find("file_sha256");
  if (sha != j.end() && sha->is_string())
    input.file_sha256 = sha->get<std::string>();
  auto task = j.find("task");
  if (task == j.end()) return InvalidArgument("no task");
  Result<pipeline::CellTask> t = pipeline::CellTaskFromJson(*task);
  if (!t.ok()) return t.status();
  input.task = std::move(*t);
  return input;
}

// `steps run FILE --cell -`: one across cell for the run that sent it. The
// events go to stdout as JSON lines; a cell that cannot run says why in
// its end event too, so that the sending run can record it.
int RunCell(const RunOptions& opts) {
  auto refuse = [](const std::string& why, int code) {
    pipeline::EventWriter writer(
        [](std::string_view line) { std::cout << line << std::endl; },
        RealClock());
    writer.WriteCellEnd({Outcome::kErrored, why, true});
    std::cerr << "steps run --cell: " << why << "\n";
    return code;
  };
  Result<CellInput> input = ReadCellInput(opts.cell);
  if (!input.ok()) return refuse(input.status().message(), kExitUsage);
  if (opts.run_id.empty() || !pipeline::IsRunId(opts.run_id))
    return refuse("--cell needs the --run-id of the run that sent it",
                  kExitUsage);
  Result<std::shared_ptr<const agent::PriceTable>> prices =
      LoadPrices(opts.prices);
  if (!prices.ok())
    return refuse("--prices " + prices.status().message(), kExitUsage);
  Result<std::string> bytes = ReadPipelineBytes(opts.file);
  if (!bytes.ok()) return refuse(bytes.status().message(), kExitUsage);
  if (Sha256Hex(*bytes) != input->file_sha256) {
    return refuse(opts.file +
                      " is not the file the run started with (it changed, "
                      "or the node sees another): the cell would run other "
                      "steps",
                  kExitRefused);
  }
  pipeline::LoadResult r = pipeline::LoadPipelineFile(opts.file);
  std::cerr << r.diagnostics.FormatAll();
  if (!r.pipeline) {
    return refuse(opts.file + " does not load on this node (see its log)",
                  kExitRefused);
  }
  if (opts.mock && !r.pipeline->mock)
    return refuse("--mock needs a 'mock:' block in " + opts.file, kExitUsage);
  // Only the keys of the pipeline's own sources are taken, for its agents.
  for (const std::string& name : pipeline::ProviderKeyVariables(*r.pipeline)) {
    auto it = input->keys.find(name);
    if (it != input->keys.end()) setenv(name.c_str(), it->second.c_str(), 1);
  }
  // The cell's steps run here, on the node: none sends a job of its own.
  pipeline::PlanOptions local;
  local.runner = pipeline::RunnerKind::kLocal;
  pipeline::ResolvedPlan plan(r.pipeline, local);
  RunSetup setup;
  setup.state_dir = opts.state_dir;
  setup.mock = opts.mock;
  setup.run_id = opts.run_id;
  setup.prices = *prices;
  return ExitCodeForCell(RunCellHere(plan, setup, input->task, stdout));
}

int RunRun(const RunOptions& opts) {
  if (!opts.cell.empty()) return RunCell(opts);
  Result<std::shared_ptr<const agent::PriceTable>> prices =
      LoadPrices(opts.prices);
  if (!prices.ok()) {
    std::cerr << "steps run: --prices " << prices.status().message() << "\n";
    return kExitUsage;
  }
  if (std::optional<int> resumed = ResumeIfInterrupted(opts, *prices))
    return *resumed;
  pipeline::LoadResult r = pipeline::LoadPipelineFile(opts.file);
  std::cerr << r.diagnostics.FormatAll();
  CiReport report("steps run " + opts.file);
  if (!r.pipeline) {
    report.AddRefusal(r.diagnostics);
    PublishCiReport(report, opts.summary);
    return kExitRefused;
  }
  if (std::string why = CheckOptions(opts, *r.pipeline); !why.empty()) {
    std::cerr << "steps run: " << why << "\n";
    return kExitUsage;
  }
  pipeline::ResolvedPlan plan(r.pipeline, PlanOptionsFor(opts.runner));
  if (!opts.mock && !SourcesServable(opts, plan, r.diagnostics))
    return kExitRefused;
  RunSetup setup;
  setup.prices = *prices;
  setup.prices_file = opts.prices;
  setup.run_id = opts.run_id;
  setup.via = opts.via;
  std::unique_ptr<RunUi> ui;
  if (opts.ui && !StartRunUi(opts, ui, setup.run_id)) return kExitUsage;
  TerminalStyle style = StyleFor(STDOUT_FILENO, opts.plain);
  TerminalPrinter printer(stdout, style.live, RealClock(), style.color);
  setup.state_dir = opts.state_dir;
  setup.mock = opts.mock;
  setup.jobs = opts.jobs;
  setup.observer = &printer;
  setup.use_cache = !opts.no_cache && !opts.record;
  setup.record = opts.record;
  if (opts.file != "-") {
    if (Result<std::string> text = ReadPipelineBytes(opts.file); text.ok())
      setup.file_text = std::move(*text);
  }
  RunOutcome outcome = RunPlan(plan, setup);
  // The run's last line stays last on the terminal: no status block is
  // drawn under what follows.
  printer.Close();
  if (ui) {
    // An open page gets to read how the run ended before the UI stops
    // (not after Ctrl-C or SIGTERM: those stop at once).
    ui->Finish(outcome.signal == 0);
    std::cerr << "steps run: the UI stopped with the run; `steps ui` serves "
                 "it again\n";
  }
  for (const std::string& p : outcome.mock_problems)
    std::cerr << "mock: " << p << "\n";
  report.AddRun(*r.pipeline, outcome.record);
  PublishCiReport(report, opts.summary);
  int code = ExitCodeFor(outcome);
  if (!outcome.mock_problems.empty() && code == kExitOk) code = kExitJobFailed;
  if (outcome.recording) {
    int written = WriteRecording(opts, *r.pipeline, *outcome.recording);
    if (code == kExitOk) code = written;
  }
  return code;
}

}  // namespace

Command RunCommand() {
  return {
      "run", "Run the jobs of a pipeline file",
      [](CLI::App& app) -> std::function<int()> {
        auto opts = std::make_shared<RunOptions>();
        app.add_option("file", opts->file, "Pipeline file (YAML)")->required();
        app.add_option("--job", opts->jobs,
                       "Run only this job (repeatable); default: all");
        app.add_flag(
            "--mock", opts->mock,
            "Serve every agent source from the file's mock: block, in-process");
        app.add_flag("--no-cache", opts->no_cache,
                     "Run every step, even unchanged ones");
        CLI::Option* record = app.add_option(
            "--record", opts->record_path,
            "Record every agent request of the run as a mock script in PATH "
            "(default: NAME.mock.yaml next to NAME.yaml; put it after FILE, "
            "or write --record=PATH); an existing file is replaced only "
            "with --record-overwrite. Implies --no-cache");
        record->expected(0, 1)->type_name("[PATH]");
        app.add_flag("--record-overwrite", opts->record_overwrite,
                     "Let --record replace an existing file");
        app.add_option("--state-dir", opts->state_dir,
                       "Where runs keep working folders and records")
            ->envname("STEPS_STATE_DIR")
            ->capture_default_str();
        app.add_flag("--plain", opts->plain, "Plain lines even on a terminal");
        AddRunnerOption(app, opts->runner);
        app.add_option("--prices", opts->prices, kPricesHelp)
            ->envname("STEPS_PRICES")
            ->type_name("FILE");
        app.add_option("--summary", opts->summary,
                       "Also write a Markdown summary of the run to this file "
                       "(under GitHub Actions it also goes to "
                       "$GITHUB_STEP_SUMMARY)");
        app.add_flag("--ui", opts->ui,
                     "Serve the web UI of this run while it runs");
        app.add_option("--ui-listen", opts->ui_listen,
                       "HOST:PORT for --ui (port 0: any free); implies --ui")
            ->capture_default_str()
            ->each([opts](const std::string&) { opts->ui = true; });
        app.add_option("--allow-host", opts->allow_hosts,
                       "Also answer the UI for this Host name (NAME or "
                       "NAME:PORT; repeatable); implies --ui")
            ->each([opts](const std::string&) { opts->ui = true; });
        app.add_flag("--resume-if-interrupted", opts->resume_if_interrupted,
                     "Resume the latest interrupted or aborted run of FILE "
                     "instead, when there is one (`steps resume`)");
        // Not for users (no group: not in --help): what `steps mcp` passes
        // the runs it starts in the background.
        app.add_option("--run-id", opts->run_id)->group("");
        app.add_option("--cell", opts->cell)->group("");
        app.add_option("--via", opts->via)
            ->check(CLI::IsMember({"mcp"}))
            ->group("");
        app.footer(
            "Exit codes: 0 all jobs succeeded; 1 a job failed; 2 a job failed "
            "because a\n"
            "step errored; 129/130/143 aborted by SIGHUP/SIGINT/SIGTERM; 64 "
            "bad command "
            "line;\n"
            "65 the pipeline was refused at load, or before the first step "
            "(an agent\n"
            "source whose key variable is not set).");
        return [opts, record] {
          opts->record = record->count() > 0;
          return RunRun(*opts);
        };
      }};
}

}  // namespace steps::cli
