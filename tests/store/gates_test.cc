// DecideGate on gates a desk opened: each way a decision can be refused is
// named (GateRefusal), so the web UI can answer it with its own HTTP
// status, and a refused decision leaves the gate waiting.
#include "store/gates.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "common/temp_dir.h"
#include "store/store.h"

namespace steps::store {
namespace {

using pipeline::GateDecision;

class DecideGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<Store>> st = Store::Open(dir_ / "steps.db");
    ASSERT_TRUE(st.ok()) << st.status().message();
    store_ = std::move(*st);
    ASSERT_TRUE(store_
                    ->Write([](Db& db) {
                      return db.Exec(
                          "INSERT INTO runs (id, file, status, started_ms,"
                          " taken_by, host, pid, pid_start) VALUES"
                          " ('20261206-120000-aaaa', 'p.yaml', 'running', 1,"
                          " 'me@here', 'here', 1, '')");
                    })
                    .ok());
    desk_ = std::make_unique<StoreGateDesk>(*store_, kRun);
  }

  void OpenGate(const std::string& id, const std::string& name,
                std::vector<std::string> approvers = {},
                std::optional<WallTime> deadline = std::nullopt) {
    pipeline::StepRef ref;
    ref.id = id;
    ref.job = "j";
    ref.name = name;
    ref.kind = pipeline::StepKind::kGate;
    pipeline::GateOpening opening;
    opening.message = "Go?";
    opening.approvers = std::move(approvers);
    opening.deadline = deadline;
    ASSERT_TRUE(desk_->Open(ref, opening).ok());
  }

  // Decides `step` as `user` through `via`; the refusal it met.
  GateRefusal Decide(const std::string& step, const std::string& user,
                     const std::string& via = "cli",
                     const std::string& run = "",
                     const std::string& reason = "",
                     WallTime now = std::chrono::system_clock::now()) {
    GateDecisionRequest request;
    request.run = run;
    request.step = step;
    request.decision = GateDecision::kApprove;
    request.by = (user.empty() ? "server" : user) + "@here";
    request.user = user;
    request.via = via;
    request.reason = reason;
    GateRefusal refusal = GateRefusal::kNotWaiting;  // Overwritten.
    Result<GateRow> r = DecideGate(*store_, request, now, &refusal);
    last_message_ = r.ok() ? "" : r.status().message();
    EXPECT_EQ(r.ok(), refusal == GateRefusal::kNone) << last_message_;
    return refusal;
  }

  const GateRow* Row(const std::string& step) {
    Result<std::vector<GateRow>> gates = ListGates(*store_, kRun);
    EXPECT_TRUE(gates.ok());
    rows_ = *gates;
    for (const GateRow& g : rows_)
      if (g.step_id == step) return &g;
    return nullptr;
  }

  std::string StateOf(const std::string& step) {
    Result<std::vector<GateRow>> gates = ListGates(*store_, kRun);
    EXPECT_TRUE(gates.ok());
    for (const GateRow& g : *gates)
      if (g.step_id == step) return g.state;
    return "";
  }

  static constexpr const char* kRun = "20261206-120000-aaaa";
  test_support::TempDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<StoreGateDesk> desk_;
  std::string last_message_;
  std::vector<GateRow> rows_;
};

