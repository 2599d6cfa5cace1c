// The OpenAI-compatible chat-completions dialect, used by the `openai/`,
// `openrouter/` and `ollama/` adapters (src/providers/adapters/openai.cc):
// the standard body (messages, tools as functions, tool_choice) POSTed to
// {base_url}/chat/completions, plain or streamed (server-sent events), and
// the answer read back into a ChatAnswer.
#ifndef STEPS_PROVIDERS_OPENAI_H_
#define STEPS_PROVIDERS_OPENAI_H_

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "core/sse.h"
#include "providers/adapter.h"
#include "providers/adapter_provider.h"
#include "providers/http.h"
#include "providers/provider.h"

namespace steps {

struct OpenAiConfig {
  // Endpoint root; the request goes to base_url + "/chat/completions".
  std::string base_url;
  // Sent as "Authorization: Bearer KEY" when non-empty. Never logged.
  std::string api_key;
  // Sent with every request (e.g. OpenRouter's attribution headers).
  HttpHeaders extra_headers;
  // Ask for a streamed answer (stream: true in the source).
  bool stream = false;
  // A stream silent for longer than this is cut (kStreamIdle). Default 60 s.
  Millis stream_idle_limit{60000};
  // Bound on the answer's size. Default 32 MiB.
  size_t max_response_bytes = 32 * 1024 * 1024;
  // Ask the provider to report cost in usage (OpenRouter's usage.include).
  bool request_cost = false;
};

// The chat-completions adapter. `info` names the provider and its
// defaults; `request_cost` asks for cost in usage (OpenRouter).
class OpenAiAdapter : public Adapter {
 public:
  OpenAiAdapter(AdapterInfo info, bool request_cost);
  const AdapterInfo& info() const override { return info_; }
  Result<HttpRequest> BuildRequest(const ChatRequest& request,
                                   const AdapterConfig& config) const override;
  Result<HttpRequest> BuildRequestReusing(
      const ChatRequest& request, const AdapterConfig& config,
      EncodedHistory& history) const override;
  ChatResult ParseAnswer(const HttpResponse& response,
                         const AdapterConfig& config) const override;
  std::unique_ptr<StreamParser> NewStreamParser(
      const AdapterConfig& config) const override;

 private:
  AdapterInfo info_;
  bool request_cost_;
};

// The chat-completions adapter under AdapterProvider, configured directly
// (tests, the mock provider and benches; sources go through the registry).
class OpenAiProvider : public AdapterProvider {
 public:
  // `transport` is not owned and must outlive the provider.
  OpenAiProvider(OpenAiConfig config, HttpTransport& transport);
};

// The JSON body for `request` (exposed for tests and the mock provider).
// With `history`, the messages' encodings kept there for earlier requests
// of the conversation are reused (the body is the same either way).
std::string BuildOpenAiRequestBody(const ChatRequest& request, bool stream,
                                   bool request_cost,
                                   EncodedHistory* history = nullptr);

// Reads a non-streamed chat.completion body. kMalformed when it is not one.
ChatResult ParseOpenAiResponse(std::string_view body);

// Assembles chat.completion.chunk events into one answer: text deltas are
// concatenated, tool-call fragments joined by index (in the order the
// indexes first appear). Holds the answer to the limits of
// providers/wire_json.h: a bad index, a bad usage count or too many calls
// stops the stream as kMalformed. Not thread-safe.
class OpenAiStreamAssembler : public StreamParser {
 public:
  // Consumes one event. Returns false when the stream must stop: at
  // "[DONE]" or an error event.
  bool Add(const SseEvent& event) override;
  // After the stream: the answer, or the error that ended it.
  ChatResult Finish() override;
  bool failed() const { return failed_; }

 private:
  // Records `error` as the outcome; returns false (stop the stream).
  bool Fail(ProviderError error);
  bool AddToolCallDelta(const nlohmann::json& delta);

  ChatAnswer answer_;
  // Wire index -> position in answer_.tool_calls.
  std::map<int64_t, size_t> tool_call_slots_;
  bool done_ = false;
  bool failed_ = false;
  bool any_output_ = false;
  ProviderError error_;
};

}  // namespace steps

#endif  // STEPS_PROVIDERS_OPENAI_H_
