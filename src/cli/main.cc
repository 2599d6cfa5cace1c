// `steps`: runs agent pipelines. See `steps --help`.
#include <fcntl.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "core/log.h"
#include "core/redact.h"
#include "core/suggest.h"
#include "pipeline/environment.h"
#include "process/guardian.h"
#include "process/limits.h"
#include "telemetry/otlp_exporter.h"

namespace {

using namespace steps::cli;

// `steps bogus`: names the word it did not know and the closest command.
// Returns the exit code when argv[1] is not a command, nullopt otherwise.
std::optional<int> RefuseUnknownCommand(int argc, char** argv,
                                        const std::vector<Command>& commands) {
  if (argc < 2 || argv[1][0] == '-') return std::nullopt;
  std::vector<std::string> names;
  for (const Command& c : commands) names.push_back(c.name);
  const std::string word = argv[1];
  for (const std::string& n : names)
    if (n == word) return std::nullopt;
  std::cerr << "steps: unknown command \"" << word << "\"";
  if (std::optional<std::string> near = steps::ClosestWord(word, names))
    std::cerr << "; did you mean \"" << *near << "\"?";
  std::cerr << "\nRun `steps --help` for the list of commands.\n";
  return kExitUsage;
}

// STEPS_LOG_FORMAT, read before any command (the guardian's included):
// what is wrong with it, or "" when it names a format or is unset.
std::string LogFormatFromEnvironment() {
  const char* name = std::getenv("STEPS_LOG_FORMAT");
  if (name == nullptr || *name == '\0') return "";
  std::optional<steps::LogFormat> format = steps::ParseLogFormat(name);
  if (!format) {
    return "steps: STEPS_LOG_FORMAT=" + std::string(name) +
           " is not a log format: use text or json (or --log-format)\n";
  }
  steps::SetLogFormat(*format);
  return "";
}

}  // namespace

// jemalloc's options, where it is linked (CMakeLists.txt, STEPS_JEMALLOC):
// one arena. Each thread keeps its own cache, so threads rarely meet on the
// arena's lock, and the memory taken stays what glibc's malloc takes (more
// arenas cost a 2000-wide fan-out 14% more memory for no less CPU).
// MALLOC_CONF adds to this or overrides it.
extern "C" {
extern const char* malloc_conf;
const char* malloc_conf = "narenas:1";
}

int main(int argc, char** argv) {
  // Descriptors 0-2 are always open (on /dev/null if we were started
  // without them), so nothing opened later lands there and is taken for
  // standard input or output by us or a child.
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd) return 70;
  }
  const std::string format_problem = LogFormatFromEnvironment();
  if (argc >= 2 && std::string(argv[1]) == steps::kGuardianCommand)
    return RunGuardianCommand(argc, argv);
  const std::vector<Command> commands = {
      RunCommand(),     ResumeCommand(),  TestCommand(),   ValidateCommand(),
      ExplainCommand(), ShowCommand(),    RunsCommand(),   CostCommand(),
      CacheCommand(),   UiCommand(),      McpCommand(),    ProvidersCommand(),
      InitCommand(),    ApproveCommand(), RejectCommand(), CompletionCommand(),
  };
  CLI::App app{
      "steps runs agent pipelines: YAML files of jobs whose steps are shell "
      "tasks, resource "
      "gets and puts, and LLM agent conversations with tools.\n"
      "Every limit is resolved from one place (step, then agent entry, then "
      "package default) "
      "and shown by `steps explain` before a run.",
      "steps"};
  app.require_subcommand(1);
  app.set_version_flag("-V,--version", std::string("steps ") + STEPS_VERSION);
  app.footer(
      "A FILE argument may be - to read the pipeline from standard input.\n"
      "`steps COMMAND --help` describes each command.");
  std::function<int()> run;
  // A command's options are made only when it may be the one to run:
  // `steps run` does not build the options of the twelve others (a tenth
  // of what a short command costs). `steps --help` and `steps completion`
  // walk them all.
  const std::string_view named = argc >= 2 ? argv[1] : "";
  const bool all = named.empty() || named[0] == '-' || named == "completion";
  std::string log_format;
  for (const Command& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    if (!all && named != c.name) continue;
    sub->add_option("--log-format", log_format,
                    "How log lines are written on stderr: text (the "
                    "default) or json, one object per line "
                    "(STEPS_LOG_FORMAT)")
        ->check(CLI::IsMember({"text", "json"}))
        ->option_text("text|json");
    auto fn = c.setup(*sub);
    sub->callback([&run, fn] { run = fn; });
  }
  if (argc == 1) {
    std::cout << app.help();
    return kExitOk;
  }
  if (std::optional<int> code = RefuseUnknownCommand(argc, argv, commands))
    return *code;
  // A wide fan-out holds a few descriptors per running step; the usual soft
  // limit of 1024 would cap it long before the machine does.
  (void)steps::RaiseOpenFileLimit();
  // Provider keys are masked in every command's output (docs/secrets.md),
  // before any pipeline is read.
  steps::AddProcessSecretsFromEnvironment(
      steps::pipeline::BuiltinProviderKeyVariables());
  // So are the credentials an OpenTelemetry collector is given.
  steps::AddProcessSecrets(steps::telemetry::OtlpSecretsFromEnvironment(
      [](const char* name) { return std::getenv(name); }));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  // A bad STEPS_LOG_FORMAT stops a command only when no flag overrides it.
  if (!format_problem.empty() && log_format.empty()) {
    std::cerr << format_problem;
    return kExitUsage;
  }
  if (!log_format.empty()) {
    steps::SetLogFormat(*steps::ParseLogFormat(log_format));
    // The programs a run starts (the web UI, the guardian) log alike.
    setenv("STEPS_LOG_FORMAT", log_format.c_str(), 1);
  }
  return run ? run() : kExitUsage;
}
