// The adapters' wire formats, without a network: request bodies as the
// providers document them, and answers as they send them.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/sse.h"
#include "providers/anthropic.h"
#include "providers/encoded_history.h"
#include "providers/exchange.h"
#include "providers/openai.h"

namespace steps {
namespace {

using nlohmann::json;

ChatRequest ToolConversation() {
  ChatRequest r;
  r.model = "gpt-4o";
  r.messages.push_back(Message::System("You are terse."));
  r.messages.push_back(Message::User("Read a.txt"));
  r.messages.push_back(
      Message::Assistant("", {{"call_1", "read_file", R"({"path":"a.txt"})"}}));
  r.messages.push_back(Message::ToolResult("call_1", "hello", "read_file"));
  r.tools.push_back(
      {"read_file", "Read a file",
       R"({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]})"});
  r.tool_choice = ToolChoice::Required();
  return r;
}

TEST(SseTest, SplitsEventsAcrossArbitraryPieces) {
  std::string stream =
      ": ping\n\nevent: delta\ndata: {\"a\":1}\n\ndata: x\ndata: y\r\n\r\n"
      "data: [DONE]\n\n";
  for (size_t step = 1; step <= stream.size(); ++step) {
    SseParser parser;
    std::vector<SseEvent> events;
    for (size_t i = 0; i < stream.size(); i += step) {
      for (auto& e : parser.Feed(std::string_view(stream).substr(i, step))) {
        events.push_back(e);
      }
    }
    ASSERT_EQ(events.size(), 3u) << "step " << step;
    EXPECT_EQ(events[0].event, "delta");
    EXPECT_EQ(events[0].data, "{\"a\":1}");
    EXPECT_EQ(events[1].data, "x\ny");
    EXPECT_EQ(events[2].data, "[DONE]");
  }
}

TEST(RetryAfterTest, ReadsSecondsMillisecondsAndDates) {
  WallTime now =
      std::chrono::system_clock::from_time_t(1445412480);  // 07:28:00
  EXPECT_EQ(ParseRetryAfter({{"Retry-After", "3"}}, now), Millis(3000));
  EXPECT_EQ(ParseRetryAfter({{"retry-after", "1.5"}}, now), Millis(1500));
  EXPECT_EQ(
      ParseRetryAfter({{"retry-after-ms", "250"}, {"Retry-After", "9"}}, now),
      Millis(250));
  EXPECT_EQ(
      ParseRetryAfter({{"Retry-After", "Wed, 21 Oct 2015 07:28:10 GMT"}}, now),
      Millis(10000));
  EXPECT_EQ(
      ParseRetryAfter({{"Retry-After", "Wed, 21 Oct 2015 07:27:00 GMT"}}, now),
      Millis(0));
  EXPECT_EQ(ParseRetryAfter({{"Retry-After", "soon"}}, now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter({}, now), std::nullopt);
}

// A body built reusing the encodings of earlier requests is byte for byte
// the body built whole, and that is the canonical dump of its JSON; only
// the messages no earlier request carried are encoded.
TEST(EncodedHistoryTest, ReusedBodiesAreTheBodiesBuiltWhole) {
  ChatRequest r = ToolConversation();
  r.params.stop = {"\x01steps:messages\x01"};  // The slot's own text.
  EncodedHistory history;
  int64_t expect_reused = 0;
  for (int turn = 0; turn < 6; ++turn) {
    SCOPED_TRACE(turn);
    const std::string whole = BuildOpenAiRequestBody(r, false, false);
    const std::string reused =
        BuildOpenAiRequestBody(r, false, false, &history);
    EXPECT_EQ(reused, whole);
    EXPECT_EQ(DumpJson(json::parse(whole)), whole);
    EXPECT_EQ(json::parse(whole)["messages"].size(), r.messages.size());
    EXPECT_EQ(history.reused(), expect_reused);
    expect_reused += static_cast<int64_t>(r.messages.size());
    const std::string id = "call_" + std::to_string(turn + 2);
    r.messages.push_back(Message::Assistant(
        "a \"quoted\", comma\n", {{id, "read_file", R"({"path":"b"})"}}));
    r.messages.push_back(Message::ToolResult(
        id, std::string("bad \xff utf-8 and \x01steps:messages\x01"),
        "read_file"));
  }
  EXPECT_EQ(history.encoded(), static_cast<int64_t>(r.messages.size()) - 2);
}

// Each kind of message is sent as the dump of its json value: the fields
// the chat completions API documents, with nothing else (tool_name stays
// home), null content for an assistant turn that only calls tools.
TEST(OpenAiWireTest, MessagesAreWrittenAsTheirJsonValuesDump) {
  ChatRequest r;
  r.model = "m";
  r.messages = {
      Message::System("sys \x01\x7f \"q\" \\ /"),
      Message::User("caf\xC3\xA9 \xE2\x82 cut"),
      Message::Assistant("plain answer", {}),
      Message::Assistant("", {}),
      Message::Assistant("", {{"c1", "read_file", R"({"path":"a"})"},
                              {"c2", "run\tshell", "not json \xFF"}}),
      Message::Assistant("thinking aloud", {{"c3", "x", ""}}),
      Message::ToolResult("c1", "line\nline", "read_file"),
      Message::ToolResult("c2", "", "run_shell"),
  };
  const json expected_messages = json::array({
      {{"role", "system"}, {"content", "sys \x01\x7f \"q\" \\ /"}},
      {{"role", "user"}, {"content", "caf\xC3\xA9 \xEF\xBF\xBD cut"}},
      {{"role", "assistant"}, {"content", "plain answer"}},
      {{"role", "assistant"}, {"content", ""}},
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        {{{"id", "c1"},
          {"type", "function"},
          {"function", {{"name", "read_file"}, {"arguments", R"({"path":"a"})"}}}},
         {{"id", "c2"},
          {"type", "function"},
          {"function",
           {{"name", "run\tshell"}, {"arguments", "not json \xEF\xBF\xBD"}}}}}}},
      {{"role", "assistant"},
       {"content", "thinking aloud"},
       {"tool_calls",
        {{{"id", "c3"},
          {"type", "function"},
          {"function", {{"name", "x"}, {"arguments", ""}}}}}}},
      {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "line\nline"}},
      {{"role", "tool"}, {"tool_call_id", "c2"}, {"content", ""}},
  });
  const std::string body = BuildOpenAiRequestBody(r, false, false);
  EXPECT_EQ(body, DumpJson(json{{"model", "m"}, {"messages", expected_messages}}));
}

