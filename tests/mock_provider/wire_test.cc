// The mock's answers on the wire, checked field by field against what the
// OpenAI and Anthropic SDKs require, for requests shaped as those SDKs send
// them, over real HTTP.
#include <curl/curl.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "mock_provider/server.h"
#include "providers/curl_transport.h"
#include "core/sse.h"

namespace steps {
namespace {

using nlohmann::json;

// A request as the OpenAI Python SDK serialises a tool round trip.
const char* kSdkRequest = R"({
  "model": "gpt-4o-mini",
  "messages": [
    {"role": "system", "content": "You are a careful reviewer."},
    {"role": "user", "content": [{"type": "text", "text": "Read a.txt"}]},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_abc", "type": "function",
       "function": {"name": "read_file", "arguments": "{\"path\": \"a.txt\"}"}}]},
    {"role": "tool", "tool_call_id": "call_abc", "content": "hello"}
  ],
  "tools": [{"type": "function", "function": {
    "name": "write_file", "description": "Write a file",
    "parameters": {"type": "object",
      "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
      "required": ["path", "content"]}}}],
  "tool_choice": "auto"
})";

class WireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto script = ParseMockScriptText(R"(
reviewer:
  - expect: {system_contains: careful, tool_result: true, last_contains: hello}
    say: Writing it.
    call: {name: write_file, arguments: {path: b.txt, content: "hi \"there\""}}
  - expect: {request: 2}
    say: Writing it.
    call: {name: write_file, arguments: {path: b.txt, content: "hi \"there\""}}
    usage: {prompt_tokens: 42, completion_tokens: 7}
  - say: Done.
  - say: Done.
)");
    ASSERT_TRUE(script.ok()) << script.status().message();
    engine_ = std::make_shared<MockEngine>(std::move(*script));
    server_ = std::make_unique<MockHttpServer>(engine_);
    ASSERT_TRUE(server_->Start().ok());
  }
  HttpResponse Post(const std::string& path, const std::string& body) {
    HttpRequest request;
    request.url = "http://127.0.0.1:" + std::to_string(server_->port()) + path;
    request.headers = {{"Content-Type", "application/json"},
                       {"X-Steps-Agent", "reviewer"}};
    request.body = body;
    TransportResult r = transport_.Post(request, TransferOptions());
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? r.response() : HttpResponse();
  }
  static std::vector<json> DataEvents(const std::string& body,
                                      bool* saw_done = nullptr) {
    std::vector<json> out;
    SseParser parser;
    for (const SseEvent& e : parser.Feed(body)) {
      if (e.data == "[DONE]") {
        if (saw_done) *saw_done = true;
        continue;
      }
      out.push_back(json::parse(e.data));
    }
    return out;
  }

  CurlTransport transport_;
  std::shared_ptr<MockEngine> engine_;
  std::unique_ptr<MockHttpServer> server_;
};

TEST_F(WireTest, PlainChatCompletionHasEverythingTheSdksRequire) {
  HttpResponse r = Post("/v1/chat/completions", kSdkRequest);
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(FindHeader(r.headers, "content-type")->find("application/json"),
            std::string::npos);
  json j = json::parse(r.body);
  EXPECT_TRUE(j["id"].is_string());
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_TRUE(j["created"].is_number_integer());
  EXPECT_EQ(j["model"], "gpt-4o-mini");
  ASSERT_EQ(j["choices"].size(), 1u);
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_EQ(choice["message"]["content"], "Writing it.");
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_TRUE(call["id"].is_string());
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "write_file");
  ASSERT_TRUE(call["function"]["arguments"].is_string());
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
            json({{"path", "b.txt"}, {"content", "hi \"there\""}}));
  const json& usage = j["usage"];
  EXPECT_TRUE(usage["prompt_tokens"].is_number_integer());
  EXPECT_TRUE(usage["completion_tokens"].is_number_integer());
  EXPECT_EQ(usage["total_tokens"], usage["prompt_tokens"].get<int>() +
                                       usage["completion_tokens"].get<int>());
  EXPECT_TRUE(engine_->ExpectationFailures().empty())
      << engine_->ExpectationFailures()[0];
}

