// Precedence, resolved once at load: every dial of every step takes its
// value from the step, then the agent entry, then the package default, and
// remembers which. The executor reads only this; it never looks a default up.
#ifndef STEPS_PIPELINE_RESOLVE_H_
#define STEPS_PIPELINE_RESOLVE_H_

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/duration.h"
#include "pipeline/model.h"
#include "process/process.h"

namespace steps::pipeline {

// Package defaults (DESIGN.md, "Precedence").
inline constexpr Millis kDefaultAgentTimeout = std::chrono::minutes(30);
inline constexpr int kDefaultAgentAttempts = 3;
inline constexpr int kDefaultTaskAttempts = 1;
inline constexpr int64_t kDefaultHostedMaxTurns = 30;
inline constexpr int64_t kDefaultMaxContextBytes = 256 * 1024;
inline constexpr Millis kDefaultToolTimeout = std::chrono::seconds(30);
inline constexpr int kDefaultFixAttempts = 1;
// How often `to:` routing may run one step in a job, the first run included.
inline constexpr int kDefaultMaxVisits = 3;

enum class DialOrigin {
  kStep,            // Written on the step.
  kRetryBlock,      // retry.max_attempts on the step.
  kFix,             // fix: { attempts } on the task that names the fixer.
  kAgentEntry,      // Written on the agents: entry.
  kJob,             // Written on the job (runner, slurm).
  kDefaults,        // Written under the pipeline's defaults:.
  kPackageDefault,  // Nobody wrote it.
  kCommandLine,     // Given on the command line (`--runner`).
};
// "step", "retry block", "fix", "agent entry", "job", "defaults",
// "default", "command line".
const char* DialOriginName(DialOrigin o);

template <typename T>
struct Dial {
  T value{};
  DialOrigin origin = DialOrigin::kPackageDefault;
  int line = 0;  // Where it was written; 0 for a default.
};

// The dials of one step (or one fixer invocation), resolved.
struct ResolvedDials {
  Dial<std::optional<Millis>> timeout;  // nullopt: no deadline.
  Dial<int> attempts;
  // Agent steps only.
  Dial<std::optional<int64_t>> max_turns;          // nullopt: no cap.
  Dial<std::optional<int64_t>> max_context_bytes;  // nullopt: whole files.
  Dial<std::optional<Millis>> llm_timeout;   // nullopt: the deadline only.
  Dial<std::optional<Millis>> tool_timeout;  // nullopt: the deadline only.
  Dial<std::optional<Budget>> budget;
  // Task, get, put and agent steps, and fixers: how commands are confined.
  // Step, then agent entry, then defaults:; package default none.
  Dial<SandboxSpec> sandbox;
  // Agents: protecting the provider's host. Agent entry, then defaults:;
  // package default off (nullopt).
  Dial<std::optional<RetryBudgetSpec>> retry_budget;
  Dial<std::optional<CircuitSpec>> circuit;
  // Task, get and put steps: where the scripts run. Step, then job, then
  // defaults:, then local; `--runner` on the command line over all of them.
  Dial<RunnerKind> runner;
  // With runner slurm: where Slurm places the job, each key from the step,
  // then the job, then defaults: (run_timeout is left to the executor).
  ClusterPlacement slurm;
  // With runner slurm: whether queue time counts against the attempt's
  // timeout, and whether a lost attempt is retried. Package default: no.
  Dial<bool> timeout_includes_queue;
  Dial<bool> retry_lost;
};

struct ResolvedStep {
  const Step* step = nullptr;
  const AgentEntry* agent = nullptr;  // Agent steps.
  ModelSource source;                 // Agent steps: entry, else defaults.
  ResolvedDials dials;
  // task/get/put with a retry block: waits before attempts 2..n.
  std::vector<Millis> retry_waits;
  std::optional<Millis> total_timeout;
  // The step cache key (hex SHA-256); empty for blocks. Covers what changes
  // the work, never timeout, attempts, retry or max_context_bytes.
  std::string identity;
  // A task's fixer, when it names one.
  const AgentEntry* fix_agent = nullptr;
  std::optional<ResolvedDials> fix_dials;
  // The agent entry of the step's `assert: {judge}`, when it names one,
  // with its source and dials (entry, then package default).
  const AgentEntry* judge_agent = nullptr;
  std::optional<ModelSource> judge_source;
  std::optional<ResolvedDials> judge_dials;
};

// What the command line says over the file.
struct PlanOptions {
  // `--runner`: every task, get and put step runs here. nullopt: as the
  // file says.
  std::optional<RunnerKind> runner;
};

// An immutable plan over a loaded pipeline. Thread-safe to read.
class ResolvedPlan {
 public:
  explicit ResolvedPlan(std::shared_ptr<const Pipeline> pipeline,
                        PlanOptions options = {});

  const Pipeline& pipeline() const { return *pipeline_; }
  // REQUIRES: `step` belongs to this plan's pipeline.
  const ResolvedStep& For(const Step& step) const;

 private:
  void ResolveAll(const std::vector<StepPtr>& steps, const Job& job);
  void ResolveRunner(const Step& s, const Job& job, ResolvedDials& d) const;
  std::shared_ptr<const Pipeline> pipeline_;
  const PlanOptions options_;
  std::unordered_map<const Step*, ResolvedStep> steps_;
};

// Exposed for tests: the identity hash of one step as the plan computes it.
std::string IdentityHash(const Pipeline& p, const Step& step,
                         const ResolvedDials& dials);

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_RESOLVE_H_
