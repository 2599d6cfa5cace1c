// The kit's tests; see adapter_conformance.h. Compiled into each binary
// that instantiates the suite (steps_add_adapter_conformance_test).
#include "conformance/adapter_conformance.h"

#include <algorithm>

namespace steps::conformance {
namespace {

using test_support::RawHttpServer;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

nlohmann::json BodyOf(const std::string& request) {
  size_t at = request.find("\r\n\r\n");
  return nlohmann::json::parse(request.substr(at + 4), nullptr, false);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(c));
  return s;
}

TEST_P(AdapterConformanceTest, SendsOneRequestOfTheRightShape) {
  ServeBytes(HttpResponseText(wire().text_answer("hi", 3, 1)));
  ChatResult r = Send();
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 1u);
  const std::string& request = requests[0];
  // base_url honoured, trailing '/' dropped.
  EXPECT_EQ(request.rfind("POST /kit/v1" + wire().path + " HTTP/1.1", 0), 0u)
      << request.substr(0, 80);
  const std::string headers =
      Lower(request.substr(0, request.find("\r\n\r\n")));
  EXPECT_TRUE(Contains(headers, "content-type: application/json"));
  EXPECT_TRUE(Contains(headers, "x-steps-agent: kit-agent"));
  EXPECT_TRUE(Contains(headers, "x-steps-step: kit-step"));
  EXPECT_TRUE(Contains(headers, "x-kit-header: kit-value"));
  EXPECT_TRUE(wire().carries_key(request, kKey));
  nlohmann::json body = BodyOf(request);
  ASSERT_TRUE(body.is_object()) << request;
  EXPECT_TRUE(Contains(body.dump(), "\"kit-model\""));
  EXPECT_TRUE(Contains(body.dump(), "hello kit"));
  EXPECT_TRUE(Contains(body.dump(), "be brief"));
}

TEST_P(AdapterConformanceTest, ReadsTextAndUsage) {
  ServeBytes(HttpResponseText(wire().text_answer("the answer", 12, 5)));
  ChatResult r = Send();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.answer().text, "the answer");
  EXPECT_EQ(r.answer().finish_reason, "stop");
  EXPECT_EQ(r.answer().usage.prompt_tokens, 12);
  EXPECT_EQ(r.answer().usage.completion_tokens, 5);
}

TEST_P(AdapterConformanceTest, ToolCallsMakeTheRoundTrip) {
  ToolCall call{"call_kit_7", "read_file", R"({"path":"a.txt","n":2})"};
  ServeBytes(HttpResponseText(wire().tool_call_answer(call)), false);
  auto provider = Source();
  ChatRequest request = Hello();
  request.tools = {
      {"read_file", "Reads a file",
       R"({"type":"object","properties":{"path":{"type":"string"}}})"}};
  ChatResult r = provider->Send(request, Context());
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r.answer().tool_calls.size(), 1u);
  const ToolCall& got = r.answer().tool_calls[0];
  EXPECT_EQ(got.id, call.id);
  EXPECT_EQ(got.name, call.name);
  EXPECT_EQ(nlohmann::json::parse(got.arguments),
            nlohmann::json::parse(call.arguments));
  EXPECT_EQ(r.answer().finish_reason, "tool_calls");
  // The call and its result go back in the next request.
  request.messages.push_back(Message::Assistant("", {got}));
  request.messages.push_back(
      Message::ToolResult(got.id, "file contents 42", "read_file"));
  provider->Send(request, Context());
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 2u);
  const std::string first = BodyOf(requests[0]).dump();
  EXPECT_TRUE(Contains(first, "read_file")) << first;
  EXPECT_TRUE(Contains(first, "Reads a file")) << first;
  const std::string second = BodyOf(requests[1]).dump();
  EXPECT_TRUE(Contains(second, "call_kit_7")) << second;
  EXPECT_TRUE(Contains(second, "file contents 42")) << second;
}

TEST_P(AdapterConformanceTest, AssemblesAStreamedAnswer) {
  ServeStream(wire().text_stream({"The ", "stream", "ed answer"}, 7, 3));
  ChatResult r = Send(/*stream=*/true);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.answer().text, "The streamed answer");
  EXPECT_EQ(r.answer().usage.prompt_tokens, 7);
  EXPECT_EQ(r.answer().usage.completion_tokens, 3);
  const std::string request = Lower(Requests().at(0));
  EXPECT_TRUE(Contains(request, "accept: text/event-stream")) << request;
}