TEST_F(WireTest, StreamedChatCompletionHasEverythingTheSdksRequire) {
  Post("/v1/chat/completions", kSdkRequest);  // Entry 1.
  json request = json::parse(kSdkRequest);
  request["stream"] = true;
  request["stream_options"] = {{"include_usage", true}};
  HttpResponse r = Post("/v1/chat/completions", request.dump());
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(FindHeader(r.headers, "content-type")->find("text/event-stream"),
            std::string::npos);
  bool done = false;
  std::vector<json> chunks = DataEvents(r.body, &done);
  EXPECT_TRUE(done);
  ASSERT_GE(chunks.size(), 4u);
  std::string id = chunks[0]["id"];
  std::string arguments;
  std::string finish;
  for (const json& c : chunks) {
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_EQ(c["id"], id);
    EXPECT_TRUE(c["created"].is_number_integer());
    EXPECT_EQ(c["model"], "gpt-4o-mini");
    if (c["choices"].empty()) continue;
    const json& choice = c["choices"][0];
    EXPECT_EQ(choice["index"], 0);
    if (choice["finish_reason"].is_string()) finish = choice["finish_reason"];
    if (!choice["delta"].contains("tool_calls")) continue;
    for (const json& t : choice["delta"]["tool_calls"]) {
      EXPECT_EQ(t["index"], 0);
      if (t.contains("id")) {
        EXPECT_EQ(t["type"], "function");
        EXPECT_EQ(t["function"]["name"], "write_file");
      }
      arguments += t["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(json::parse(arguments),
            json({{"path", "b.txt"}, {"content", "hi \"there\""}}));
  EXPECT_EQ(finish, "tool_calls");
  const json& last = chunks.back();
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"]["prompt_tokens"], 42);
  EXPECT_EQ(last["usage"]["completion_tokens"], 7);
  EXPECT_EQ(last["usage"]["total_tokens"], 49);
}

TEST_F(WireTest, AnthropicMessagesPlainAndStreamed) {
  Post("/v1/chat/completions", kSdkRequest);
  Post("/v1/chat/completions", kSdkRequest);
  json request = {{"model", "claude-sonnet-4"},
                  {"max_tokens", 1024},
                  {"system", "You are a careful reviewer."},
                  {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  HttpResponse plain = Post("/v1/messages", request.dump());
  ASSERT_EQ(plain.status, 200);
  json j = json::parse(plain.body);
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["model"], "claude-sonnet-4");
  EXPECT_EQ(j["content"][0], json({{"type", "text"}, {"text", "Done."}}));
  EXPECT_EQ(j["stop_reason"], "end_turn");
  EXPECT_TRUE(j["usage"]["input_tokens"].is_number_integer());
  EXPECT_TRUE(j["usage"]["output_tokens"].is_number_integer());

  request["stream"] = true;
  HttpResponse streamed = Post("/v1/messages", request.dump());
  ASSERT_EQ(streamed.status, 200);
  SseParser parser;
  std::vector<std::string> names;
  std::string text;
  for (const SseEvent& e : parser.Feed(streamed.body)) {
    names.push_back(e.event);
    json d = json::parse(e.data);
    EXPECT_EQ(d["type"], e.event);
    if (e.event == "content_block_delta") text += d["delta"]["text"];
  }
  ASSERT_GE(names.size(), 6u);
  EXPECT_EQ(names.front(), "message_start");
  EXPECT_EQ(names[1], "content_block_start");
  EXPECT_EQ(names[names.size() - 2], "message_delta");
  EXPECT_EQ(names.back(), "message_stop");
  EXPECT_EQ(text, "Done.");
}

size_t Collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

TEST_F(WireTest, EveryRequestIsListedOverHttp) {
  Post("/v1/chat/completions", kSdkRequest);
  CURL* curl = curl_easy_init();
  std::string body;
  std::string url =
      "http://127.0.0.1:" + std::to_string(server_->port()) + "/_requests";
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  ASSERT_EQ(curl_easy_perform(curl), CURLE_OK);
  curl_easy_cleanup(curl);
  json list = json::parse(body);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["index"], 1);
  EXPECT_EQ(list[0]["agent"], "reviewer");
  EXPECT_EQ(list[0]["model"], "gpt-4o-mini");
  EXPECT_EQ(list[0]["action"], "say");
  EXPECT_EQ(list[0]["entry_line"], 3);
  EXPECT_EQ(list[0]["body"]["tool_choice"], "auto");
  EXPECT_TRUE(list[0]["expect_failures"].empty());
}

TEST_F(WireTest, ASecondServerOnATakenPortIsRefused) {
  // Two servers never share a port (each would get some of the requests).
  MockHttpServer second(engine_);
  Status s = second.Start("127.0.0.1", server_->port());
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace steps
