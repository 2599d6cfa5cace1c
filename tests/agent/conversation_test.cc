// The turn loop against the in-process mock: tools, retries carrying the
// conversation on, fallback, context, caps at their edges, budgets, guards,
// CLI sources and events.
#include "agent/conversation.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "agent/resume.h"
#include "agent_test_util.h"

namespace steps::agent {
namespace {

using testing::ContentOf;
using testing::CountContaining;
using testing::Invocation;
using testing::LogCapture;
using testing::MockRunner;
using testing::MockSource;
using testing::RequestMessages;
using testing::TempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ConversationTest : public ::testing::Test {
 protected:
  ConversationTest() { ctx_.clock = &clock_; }

  AgentInvocation Inv(std::vector<AgentSource> sources = {MockSource("w")}) {
    AgentInvocation inv = Invocation(std::move(sources));
    inv.working_dir = dir_.path();
    inv.tools = {"read_file", "write_file", "list_files"};
    return inv;
  }

  FakeClock clock_{/*auto_advance=*/true};
  AgentContext ctx_;
  TempDir dir_;
};

TEST_F(ConversationTest, ToolCallsRunAndTheirResultsRideOnTheNextRequest) {
  auto runner = MockRunner(R"(
w:
  - call: {name: write_file, arguments: {path: out.txt, content: hello}}
  - {say: "checking", call: {name: read_file, arguments: {path: out.txt}}}
  - say: all done
)");
  AgentResult r = runner->Run(Inv(), ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "all done");
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.turns, 3);
  EXPECT_EQ(r.provider_requests, 3);
  EXPECT_EQ(ReadFile(dir_.path() + "/out.txt"), "hello");

  auto requests = runner->MockRequests();
  ASSERT_EQ(requests.size(), 3u);
  auto last = RequestMessages(requests[2]);
  // user, assistant(call), tool, assistant(text + call), tool.
  ASSERT_EQ(last.size(), 5u);
  EXPECT_EQ(last[0]["role"], "user");
  EXPECT_EQ(last[0]["content"], "Do the task.");
  EXPECT_EQ(last[1]["role"], "assistant");
  EXPECT_EQ(last[2]["role"], "tool");
  EXPECT_EQ(last[2]["tool_call_id"], last[1]["tool_calls"][0]["id"]);
  EXPECT_EQ(last[3]["content"], "checking");
  EXPECT_EQ(last[4]["role"], "tool");
  EXPECT_NE(ContentOf(last[4]).find("hello"), std::string::npos);

  ASSERT_EQ(r.turn_records.size(), 3u);
  EXPECT_EQ(r.turn_records[0].turn, 1);
  EXPECT_EQ(r.turn_records[0].source, "mock/w");
  ASSERT_EQ(r.turn_records[1].tool_calls.size(), 1u);
  const agent::ToolCallRecord& call = r.turn_records[1].tool_calls[0];
  EXPECT_EQ(call.name, "read_file");
  EXPECT_EQ(call.arguments, R"({"path":"out.txt"})");
  ASSERT_TRUE(call.result.has_value());
  EXPECT_NE(call.result->find("hello"), std::string::npos);
  EXPECT_EQ(call.result_bytes, static_cast<int64_t>(call.result->size()));
  EXPECT_FALSE(call.result_truncated);
  EXPECT_FALSE(call.is_error);
  EXPECT_EQ(r.turn_records[1].text, "checking");
  // Headers name the agent and the step.
  EXPECT_EQ(requests[0].agent, "tester");
  EXPECT_EQ(requests[0].step, "step");
}

// Each checkpoint comes before what it marks: a request's messages are all
// in checkpoints before it is sent, an answer before its tools with effects
// run, such a tool's start before it runs and every result before the next
// request. The
// checkpoints together hold the history, each message once, in order.
TEST_F(ConversationTest, CheckpointsComeFirstAndHoldTheWholeHistory) {
  auto runner = MockRunner(R"(
w:
  - call: {name: write_file, arguments: {path: out.txt, content: hello}}
  - {say: "checking", call: {name: read_file, arguments: {path: out.txt}}}
  - say: all done
)");
  using Kind = ConversationCheckpoint::Kind;
  std::vector<Message> history;
  std::vector<std::string> seen;
  std::vector<size_t> batches;
  ctx_.events.on_checkpoints =
      [&](const std::vector<ConversationCheckpoint>& batch) {
        batches.push_back(batch.size());
        for (const ConversationCheckpoint& cp : batch) {
          const size_t sent = runner->MockRequests().size();
          const bool written =
              std::filesystem::exists(dir_.path() + "/out.txt");
          for (const Message& m : cp.messages) history.push_back(m);
          std::string what;
          switch (cp.kind) {
            case Kind::kRequest:
              what = "request";
              break;
            case Kind::kAnswer:
              what = "answer " + cp.source;
              break;
            case Kind::kToolStarted:
              what = "start " + cp.tool + " " + cp.arguments;
              break;
            case Kind::kToolFinished:
              what = "finish " + cp.tool + (cp.is_error ? " error" : "");
              break;
          }
          seen.push_back("turn " + std::to_string(cp.turn) + " " + what + " (" +
                         std::to_string(cp.messages.size()) + " messages, " +
                         std::to_string(sent) + " sent" +
                         (written ? ", written)" : ")"));
        }
      };
  AgentResult r = runner->Run(Inv(), ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(seen, (std::vector<std::string>{
                      "turn 1 request (1 messages, 0 sent)",
                      "turn 1 answer mock/w (1 messages, 1 sent)",
                      "turn 1 start write_file "
                      "{\"content\":\"hello\",\"path\":\"out.txt\"} (0 "
                      "messages, 1 sent)",
                      "turn 1 finish write_file (1 messages, 1 sent, written)",
                      "turn 2 request (0 messages, 1 sent, written)",
                      "turn 2 answer mock/w (1 messages, 2 sent, written)",
                      "turn 2 start read_file {\"path\":\"out.txt\"} (0 "
                      "messages, 2 sent, written)",
                      "turn 2 finish read_file (1 messages, 2 sent, written)",
                      "turn 3 request (0 messages, 2 sent, written)",
                      "turn 3 answer mock/w (1 messages, 3 sent, written)"}));
  // Stored together, as one durable point each: an answer with its first
  // start of a call with effects (write_file); a result with what follows
  // it (the next request). read_file has no effects: turn 2's answer, its
  // start and its result ride with the third request.
  EXPECT_EQ(batches, (std::vector<size_t>{1, 2, 2, 4, 1}));
  // The history the checkpoints hold is what the last request carried,
  // and then the answer.
  auto last = RequestMessages(runner->MockRequests()[2]);
  ASSERT_EQ(history.size(), last.size() + 1);
  for (size_t i = 0; i < last.size(); ++i) {
    EXPECT_EQ(ContentOf(last[i]), history[i].content) << i;
  }
  EXPECT_EQ(history[1].tool_calls.at(0).name, "write_file");
  EXPECT_EQ(history[2].tool_call_id, history[1].tool_calls[0].id);
  EXPECT_EQ(history.back().content, "all done");
}

// The checkpoints of a conversation cut where its run died (after the
// `keep` first ones), for a resumed run to continue from.
std::vector<ConversationCheckpoint> CheckpointsOf(AgentRunner& runner,
                                                  const AgentInvocation& inv,
                                                  AgentContext ctx,
                                                  size_t keep) {
  std::vector<ConversationCheckpoint> kept;
  bool cut = false;
  // A batch is one transaction: stored whole or not at all.
  ctx.events.on_checkpoints =
      [&](const std::vector<ConversationCheckpoint>& batch) {
        cut = cut || kept.size() + batch.size() > keep;
        if (!cut) kept.insert(kept.end(), batch.begin(), batch.end());
      };
  runner.Run(inv, ctx);
  return kept;
}

constexpr char kWriteReadDone[] = R"(
w:
  - call: {name: write_file, arguments: {path: out.txt, content: hello}}
  - {say: "checking", call: {name: read_file, arguments: {path: out.txt}}}
  - say: all done
)";

constexpr char kReadWriteDone[] = R"(
w:
  - call: {name: read_file, arguments: {path: in.txt}}
  - {say: "writing", call: {name: write_file, arguments: {path: out.txt, content: hello}}}
  - say: all done
)";