TEST_P(AdapterConformanceTest, JoinsToolArgumentsSplitAcrossEvents) {
  ToolCall call{"call_split", "write_file", R"({"path":"b.txt","text":"x y"})"};
  ServeStream(wire().tool_call_stream(
      call, {R"({"pa)", R"(th":"b.txt",)", R"("text":"x y"})"}));
  ChatResult r = Send(/*stream=*/true);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r.answer().tool_calls.size(), 1u);
  EXPECT_EQ(r.answer().tool_calls[0].id, "call_split");
  EXPECT_EQ(r.answer().tool_calls[0].name, "write_file");
  EXPECT_EQ(nlohmann::json::parse(r.answer().tool_calls[0].arguments),
            nlohmann::json::parse(call.arguments));
  EXPECT_EQ(r.answer().finish_reason, "tool_calls");
}

TEST_P(AdapterConformanceTest, RetryableStatusesAreRetryable) {
  for (int status : {408, 409, 429, 500, 502, 503, 529}) {
    ServeBytes(HttpResponseText(R"({"error":{"message":"busy"}})", status));
    ChatResult r = Send();
    ASSERT_FALSE(r.ok()) << status;
    EXPECT_EQ(r.error().kind, ProviderErrorKind::kHttpStatus) << status;
    EXPECT_EQ(r.error().http_status, status);
    EXPECT_TRUE(r.error().retryable()) << status;
  }
}

TEST_P(AdapterConformanceTest, FinalStatusesAreFinal) {
  for (int status : {400, 401, 403, 404, 422}) {
    ServeBytes(HttpResponseText(R"({"error":{"message":"no"}})", status));
    ChatResult r = Send();
    ASSERT_FALSE(r.ok()) << status;
    EXPECT_EQ(r.error().http_status, status);
    EXPECT_FALSE(r.error().retryable()) << status;
  }
}

TEST_P(AdapterConformanceTest, ConnectionFailuresAreRetryable) {
  ServeBytes("");  // Closed with no answer.
  ChatResult dropped = Send();
  ASSERT_FALSE(dropped.ok());
  EXPECT_EQ(dropped.error().kind, ProviderErrorKind::kConnection);
  EXPECT_TRUE(dropped.error().retryable());

  const std::string refused_url = server_->base_url();
  server_->Stop();
  server_.reset();  // Nothing listens on that port now.
  ChatResult refused =
      Source(false, Millis(60000), refused_url)->Send(Hello(), Context());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ProviderErrorKind::kConnection);
}

TEST_P(AdapterConformanceTest, ReadsRetryAfterInEveryForm) {
  ServeBytes(HttpResponseText("{}", 429, "Retry-After: 2\r\n"));
  EXPECT_EQ(Send().error().retry_after, Millis(2000));
  ServeBytes(HttpResponseText("{}", 503, "retry-after-ms: 1500\r\n"));
  EXPECT_EQ(Send().error().retry_after, Millis(1500));
  const std::string date =
      HttpDate(clock_.WallNow(), std::chrono::seconds(120));
  ServeBytes(HttpResponseText("{}", 429, "Retry-After: " + date + "\r\n"));
  std::optional<Millis> wait = Send().error().retry_after;
  ASSERT_TRUE(wait.has_value()) << date;
  EXPECT_GT(*wait, Millis(119000));
  EXPECT_LE(*wait, Millis(120000));
}

TEST_P(AdapterConformanceTest, MalformedAnswersAreRetryableErrors) {
  for (const std::string& body :
       {std::string("not json at all"), std::string("[1, 2, 3]"),
        std::string(100000, '['), std::string("{}")}) {
    ServeBytes(HttpResponseText(body));
    ChatResult r = Send();
    ASSERT_FALSE(r.ok()) << body.substr(0, 40);
    EXPECT_EQ(r.error().kind, ProviderErrorKind::kMalformed)
        << body.substr(0, 40) << ": " << r.error().message;
    EXPECT_TRUE(r.error().retryable());
  }
}

TEST_P(AdapterConformanceTest, RefusesTokenCountsThatAreNotCounts) {
  for (const char* raw : {"\"12\"", "-1", "1e300", "2.5"}) {
    ServeBytes(HttpResponseText(wire().bad_usage_answer(raw)));
    ChatResult r = Send();
    ASSERT_FALSE(r.ok()) << raw;
    EXPECT_EQ(r.error().kind, ProviderErrorKind::kMalformed) << raw;
  }
}