// The body around the messages is made once and kept while nothing it is
// made from changes; a change to any field it carries makes it again, so
// the body sent is always the one built whole.
TEST(EncodedHistoryTest, TheFrameIsMadeAgainWhenAnythingInItChanges) {
  ChatRequest r = ToolConversation();
  EncodedHistory history;
  bool stream = false, cost = false;
  int64_t made = 0;
  auto expect_body = [&](bool new_frame, const char* what) {
    SCOPED_TRACE(what);
    EXPECT_EQ(BuildOpenAiRequestBody(r, stream, cost, &history),
              BuildOpenAiRequestBody(r, stream, cost));
    made += new_frame ? 1 : 0;
    EXPECT_EQ(history.frames_made(), made);
  };
  expect_body(true, "first");
  r.messages.push_back(Message::User("more"));
  expect_body(false, "a new message");
  const std::vector<std::pair<const char*, std::function<void()>>> changes = {
      {"model", [&] { r.model = "gpt-5"; }},
      {"a tool's name", [&] { r.tools[0].name = "read"; }},
      {"a tool's description", [&] { r.tools[0].description = "Reads"; }},
      {"a tool's parameters", [&] { r.tools[0].parameters_json = ""; }},
      {"another tool", [&] { r.tools.push_back({"run_shell", "", ""}); }},
      {"tool choice", [&] { r.tool_choice = ToolChoice::Function("read"); }},
      {"tool choice's function",
       [&] { r.tool_choice = ToolChoice::Function("run_shell"); }},
      {"max_tokens", [&] { r.max_tokens = 100; }},
      {"max_tokens again", [&] { r.max_tokens = 101; }},
      {"max_output_tokens", [&] { r.params.max_output_tokens = 7; }},
      {"temperature", [&] { r.params.temperature = 0.5; }},
      {"temperature 0", [&] { r.params.temperature = 0.0; }},
      {"top_p", [&] { r.params.top_p = 0.9; }},
      {"seed", [&] { r.params.seed = 3; }},
      {"stop", [&] { r.params.stop = {"END"}; }},
      {"stop split", [&] { r.params.stop = {"EN", "D"}; }},
      {"json schema", [&] { r.params.json_schema = R"({"type":"object"})"; }},
      {"stream", [&] { stream = true; }},
      {"cost", [&] { cost = true; }},
      {"no tools", [&] { r.tools.clear(); }},
  };
  for (const auto& [what, change] : changes) {
    change();
    expect_body(true, what);
    expect_body(false, what);
  }
}

