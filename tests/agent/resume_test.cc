// RebuildConversation: the history, the unfinished tool calls and the
// counts a resumed conversation starts from, at each point it can die.
#include "agent/resume.h"

#include <gtest/gtest.h>

namespace steps::agent {
namespace {

using Kind = ConversationCheckpoint::Kind;

ConversationCheckpoint Request(int turn, std::vector<Message> messages) {
  ConversationCheckpoint cp;
  cp.kind = Kind::kRequest;
  cp.turn = turn;
  cp.messages = std::move(messages);
  return cp;
}

ConversationCheckpoint Answer(int turn, std::vector<ToolCall> calls) {
  ConversationCheckpoint cp;
  cp.kind = Kind::kAnswer;
  cp.turn = turn;
  cp.messages = {Message::Assistant(calls.empty() ? "done" : "", calls)};
  cp.provider_requests = 1;
  cp.prompt_tokens = 10;
  cp.completion_tokens = 3;
  cp.usd = 0.5;
  return cp;
}

ConversationCheckpoint Tool(Kind kind, const std::string& id) {
  ConversationCheckpoint cp;
  cp.kind = kind;
  cp.call_id = id;
  if (kind == Kind::kToolFinished)
    cp.messages = {Message::ToolResult(id, "out " + id, "run_shell")};
  return cp;
}

TEST(RebuildConversationTest, NothingStoredIsAnEmptyConversation) {
  ResumedConversation r = RebuildConversation({});
  EXPECT_TRUE(r.messages.empty());
  EXPECT_TRUE(r.unfinished_calls.empty());
  EXPECT_EQ(r.turns, 0);
}

TEST(RebuildConversationTest, ARequestWithoutAnswerIsAllThereIs) {
  ResumedConversation r = RebuildConversation(
      {Request(1, {Message::System("s"), Message::User("go")})});
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "go");
  EXPECT_EQ(r.turns, 0);  // The request is sent again: it had no answer.
  EXPECT_EQ(r.provider_requests, 0);
}

TEST(RebuildConversationTest, FinishedCallsStayStartedOnesRunAgain) {
  std::vector<ToolCall> calls = {{"c1", "run_shell", "{}"},
                                 {"c2", "run_shell", "{}"},
                                 {"c3", "run_shell", "{}"}};
  ResumedConversation r = RebuildConversation(
      {Request(1, {Message::User("go")}), Answer(1, calls),
       Tool(Kind::kToolStarted, "c1"), Tool(Kind::kToolFinished, "c1"),
       Tool(Kind::kToolStarted, "c2")});
  // user, assistant, c1's result.
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[2].tool_call_id, "c1");
  ASSERT_EQ(r.unfinished_calls.size(), 2u);
  EXPECT_EQ(r.unfinished_calls[0].id, "c2");
  EXPECT_EQ(r.unfinished_calls[1].id, "c3");
  // Only c2 had started: c3 runs for the first time.
  EXPECT_EQ(r.restarted, std::vector<std::string>{"c2"});
  EXPECT_EQ(r.turns, 1);
  EXPECT_EQ(r.prompt_tokens, 10);
}

TEST(RebuildConversationTest, CountsAddUpOverTurns) {
  std::vector<ToolCall> calls = {{"c1", "run_shell", "{}"}};
  ResumedConversation r = RebuildConversation(
      {Request(1, {Message::User("go")}), Answer(1, calls),
       Tool(Kind::kToolStarted, "c1"), Tool(Kind::kToolFinished, "c1"),
       Request(2, {}), Answer(2, {})});
  EXPECT_TRUE(r.unfinished_calls.empty());
  EXPECT_EQ(r.turns, 2);
  EXPECT_EQ(r.provider_requests, 2);
  EXPECT_EQ(r.prompt_tokens, 20);
  EXPECT_EQ(r.completion_tokens, 6);
  EXPECT_DOUBLE_EQ(r.usd, 1.0);
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages.back().content, "done");
}

}  // namespace
}  // namespace steps::agent
