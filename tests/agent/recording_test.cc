// MockRecorder: each exchange becomes the entry that replays it, with the
// expectations that hold on replay and nothing time-based or secret.
#include "agent/recording.h"

#include <gtest/gtest.h>

#include "agent/deadline_notice.h"
#include "providers/exchange.h"

namespace steps::agent {
namespace {

class RecordingTest : public ::testing::Test {
 protected:
  void Record(const ChatRequest& request, ChatResult result,
              const std::string& source = "openai/gpt-4o", int index = 0) {
    ProviderExchange x;
    x.agent = "coder";
    x.step = "build";
    x.source = source;
    x.source_index = index;
    x.request = &request;
    x.result = &result;
    recorder_.OnExchange(x);
  }
  static ChatRequest Request(std::vector<Message> messages) {
    ChatRequest r;
    r.model = "gpt-4o";
    r.messages = std::move(messages);
    r.tools = {{"read_file", "", ""}, {"run_shell", "", ""}};
    return r;
  }
  static ProviderError Error(ProviderErrorKind kind, int status = 0) {
    ProviderError e;
    e.kind = kind;
    e.http_status = status;
    e.message = "HTTP " + std::to_string(status) + ": key sk-SECRET-123";
    return e;
  }

  std::shared_ptr<const Redactor> redactor_ = std::make_shared<Redactor>(
      std::vector<std::string>{"sk-SECRET-123", "deploy-SECRET-9"});
  MockRecorder recorder_{redactor_};
};

TEST_F(RecordingTest, AnswersAndFailuresBecomeEntriesInOrder) {
  const std::string system =
      "You are careful.\n\n" +
      DisclosureText(Millis(600000),
                     WallTime(std::chrono::seconds(1000000000)));
  ChatRequest first =
      Request({Message::System(system), Message::User("Fix the build.")});
  Record(first, Error(ProviderErrorKind::kHttpStatus, 500));
  Record(first, Error(ProviderErrorKind::kConnection));
  ChatAnswer call;
  call.tool_calls = {{"call_abc", "read_file", R"({"path":"a"})"}};
  call.usage = {120, 7, 0.5};
  Record(first, call, "anthropic/claude", 1);
  ChatRequest second = first;
  second.messages.push_back(Message::Assistant("", call.tool_calls));
  second.messages.push_back(
      Message::ToolResult("call_abc", "line one\nline two", "read_file"));
  second.messages.push_back(
      Message::User(NudgeText(Millis(5000), Millis(600000))));
  ChatAnswer done;
  done.text = "Fixed; the token was deploy-SECRET-9.";
  Record(second, done, "anthropic/claude", 1);

  MockScript script = recorder_.Script();
  ASSERT_EQ(recorder_.requests(), 4);
  EXPECT_EQ(recorder_.agents(), std::vector<std::string>{"coder"});
  const std::vector<MockEntry>& e = script.scripts.at("coder");
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].action, MockEntry::Action::kStatus);
  EXPECT_EQ(e[0].status, 500);
  EXPECT_EQ(e[0].note,
            "request 1 of 'coder', step 'build': HTTP 500 from openai/gpt-4o\n"
            "HTTP 500: key ***");
  EXPECT_EQ(*e[0].expect->model, "gpt-4o");
  EXPECT_EQ(*e[0].expect->tools,
            (std::vector<std::string>{"read_file", "run_shell"}));
  EXPECT_EQ(*e[0].expect->last_is, "Fix the build.");
  // The persona without the disclosure's clock time.
  EXPECT_EQ(*e[0].expect->system_contains, "You are careful.");
  EXPECT_EQ(e[1].action, MockEntry::Action::kDrop);
  EXPECT_EQ(e[2].action, MockEntry::Action::kSay);
  ASSERT_EQ(e[2].calls.size(), 1u);
  EXPECT_EQ(e[2].calls[0].id, "");  // Ids are the replay's own.
  EXPECT_EQ(e[2].calls[0].arguments, R"({"path":"a"})");
  EXPECT_EQ(e[2].usage->prompt_tokens, 120);
  EXPECT_EQ(*e[2].usage->cost, 0.5);
  EXPECT_EQ(e[2].note,
            "request 3 of 'coder', step 'build': 1 tool call from "
            "anthropic/claude (fallback 1)");
  // After an answer: no persona; the nudge is not expected.
  EXPECT_FALSE(e[3].expect->system_contains.has_value());
  EXPECT_FALSE(e[3].expect->last_is.has_value());
  EXPECT_FALSE(e[3].expect->last_contains.has_value());
  EXPECT_EQ(e[3].text, "Fixed; the token was ***.");
  // Written and read back, nothing secret is left.
  std::string text = recorder_.Text("header");
  EXPECT_EQ(text.find("SECRET"), std::string::npos) << text;
  auto back = ParseMockScriptText(text);
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
  EXPECT_EQ(back->scripts.at("coder").size(), 4u);
}

