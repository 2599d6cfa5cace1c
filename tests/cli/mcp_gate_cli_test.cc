// The approve and reject tools of `steps mcp` against a `steps run` waiting
// on its gates in another process: a decision reaches the run, recorded as
// the server's OS user (via mcp) with its reason; a gate whose approvers
// leave that user out refuses it and keeps waiting; a gate already decided,
// an unknown gate and bad arguments are refused, saying why.
//
// Timing: every wait is for a condition (a line in the run's log, the
// run's exit), bounded far above what it needs.
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "common/steps_cli.h"
#include "common/temp_dir.h"
#include "mcp_session.h"

namespace {

using nlohmann::json;
using steps::test_support::Has;
using steps::test_support::IsError;
using steps::test_support::McpSession;
using steps::test_support::RunSteps;
using steps::test_support::SpawnSteps;
using steps::test_support::TempDir;
using steps::test_support::Text;

std::string Me() {
  const passwd* pw = getpwuid(geteuid());
  return pw ? pw->pw_name : "";
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `steps run p.yaml --plain` in the background, its output in run.log.
class GatedRun {
 public:
  GatedRun(const TempDir& dir, const std::string& pipeline) : dir_(dir) {
    dir.Write("p.yaml", pipeline);
    pid_ =
        SpawnSteps(dir.path(), {"run", "p.yaml", "--plain"}, dir / "run.log");
    EXPECT_GT(pid_, 0);
  }
  ~GatedRun() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  // Waits (up to 60 s) until the log holds `text`; whether it did.
  bool WaitForLog(const std::string& text) {
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < give_up) {
      if (Has(Log(), text)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  std::string Log() const { return ReadAll(dir_ / "run.log"); }
  // The run's id, from the approve command its log names.
  std::string RunId() const {
    std::smatch m;
    const std::string log = Log();
    return std::regex_search(log, m, std::regex(R"(steps approve (\S+) )"))
               ? m[1].str()
               : "";
  }
  // The run's exit code once it ends (bounded at 60 s); -1 if it did not.
  int Wait() {
    return steps::test_support::WaitForExit(pid_, std::chrono::seconds(60));
  }

 private:
  const TempDir& dir_;
  pid_t pid_ = -1;
};

// The gate record of step `name` in `steps show --json`.
json GateOf(const TempDir& dir, const std::string& name) {
  json run =
      json::parse(RunSteps(dir.path(), "show --json").out, nullptr, false);
  if (run.is_discarded()) return json();
  for (const json& job : run["jobs"])
    for (const json& s : job["steps"])
      if (s["name"] == name) return s["gate"];
  return json();
}

constexpr const char* kOneGate = R"(jobs:
- name: j
  plan:
  - gate: deploy
    message: Deploy?
    timeout: 60s
  - task: ship
    run: echo shipping
)";

TEST(McpGateCliTest, AnApprovalReachesTheRunAsTheServersUser) {
  TempDir dir;
  GatedRun run(dir, kOneGate);
  ASSERT_TRUE(run.WaitForLog("waits for a decision")) << run.Log();
  const std::string id = run.RunId();
  ASSERT_FALSE(id.empty()) << run.Log();
  McpSession s(dir.path());
  s.Initialize();

  json ok = s.Call(1, "approve",
                   {{"run", id}, {"step", "deploy"}, {"reason", "ship it"}});
  ASSERT_FALSE(IsError(ok)) << ok;
  EXPECT_TRUE(Has(Text(ok), "Approved gate 'deploy' (j:1) of run " + id))
      << Text(ok);
  EXPECT_TRUE(Has(Text(ok), "Taken by: " + Me() + "@")) << Text(ok);
  EXPECT_TRUE(Has(Text(ok), "(via mcp)")) << Text(ok);
  const json& gate = ok["result"]["structuredContent"];
  EXPECT_EQ(gate["state"], "approved");
  EXPECT_EQ(gate["step"], "j:1");
  EXPECT_EQ(gate["reason"], "ship it");

  EXPECT_EQ(run.Wait(), 0) << run.Log();
  EXPECT_TRUE(Has(run.Log(), "ship | shipping")) << run.Log();
  const json record = GateOf(dir, "deploy");
  EXPECT_EQ(record["state"], "approved") << record;
  EXPECT_EQ(record["reason"], "ship it");
  EXPECT_TRUE(Has(record["taken_by"].get<std::string>(), "(via mcp)"));

  // Decided once: another decision is refused and says how it ended.
  json again = s.Call(2, "reject", {{"run", id}, {"step", "j:1"}});
  EXPECT_TRUE(IsError(again));
  EXPECT_TRUE(Has(Text(again), "was already approved by " + Me() + "@"))
      << Text(again);
  json unknown = s.Call(3, "approve", {{"run", id}, {"step", "nope"}});
  EXPECT_TRUE(IsError(unknown));
  EXPECT_TRUE(Has(Text(unknown), "has no gate 'nope'; its gates: 'deploy'"))
      << Text(unknown);
  // Arguments the schema refuses never reach the store.
  EXPECT_EQ(s.Call(4, "approve", {{"run", id}})["error"]["code"], -32602);
  EXPECT_EQ(
      s.Call(5, "reject",
             {{"run", id}, {"step", "j:1"}, {"why", "x"}})["error"]["code"],
      -32602);
}

TEST(McpGateCliTest, ApproversAreEnforcedAsTheServersUser) {
  TempDir dir;
  GatedRun run(dir, R"(jobs:
- name: j
  plan:
  - in_parallel:
    - gate: theirs
      approvers: [somebody-else]
      timeout: 60s
    - gate: ours
      approvers: [somebody-else, )" +
                        Me() + R"(]
      timeout: 60s
)");
  ASSERT_TRUE(run.WaitForLog("theirs waits for a decision")) << run.Log();
  ASSERT_TRUE(run.WaitForLog("ours waits for a decision")) << run.Log();
  McpSession s(dir.path());
  s.Initialize();

  json refused = s.Call(1, "approve", {{"run", ""}, {"step", "theirs"}});
  EXPECT_TRUE(IsError(refused));
  EXPECT_TRUE(Has(Text(refused),
                  "may be decided only by somebody-else; you are " + Me()))
      << Text(refused);
  EXPECT_EQ(GateOf(dir, "theirs")["state"], "waiting");

  json rejected = s.Call(
      2, "reject", {{"run", ""}, {"step", "ours"}, {"reason", "not today"}});
  ASSERT_FALSE(IsError(rejected)) << rejected;
  EXPECT_TRUE(Has(Text(rejected), "Rejected gate 'ours'")) << Text(rejected);
  const json ours = GateOf(dir, "ours");
  EXPECT_EQ(ours["state"], "rejected") << ours;
  EXPECT_EQ(ours["reason"], "not today");
  EXPECT_TRUE(Has(ours["taken_by"].get<std::string>(), Me() + "@")) << ours;
}

}  // namespace