// Died while write_file ran (its start stored, not its result): the resumed
// conversation runs it again, then sends only the third request. The
// read_file before it finished and does not run again.
TEST_F(ConversationTest, AResumedConversationRerunsTheUnfinishedCallOnly) {
  std::ofstream(dir_.path() + "/in.txt") << "input";
  auto first = MockRunner(kReadWriteDone);
  // request; answer, read_file's start and result, the second request;
  // the second answer and write_file's start.
  ResumedConversation resumed =
      RebuildConversation(CheckpointsOf(*first, Inv(), ctx_, 7));
  std::filesystem::remove(dir_.path() + "/out.txt");
  ASSERT_EQ(resumed.restarted,
            std::vector<std::string>{resumed.unfinished_calls.at(0).id});
  auto second = MockRunner("w:\n  - say: all done\n");
  AgentInvocation inv = Inv();
  inv.resume_from = resumed;
  std::vector<std::string> logs;
  ctx_.events.on_log = [&](const std::string& line) { logs.push_back(line); };
  AgentResult r = second->Run(inv, ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "all done");
  EXPECT_EQ(r.turns, 3);
  EXPECT_EQ(r.provider_requests, 3);
  auto requests = second->MockRequests();
  ASSERT_EQ(requests.size(), 1u);
  auto last = RequestMessages(requests[0]);
  // user, assistant(call), tool, assistant(text + call), tool: as sent by
  // an uninterrupted run.
  ASSERT_EQ(last.size(), 5u);
  EXPECT_EQ(last[0]["content"], "Do the task.");
  EXPECT_EQ(ContentOf(last[2]), "input");
  EXPECT_EQ(last[3]["content"], "writing");
  EXPECT_EQ(ReadFile(dir_.path() + "/out.txt"), "hello");
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_NE(logs[0].find("agent.tool_rerun"), std::string::npos) << logs[0];
}

// Died after the final answer was stored: it is the answer, no request.
TEST_F(ConversationTest, AResumedConversationWithItsAnswerStoredSendsNothing) {
  auto first = MockRunner(kWriteReadDone);
  AgentInvocation inv = Inv();
  inv.resume_from = RebuildConversation(CheckpointsOf(*first, Inv(), ctx_, 10));
  auto second = MockRunner("w: []\n");
  AgentResult r = second->Run(inv, ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "all done");
  EXPECT_EQ(r.turns, 3);
  EXPECT_TRUE(second->MockRequests().empty());
}

// The turn records a store holds when the run dies after `keep`
// checkpoints and is resumed: the turn rows written before the death,
// then those of the resumed conversation (a row written again replaces
// the earlier one, as agent_turns does); and the resumed result's own.
struct ResumedTurns {
  std::map<int, AgentTurnRecord> stored;
  std::vector<AgentTurnRecord> in_result;
  int requests = 0;
};

