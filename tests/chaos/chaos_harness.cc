// The chaos harness: kills `steps run` with SIGKILL at chosen and random
// moments while it runs a pipeline with tasks side by side, a multi-turn
// agent conversation whose tool calls append to a file, and a task its
// fixer repairs; then runs it again (`--resume-if-interrupted`, as a re-run
// CI job would) until the run ends. It counts what a durable run must never
// do (docs/resume.md):
//   duplicate model requests   a request sent again although its answer was
//                              stored (from the model server's own log);
//   duplicate tool calls       a tool call with a stored result run again
//                              (from the file the calls append to);
//   duplicate task steps       a task recorded as ended run again;
//   divergent final states     a run whose records or files differ from an
//                              uninterrupted run's;
//   lost records               a record durable at a kill and gone, or
//                              changed, at the end; or one the
//                              uninterrupted run has and the trial lacks.
// and what it may do, at least once: send again a request whose answer was
// never stored, run again a tool call that had started and had no result.
//
//   chaos_harness --steps BUILD/src/cli/steps [--kills N] [--seed S]
//                 [--latency-ms MS] [--keep DIR]
//
// Trials first kill the run after each of its store commits in turn (one
// kill per trial, then a clean resume), then chain up to four kills at a
// random commit or a random time, until N kills have been made. Exit code 0
// when every count that must be 0 is.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "chaos_model.h"
#include "chaos_process.h"
#include "chaos_state.h"

namespace steps::chaos {
namespace {

struct Options {
  std::string steps;
  int kills = 300;
  unsigned seed = 1;
  int latency_ms = 2;
  std::string keep;  // Where failing trials' folders are copied.
};

struct Counts {
  int trials = 0;
  int kills = 0;
  int commit_kills = 0;
  int time_kills = 0;
  int duplicate_requests = 0;
  int duplicate_tool_calls = 0;
  int duplicate_tasks = 0;
  int divergent = 0;
  int lost = 0;
  int faults = 0;  // Hangs, unexpected exits, refused requests.
  int resent_unstored = 0;
  int rerun_unfinished = 0;

  bool Clean() const {
    return duplicate_requests + duplicate_tool_calls + duplicate_tasks +
               divergent + lost + faults ==
           0;
  }
};

class Harness {
 public:
  Harness(Options options, ChaosModel& model)
      : options_(std::move(options)), model_(model), random_(options_.seed) {}

  int Run();

 private:
  struct Trial {
    int number = 0;
    std::string out;
    std::vector<KillPlan> plans;
    std::vector<std::string> problems;
  };

  bool RunBaseline();
  // Runs one trial to its end; false when it could not (a fault).
  bool RunTrial(std::vector<KillPlan> plans);
  void CheckIncarnation(Trial& trial, int n, const Snapshot& before,
                        const Snapshot& after);
  void CheckDurable(Trial& trial, const Snapshot& before,
                    const Snapshot& after);
  void CheckFinal(Trial& trial);
  void Problem(Trial& trial, int& counter, const std::string& what);
  KillPlan RandomPlan();
  void Report() const;

