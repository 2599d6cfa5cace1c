// The OpenAI-compatible chat-completions adapter: `openai/`, `openrouter/`,
// `ollama/` and any source with a `base_url`. POSTs the standard body
// (messages, tools as functions, tool_choice) to {base_url}/chat/completions,
// plain or streamed (server-sent events), and reads the answer back into a
// ChatAnswer.
#ifndef STEPS_PROVIDERS_OPENAI_H_
#define STEPS_PROVIDERS_OPENAI_H_

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "providers/http.h"
#include "providers/provider.h"
#include "providers/sse.h"

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

class OpenAiProvider : public Provider {
 public:
  // `transport` is not owned and must outlive the provider.
  OpenAiProvider(OpenAiConfig config, HttpTransport& transport);
  ChatResult Send(const ChatRequest& request,
                  const CallContext& context) override;

 private:
  OpenAiConfig config_;
  HttpTransport& transport_;
};

// The JSON body for `request` (exposed for tests and the mock provider).
std::string BuildOpenAiRequestBody(const ChatRequest& request, bool stream,
                                   bool request_cost);

// Reads a non-streamed chat.completion body. kMalformed when it is not one.
ChatResult ParseOpenAiResponse(std::string_view body);

// Assembles chat.completion.chunk events into one answer: text deltas are
// concatenated, tool-call fragments joined by index (in the order the
// indexes first appear). Holds the answer to the limits of
// providers/wire_json.h: a bad index, a bad usage count or too many calls
// stops the stream as kMalformed. Not thread-safe.
class OpenAiStreamAssembler {
 public:
  // Consumes one event. Returns false when the stream must stop: at
  // "[DONE]" or an error event (see error()).
  bool Add(const SseEvent& event);
  // After the stream: the answer, or the error that ended it.
  ChatResult Finish();
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