std::string Describe(const AgentTurnRecord& t) {
  std::string out = std::to_string(t.turn) + " " + t.source + " " +
                    std::to_string(t.provider_requests) + " " +
                    std::to_string(t.prompt_tokens) + "/" +
                    std::to_string(t.completion_tokens) + " [" + t.text + "]";
  for (const ToolCallRecord& c : t.tool_calls) {
    out += " " + c.Label() + " -> " + c.result.value_or("(none)") +
           (c.is_error ? " (error)" : "") + " " +
           std::to_string(c.result_bytes);
  }
  return out;
}

// Entries of one mock script, so a resumed run is served the rest of it.
const std::vector<std::string> kTwoCallTurns = {
    "{say: writing, call: [{name: write_file, arguments: {path: a.txt, "
    "content: one}}, {name: write_file, arguments: {path: b.txt, content: "
    "two}}]}",
    "{call: [{name: read_file, arguments: {path: a.txt}}, {name: read_file, "
    "arguments: {path: nope.txt}}]}",
    "{say: all done}"};

std::string ScriptFrom(const std::vector<std::string>& entries, size_t from) {
  std::string yaml = "w:\n";
  if (from >= entries.size()) return yaml + "  []\n";
  for (size_t i = from; i < entries.size(); ++i)
    yaml += "  - " + entries[i] + "\n";
  return yaml;
}

// Every point a run can die at, for a conversation with two tool calls per
// turn: the resumed run ends with the turn records of an uninterrupted
// one, in the store and in its result; no turn is lost or cut to the
// calls that ran after the resume.
TEST_F(ConversationTest, TurnRecordsOfAResumedRunAreThoseOfAnUninterruptedOne) {
  auto whole = MockRunner(ScriptFrom(kTwoCallTurns, 0));
  std::vector<ConversationCheckpoint> all;
  AgentContext ctx = ctx_;
  ctx.events.on_checkpoints =
      [&](const std::vector<ConversationCheckpoint>& batch) {
        all.insert(all.end(), batch.begin(), batch.end());
      };
  AgentResult expected = whole->Run(Inv(), ctx);
  ASSERT_EQ(expected.outcome, Outcome::kSucceeded) << expected.error;
  ASSERT_EQ(expected.turn_records.size(), 3u);
  ASSERT_EQ(all.size(), 3u + 3u + 4u + 4u);  // Requests, answers, tools.

  for (size_t keep = 0; keep <= all.size(); ++keep) {
    SCOPED_TRACE("died after checkpoint " + std::to_string(keep));
    std::filesystem::remove_all(dir_.path());
    std::filesystem::create_directories(dir_.path());
    // The first run, cut after `keep` checkpoints: what it stored.
    std::map<int, AgentTurnRecord> stored;
    size_t seen = 0;
    AgentContext first_ctx = ctx_;
    first_ctx.events.on_checkpoints =
        [&](const std::vector<ConversationCheckpoint>& batch) {
          seen += batch.size();
        };
    first_ctx.events.on_turn = [&](const AgentTurnRecord& t) {
      if (seen <= keep) stored[t.turn] = t;
    };
    auto first = MockRunner(ScriptFrom(kTwoCallTurns, 0));
    first->Run(Inv(), first_ctx);
    std::vector<ConversationCheckpoint> kept(all.begin(), all.begin() + keep);
    // A turn row written after the last stored checkpoint did not survive.
    ResumedConversation resumed = RebuildConversation(kept);
    size_t answers = 0;
    for (const auto& cp : kept)
      answers += cp.kind == ConversationCheckpoint::Kind::kAnswer;

    auto second = MockRunner(ScriptFrom(kTwoCallTurns, answers));
    AgentInvocation inv = Inv();
    if (keep > 0) inv.resume_from = resumed;
    AgentContext second_ctx = ctx_;
    second_ctx.events.on_turn = [&](const AgentTurnRecord& t) {
      stored[t.turn] = t;
    };
    AgentResult r = second->Run(inv, second_ctx);
    ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
    EXPECT_EQ(second->MockRequests().size(), 3u - answers);
    ASSERT_EQ(r.turn_records.size(), 3u);
    ASSERT_EQ(stored.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(Describe(r.turn_records[i]),
                Describe(expected.turn_records[i]));
      EXPECT_EQ(Describe(stored[static_cast<int>(i) + 1]),
                Describe(expected.turn_records[i]));
    }
  }
}

TEST_F(ConversationTest, ToolErrorsGoBackToTheModel) {
  auto runner = MockRunner(R"(
w:
  - call: {name: read_file, arguments: {path: /etc/passwd}}
  - call: {name: launch_missiles, arguments: {}}
  - call: {name: read_file, arguments: "{not json"}
  - say: gave up politely
)");
  AgentResult r = runner->Run(Inv(), ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  auto last = RequestMessages(runner->MockRequests().at(3));
  EXPECT_NE(ContentOf(last[2]).find("refused"), std::string::npos)
      << ContentOf(last[2]);
  EXPECT_EQ(ContentOf(last[4]),
            "no tool named 'launch_missiles' is available (available: "
            "read_file, write_file, list_files)");
  EXPECT_NE(ContentOf(last[6]).find("not valid JSON"), std::string::npos);
}

TEST_F(ConversationTest, MessagesCritiqueAndContextFilesInOrder) {
  dir_.Write("a.txt", "alpha");
  dir_.Write("b.txt", "0123456789");
  auto runner = MockRunner("w: [{say: ok}]");
  AgentInvocation inv = Inv();
  inv.persona = "You are careful.";
  inv.messages = {"First.", "Second."};
  inv.critique = "Missing tests.";
  inv.context_paths = {"a.txt", "b.txt"};
  inv.max_context_bytes = 8;
  ASSERT_EQ(runner->Run(inv, ctx_).outcome, Outcome::kSucceeded);
  auto m = RequestMessages(runner->MockRequests().at(0));
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[0]["content"], "You are careful.");
  EXPECT_EQ(m[1]["content"], "First.");
  EXPECT_EQ(m[2]["content"], "Second.");
  EXPECT_EQ(m[3]["content"],
            "Your earlier answer to this task was sent back with this "
            "critique:\n\nMissing tests.");
  EXPECT_EQ(m[4]["content"], "Context file: a.txt (5 bytes)\n\nalpha");
  EXPECT_EQ(m[5]["content"],
            "Context file: b.txt (10 bytes; cut: the first 3 of 10 bytes are "
            "shown; max_context_bytes is 8)\n\n012");
}