TEST_F(RecordingTest, ToolResultsAreExpectedByTheirFirstLine) {
  ChatRequest r =
      Request({Message::User("Go."),
               Message::Assistant("", {{"c1", "run_shell", "{}"}}),
               Message::ToolResult("c1", std::string(300, 'x') + "\nmore")});
  Record(r, ChatAnswer{});
  const MockScript script = recorder_.Script();
  const MockEntry& e = script.scripts.at("coder").at(0);
  EXPECT_EQ(*e.expect->tool_result, true);
  EXPECT_EQ(*e.expect->last_contains, std::string(200, 'x'));
  EXPECT_FALSE(e.expect->last_is.has_value());
}

TEST_F(RecordingTest, ATextHoldingASecretIsExpectedByItsLongestCleanPart) {
  Record(Request({Message::User("Deploy with deploy-SECRET-9 to the staging "
                                "cluster")}),
         ChatAnswer{});
  const MockScript script = recorder_.Script();
  const MockEntry& e = script.scripts.at("coder").at(0);
  EXPECT_FALSE(e.expect->last_is.has_value());
  EXPECT_EQ(*e.expect->last_contains, " to the staging cluster");
}

TEST_F(RecordingTest, FailuresMapToTheEntriesThatReproduceThem) {
  ChatRequest r = Request({Message::User("Go.")});
  Record(r, Error(ProviderErrorKind::kTimeout));
  Record(r, Error(ProviderErrorKind::kMalformed));
  Record(r, Error(ProviderErrorKind::kStreamError));
  Record(r, Error(ProviderErrorKind::kCancelled));  // Nothing to replay.
  Record(r, Error(ProviderErrorKind::kConfig));     // Nothing was sent.
  const MockScript script = recorder_.Script();
  const auto& e = script.scripts.at("coder");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].action, MockEntry::Action::kHang);
  EXPECT_EQ(e[1].action, MockEntry::Action::kGarbage);
  EXPECT_EQ(e[2].action, MockEntry::Action::kErrorEvent);
  EXPECT_EQ(e[2].text, "HTTP 0: key ***");
}

// A 429 with Retry-After is recorded with the wait it asked for, which the
// replay's answer carries again (and the provider reads, in milliseconds).
TEST_F(RecordingTest, TheWaitAServerAskedForIsRecorded) {
  ChatRequest r = Request({Message::User("Go.")});
  ProviderError busy = Error(ProviderErrorKind::kHttpStatus, 429);
  busy.retry_after = Millis(1500);
  Record(r, busy);
  Record(r, Error(ProviderErrorKind::kHttpStatus, 503));
  const MockScript script = recorder_.Script();
  const auto& e = script.scripts.at("coder");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].headers, (HttpHeaders{{"retry-after-ms", "1500"}}));
  EXPECT_TRUE(e[1].headers.empty());
  auto back = ParseMockScriptText(recorder_.Text("header"));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->scripts.at("coder")[0].headers, e[0].headers);
  EXPECT_EQ(ParseRetryAfter(back->scripts.at("coder")[0].headers, WallTime{}),
            Millis(1500));
}

}  // namespace
}  // namespace steps::agent
