// The adapter conformance kit: one value-parameterised GoogleTest suite that
// any provider adapter instantiates to show it behaves the way the engine
// relies on. Each test resolves a source through ProviderRegistry (so the
// adapter's registration, base_url, api_key_env, headers and stream
// handling are what run), sends through the real libcurl transport to a
// scriptable HTTP server on 127.0.0.1, and checks the ChatResult.
//
// To run it for an adapter, describe its wire format (how its server
// answers) and instantiate:
//
//   INSTANTIATE_TEST_SUITE_P(Acme, AdapterConformanceTest,
//       ::testing::Values(AdapterUnderTest{"acme", RegisterAdapter_acme,
//                                          AcmeWire()}),
//       AdapterConformanceName);
//
// Covered: request shape and headers, tool-call round trip, streamed text
// and tool calls with arguments split across events, usage, every error
// class (connection, retryable and final statuses, malformed and hostile
// answers, error events in a stream), Retry-After in seconds, as an HTTP
// date and in milliseconds, the deadline cutting a hung request and a
// stalled stream, the idle limit, cancellation, the key kept out of
// errors, and each model parameter the adapter lists reaching the body.
#ifndef STEPS_TESTS_PROVIDERS_CONFORMANCE_ADAPTER_CONFORMANCE_H_
#define STEPS_TESTS_PROVIDERS_CONFORMANCE_ADAPTER_CONFORMANCE_H_

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/raw_http_server.h"
#include "core/cancel.h"
#include "core/clock.h"
#include "providers/curl_transport.h"
#include "providers/registry.h"