// A history that changed before its end (another conversation, an edited
// message) is encoded again from the first message that differs; one that
// got shorter keeps what it still has.
TEST(EncodedHistoryTest, AChangedHistoryIsEncodedAgainFromTheChange) {
  ChatRequest r = ToolConversation();
  EncodedHistory history;
  BuildOpenAiRequestBody(r, false, false, &history);
  ASSERT_EQ(history.encoded(), 4);
  r.messages[2].tool_calls[0].arguments = R"({"path":"c.txt"})";
  EXPECT_EQ(BuildOpenAiRequestBody(r, false, false, &history),
            BuildOpenAiRequestBody(r, false, false));
  EXPECT_EQ(history.reused(), 2);
  EXPECT_EQ(history.encoded(), 6);
  r.messages.resize(3);
  EXPECT_EQ(BuildOpenAiRequestBody(r, false, false, &history),
            BuildOpenAiRequestBody(r, false, false));
  EXPECT_EQ(history.reused(), 5);
  EXPECT_EQ(history.encoded(), 6);
  r.messages.clear();
  EXPECT_EQ(BuildOpenAiRequestBody(r, false, false, &history),
            BuildOpenAiRequestBody(r, false, false));
  EXPECT_EQ(json::parse(
                BuildOpenAiRequestBody(r, false, false, &history))["messages"],
            json::array());
}

// A request that vouches for its history (the same history_id as the last
// one) has only its last kept message compared, not all of them: a long
// conversation's check costs its new messages. The body is still the one
// built whole. A changed vouch, an unvouched request, a shorter history or
// a changed last message are all compared in full.
TEST(EncodedHistoryTest, AVouchedHistoryComparesOnlyItsLastKeptMessage) {
  ChatRequest r = ToolConversation();
  r.history_id = NewHistoryId();
  EncodedHistory history;
  auto expect_body = [&](int64_t compared, const char* what) {
    SCOPED_TRACE(what);
    EXPECT_EQ(BuildOpenAiRequestBody(r, false, false, &history),
              BuildOpenAiRequestBody(r, false, false));
    EXPECT_EQ(history.compared(), compared);
  };
  expect_body(0, "first request: nothing kept");
  for (int turn = 0; turn < 50; ++turn) {
    r.messages.push_back(Message::Assistant("a", {{"c", "read_file", "{}"}}));
    r.messages.push_back(Message::ToolResult("c", "r", "read_file"));
  }
  expect_body(1, "vouched");
  r.messages.push_back(Message::User("more"));
  expect_body(2, "vouched again");
  const int64_t kept = static_cast<int64_t>(r.messages.size());

  r.history_id = NewHistoryId();
  r.messages.push_back(Message::User("more"));
  int64_t now = 2 + kept;
  expect_body(now, "a new vouch: all compared");
  const int64_t all = kept + 1;
  r.history_id = 0;
  expect_body(now += all, "no vouch: all compared");
  r.history_id = NewHistoryId();
  expect_body(now += all, "new vouch");
  r.messages.back().content = "changed at its end";
  expect_body(now += 1 + all, "the last kept one differs: all compared");
  const int64_t before = history.compared();
  r.messages.resize(3);
  expect_body(before + 3, "shorter: compared in full");
}

