#include "cli/run_support.h"

#include <signal.h>

#include "agent/runner.h"
#include "cli/commands.h"
#include "cli/signals.h"
#include "core/log.h"
#include "core/redact.h"
#include "mock_provider/script.h"
#include "pipeline/environment.h"
#include "pipeline/redacting.h"
#include "process/local_launcher.h"
#include "store/cache.h"
#include "store/recorder.h"
#include "store/store.h"

namespace steps::cli {

RunOutcome RunPlan(const pipeline::ResolvedPlan& plan, const RunSetup& setup) {
  // Secrets (docs/secrets.md): the values of the pipeline's secret
  // variables are masked in everything below, and provider keys reach a
  // child process only when an `env:` entry passes them.
  const pipeline::Pipeline& pipeline = plan.pipeline();
  AddProcessSecretsFromEnvironment(pipeline::SecretVariables(pipeline));
  const std::shared_ptr<const Redactor> redactor = ProcessRedactor();
  LocalProcessLauncher launcher(
      RealClock(),
      CurrentEnvironmentWithout(pipeline::ProviderKeyVariables(pipeline)));
  pipeline::ExecutorOptions opts;
  opts.launcher = &launcher;
  opts.state_dir = setup.state_dir;
  opts.file = plan.pipeline().file;
  opts.run_id =
      setup.run_id.empty() ? pipeline::NewRunId(RealClock()) : setup.run_id;
  // The run store (STATE_DIR/steps.db) records the run beside the printer
  // and holds the step cache. Without it the run still runs, unrecorded.
  pipeline::ObserverList observers;
  if (setup.observer) observers.Add(setup.observer);
  std::unique_ptr<store::Store> db;
  std::unique_ptr<store::RunRecorder> recorder;
  std::unique_ptr<store::StoreStepCache> cache;
  std::unique_ptr<pipeline::RedactingStepCache> masked_cache;
  if (auto opened = store::Store::Open(store::StorePath(setup.state_dir));
      opened.ok()) {
    db = std::move(*opened);
    recorder = std::make_unique<store::RunRecorder>(*db);
    observers.Add(recorder.get());
    cache = std::make_unique<store::StoreStepCache>(
        *db, store::CacheDir(setup.state_dir), opts.run_id, setup.use_cache);
    masked_cache =
        std::make_unique<pipeline::RedactingStepCache>(*cache, redactor);
    opts.cache = masked_cache.get();
  } else {
    LogEvent(LogLevel::kWarn, "store.unavailable",
             {{"error", opened.status().message()}});
  }
  // Every observer (printer, recorder) sees the run through the mask.
  pipeline::RedactingObserver masked(observers, redactor);
  opts.observer = &masked;
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
  pipeline::RedactRecord(*redactor, outcome.record);
  outcome.signal = signals.first_signal();
  for (const std::string& problem : agents->MockExpectationFailures())
    outcome.mock_problems.push_back(redactor->Redact(problem));
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
