// `steps approve` and `steps reject` from another shell while `steps run`
// waits on a gate: the decision reaches the run, and the refusals (an
// approver list that leaves the user out, a gate already decided, an
// unknown gate) say why and change nothing.
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace {

namespace test_support = steps::test_support;
using test_support::Has;

// Runs `pipeline` in the background in `dir`, waits (up to 10 s, looking
// every 50 ms) until it says its gate waits, runs `decide` (steps approve
// or reject ARGS, from the same folder), then waits for the run. Prints
// the decision's output, "RUN-EXIT N", then the run's output. `as`, when
// given, is a command prefix both run under (another user).
test_support::CliResult DecideWhileRunning(const test_support::TempDir& dir,
                                           const std::string& pipeline,
                                           const std::string& decide,
                                           const std::string& as = "") {
  std::ofstream(dir / "p.yaml") << pipeline;
  return test_support::RunInShell(
      dir.path(),
      as +
          " \"$STEPS\" run p.yaml --plain --state-dir state > run.out 2>&1 &\n"
          "pid=$!\n"
          "for i in $(seq 200); do grep -q 'waits for a decision' run.out && "
          "break; sleep 0.05; done\n" +
          as + " \"$STEPS\" " + decide +
          " --state-dir state 2>&1\n"
          "wait $pid; echo \"RUN-EXIT $?\"; cat run.out");
}

constexpr const char* kGate = R"(jobs:
- name: j
  plan:
  - gate: deploy
    message: Deploy?
    timeout: 20s
  - task: ship
    run: echo shipping
)";

TEST(GateCliTest, AnApprovalFromAnotherShellLetsTheRunGoOn) {
  test_support::TempDir dir;
  auto r = DecideWhileRunning(dir, kGate,
                              "approve \"\" deploy --reason 'looks good'");
  EXPECT_TRUE(Has(r.out, "Approved gate 'deploy' (j:1) of run")) << r.out;
  EXPECT_TRUE(Has(r.out, "(via cli)")) << r.out;
  EXPECT_TRUE(Has(r.out, "RUN-EXIT 0")) << r.out;
  EXPECT_TRUE(Has(r.out, "ship | shipping")) << r.out;
  auto show = test_support::RunSteps(dir.path(), "show --state-dir state");
  EXPECT_TRUE(Has(show.out, "Approved: looks good")) << show.out;
  // Decided once: a second decision is refused and says how it ended.
  auto again =
      test_support::RunSteps(dir.path(), "reject \"\" deploy --state-dir state");
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_TRUE(Has(again.out, "was already approved by")) << again.out;
}

TEST(GateCliTest, ARejectionFailsTheRunWithItsReason) {
  test_support::TempDir dir;
  auto r = DecideWhileRunning(dir, kGate, "reject \"\" j:1 --reason 'not now'");
  EXPECT_TRUE(Has(r.out, "Rejected gate 'deploy'")) << r.out;
  EXPECT_TRUE(Has(r.out, "RUN-EXIT 1")) << r.out;
  EXPECT_TRUE(Has(r.out, "GATE_REJECTED: Gate 'deploy' was rejected by"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "not now")) << r.out;
  EXPECT_FALSE(Has(r.out, "shipping")) << r.out;
}

TEST(GateCliTest, AUserNotAmongTheApproversIsRefused) {
  test_support::TempDir dir;
  auto r = DecideWhileRunning(dir, R"(jobs:
- name: j
  plan:
  - gate: deploy
    approvers: [somebody-else]
    timeout: 1s
)",
                              "approve \"\" deploy");
  EXPECT_TRUE(Has(r.out, "may be decided only by somebody-else; you are"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "RUN-EXIT 1")) << r.out;
  EXPECT_TRUE(Has(r.out, "GATE_TIMEOUT: Gate 'deploy' got no decision within 1s"))
      << r.out;
}

// Approvers are checked against the user database's name for the uid:
// $USER is anybody's to set. A uid with no name there is "uid#N", which
// no approvers list can hold.
TEST(GateCliTest, AUidWithNoUserNameIsNoApproverWhateverUserSays) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "runs steps as a uid with no user name: needs root";
  }
  constexpr uid_t kNameless = 54321;
  if (getpwuid(kNameless) != nullptr) {
    GTEST_SKIP() << "uid " << kNameless << " has a user name here";
  }
  test_support::TempDir dir;
  ASSERT_EQ(chmod(dir.path().c_str(), 0777), 0);
  const std::string as =
      "setpriv --reuid=54321 --regid=54321 --clear-groups "
      "env USER=alice LOGNAME=alice HOME=\"$PWD\"";
  auto r = DecideWhileRunning(dir, R"(jobs:
- name: j
  plan:
  - gate: deploy
    approvers: [alice]
    timeout: 2s
)",
                              "approve \"\" deploy", as);
  EXPECT_TRUE(Has(r.out, "may be decided only by alice; you are uid#54321"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "RUN-EXIT 1")) << r.out;
  EXPECT_TRUE(
      Has(r.out, "GATE_TIMEOUT: Gate 'deploy' got no decision within 2s"))
      << r.out;
}

TEST(GateCliTest, AnUnknownGateIsNamedWithTheGatesThereAre) {
  test_support::TempDir dir;
  auto r = DecideWhileRunning(dir, R"(jobs:
- name: j
  plan:
  - gate: deploy
    timeout: 1s
)",
                              "approve \"\" nope");
  EXPECT_TRUE(Has(r.out, "has no gate 'nope'; its gates: 'deploy' (j:1)"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "RUN-EXIT 1")) << r.out;
}

}  // namespace