// A large body given back lends its room to the next request's body (the
// same storage, not a fresh allocation); a small one is not kept.
TEST(EncodedHistoryTest, ALargeBodysRoomServesTheNextBody) {
  ChatRequest r = ToolConversation();
  r.messages.push_back(Message::User(std::string(100 * 1024, 'x')));
  EncodedHistory history;
  std::string first = BuildOpenAiRequestBody(r, false, false, &history);
  first.reserve(first.size() + 4096);  // Room for what the next one adds.
  const char* room = first.data();
  history.GiveBack(std::move(first));
  std::string lent = history.TakeBuffer();
  EXPECT_TRUE(lent.empty());
  EXPECT_EQ(lent.data(), room);
  history.GiveBack(std::move(lent));
  r.messages.push_back(Message::User("more"));
  const std::string second = BuildOpenAiRequestBody(r, false, false, &history);
  EXPECT_EQ(second, BuildOpenAiRequestBody(r, false, false));
  EXPECT_EQ(second.data(), room);

  EncodedHistory small;
  ChatRequest s = ToolConversation();
  std::string body = BuildOpenAiRequestBody(s, false, false, &small);
  ASSERT_LT(body.capacity(), 64u * 1024);
  small.GiveBack(std::move(body));
  EXPECT_EQ(small.TakeBuffer().capacity(), std::string().capacity());
}

TEST(RedactTest, RemovesEveryOccurrence) {
  EXPECT_EQ(Redact("key sk-1 and sk-1", "sk-1"),
            "key [redacted] and [redacted]");
  EXPECT_EQ(Redact("nothing", ""), "nothing");
}