TEST_F(ConversationTest, AMissingContextFileErrorsBeforeAnyRequest) {
  auto runner = MockRunner("w: [{say: ok}]");
  AgentInvocation inv = Inv();
  inv.context_paths = {"missing.txt"};
  AgentResult r = runner->Run(inv, ctx_);
  EXPECT_EQ(r.outcome, Outcome::kErrored);
  EXPECT_EQ(r.error, "agent: context_paths: missing.txt: no such file");
  EXPECT_TRUE(runner->MockRequests().empty());
}

// attempts: 2 and one 500 in the middle: the retry re-sends exactly the
// failing request, which holds everything before it, and the conversation
// carries on. One extra request, not a rebuilt history.
TEST_F(ConversationTest, A500IsAbsorbedByARetryAndTheConversationCarriesOn) {
  auto runner = MockRunner(R"(
w:
  - call: {name: write_file, arguments: {path: notes.txt, content: draft}}
  - status: 500
  - say: Release looks good
)");
  AgentInvocation inv = Inv();
  inv.attempts = 2;
  LogCapture logs;
  AgentResult r = runner->Run(inv, ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "Release looks good");
  EXPECT_EQ(r.turns, 2);
  EXPECT_EQ(r.provider_requests, 3);
  ASSERT_EQ(r.turn_records.size(), 2u);
  EXPECT_EQ(r.turn_records[1].provider_requests, 2);

  auto requests = runner->MockRequests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[2].body, requests[1].body);
  auto m = RequestMessages(requests[2]);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0]["content"], "Do the task.");
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["name"], "write_file");
  EXPECT_EQ(m[2]["role"], "tool");
  EXPECT_EQ(logs.LinesWith("agent.request_retry"),
            std::vector<std::string>{
                "WRN agent.request_retry agent=tester model=w attempt=1 "
                "attempts=2 status=500"});
  EXPECT_TRUE(logs.LinesWith("agent.conversation_failed").empty());
}

TEST_F(ConversationTest, FallbackCarriesTheConversationOnFromWhereItWas) {
  auto runner = MockRunner(R"(
primary:
  - call: {name: write_file, arguments: {path: a.txt, content: one}}
  - status: 401
fallback:
  - say: finished by the fallback
)");
  AgentInvocation inv = Inv({MockSource("primary"), MockSource("fallback")});
  inv.attempts = 3;
  LogCapture logs;
  AgentResult r = runner->Run(inv, ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "finished by the fallback");
  EXPECT_EQ(r.fallbacks_taken, std::vector<std::string>{"mock/fallback"});
  EXPECT_EQ(r.provider_requests, 3);  // A 401 is final: not retried.
  ASSERT_EQ(r.turn_records.size(), 2u);
  EXPECT_EQ(r.turn_records[1].source, "mock/fallback");
  EXPECT_EQ(r.turn_records[1].provider_requests, 2);

  auto requests = runner->MockRequests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[2].model, "fallback");
  EXPECT_EQ(RequestMessages(requests[2]), RequestMessages(requests[1]));
  EXPECT_EQ(RequestMessages(requests[2]).size(), 3u);
  auto cascade = logs.LinesWith("agent.fallback");
  ASSERT_EQ(cascade.size(), 1u);
  EXPECT_NE(cascade[0].find("from=mock/primary to=mock/fallback"),
            std::string::npos);
  EXPECT_NE(cascade[0].find("HTTP 401"), std::string::npos);
  EXPECT_TRUE(logs.LinesWith("agent.request_retry").empty());
}

TEST_F(ConversationTest, ASourceThatCannotBeBuiltFallsBackToTheNext) {
  auto runner = MockRunner("fallback: [{say: ok}]");
  AgentSource bad;
  bad.model = "nosuchprovider/x";
  AgentResult r = runner->Run(Inv({bad, MockSource("fallback")}), ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.fallbacks_taken, std::vector<std::string>{"mock/fallback"});

  AgentResult alone = runner->Run(Inv({bad}), ctx_);
  EXPECT_EQ(alone.outcome, Outcome::kErrored);
  EXPECT_EQ(alone.error.rfind("agent: source nosuchprovider/x: ", 0), 0u)
      << alone.error;
}

