// Gate steps through the executor, on the fake clock, decided by a scripted
// desk: a decision, a rejection, the expiry at exactly the timeout (and a
// decision found at that instant), `default:`, the job's deadline, an
// abort, a decision that wins the race with the expiry, and cells.
#include "pipeline/gate.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "executor_test_util.h"

namespace steps::pipeline {
namespace {

using std::chrono::milliseconds;

// Decides each gate (by step name and cell) once the clock reaches a time.
class ScriptedDesk : public GateDesk {
 public:
  explicit ScriptedDesk(Clock& clock) : clock_(clock) {}

  struct Plan {
    Millis after;  // From when the gate opened.
    GateVerdict verdict;
  };
  void Decide(const std::string& key, Millis after, GateDecision d,
              std::string reason = "") {
    GateVerdict v;
    v.decision = d;
    v.by = "ops@server-1";
    v.via = "cli";
    v.reason = std::move(reason);
    plans_[key] = {after, v};
  }
  // Settle answers with this decision instead: a person decided just
  // before the gate ended.
  std::optional<GateVerdict> late;

  Status Open(const StepRef& step, const GateOpening& opening) override {
    std::lock_guard<std::mutex> lock(mu_);
    opened_[Key(step)] = clock_.Now();
    openings.push_back(opening);
    return Status::Ok();
  }
  std::optional<GateVerdict> Look(const StepRef& step) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++looks;
    auto plan = plans_.find(Key(step));
    if (plan == plans_.end()) return std::nullopt;
    if (clock_.Now() - opened_[Key(step)] < plan->second.after)
      return std::nullopt;
    return plan->second.verdict;
  }
  GateVerdict Settle(const StepRef& step, const GateVerdict& ending) override {
    std::lock_guard<std::mutex> lock(mu_);
    (void)step;
    settled.push_back(ending.how);
    return late ? *late : ending;
  }

  std::vector<GateOpening> openings;
  std::vector<GateVerdict::How> settled;
  int looks = 0;

 private:
  static std::string Key(const StepRef& s) {
    return s.cell.empty() ? s.name : s.name + "[" + s.cell + "]";
  }
  Clock& clock_;
  std::mutex mu_;
  std::map<std::string, SteadyTime> opened_;
  std::map<std::string, Plan> plans_;
};

struct GateRun {
  explicit GateRun(const std::string& yaml)
      : clock(/*auto_advance=*/true), run(yaml, &clock), desk(clock) {
    run.options.gates = &desk;
  }
  FakeClock clock;
  PipelineRun run;
  ScriptedDesk desk;
};

const char* kDeploy = R"(jobs:
- name: j
  plan:
  - gate: deploy
    message: Deploy to production?
    approvers: [ops]
    timeout: 10s
    on_failure: { task: told, run: echo told }
  - task: after
    run: echo after
)";

TEST(GateTest, AnApprovedGateSucceedsWhenDecided) {
  GateRun g(kDeploy);
  g.desk.Decide("deploy", milliseconds(3000), GateDecision::kApprove, "ok");
  JobRecord job = g.run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kSucceeded);
  EXPECT_EQ(job.execution, Names({"deploy", "after"}));
  const StepRecord* gate = g.run.observer().Step("deploy");
  ASSERT_NE(gate, nullptr);
  ASSERT_TRUE(gate->gate.has_value());
  EXPECT_EQ(gate->gate->how, GateVerdict::How::kDecided);
  EXPECT_EQ(gate->gate->by, "ops@server-1");
  EXPECT_EQ(gate->output, "ok");
  // Looked at every 250 ms: found at 3 s exactly.
  EXPECT_EQ(gate->duration, milliseconds(3000));
  ASSERT_EQ(g.desk.openings.size(), 1u);
  EXPECT_EQ(g.desk.openings[0].message, "Deploy to production?");
  EXPECT_EQ(g.desk.openings[0].approvers, Names({"ops"}));
  ASSERT_TRUE(g.desk.openings[0].deadline.has_value());
  EXPECT_TRUE(g.desk.settled.empty()) << "a decided gate needs no settling";
}

TEST(GateTest, ARejectedGateFailsAndFiresItsOnFailure) {
  GateRun g(kDeploy);
  g.desk.Decide("deploy", milliseconds(500), GateDecision::kReject,
                "not on a Friday");
  JobRecord job = g.run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kFailed);
  EXPECT_EQ(job.execution, Names({"deploy", "told"}));
  const StepRecord* gate = g.run.observer().Step("deploy");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->outcome, Outcome::kFailed);
  EXPECT_EQ(gate->error,
            "GATE_REJECTED: Gate 'deploy' was rejected by ops@server-1 (via "
            "cli): not on a Friday");
}

TEST(GateTest, WithoutADecisionItFailsAtExactlyItsTimeout) {
  GateRun g(kDeploy);
  JobRecord job = g.run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kFailed);
  const StepRecord* gate = g.run.observer().Step("deploy");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->error,
            "GATE_TIMEOUT: Gate 'deploy' got no decision within 10s");
  EXPECT_EQ(gate->duration, milliseconds(10000));
  EXPECT_EQ(g.desk.settled,
            std::vector<GateVerdict::How>{GateVerdict::How::kExpired});
  EXPECT_EQ(job.execution, Names({"deploy", "told"}));
}