TEST(OpenAiWireTest, RequestBodyHasTheStandardShape) {
  json body =
      json::parse(BuildOpenAiRequestBody(ToolConversation(), false, false));
  EXPECT_EQ(body["model"], "gpt-4o");
  ASSERT_EQ(body["messages"].size(), 4u);
  EXPECT_EQ(body["messages"][0],
            json({{"role", "system"}, {"content", "You are terse."}}));
  const json& assistant = body["messages"][2];
  EXPECT_EQ(assistant["role"], "assistant");
  EXPECT_TRUE(assistant["content"].is_null());
  EXPECT_EQ(assistant["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(assistant["tool_calls"][0]["type"], "function");
  EXPECT_EQ(assistant["tool_calls"][0]["function"]["name"], "read_file");
  EXPECT_EQ(assistant["tool_calls"][0]["function"]["arguments"],
            R"({"path":"a.txt"})");
  EXPECT_EQ(body["messages"][3], json({{"role", "tool"},
                                       {"tool_call_id", "call_1"},
                                       {"content", "hello"}}));
  EXPECT_EQ(body["tools"][0]["type"], "function");
  EXPECT_EQ(body["tools"][0]["function"]["name"], "read_file");
  EXPECT_EQ(body["tools"][0]["function"]["parameters"]["required"][0], "path");
  EXPECT_EQ(body["tool_choice"], "required");
  EXPECT_FALSE(body.contains("stream"));

  ChatRequest named = ToolConversation();
  named.tool_choice = ToolChoice::Function("read_file");
  json streamed = json::parse(BuildOpenAiRequestBody(named, true, true));
  EXPECT_EQ(
      streamed["tool_choice"],
      json({{"type", "function"}, {"function", {{"name", "read_file"}}}}));
  EXPECT_EQ(streamed["stream"], true);
  EXPECT_EQ(streamed["stream_options"]["include_usage"], true);
  EXPECT_EQ(streamed["usage"]["include"], true);
}

TEST(OpenAiWireTest, ParsesAnAnswerWithToolCallsAndCost) {
  ChatResult r = ParseOpenAiResponse(R"({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
    "model": "gpt-4o-2024",
    "choices": [{"index": 0, "finish_reason": "tool_calls",
      "message": {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_a", "type": "function",
         "function": {"name": "run_shell", "arguments": "{\"command\":\"ls\"}"}},
        {"id": "call_b", "type": "function",
         "function": {"name": "read_file", "arguments": "{\"path\":\"x\"}"}}]}}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17,
              "cost": 0.0012}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ChatAnswer& a = r.answer();
  EXPECT_EQ(a.id, "chatcmpl-1");
  EXPECT_EQ(a.model, "gpt-4o-2024");
  EXPECT_EQ(a.text, "");
  ASSERT_EQ(a.tool_calls.size(), 2u);
  EXPECT_EQ(a.tool_calls[0].name, "run_shell");
  EXPECT_EQ(a.tool_calls[0].arguments, R"({"command":"ls"})");
  EXPECT_EQ(a.tool_calls[1].id, "call_b");
  EXPECT_EQ(a.finish_reason, "tool_calls");
  EXPECT_EQ(a.usage.prompt_tokens, 12);
  EXPECT_EQ(a.usage.completion_tokens, 5);
  ASSERT_TRUE(a.usage.cost_usd.has_value());
  EXPECT_DOUBLE_EQ(*a.usage.cost_usd, 0.0012);
}

TEST(OpenAiWireTest, MalformedAnswersAreClassified) {
  for (const char* body : {"not json", "[]", R"({"choices": []})",
                           R"({"choices": [{"index": 0}]})"}) {
    ChatResult r = ParseOpenAiResponse(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().kind, ProviderErrorKind::kMalformed) << body;
    EXPECT_TRUE(r.error().retryable());
  }
}

TEST(OpenAiWireTest, AssemblesAStreamOfTextAndToolCallFragments) {
  const char* stream =
      R"(data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read_file","arguments":""}}]},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"pa"}}]},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":\"a\"}"}}]},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}

data: [DONE]

)";
  SseParser parser;
  OpenAiStreamAssembler assembler;
  bool more = true;
  for (const SseEvent& e : parser.Feed(stream)) more = assembler.Add(e);
  EXPECT_FALSE(more);  // Stopped at [DONE].
  ChatResult r = assembler.Finish();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.answer().text, "Hello");
  ASSERT_EQ(r.answer().tool_calls.size(), 1u);
  EXPECT_EQ(r.answer().tool_calls[0].id, "call_1");
  EXPECT_EQ(r.answer().tool_calls[0].arguments, R"({"path":"a"})");
  EXPECT_EQ(r.answer().finish_reason, "tool_calls");
  EXPECT_EQ(r.answer().usage.total_tokens(), 7);
}

TEST(OpenAiWireTest, AnErrorEventBeforeOutputIsRetryable) {
  OpenAiStreamAssembler assembler;
  SseEvent e;
  e.data = R"({"error":{"message":"Provider overloaded","code":502}})";
  EXPECT_FALSE(assembler.Add(e));
  ChatResult r = assembler.Finish();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kStreamError);
  EXPECT_TRUE(r.error().retryable());
  EXPECT_NE(r.error().message.find("before any output: Provider overloaded"),
            std::string::npos);
}

TEST(OpenAiWireTest, AStreamCutShortIsMalformed) {
  OpenAiStreamAssembler assembler;
  SseEvent e;
  e.data = R"({"id":"c","choices":[{"index":0,"delta":{"content":"x"}}]})";
  EXPECT_TRUE(assembler.Add(e));
  ChatResult r = assembler.Finish();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kMalformed);
}