namespace steps::conformance {

// How an adapter's server answers, as raw HTTP bodies. Streams are the
// body of a text/event-stream answer (SSE), complete unless said.
struct WireFormat {
  // The path a request must go to under base_url, e.g. "/chat/completions".
  std::string path;
  // Whether `request` (the raw HTTP request text) carries `key`.
  std::function<bool(const std::string& request, const std::string& key)>
      carries_key;
  // A 200 body answering `text`, with `in` prompt and `out` completion tokens.
  std::function<std::string(const std::string& text, int64_t in, int64_t out)>
      text_answer;
  // A 200 body answering one tool call.
  std::function<std::string(const ToolCall& call)> tool_call_answer;
  // A stream answering the concatenation of `pieces`, then usage.
  std::function<std::string(const std::vector<std::string>& pieces, int64_t in,
                            int64_t out)>
      text_stream;
  // A stream answering one tool call whose arguments arrive in `pieces`.
  std::function<std::string(const ToolCall& call,
                            const std::vector<std::string>& pieces)>
      tool_call_stream;
  // The start of a stream (some text) that never ends.
  std::function<std::string()> stream_start;
  // A stream that starts, then sends the provider's error event.
  std::function<std::string()> error_stream;
  // A 200 body where usage says `in` prompt tokens, with `in` given as raw
  // JSON text (e.g. "\"12\"", "-1", "1e300"): must be refused.
  std::function<std::string(const std::string& raw_in)> bad_usage_answer;
  // Where each model parameter the adapter lists (AdapterInfo::parameters)
  // lands in the request body when set to its KitParameters() value: a JSON
  // pointer into the body and the JSON found there. Keyed as a pipeline
  // writes the parameter ("temperature", "max_output_tokens", ...).
  struct Placement {
    std::string pointer;
    nlohmann::json value;
  };
  std::map<std::string, Placement> parameters;
};

// The values the kit sets, one parameter per request, to find them on the
// wire.
inline ModelParameters KitParameters() {
  ModelParameters p;
  p.temperature = 0.25;
  p.top_p = 0.5;
  p.seed = 42;
  p.max_output_tokens = 77;
  p.stop = {"END", "HALT"};
  p.json_schema = R"({"type":"object","properties":{"a":{"type":"string"}}})";
  return p;
}

// KitParameters() with only `key` set.
inline ModelParameters OnlyKitParameter(const std::string& key) {
  const ModelParameters all = KitParameters();
  ModelParameters one;
  if (key == "temperature") one.temperature = all.temperature;
  if (key == "top_p") one.top_p = all.top_p;
  if (key == "seed") one.seed = all.seed;
  if (key == "max_output_tokens") one.max_output_tokens = all.max_output_tokens;
  if (key == "stop") one.stop = all.stop;
  if (key == "response_format") one.json_schema = all.json_schema;
  return one;
}

struct AdapterUnderTest {
  // The provider prefix (`model: NAME/...`); also the test name suffix.
  std::string provider;
  // Registers the adapter (its file's RegisterAdapter_FILE).
  std::function<void(ProviderRegistry&)> register_adapters;
  WireFormat wire;
};

inline std::string AdapterConformanceName(
    const ::testing::TestParamInfo<AdapterUnderTest>& info) {
  return info.param.provider;
}

inline std::string HttpResponseText(const std::string& body, int status = 200,
                                    const std::string& extra_headers = "") {
  return test_support::RawHttpServer::Response(body, "application/json", status,
                                               extra_headers);
}

class AdapterConformanceTest
    : public ::testing::TestWithParam<AdapterUnderTest> {
 protected:
  static constexpr const char* kKey = "kit-secret-key-0123456789";

  const WireFormat& wire() const { return GetParam().wire; }

  // Serves every request with `reply` (given the request's index and text);
  // keeps the requests for inspection.
  void Serve(
      std::function<test_support::RawHttpServer::Reply(int, const std::string&)>
          reply) {
    server_ = std::make_unique<test_support::RawHttpServer>(
        [this, reply](int i, const std::string& request) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            requests_.push_back(request);
          }
          cv_.notify_all();
          return reply(i, request);
        });
  }
  void ServeBytes(const std::string& bytes, bool close = true) {
    Serve([bytes, close](int, const std::string&) {
      return test_support::RawHttpServer::Reply{bytes, close};
    });
  }
  void ServeStream(const std::string& events, bool close = true) {
    ServeBytes(test_support::RawHttpServer::Stream(events), close);
  }

  // The provider for this adapter, pointed at the fake server.
  std::unique_ptr<Provider> Source(bool stream = false,
                                   Millis idle = Millis(60000),
                                   std::string base_url = "") {
    ProviderRegistry registry;
    GetParam().register_adapters(registry);
    SourceSpec spec;
    spec.model = GetParam().provider + "/kit-model";
    spec.base_url =
        base_url.empty() ? server_->base_url() + "/kit/v1/" : base_url;
    spec.api_key_env = "KIT_KEY";
    spec.stream = stream;
    spec.stream_idle_limit = idle;
    spec.headers = {{"X-Kit-Header", "kit-value"}};
    ProviderEnvironment env;
    env.transport = &transport_;
    env.getenv = [](const std::string& name) -> std::optional<std::string> {
      if (name == "KIT_KEY") return std::string(kKey);
      return std::nullopt;
    };
    auto source = registry.Create(spec, env);
    EXPECT_TRUE(source.ok()) << source.status().message();
    if (!source.ok()) return nullptr;
    EXPECT_EQ(source->model, "kit-model");
    return std::move(source->provider);
  }

  ChatRequest Hello() const {
    ChatRequest r;
    r.model = "kit-model";
    r.messages = {Message::System("be brief"), Message::User("hello kit")};
    return r;
  }
  CallContext Context() {
    CallContext c;
    c.clock = &clock_;
    c.agent = "kit-agent";
    c.step = "kit-step";
    return c;
  }
  ChatResult Send(bool stream = false) {
    auto provider = Source(stream);
    if (!provider) return ProviderError{};
    return provider->Send(Hello(), Context());
  }

  std::vector<std::string> Requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  // Blocks (bounded) until the server has received `n` requests.
  bool WaitForRequests(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20),
                        [&] { return requests_.size() >= n; });
  }

  FakeClock clock_;  // Frozen: wall time for Retry-After dates.
  CurlTransport transport_;
  std::unique_ptr<test_support::RawHttpServer> server_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> requests_;
};

// An IMF-fixdate `ahead` seconds after `now`.
inline std::string HttpDate(WallTime now, std::chrono::seconds ahead) {
  std::time_t t = std::chrono::system_clock::to_time_t(now + ahead);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[64];
  std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return text;
}

}  // namespace steps::conformance

#endif  // STEPS_TESTS_PROVIDERS_CONFORMANCE_ADAPTER_CONFORMANCE_H_