TEST_P(AdapterConformanceTest, AnErrorEventInAStreamIsAStreamError) {
  ServeStream(wire().error_stream());
  ChatResult r = Send(/*stream=*/true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kStreamError)
      << r.error().message;
  EXPECT_TRUE(r.error().retryable());
}

TEST_P(AdapterConformanceTest, AStreamCutShortIsMalformed) {
  ServeStream(wire().stream_start());  // Connection closes mid-answer.
  ChatResult r = Send(/*stream=*/true);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error().retryable()) << r.error().message;
}

TEST_P(AdapterConformanceTest, TheDeadlineCutsAHungRequest) {
  ServeBytes("", /*close=*/false);  // Never answers.
  auto provider = Source();
  CallContext context = Context();
  context.deadline = Deadline::After(clock_, Millis(300));
  auto start = std::chrono::steady_clock::now();
  ChatResult r = provider->Send(Hello(), context);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kDeadline);
  EXPECT_FALSE(r.error().retryable());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST_P(AdapterConformanceTest, TheDeadlineCutsAStalledStream) {
  ServeStream(wire().stream_start(), /*close=*/false);
  auto provider = Source(/*stream=*/true);
  CallContext context = Context();
  context.deadline = Deadline::After(clock_, Millis(400));
  ChatResult r = provider->Send(Hello(), context);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kDeadline) << r.error().message;
}

TEST_P(AdapterConformanceTest, TheIdleLimitCutsASilentStream) {
  ServeStream(wire().stream_start(), /*close=*/false);
  ChatResult r = Source(/*stream=*/true, Millis(200))->Send(Hello(), Context());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kStreamIdle)
      << r.error().message;
  EXPECT_TRUE(r.error().retryable());
}

TEST_P(AdapterConformanceTest, CancellationCutsATransferInFlight) {
  ServeBytes("", /*close=*/false);
  auto provider = Source();
  CallContext context = Context();
  std::thread canceller([&] {
    if (WaitForRequests(1)) context.cancel.Cancel(CancelReason::kAbort);
  });
  ChatResult r = provider->Send(Hello(), context);
  canceller.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kCancelled);
}

TEST_P(AdapterConformanceTest, TheKeyNeverAppearsInAnError) {
  ServeBytes(HttpResponseText(
      std::string(R"({"error":{"message":"bad key )") + kKey + R"("}})", 401));
  ChatResult r = Send();
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(Contains(r.error().message, kKey)) << r.error().message;
}

// Every parameter the adapter lists reaches the body where its WireFormat
// says, one request each; the adapter lists only parameters that exist, and
// the WireFormat places only those it lists.
TEST_P(AdapterConformanceTest, SendsEachListedModelParameterInItsDialect) {
  ProviderRegistry registry;
  GetParam().register_adapters(registry);
  auto adapter = registry.FindAdapter(GetParam().provider);
  ASSERT_NE(adapter, nullptr);
  const std::vector<std::string>& listed = adapter->info().parameters;
  const std::vector<std::string> known = ModelParameters::AllKeys();
  for (const std::string& key : listed) {
    EXPECT_NE(std::find(known.begin(), known.end(), key), known.end())
        << "AdapterInfo::parameters lists '" << key
        << "', which is not a model parameter";
    EXPECT_TRUE(wire().parameters.count(key))
        << "the adapter lists '" << key
        << "' but its WireFormat does not say where it lands";
  }
  for (const auto& [key, placement] : wire().parameters) {
    EXPECT_NE(std::find(listed.begin(), listed.end(), key), listed.end())
        << "the WireFormat places '" << key
        << "', which the adapter does not list";
  }
  // Kept alive: one connection carries the requests in turn.
  ServeBytes(HttpResponseText(wire().text_answer("ok", 1, 1)),
             /*close=*/false);
  auto provider = Source();
  ASSERT_NE(provider, nullptr);
  for (const std::string& key : listed) {
    auto placement = wire().parameters.find(key);
    if (placement == wire().parameters.end()) continue;
    ChatRequest request = Hello();
    request.params = OnlyKitParameter(key);
    ChatResult r = provider->Send(request, Context());
    ASSERT_TRUE(r.ok()) << key << ": " << r.error().message;
    const nlohmann::json body = BodyOf(Requests().back());
    const nlohmann::json::json_pointer at(placement->second.pointer);
    ASSERT_TRUE(body.contains(at))
        << key << " is not at " << placement->second.pointer << " in "
        << body.dump();
    EXPECT_EQ(body.at(at), placement->second.value) << key;
  }
}

}  // namespace
}  // namespace steps::conformance
