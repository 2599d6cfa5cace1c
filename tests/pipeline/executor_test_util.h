// Running pipelines for real in tests: a temporary state folder, the local
// process launcher, and an observer that records every event with its time.
#ifndef STEPS_TESTS_PIPELINE_EXECUTOR_TEST_UTIL_H_
#define STEPS_TESTS_PIPELINE_EXECUTOR_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>

#include "pipeline/executor.h"
#include "pipeline/loader.h"
#include "process/local_launcher.h"

namespace steps::pipeline {

// Records events; thread-safe. Optional hooks let a test act on an event.
class RecordingObserver : public RunObserver {
 public:
  explicit RecordingObserver(Clock& clock) : clock_(clock) {}

  struct AttemptStart {
    std::string step;
    int attempt;
    SteadyTime at;
  };

  void OnStepStart(const StepRef& s, std::optional<SteadyTime>) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++running_;
    max_running_ = std::max(max_running_, running_);
    if (on_step_start) on_step_start(s);
  }
  void OnAttemptStart(const StepRef& s, int attempt, int,
                      std::optional<SteadyTime>) override {
    std::lock_guard<std::mutex> lock(mu_);
    attempt_starts.push_back({s.name, attempt, clock_.Now()});
  }
  void OnAttemptEnd(const StepRef& s, const AttemptRecord& a) override {
    std::lock_guard<std::mutex> lock(mu_);
    attempt_ends[s.name].push_back(clock_.Now());
    (void)a;
  }
  void OnOutput(const StepRef& s, OutputStream,
                std::string_view line) override {
    std::lock_guard<std::mutex> lock(mu_);
    output[s.name] += std::string(line) + "\n";
  }
  void OnLog(const StepRef& s, std::string_view line) override {
    std::lock_guard<std::mutex> lock(mu_);
    logs[s.name].push_back(std::string(line));
  }
  void OnAgentTurn(const StepRef& s, const agent::AgentTurnRecord&) override {
    std::lock_guard<std::mutex> lock(mu_);
    durability.push_back("turn " + s.id);
  }
  void OnCheckpoints(
      const StepRef& s,
      const std::vector<agent::ConversationCheckpoint>& cps) override {
    std::lock_guard<std::mutex> lock(mu_);
    durability.push_back("durable " + s.id + " " + std::to_string(cps.size()));
  }
  void OnStepEnd(const StepRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    --running_;
    steps.push_back(r);
    step_ended_.notify_all();
  }

  // Blocks until at least `n` steps have ended (the run goes on in another
  // thread).
  void WaitForStepEnds(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    step_ended_.wait(lock, [&] { return steps.size() >= n; });
  }

  int max_running() const { return max_running_; }
  const StepRecord* Step(const std::string& name) const {
    for (const StepRecord& r : steps) {
      if (r.ref.name == name) return &r;
    }
    return nullptr;
  }

  std::function<void(const StepRef&)> on_step_start;
  // "turn ID" for each turn, "durable ID N" for each durable point of N
  // checkpoints, in order.
  std::vector<std::string> durability;
  std::vector<AttemptStart> attempt_starts;
  std::map<std::string, std::vector<SteadyTime>> attempt_ends;
  std::map<std::string, std::string> output;
  std::map<std::string, std::vector<std::string>> logs;
  std::vector<StepRecord> steps;

 private:
  Clock& clock_;
  std::mutex mu_;
  std::condition_variable step_ended_;
  int running_ = 0;
  int max_running_ = 0;
};

// A pipeline run in a fresh temporary state folder, removed afterwards.
class PipelineRun {
 public:
  explicit PipelineRun(const std::string& yaml, Clock* clock = &RealClock())
      : clock_(clock), observer_(*clock) {
    char tmpl[] = "/tmp/steps-exec-XXXXXX";
    state_dir_ = mkdtemp(tmpl);
    LoadResult r = LoadPipelineText(yaml, "test.yaml");
    EXPECT_TRUE(r.pipeline) << r.diagnostics.FormatAll();
    if (r.pipeline) plan_ = std::make_unique<ResolvedPlan>(r.pipeline);
    options.clock = clock_;
    options.launcher = &launcher_;
    options.observer = &observer_;
    options.state_dir = state_dir_;
    options.kill_grace = Millis(500);
  }
  ~PipelineRun() {
    std::error_code ec;
    std::filesystem::remove_all(state_dir_, ec);
  }

  // Runs every job (or `jobs`); returns the run record.
  RunRecord Run(const std::vector<std::string>& jobs = {}) {
    if (!plan_) return {};
    Executor ex(*plan_, options);
    run_dir_ = ex.run_dir();
    return ex.Run(jobs);
  }
  JobRecord RunJob() {
    RunRecord r = Run();
    return r.jobs.empty() ? JobRecord{} : r.jobs[0];
  }

  RecordingObserver& observer() { return observer_; }
  // The loaded plan; null when the text did not load.
  const ResolvedPlan* plan() const { return plan_.get(); }
  const std::string& run_dir() const { return run_dir_; }
  const std::string& state_dir() const { return state_dir_; }

  ExecutorOptions options;

 private:
  Clock* clock_;
  LocalProcessLauncher launcher_;
  RecordingObserver observer_;
  std::unique_ptr<ResolvedPlan> plan_;
  std::string state_dir_;
  std::string run_dir_;
};

inline std::vector<std::string> Names(
    std::initializer_list<const char*> names) {
  return std::vector<std::string>(names.begin(), names.end());
}

}  // namespace steps::pipeline

#endif  // STEPS_TESTS_PIPELINE_EXECUTOR_TEST_UTIL_H_