TEST(GateTest, ADecisionThereAtTheDeadlineItselfCounts) {
  GateRun g(kDeploy);
  g.desk.Decide("deploy", milliseconds(10000), GateDecision::kApprove);
  JobRecord job = g.run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kSucceeded);
  EXPECT_TRUE(g.desk.settled.empty());
}

TEST(GateTest, ADecisionMadeJustBeforeTheExpiryWins) {
  GateRun g(kDeploy);
  GateVerdict late;
  late.decision = GateDecision::kApprove;
  late.by = "ops@server-1";
  late.via = "ui";
  g.desk.late = late;
  JobRecord job = g.run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kSucceeded);
  const StepRecord* gate = g.run.observer().Step("deploy");
  ASSERT_NE(gate, nullptr);
  ASSERT_TRUE(gate->gate.has_value());
  EXPECT_EQ(gate->gate->via, "ui");
}

TEST(GateTest, ItsDefaultDecidesOnExpiry) {
  for (const char* decision : {"approve", "reject"}) {
    GateRun g(std::string(R"(jobs:
- name: j
  plan:
  - gate: deploy
    timeout: 2s
    default: )") +
              decision + "\n");
    JobRecord job = g.run.RunJob();
    const StepRecord* gate = g.run.observer().Step("deploy");
    ASSERT_NE(gate, nullptr);
    ASSERT_TRUE(gate->gate.has_value());
    EXPECT_EQ(gate->gate->via, "default");
    EXPECT_EQ(gate->duration, milliseconds(2000));
    if (std::string(decision) == "approve") {
      EXPECT_EQ(job.outcome, Outcome::kSucceeded);
    } else {
      EXPECT_EQ(job.outcome, Outcome::kFailed);
      EXPECT_EQ(gate->error,
                "GATE_REJECTED: Gate 'deploy' got no decision within 2s and "
                "its default rejects it");
    }
  }
}

TEST(GateTest, TheJobsDeadlineEndsAWaitingGateWithoutItsDefault) {
  GateRun g(R"(jobs:
- name: j
  timeout: 5s
  plan:
  - gate: deploy
    timeout: 10s
    default: approve
)");
  JobRecord job = g.run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kFailed);
  const StepRecord* gate = g.run.observer().Step("deploy");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->duration, milliseconds(5000));
  EXPECT_EQ(gate->error,
            "GATE_TIMEOUT: Gate 'deploy' was still waiting when job 'j' "
            "passed its timeout of 5s");
  EXPECT_EQ(g.desk.settled,
            std::vector<GateVerdict::How>{GateVerdict::How::kCut});
}

TEST(GateTest, AGateWithoutTimeoutWaitsUntilTheJobsDeadline) {
  GateRun g(R"(jobs:
- name: j
  timeout: 1m
  plan:
  - gate: deploy
)");
  JobRecord job = g.run.RunJob();
  const StepRecord* gate = g.run.observer().Step("deploy");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->outcome, Outcome::kFailed);
  EXPECT_EQ(gate->duration, milliseconds(60000));
}

TEST(GateTest, AnAbortEndsAWaitingGateAtOnce) {
  FakeClock clock;  // Not advancing: only the abort can end the wait.
  PipelineRun run(kDeploy, &clock);
  ScriptedDesk desk(clock);
  run.options.gates = &desk;
  std::thread aborter([&] {
    clock.WaitForSleepers(1);
    run.options.abort.Cancel(CancelReason::kAbort);
  });
  JobRecord job = run.RunJob();
  aborter.join();
  EXPECT_EQ(job.outcome, Outcome::kAborted);
  const StepRecord* gate = run.observer().Step("deploy");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->outcome, Outcome::kAborted);
  EXPECT_EQ(desk.settled,
            std::vector<GateVerdict::How>{GateVerdict::How::kAborted});
}

TEST(GateTest, AGateInAnAcrossWaitsPerCell) {
  GateRun g(R"(jobs:
- name: j
  plan:
  - across: [{var: env, values: [staging, prod]}]
    do:
    - gate: deploy
      message: "Deploy to {{ .env }}?"
      timeout: 10s
)");
  g.desk.Decide("deploy[env=staging]", milliseconds(1000),
                GateDecision::kApprove);
  JobRecord job = g.run.RunJob();
  EXPECT_EQ(job.outcome, Outcome::kFailed) << "prod was never decided";
  ASSERT_EQ(g.desk.openings.size(), 2u);
  std::set<std::string> messages;
  for (const GateOpening& o : g.desk.openings) messages.insert(o.message);
  EXPECT_EQ(messages,
            (std::set<std::string>{"Deploy to staging?", "Deploy to prod?"}));
  int succeeded = 0, failed = 0;
  for (const StepRecord& s : g.run.observer().steps) {
    if (s.ref.name != "deploy") continue;
    succeeded += s.outcome == Outcome::kSucceeded;
    failed += s.outcome == Outcome::kFailed;
  }
  EXPECT_EQ(succeeded, 1);
  EXPECT_EQ(failed, 1);
}

TEST(GateTest, WithoutADeskAGateErrorsAndSaysSo) {
  FakeClock clock(true);
  PipelineRun run(kDeploy, &clock);
  JobRecord job = run.RunJob();
  const StepRecord* gate = run.observer().Step("deploy");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->outcome, Outcome::kErrored);
  EXPECT_EQ(gate->error,
            "gate 'deploy' cannot run: nothing here can decide it");
}

}  // namespace
}  // namespace steps::pipeline