TEST_F(ConversationTest, EverySourceFailingNamesEachOne) {
  auto runner = MockRunner(R"(
a: [{status: 500}]
b: [{status: 502}]
)");
  AgentResult r = runner->Run(Inv({MockSource("a"), MockSource("b")}), ctx_);
  EXPECT_EQ(r.outcome, Outcome::kErrored);
  EXPECT_EQ(r.error.rfind("agent: all 2 sources failed: mock/a: generate "
                          "content: gave up after 1 request: HTTP 500",
                          0),
            0u)
      << r.error;
  EXPECT_NE(r.error.find("; mock/b: generate content: gave up after 1 "
                         "request: HTTP 502"),
            std::string::npos)
      << r.error;
}

// Three tool turns, then the answer on turn 4.
constexpr char kFourTurns[] = R"(
w:
  - {say: "turn 1", call: {name: list_files, arguments: {path: "."}}}
  - {say: "turn 2", call: {name: write_file, arguments: {path: x, content: "2"}}}
  - {say: "turn 3", call: {name: read_file, arguments: {path: x}}}
  - say: final answer
)";

TEST_F(ConversationTest, MaxTurnsAllowsTheLastTurnItself) {
  auto runner = MockRunner(kFourTurns);
  AgentInvocation inv = Inv();
  inv.max_turns = 4;
  AgentResult r = runner->Run(inv, ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.turns, 4);
  EXPECT_EQ(r.answer, "final answer");
}

TEST_F(ConversationTest, NeedingOneTurnMoreThanMaxTurnsFailsAndKeepsTheWork) {
  auto runner = MockRunner(kFourTurns);
  AgentInvocation inv = Inv();
  inv.max_turns = 3;
  AgentResult r = runner->Run(inv, ctx_);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error,
            "agent: max_turns exceeded: no final answer after 3 turns "
            "(max_turns: 3)");
  EXPECT_EQ(r.turns, 3);
  ASSERT_EQ(r.turn_records.size(), 3u);
  EXPECT_EQ(r.answer, "turn 3");                 // The last answer is kept.
  EXPECT_EQ(ReadFile(dir_.path() + "/x"), "2");  // And the work done.
  EXPECT_EQ(runner->MockRequests().size(), 3u);  // No fourth request.
}

TEST_F(ConversationTest, NoTurnCapWhenMaxTurnsIsUnset) {
  std::string script = "w:\n";
  for (int i = 0; i < 40; ++i) {
    script += "  - call: {name: write_file, arguments: {path: f, content: \"" +
              std::to_string(i) + "\"}}\n";
  }
  script += "  - say: done\n";
  auto runner = MockRunner(script);
  AgentResult r = runner->Run(Inv(), ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.turns, 41);
}

constexpr char kTwoAnswersOf15Tokens[] = R"(
w:
  - call: {name: list_files, arguments: {path: "."}}
    usage: {prompt_tokens: 10, completion_tokens: 5}
  - say: done
    usage: {prompt_tokens: 10, completion_tokens: 5}
)";

TEST_F(ConversationTest, ABudgetExactlySpentSucceeds) {
  auto runner = MockRunner(kTwoAnswersOf15Tokens);
  AgentInvocation inv = Inv();
  inv.budget = BudgetLimit{30, std::nullopt};
  AgentResult r = runner->Run(inv, ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.prompt_tokens, 20);
  EXPECT_EQ(r.completion_tokens, 10);
}

TEST_F(ConversationTest, ABudgetPassedFailsNamingItAndKeepsTheAnswer) {
  auto runner = MockRunner(kTwoAnswersOf15Tokens);
  AgentInvocation inv = Inv();
  inv.budget = BudgetLimit{29, std::nullopt};
  AgentResult r = runner->Run(inv, ctx_);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error,
            "agent: step budget: token budget of 29 exceeded (30 used)");
  EXPECT_EQ(r.answer, "done");
}

TEST_F(ConversationTest, ABudgetSpentMidConversationSendsNoFurtherRequest) {
  auto runner = MockRunner(kTwoAnswersOf15Tokens);
  AgentInvocation inv = Inv();
  inv.budget = BudgetLimit{15, std::nullopt};
  AgentResult r = runner->Run(inv, ctx_);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error,
            "agent: step budget: token budget of 15 spent (15 used); another "
            "request would exceed it");
  EXPECT_EQ(runner->MockRequests().size(), 1u);
}

// The job's budget spent elsewhere (its cells on other nodes) mid-way:
// the next request is not sent, and the step fails in those words.
TEST_F(ConversationTest, ABudgetSpentElsewhereSendsNoFurtherRequest) {
  auto runner = MockRunner(kTwoAnswersOf15Tokens);
  auto job =
      std::make_shared<BudgetMeter>(BudgetLimit{1000, std::nullopt}, "job");
  std::atomic<int> asked{0};
  job->SetSpentElsewhere([&]() -> std::optional<std::string> {
    if (++asked < 2) return std::nullopt;
    return "token budget of 1000 spent (1010 used), counting the job's cells "
           "on other nodes";
  });
  ctx_.shared_budgets = {job};
  AgentResult r = runner->Run(Inv(), ctx_);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error,
            "agent: job budget: token budget of 1000 spent (1010 used), "
            "counting the job's cells on other nodes; another request would "
            "exceed it");
  EXPECT_EQ(runner->MockRequests().size(), 1u);
  EXPECT_EQ(job->tokens(), 15);
}