TEST_F(DecideGateTest, EachRefusalIsNamedAndLeavesTheGateWaiting) {
  OpenGate("j:1", "deploy");
  OpenGate("j:2.c1.1", "cell");
  OpenGate("j:2.c2.1", "cell");
  OpenGate("j:3", "guarded", {"alice"});

  EXPECT_EQ(Decide("nope", "me"), GateRefusal::kUnknown);
  EXPECT_EQ(Decide("deploy", "me", "cli", "nosuchrun"), GateRefusal::kUnknown);
  EXPECT_EQ(Decide("cell", "me"), GateRefusal::kAmbiguous);
  EXPECT_NE(last_message_.find("name one by its step id"), std::string::npos)
      << last_message_;
  EXPECT_EQ(Decide("guarded", "bob"), GateRefusal::kNotApprover);
  // A channel that cannot tell who decides: refused, with the command to
  // use instead.
  EXPECT_EQ(Decide("guarded", "", "ui"), GateRefusal::kNotApprover);
  EXPECT_NE(last_message_.find("the web UI cannot tell who you are"),
            std::string::npos)
      << last_message_;
  EXPECT_NE(last_message_.find(std::string("`steps approve ") + kRun + " j:3`"),
            std::string::npos)
      << last_message_;
  for (const char* step : {"j:1", "j:2.c1.1", "j:2.c2.1", "j:3"})
    EXPECT_EQ(StateOf(step), "waiting") << step;

  EXPECT_EQ(Decide("guarded", "alice"), GateRefusal::kNone);
  EXPECT_EQ(StateOf("j:3"), "approved");
  EXPECT_EQ(Decide("deploy", "", "ui"), GateRefusal::kNone);
  EXPECT_EQ(StateOf("j:1"), "approved");
  EXPECT_EQ(Decide("j:1", "me"), GateRefusal::kNotWaiting);
  EXPECT_NE(last_message_.find("was already approved by server@here (via ui)"),
            std::string::npos)
      << last_message_;
}

// The run settles a gate within moments of its deadline; a decision made
// from then on is too late even when the run has not written that down.
// The millisecond before it still decides.
TEST_F(DecideGateTest, ADecisionAtOrAfterTheDeadlineIsRefused) {
  const WallTime deadline =
      WallTime(std::chrono::milliseconds(1'800'000'000'000));
  OpenGate("j:1", "late", {}, deadline);
  OpenGate("j:2", "in-time", {}, deadline);
  EXPECT_EQ(Decide("late", "me", "cli", "", "", deadline),
            GateRefusal::kNotWaiting);
  EXPECT_NE(last_message_.find("is past its deadline; its expiry decides it"),
            std::string::npos)
      << last_message_;
  EXPECT_EQ(
      Decide("late", "me", "cli", "", "", deadline + std::chrono::minutes(3)),
      GateRefusal::kNotWaiting);
  EXPECT_NE(last_message_.find("is past its deadline by 3m;"),
            std::string::npos)
      << last_message_;
  EXPECT_EQ(StateOf("j:1"), "waiting");
  EXPECT_EQ(Decide("in-time", "me", "cli", "", "",
                   deadline - std::chrono::milliseconds(1)),
            GateRefusal::kNone)
      << last_message_;
  EXPECT_EQ(StateOf("j:2"), "approved");
}

// A reason is kept and shown in terminals: at most 2000 bytes of UTF-8
// text whose only controls are line breaks and tabs, whichever channel it
// comes through. A refused reason leaves the gate waiting.
TEST_F(DecideGateTest, AReasonIsBoundedTextWithoutEscapes) {
  OpenGate("j:1", "deploy");
  const std::string at_limit(kMaxGateReasonBytes, 'x');
  for (const std::string& bad :
       {at_limit + "y", std::string("\x1b]0;owned\x07"),
        std::string("red \x1b[31m"), std::string("bell\a"),
        std::string("cr\rover"), std::string("del\x7f"),
        std::string("c1 \xc2\x9b"
                    "2J"),
        std::string("bad \xff utf-8"), std::string("nul\0here", 8)}) {
    EXPECT_EQ(Decide("deploy", "me", "cli", "", bad), GateRefusal::kBadReason)
        << bad;
  }
  EXPECT_EQ(StateOf("j:1"), "waiting");
  const std::string kept = "two lines:\n\tfirst, then ok — ✓";
  EXPECT_EQ(Decide("deploy", "me", "mcp", "", kept), GateRefusal::kNone)
      << last_message_;
  const GateRow* row = Row("j:1");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->reason, kept);
  OpenGate("j:2", "max");
  EXPECT_EQ(Decide("max", "me", "cli", "", at_limit), GateRefusal::kNone)
      << last_message_;
}

}  // namespace
}  // namespace steps::store
