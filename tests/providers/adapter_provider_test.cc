// AdapterProvider's guard: whatever an adapter does (throw while building,
// reading an answer or a stream event, return a bad answer, echo the key),
// the call ends in a classified error, never a crash.
#include "providers/adapter_provider.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "common/raw_http_server.h"
#include "providers/curl_transport.h"
#include "providers/wire_json.h"

namespace steps {
namespace {

using test_support::RawHttpServer;

constexpr const char* kKey = "sk-guarded-0123456789";

// Throws where `throw_in` says; otherwise answers the body as text, with
// whatever usage the body's first character implies.
class ClumsyAdapter : public Adapter {
 public:
  explicit ClumsyAdapter(std::string throw_in) : throw_in_(throw_in) {}
  const AdapterInfo& info() const override { return info_; }
  Result<HttpRequest> BuildRequest(const ChatRequest&,
                                   const AdapterConfig& config) const override {
    if (throw_in_ == "build") throw std::runtime_error("no field 'x'");
    if (throw_in_ == "refuse") {
      return InvalidArgument("cannot express this with key " + config.api_key);
    }
    return HttpRequest{config.base_url + "/go", {}, "{}"};
  }
  ChatResult ParseAnswer(const HttpResponse& response,
                         const AdapterConfig&) const override {
    if (throw_in_ == "parse") throw std::out_of_range("key 'tokens' not found");
    ChatAnswer answer;
    answer.text = response.body;
    answer.finish_reason = "stop";
    if (throw_in_ == "huge") answer.usage.prompt_tokens = kMaxTokenCount + 1;
    return answer;
  }
  std::unique_ptr<StreamParser> NewStreamParser(
      const AdapterConfig&) const override {
    struct Throwing : StreamParser {
      bool Add(const SseEvent&) override { throw std::logic_error("boom"); }
      ChatResult Finish() override { return ChatAnswer{}; }
    };
    return std::make_unique<Throwing>();
  }

 private:
  AdapterInfo info_{.name = "clumsy",
                    .default_base_url = "",
                    .key_env = "",
                    .key_required = false,
                    .can_stream = true,
                    .mock_wire = MockWireFormat::kNone,
                    .parameters = {}};
  std::string throw_in_;
};

class AdapterProviderTest : public ::testing::Test {
 protected:
  ChatResult Send(const std::string& throw_in, bool stream = false) {
    AdapterConfig config;
    config.base_url = server_.base_url();
    config.api_key = kKey;
    config.stream = stream;
    AdapterProvider provider(std::make_shared<ClumsyAdapter>(throw_in), config,
                             transport_);
    ChatRequest request;
    request.messages = {Message::User("hi")};
    return provider.Send(request, CallContext{});
  }

  RawHttpServer server_{[](int, const std::string&) {
    return RawHttpServer::Reply{
        RawHttpServer::Stream("data: {\"text\": \"x\"}\n\n"), true};
  }};
  CurlTransport transport_;
};

TEST_F(AdapterProviderTest, AThrowWhileBuildingIsAFinalConfigError) {
  ChatResult r = Send("build");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kConfig);
  EXPECT_EQ(r.error().requests, 0);
  EXPECT_NE(r.error().message.find("no field 'x'"), std::string::npos);
  EXPECT_EQ(server_.requests(), 0);
}

TEST_F(AdapterProviderTest, ARefusedRequestIsNeverSentAndHidesTheKey) {
  ChatResult r = Send("refuse");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kConfig);
  EXPECT_EQ(r.error().message.find(kKey), std::string::npos);
  EXPECT_EQ(server_.requests(), 0);
}

TEST_F(AdapterProviderTest, AThrowWhileReadingIsAMalformedAnswer) {
  ChatResult r = Send("parse");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kMalformed);
  EXPECT_NE(r.error().message.find("key 'tokens' not found"),
            std::string::npos);
  ChatResult streamed = Send("", /*stream=*/true);
  ASSERT_FALSE(streamed.ok());
  EXPECT_EQ(streamed.error().kind, ProviderErrorKind::kMalformed);
  EXPECT_NE(streamed.error().message.find("boom"), std::string::npos);
}

TEST_F(AdapterProviderTest, EveryAnswerIsHeldToTheLimits) {
  ChatResult huge = Send("huge");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().kind, ProviderErrorKind::kMalformed);
}

}  // namespace
}  // namespace steps