TEST_F(ConversationTest, UsdFromThePriceOrTheReportedCost) {
  auto runner = MockRunner(R"(
priced:
  - say: ok
    usage: {prompt_tokens: 1000000, completion_tokens: 100000, cost: 99}
reported:
  - say: ok
    usage: {prompt_tokens: 10, completion_tokens: 10, cost: 0.25}
)");
  AgentSource priced = MockSource("priced");
  priced.price = SourcePrice{0.5, 2.0};
  AgentInvocation inv = Inv({priced});
  inv.budget = BudgetLimit{std::nullopt, 0.6};
  AgentResult r = runner->Run(inv, ctx_);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_DOUBLE_EQ(r.usd, 0.7);
  EXPECT_EQ(r.error,
            "agent: step budget: USD budget of $0.6 exceeded "
            "($0.7 spent)");

  AgentResult reported = runner->Run(Inv({MockSource("reported")}), ctx_);
  ASSERT_EQ(reported.outcome, Outcome::kSucceeded);
  EXPECT_DOUBLE_EQ(reported.usd, 0.25);
}

TEST_F(ConversationTest, ASharedBudgetBoundsConversationsTogether) {
  auto runner = MockRunner(R"(
w:
  - say: first
    usage: {prompt_tokens: 60, completion_tokens: 0}
  - say: second
    usage: {prompt_tokens: 60, completion_tokens: 0}
  - say: third
    usage: {prompt_tokens: 1, completion_tokens: 0}
)");
  auto job =
      std::make_shared<BudgetMeter>(BudgetLimit{100, std::nullopt}, "job");
  ctx_.shared_budgets = {job};
  EXPECT_EQ(runner->Run(Inv(), ctx_).outcome, Outcome::kSucceeded);
  AgentResult second = runner->Run(Inv(), ctx_);
  EXPECT_EQ(second.outcome, Outcome::kFailed);
  EXPECT_EQ(second.error,
            "agent: job budget: token budget of 100 exceeded (120 used)");
  AgentResult third = runner->Run(Inv(), ctx_);
  EXPECT_EQ(third.outcome, Outcome::kFailed);
  EXPECT_EQ(third.provider_requests, 0);  // Spent before it began.
  EXPECT_EQ(runner->MockRequests().size(), 2u);
}

TEST_F(ConversationTest, TheSameCallWithTheSameResultThreeTimesIsALoop) {
  dir_.Write("a.txt", "same");
  auto runner = MockRunner(R"(
w:
  - call: {name: read_file, arguments: {path: a.txt}}
  - call: {name: read_file, arguments: {path: a.txt}}
  - call: {name: read_file, arguments: {path: a.txt}}
  - say: never
)");
  AgentResult r = runner->Run(Inv(), ctx_);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error,
            "agent: loop detected: read_file {\"path\":\"a.txt\"} returned "
            "the same result 3 times in a row");
  EXPECT_EQ(r.turns, 3);
  EXPECT_EQ(runner->MockRequests().size(), 3u);
}

TEST_F(ConversationTest, TwoRepeatsOrAChangedResultIsNoLoop) {
  dir_.Write("a.txt", "v1");
  auto runner = MockRunner(R"(
w:
  - call: {name: read_file, arguments: {path: a.txt}}
  - call: {name: read_file, arguments: {path: a.txt}}
  - call:
      - {name: write_file, arguments: {path: a.txt, content: v2}}
      - {name: read_file, arguments: {path: a.txt}}
  - call: {name: read_file, arguments: {path: a.txt}}
  - say: no loop here
)");
  AgentResult r = runner->Run(Inv(), ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
}

TEST_F(ConversationTest, TheSameCommandWithChangingOutputIsNoLoop) {
  ctx_.clock = &RealClock();
  auto runner = MockRunner(R"(
w:
  - call: {name: run_shell, arguments: {command: "echo x >> n; wc -l < n"}}
  - call: {name: run_shell, arguments: {command: "echo x >> n; wc -l < n"}}
  - call: {name: run_shell, arguments: {command: "echo x >> n; wc -l < n"}}
  - call: {name: run_shell, arguments: {command: "echo same"}}
  - call: {name: run_shell, arguments: {command: "echo same"}}
  - call: {name: run_shell, arguments: {command: "echo same"}}
  - say: never
)");
  AgentInvocation inv = Inv();
  inv.tools = {"run_shell"};
  AgentResult r = runner->Run(inv, ctx_);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.turns, 6);
  EXPECT_NE(r.error.find("run_shell {\"command\":\"echo same\"}"),
            std::string::npos)
      << r.error;
}

TEST_F(ConversationTest, RequiredToolsForcesToolChoiceAndOffersFinish) {
  auto runner = MockRunner(R"(
w:
  - say: let me think
  - say: still thinking
  - call: {name: list_files, arguments: {path: "."}}
  - say: one
  - say: two
  - say: three
  - say: four
  - call: {name: finish, arguments: {answer: the real answer}}
)");
  AgentInvocation inv = Inv();
  inv.required_tools = true;
  AgentResult r = runner->Run(inv, ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "the real answer");
  EXPECT_EQ(r.turns, 8);

  auto requests = runner->MockRequests();
  auto body = nlohmann::json::parse(requests[0].body);
  EXPECT_EQ(body["tool_choice"], "required");
  ASSERT_EQ(body["tools"].size(), 4u);
  EXPECT_EQ(body["tools"][3]["function"]["name"], "finish");
  auto second = RequestMessages(requests[1]);
  EXPECT_EQ(second.back()["content"], kRequiredToolReminder);
}

TEST_F(ConversationTest, FiveTextAnswersInARowEndTheAttempt) {
  auto runner = MockRunner(R"(
w:
  - say: one
  - say: two
  - say: three
  - say: four
  - say: five
  - call: {name: finish, arguments: {answer: too late}}
)");
  AgentInvocation inv = Inv();
  inv.required_tools = true;
  AgentResult r = runner->Run(inv, ctx_);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error,
            "agent: required tools: the model answered with text 5 times in "
            "a row instead of calling a tool");
  EXPECT_EQ(r.turns, 5);
  EXPECT_EQ(r.answer, "five");
  EXPECT_EQ(runner->MockRequests().size(), 5u);
}

