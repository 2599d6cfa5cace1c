// `steps`: runs agent pipelines. See `steps --help`.
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/redact.h"
#include "pipeline/environment.h"
#include "process/limits.h"

int main(int argc, char** argv) {
  using namespace steps::cli;
  const std::vector<Command> commands = {
      RunCommand(),  TestCommand(), ValidateCommand(), ExplainCommand(),
      ShowCommand(), RunsCommand(), UiCommand(),
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
  std::function<int()> run;
  for (const Command& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    auto fn = c.setup(*sub);
    sub->callback([&run, fn] { run = fn; });
  }
  // A wide fan-out holds a few descriptors per running step; the usual soft
  // limit of 1024 would cap it long before the machine does.
  (void)steps::RaiseOpenFileLimit();
  // Provider keys are masked in every command's output (docs/secrets.md),
  // before any pipeline is read.
  steps::AddProcessSecretsFromEnvironment(
      steps::pipeline::BuiltinProviderKeyVariables());
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
  return run ? run() : kExitUsage;
}