  Options options_;
  ChaosModel& model_;
  std::mt19937 random_;
  Counts counts_;
  std::map<std::string, std::string> baseline_;
  std::chrono::microseconds baseline_time_{0};
  int64_t commit_points_ = 0;  // Commits of an uninterrupted run, once known.
  std::filesystem::path work_;
};

// Whether the trial's run is recorded as ended (not running, not stopped
// early): nothing is left to resume.
bool RunEnded(const std::string& out) {
  const auto rows = Query(StoreOf(out), "SELECT status FROM runs");
  return rows.size() == 1 && rows[0][0] != "running" &&
         rows[0][0] != "aborted" && rows[0][0] != "interrupted";
}

void Harness::Problem(Trial& trial, int& counter, const std::string& what) {
  ++counter;
  trial.problems.push_back(what);
}

void Harness::CheckIncarnation(Trial& trial, int n, const Snapshot& before,
                               const Snapshot& after) {
  const std::string at = "incarnation " + std::to_string(n) + ": ";
  std::set<std::string> sent;
  const std::vector<Answered> log = model_.log();
  for (const Answered& a : log) {
    if (a.incarnation != n) continue;
    if (before.stored_answers.count(a.tag))
      Problem(trial, counts_.duplicate_requests,
              at + "request for '" + a.tag +
                  "' sent again after its answer"
                  " was stored");
    else if (!sent.insert(a.tag).second)
      Problem(trial, counts_.duplicate_requests,
              at + "request for '" + a.tag + "' sent twice");
    else if (n > 1 &&
             std::any_of(log.begin(), log.end(), [&](const Answered& b) {
               return b.incarnation < n && b.tag == a.tag;
             }))
      ++counts_.resent_unstored;
  }
  for (const auto& [line, now] : after.appended) {
    auto it = before.appended.find(line);
    const int was = it == before.appended.end() ? 0 : it->second;
    if (now <= was) continue;
    if (before.finished_calls.count(line))
      Problem(trial, counts_.duplicate_tool_calls,
              at + "tool call " + line +
                  " ran again after its result was"
                  " stored");
    else if (now - was > 1)
      Problem(trial, counts_.duplicate_tool_calls,
              at + "tool call " + line + " ran " + std::to_string(now - was) +
                  " times");
    else if (was > 0)
      ++counts_.rerun_unfinished;
  }
  for (const auto& [line, now] : after.tasks) {
    auto it = before.tasks.find(line);
    const int was = it == before.tasks.end() ? 0 : it->second;
    if (now > was && before.ended_tasks.count(line))
      Problem(trial, counts_.duplicate_tasks,
              at + "task " + line + " ran again after it had ended");
  }
  CheckDurable(trial, before, after);
}

void Harness::CheckDurable(Trial& trial, const Snapshot& before,
                           const Snapshot& after) {
  for (const auto& [key, value] : before.durable) {
    auto it = after.durable.find(key);
    if (it == after.durable.end())
      Problem(trial, counts_.lost, key + ": stored, then gone");
    else if (it->second != value)
      Problem(trial, counts_.lost,
              key + ": stored as `" + value + "`, later `" + it->second + "`");
  }
}

void Harness::CheckFinal(Trial& trial) {
  const std::map<std::string, std::string> final = FinalRecords(trial.out);
  bool divergent = false;
  for (const auto& [key, value] : baseline_) {
    auto it = final.find(key);
    if (it == final.end()) {
      Problem(trial, counts_.lost, key + ": missing at the end");
    } else if (it->second != value) {
      trial.problems.push_back(key + ": `" + it->second + "`, uninterrupted `" +
                               value + "`");
      divergent = true;
    }
  }
  for (const auto& [key, value] : final) {
    if (!baseline_.count(key)) {
      trial.problems.push_back(key + ": `" + value +
                               "`, which an uninterrupted run lacks");
      divergent = true;
    }
  }
  if (divergent) ++counts_.divergent;
}

bool Harness::RunTrial(std::vector<KillPlan> plans) {
  Trial trial;
  trial.number = ++counts_.trials;
  trial.out = (work_ / ("trial-" + std::to_string(trial.number))).string();
  trial.plans = plans;
  std::filesystem::create_directories(trial.out);
  model_.StartTrial(trial.out);
  WritePipeline(trial.out, model_.port());
  Snapshot before;
  bool ended = false;
  for (int n = 1; n <= 12 && !ended; ++n) {
    const KillPlan plan =
        n <= static_cast<int>(plans.size()) ? plans[n - 1] : KillPlan{};
    model_.SetIncarnation(n);
    const Incarnation inc = RunIncarnation(options_.steps, trial.out, n, plan,
                                           std::chrono::seconds(120));
    Snapshot after = TakeSnapshot(trial.out);
    CheckIncarnation(trial, n, before, after);
    before = std::move(after);
    switch (inc.end) {
      case Incarnation::End::kKilled:
        ++counts_.kills;
        ++(plan.kind == KillPlan::Kind::kAfterTime ? counts_.time_kills
                                                   : counts_.commit_kills);
        if (plan.kind == KillPlan::Kind::kNone)
          Problem(trial, counts_.faults,
                  "incarnation died unasked: " + inc.log);
        // Killed after the run's end was stored: the run is over, and
        // running the pipeline again would start a new one.
        ended = RunEnded(trial.out);
        break;
      case Incarnation::End::kExited:
        if (plan.kind == KillPlan::Kind::kAfterCommits && commit_points_ == 0 &&
            n == 1)
          commit_points_ = plan.commits - 1;
        if (inc.exit_code != 0)
          Problem(trial, counts_.faults,
                  "incarnation " + std::to_string(n) + " exited " +
                      std::to_string(inc.exit_code) + ": " + inc.log);
        ended = true;
        break;
      case Incarnation::End::kHung:
        Problem(trial, counts_.faults, "incarnation hung: " + inc.log);
        ended = true;
        break;
      case Incarnation::End::kNotStarted:
        Problem(trial, counts_.faults, "steps could not be started");
        ended = true;
        break;
    }
  }
  if (!ended) Problem(trial, counts_.faults, "no end after 12 incarnations");
  for (const std::string& r : model_.refused())
    Problem(trial, counts_.faults, "model refused " + r);
  if (ended) CheckFinal(trial);
  if (!trial.problems.empty()) {
    std::printf("trial %d (", trial.number);
    for (size_t i = 0; i < plans.size(); ++i)
      std::printf("%s%s", i ? ", " : "", plans[i].Describe().c_str());
    std::printf("):\n");
    for (const std::string& p : trial.problems)
      std::printf("  %s\n", p.c_str());
    if (!options_.keep.empty()) {
      std::error_code ec;
      const std::string to =
          options_.keep + "/trial-" + std::to_string(trial.number);
      std::filesystem::create_directories(to, ec);
      std::filesystem::copy(trial.out, to,
                            std::filesystem::copy_options::recursive, ec);
      std::printf("  kept in %s\n", to.c_str());
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(trial.out, ec);
  return trial.problems.empty();
}

bool Harness::RunBaseline() {
  const std::string out = (work_ / "baseline").string();
  std::filesystem::create_directories(out);
  model_.StartTrial(out);
  WritePipeline(out, model_.port());
  const auto start = std::chrono::steady_clock::now();
  const Incarnation inc =
      RunIncarnation(options_.steps, out, 1, {}, std::chrono::seconds(120));
  baseline_time_ = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  baseline_ = FinalRecords(out);
  if (inc.end != Incarnation::End::kExited || inc.exit_code != 0 ||
      baseline_["runs"] != "1 | succeeded | p.yaml") {
    std::printf(
        "chaos: the uninterrupted run did not succeed; its output is"
        " in %s\n",
        inc.log.c_str());
    return false;
  }
  return true;
}

KillPlan Harness::RandomPlan() {
  KillPlan plan;
  if (std::uniform_int_distribution<int>(0, 1)(random_) == 0) {
    plan.kind = KillPlan::Kind::kAfterCommits;
    plan.commits = std::uniform_int_distribution<int64_t>(
        1, std::max<int64_t>(commit_points_, 1))(random_);
  } else {
    plan.kind = KillPlan::Kind::kAfterTime;
    plan.time =
        std::chrono::microseconds(std::uniform_int_distribution<int64_t>(
            0, baseline_time_.count())(random_));
  }
  return plan;
}

void Harness::Report() const {
  const Counts& c = counts_;
  std::printf(
      "chaos: %d kills (%d after a store commit, %d at a random time) in %d "
      "trials; an uninterrupted run makes %lld commits in %.0f ms\n",
      c.kills, c.commit_kills, c.time_kills, c.trials,
      static_cast<long long>(commit_points_),
      static_cast<double>(baseline_time_.count()) / 1000.0);
  std::printf("  duplicate model requests        %d\n", c.duplicate_requests);
  std::printf("  duplicate finished tool calls   %d\n", c.duplicate_tool_calls);
  std::printf("  duplicate finished task steps   %d\n", c.duplicate_tasks);
  std::printf("  divergent final states          %d\n", c.divergent);
  std::printf("  lost records                    %d\n", c.lost);
  std::printf("  faults (hangs, failed resumes)  %d\n", c.faults);
  std::printf(
      "  allowed: unanswered requests sent again %d, unfinished tool "
      "calls run again %d\n",
      c.resent_unstored, c.rerun_unfinished);
}

int Harness::Run() {
  char tmpl[] = "/tmp/steps-chaos-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 2;
  work_ = tmpl;
  if (!RunBaseline()) return 1;
  // Every commit point in turn, until a run's commits are all passed.
  for (int64_t k = 1; commit_points_ == 0 && counts_.kills < options_.kills;
       ++k) {
    KillPlan plan{KillPlan::Kind::kAfterCommits, k, {}};
    RunTrial({plan});
    if (k > 100000) break;
  }
  while (counts_.kills < options_.kills) {
    std::vector<KillPlan> plans;
    const int chain = std::uniform_int_distribution<int>(1, 4)(random_);
    for (int i = 0; i < chain; ++i) plans.push_back(RandomPlan());
    RunTrial(plans);
  }
  Report();
  std::error_code ec;
  std::filesystem::remove_all(work_, ec);
  return counts_.Clean() ? 0 : 1;
}

int Usage() {
  std::fprintf(stderr,
               "usage: chaos_harness --steps PATH [--kills N] [--seed S]"
               " [--latency-ms MS] [--keep DIR]\n");
  return 64;
}

}  // namespace
}  // namespace steps::chaos

int main(int argc, char** argv) {
  using steps::chaos::Options;
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return steps::chaos::Usage();
    const std::string value = argv[++i];
    if (arg == "--steps")
      options.steps = std::filesystem::absolute(value);
    else if (arg == "--kills")
      options.kills = std::atoi(value.c_str());
    else if (arg == "--seed")
      options.seed = static_cast<unsigned>(std::atol(value.c_str()));
    else if (arg == "--latency-ms")
      options.latency_ms = std::atoi(value.c_str());
    else if (arg == "--keep")
      options.keep = value;
    else
      return steps::chaos::Usage();
  }
  if (options.steps.empty() || options.kills < 1 || options.latency_ms < 0)
    return steps::chaos::Usage();
  steps::chaos::ChaosModel model(std::chrono::milliseconds(options.latency_ms));
  if (model.port() <= 0) {
    std::fprintf(stderr, "chaos_harness: the model server could not listen\n");
    return 2;
  }
  std::printf("chaos: seed %u, %d kills, model latency %d ms\n", options.seed,
              options.kills, options.latency_ms);
  std::fflush(stdout);
  return steps::chaos::Harness(options, model).Run();
}