TEST_F(ConversationTest, AMalformedFinishIsToldSoAndTheConversationGoesOn) {
  auto runner = MockRunner(R"(
w:
  - call: {name: finish, arguments: {result: wrong key}}
  - call: {name: finish, arguments: {answer: right}}
)");
  AgentInvocation inv = Inv();
  inv.required_tools = true;
  AgentResult r = runner->Run(inv, ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "right");
  auto m = RequestMessages(runner->MockRequests().at(1));
  EXPECT_EQ(ContentOf(m.back()),
            "finish: pass your final answer as {\"answer\": \"...\"}");
}

TEST_F(ConversationTest, WithoutRequiredToolsFinishIsNotOffered) {
  auto runner = MockRunner(R"(
w:
  - call: {name: finish, arguments: {answer: x}}
  - say: plain answer
)");
  AgentResult r = runner->Run(Inv(), ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "plain answer");
  auto body = nlohmann::json::parse(runner->MockRequests().at(0).body);
  EXPECT_EQ(body["tools"].size(), 3u);
}

TEST_F(ConversationTest, EventsSeeEveryTurnAndLogLine) {
  auto runner = MockRunner(R"(
a: [{status: 500}]
b:
  - call: {name: list_files, arguments: {path: "."}}
  - say: done
)");
  std::vector<int> turns;
  std::vector<std::string> lines;
  ctx_.events.on_turn = [&](const AgentTurnRecord& t) {
    turns.push_back(t.turn);
  };
  ctx_.events.on_log = [&](const std::string& l) { lines.push_back(l); };
  AgentResult r = runner->Run(Inv({MockSource("a"), MockSource("b")}), ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(turns, (std::vector<int>{1, 2}));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("WRN agent.fallback agent=tester from=mock/a "
                           "to=mock/b",
                           0),
            0u);
}

TEST_F(ConversationTest, MockExpectationsAreReportedByTheRunner) {
  auto runner = MockRunner(R"(
w:
  - say: ok
    expect: {system_contains: "Deadline: you have 5m", messages: 2}
)");
  AgentInvocation inv = Inv();
  inv.timeout = std::chrono::minutes(5);
  ASSERT_EQ(runner->Run(inv, ctx_).outcome, Outcome::kSucceeded);
  EXPECT_TRUE(runner->MockExpectationFailures().empty());

  auto strict = MockRunner(R"(
w:
  - say: ok
    expect: {system_contains: "no such text"}
)");
  ASSERT_EQ(strict->Run(inv, ctx_).outcome, Outcome::kSucceeded);
  ASSERT_EQ(strict->MockExpectationFailures().size(), 1u);
  EXPECT_NE(strict->MockExpectationFailures()[0].find("no such text"),
            std::string::npos);
}

TEST_F(ConversationTest, ProviderPrefixesAreAllServedByTheMock) {
  auto runner = MockRunner(R"(
qwen/qwen3.7-flash: [{say: via openrouter}]
claude-x: [{say: via anthropic}]
)");
  AgentSource openrouter;
  openrouter.model = "openrouter/qwen/qwen3.7-flash";
  AgentResult r = runner->Run(Inv({openrouter}), ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "via openrouter");
  AgentSource anthropic;
  anthropic.model = "anthropic/claude-x";
  r = runner->Run(Inv({anthropic}), ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "via anthropic");
  EXPECT_EQ(runner->MockRequests().back().format, "anthropic");
}

TEST_F(ConversationTest, AMockSourceWithoutAScriptIsRefused) {
  auto runner = MakeAgentRunner({});
  AgentResult r = runner->Run(Inv(), ctx_);
  EXPECT_EQ(r.outcome, Outcome::kErrored);
  EXPECT_NE(r.error.find("served only from a mock: script"), std::string::npos)
      << r.error;
}