TEST(AnthropicWireTest, RequestBodyUsesBlocksAndATopLevelSystem) {
  json body =
      json::parse(BuildAnthropicRequestBody(ToolConversation(), false, 4096));
  EXPECT_EQ(body["model"], "gpt-4o");
  EXPECT_EQ(body["max_tokens"], 4096);
  EXPECT_EQ(body["system"], "You are terse.");
  ASSERT_EQ(body["messages"].size(), 3u);
  EXPECT_EQ(body["messages"][0],
            json({{"role", "user"}, {"content", "Read a.txt"}}));
  const json& assistant = body["messages"][1];
  EXPECT_EQ(assistant["content"][0], json({{"type", "tool_use"},
                                           {"id", "call_1"},
                                           {"name", "read_file"},
                                           {"input", {{"path", "a.txt"}}}}));
  EXPECT_EQ(body["messages"][2]["role"], "user");
  EXPECT_EQ(body["messages"][2]["content"][0], json({{"type", "tool_result"},
                                                     {"tool_use_id", "call_1"},
                                                     {"content", "hello"}}));
  EXPECT_EQ(body["tools"][0]["name"], "read_file");
  EXPECT_EQ(body["tools"][0]["input_schema"]["type"], "object");
  EXPECT_EQ(body["tool_choice"], json({{"type", "any"}}));
}

// The example answer of the Messages API reference, with a tool_use block.
TEST(AnthropicWireTest, ParsesARecordedAnswer) {
  ChatResult r = ParseAnthropicResponse(R"({
    "id": "msg_01Aq9w938a90dw8q", "type": "message", "role": "assistant",
    "model": "claude-3-5-sonnet-20241022",
    "content": [
      {"type": "text", "text": "I'll check the weather."},
      {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9",
       "name": "get_weather", "input": {"location": "San Francisco, CA"}}],
    "stop_reason": "tool_use", "stop_sequence": null,
    "usage": {"input_tokens": 472, "output_tokens": 91}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.answer().text, "I'll check the weather.");
  ASSERT_EQ(r.answer().tool_calls.size(), 1u);
  EXPECT_EQ(r.answer().tool_calls[0].id, "toolu_01A09q90qw90lq917835lq9");
  EXPECT_EQ(json::parse(r.answer().tool_calls[0].arguments),
            json({{"location", "San Francisco, CA"}}));
  EXPECT_EQ(r.answer().finish_reason, "tool_calls");
  EXPECT_EQ(r.answer().usage.prompt_tokens, 472);
  EXPECT_EQ(r.answer().usage.completion_tokens, 91);
}

// The streaming example of the Messages API reference (text, then a tool).
TEST(AnthropicWireTest, AssemblesARecordedStream) {
  const char* stream = R"(event: message_start
data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-3-haiku-20240307","stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2},"content":[],"stop_reason":null}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Okay"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", let's check."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"San Francisco, CA\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

)";
  SseParser parser;
  AnthropicStreamAssembler assembler;
  for (const SseEvent& e : parser.Feed(stream)) assembler.Add(e);
  ChatResult r = assembler.Finish();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.answer().id, "msg_014p7gG3wDgGV9EUtLvnow3U");
  EXPECT_EQ(r.answer().text, "Okay, let's check.");
  ASSERT_EQ(r.answer().tool_calls.size(), 1u);
  EXPECT_EQ(r.answer().tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(r.answer().tool_calls[0].arguments),
            json({{"location", "San Francisco, CA"}}));
  EXPECT_EQ(r.answer().finish_reason, "tool_calls");
  EXPECT_EQ(r.answer().usage.prompt_tokens, 472);
  EXPECT_EQ(r.answer().usage.completion_tokens, 89);
}

TEST(AnthropicWireTest, OverloadedErrorEventIsRetryable) {
  SseParser parser;
  AnthropicStreamAssembler assembler;
  for (const SseEvent& e : parser.Feed(
           "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": "
           "\"overloaded_error\", \"message\": \"Overloaded\"}}\n\n")) {
    assembler.Add(e);
  }
  ChatResult r = assembler.Finish();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kStreamError);
  EXPECT_TRUE(r.error().retryable());
}

}  // namespace
}  // namespace steps
