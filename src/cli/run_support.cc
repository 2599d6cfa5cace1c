#include "cli/run_support.h"

#include <signal.h>

#include "agent/runner.h"
#include "cli/commands.h"
#include "cli/signals.h"
#include "mock_provider/script.h"
#include "process/local_launcher.h"

namespace steps::cli {

RunOutcome RunPlan(const pipeline::ResolvedPlan& plan, const RunSetup& setup) {
  LocalProcessLauncher launcher;
  pipeline::ExecutorOptions opts;
  opts.launcher = &launcher;
  opts.observer = setup.observer;
  opts.state_dir = setup.state_dir;
  opts.file = plan.pipeline().file;
  RunOutcome outcome;
  // Agents: served in process from the file's mock: block, or real.
  std::unique_ptr<agent::ConversationRunner> agents;
  if (setup.mock && plan.pipeline().mock) {
    Result<MockScript> script = ParseMockScript(*plan.pipeline().mock);
    if (script.ok()) agents = agent::MakeMockAgentRunner(std::move(*script));
  }
  if (!agents) agents = agent::MakeAgentRunner({});
  opts.agents = agents.get();
  SignalWatcher signals(opts.abort, opts.cleanup_abort);
  pipeline::Executor executor(plan, opts);
  outcome.record = executor.Run(setup.jobs);
  outcome.signal = signals.first_signal();
  outcome.mock_problems = agents->MockExpectationFailures();
  return outcome;
}

int ExitCodeFor(const RunOutcome& outcome) {
  if (outcome.signal == SIGINT) return 130;
  if (outcome.signal == SIGTERM) return 143;
  bool failed = false, errored = false;
  for (const pipeline::JobRecord& job : outcome.record.jobs) {
    if (job.outcome == Outcome::kAborted) return 130;
    if (job.outcome != Outcome::kSucceeded) failed = true;
    if (job.caused_by_error) errored = true;
  }
  if (errored) return kExitStepErrored;
  return failed ? kExitJobFailed : kExitOk;
}

}  // namespace steps::cli