// One runner serves many conversations at once, each on its own thread,
// charging one shared budget.
TEST_F(ConversationTest, ConcurrentConversationsShareOneRunner) {
  constexpr int kConversations = 48;
  std::string script;
  for (int i = 0; i < kConversations; ++i) {
    script += "c" + std::to_string(i) +
              ":\n"
              "  - {call: {name: list_files, arguments: {path: \".\"}}, "
              "usage: {prompt_tokens: 1}}\n"
              "  - {say: \"answer " +
              std::to_string(i) + "\", usage: {prompt_tokens: 1}}\n";
  }
  auto runner = MockRunner(script);
  auto job = std::make_shared<BudgetMeter>(BudgetLimit{}, "job");
  ctx_.clock = &RealClock();
  ctx_.shared_budgets = {job};
  std::vector<AgentResult> results(kConversations);
  std::vector<std::thread> threads;
  for (int i = 0; i < kConversations; ++i) {
    threads.emplace_back([&, i] {
      AgentInvocation inv = Inv();
      inv.agent_name = "c" + std::to_string(i);
      results[i] = runner->Run(inv, ctx_);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kConversations; ++i) {
    ASSERT_EQ(results[i].outcome, Outcome::kSucceeded) << results[i].error;
    EXPECT_EQ(results[i].answer, "answer " + std::to_string(i));
  }
  EXPECT_EQ(job->tokens(), 2 * kConversations);
  EXPECT_EQ(runner->MockRequests().size(), 2u * kConversations);
}

TEST_F(ConversationTest, StreamedSourcesWork) {
  auto runner = MockRunner(R"(
w:
  - call: {name: list_files, arguments: {path: "."}}
  - say: streamed answer
)");
  AgentSource streamed = MockSource("w");
  streamed.stream = true;
  AgentResult r = runner->Run(Inv({streamed}), ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "streamed answer");
  EXPECT_TRUE(runner->MockRequests().at(0).stream);
}

// run_shell on the real clock: tool_timeout bounds one command (its result
// says so and the conversation goes on); the deadline bounds it too, and
// ends the step.
TEST_F(ConversationTest, ToolTimeoutCutsACommandAndTheConversationGoesOn) {
  ctx_.clock = &RealClock();
  auto runner = MockRunner(R"(
w:
  - call: {name: run_shell, arguments: {command: "sleep 30"}}
  - say: moved on
)");
  AgentInvocation inv = Inv();
  inv.tools = {"run_shell"};
  inv.tool_timeout = Millis(200);
  AgentResult r = runner->Run(inv, ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  auto m = RequestMessages(runner->MockRequests().at(1));
  EXPECT_NE(ContentOf(m.back()).find("timed out"), std::string::npos)
      << ContentOf(m.back());
}

TEST_F(ConversationTest, TheDeadlineCutsAToolCallAndEndsTheStep) {
  ctx_.clock = &RealClock();
  auto runner = MockRunner(R"(
w:
  - call: {name: run_shell, arguments: {command: "sleep 30"}}
  - say: never asked
)");
  AgentInvocation inv = Inv();
  inv.tools = {"run_shell"};
  inv.timeout = Millis(400);
  auto start = std::chrono::steady_clock::now();
  AgentResult r = runner->Run(inv, ctx_);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error, kDeadlineExceededError);
  EXPECT_EQ(runner->MockRequests().size(), 1u);
  // Tolerance: the shell's kill grace (500ms) plus scheduling.
  EXPECT_LT(took, std::chrono::seconds(3));
}

// CLI sources run for real (bash), on the real clock.
class CliSourceTest : public ::testing::Test {
 protected:
  AgentInvocation Cli(const std::string& command) {
    AgentSource s;
    s.cli = command;
    AgentInvocation inv = Invocation({s});
    inv.working_dir = dir_.path();
    return inv;
  }
  TempDir dir_;
  AgentContext ctx_;
};

TEST_F(CliSourceTest, StdoutIsTheAnswerAndStdinTheConversation) {
  auto runner = MakeAgentRunner({});
  AgentInvocation inv = Cli("cat; pwd > where");
  inv.persona = "Be brief.";
  inv.timeout = std::chrono::minutes(5);
  AgentResult r = runner->Run(inv, ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(
      r.answer.rfind("## system\n\nBe brief.\n\nDeadline: you have 5m", 0), 0u)
      << r.answer;
  EXPECT_NE(r.answer.find("## user\n\nDo the task.\n"), std::string::npos);
  EXPECT_TRUE(r.deadline_disclosed);
  EXPECT_EQ(r.turns, 1);
  EXPECT_EQ(r.provider_requests, 0);
  std::string where = ReadFile(dir_.path() + "/where");
  EXPECT_EQ(std::filesystem::canonical(where.substr(0, where.size() - 1)),
            std::filesystem::canonical(dir_.path()));
}

TEST_F(CliSourceTest, ANonZeroExitFailsWithItsStderr) {
  auto runner = MakeAgentRunner({});
  AgentResult r =
      runner->Run(Cli("echo partial; echo broke >&2; exit 3"), ctx_);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error,
            "agent: cli `echo partial; echo broke >&2; exit 3`: "
            "exited with code 3: broke");
  EXPECT_EQ(r.answer, "partial\n");
}

TEST_F(CliSourceTest, TheDeadlineKillsIt) {
  auto runner = MakeAgentRunner({});
  AgentInvocation inv = Cli("sleep 30");
  inv.timeout = Millis(300);
  auto start = std::chrono::steady_clock::now();
  AgentResult r = runner->Run(inv, ctx_);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error, kDeadlineExceededError);
  // Tolerance: the kill grace (2s) at most, plus scheduling.
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST_F(CliSourceTest, AFailedCliFallsBackToAHostedSource) {
  auto runner = MockRunner("w: [{say: hosted answer}]");
  AgentInvocation inv = Cli("exit 1");
  inv.sources.push_back(MockSource("w"));
  // Under a mock script the CLI source is served by the mock too (model
  // "cli"); unscripted, it answers 400 and the fallback takes over.
  AgentResult r = runner->Run(inv, ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "hosted answer");
  EXPECT_EQ(r.fallbacks_taken, std::vector<std::string>{"mock/w"});

  auto real = MakeAgentRunner({});
  AgentInvocation twice = Cli("exit 1");
  AgentSource second;
  second.cli = "echo from the second";
  twice.sources.push_back(second);
  r = real->Run(twice, ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "from the second\n");
  EXPECT_EQ(r.fallbacks_taken,
            std::vector<std::string>{"cli: echo from the second"});
}

TEST_F(CliSourceTest, UnderAMockScriptTheCliIsAnsweredByTheMock) {
  auto runner = MockRunner("cli: [{say: scripted cli answer}]");
  AgentResult r = runner->Run(Cli("exit 1"), ctx_);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "scripted cli answer");
  auto body = nlohmann::json::parse(runner->MockRequests().at(0).body);
  EXPECT_FALSE(body.contains("tools"));
}

}  // namespace
}  // namespace steps::agent
