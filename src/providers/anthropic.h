// The Anthropic Messages dialect, used by the `anthropic/` adapter
// (src/providers/adapters/anthropic.cc): system prompt as a top-level
// field, content blocks, tool_use / tool_result, x-api-key and
// anthropic-version headers, and its own streaming events.
#ifndef STEPS_PROVIDERS_ANTHROPIC_H_
#define STEPS_PROVIDERS_ANTHROPIC_H_

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/sse.h"
#include "providers/adapter.h"
#include "providers/adapter_provider.h"
#include "providers/http.h"
#include "providers/provider.h"

namespace steps {

struct AnthropicConfig {
  // Endpoint root; the request goes to base_url + "/messages".
  // Default: https://api.anthropic.com/v1.
  std::string base_url = "https://api.anthropic.com/v1";
  // Sent as x-api-key. Never logged.
  std::string api_key;
  std::string version = "2023-06-01";
  bool stream = false;
  // See OpenAiConfig. Default 60 s.
  Millis stream_idle_limit{60000};
  size_t max_response_bytes = 32 * 1024 * 1024;
  // max_tokens is mandatory in this API; used when the request sets none.
  int64_t default_max_tokens = 4096;
};

// The model parameters the Messages API takes (AdapterInfo::parameters):
// all but seed and response_format, which it has no field for.
std::vector<std::string> AnthropicParameters();

// The Messages adapter. `version` is sent as anthropic-version;
// `default_max_tokens` is used when a request sets none (the API requires
// max_tokens).
class AnthropicAdapter : public Adapter {
 public:
  AnthropicAdapter(AdapterInfo info, std::string version,
                   int64_t default_max_tokens);
  const AdapterInfo& info() const override { return info_; }
  Result<HttpRequest> BuildRequest(const ChatRequest& request,
                                   const AdapterConfig& config) const override;
  ChatResult ParseAnswer(const HttpResponse& response,
                         const AdapterConfig& config) const override;
  std::unique_ptr<StreamParser> NewStreamParser(
      const AdapterConfig& config) const override;

 private:
  AdapterInfo info_;
  std::string version_;
  int64_t default_max_tokens_;
};

// The Messages adapter under AdapterProvider, configured directly (tests;
// sources go through the registry).
class AnthropicProvider : public AdapterProvider {
 public:
  // `transport` is not owned and must outlive the provider.
  AnthropicProvider(AnthropicConfig config, HttpTransport& transport);
};

// System messages are joined into `system`; consecutive tool results become
// one user message of tool_result blocks; assistant tool calls become
// tool_use blocks (their arguments parsed back into an `input` object).
std::string BuildAnthropicRequestBody(const ChatRequest& request, bool stream,
                                      int64_t default_max_tokens);

// Reads a Messages API answer; stop_reason maps to finish_reason
// (end_turn/stop_sequence -> stop, tool_use -> tool_calls,
// max_tokens -> length).
ChatResult ParseAnthropicResponse(std::string_view body);

// Assembles message_start / content_block_* / message_delta events.
class AnthropicStreamAssembler : public StreamParser {
 public:
  // Consumes one event; false when the stream must stop (message_stop, an
  // error event, or a value outside the limits of providers/wire_json.h,
  // which makes the answer kMalformed).
  bool Add(const SseEvent& event) override;
  ChatResult Finish() override;

 private:
  // Records `error` as the outcome; returns false (stop the stream).
  bool Fail(ProviderError error);
  bool AddMessageStart(const nlohmann::json& j);
  bool AddMessageDelta(const nlohmann::json& j);
  bool AddBlockStart(const nlohmann::json& j, int64_t index);
  bool AddBlockDelta(const nlohmann::json& j, int64_t index);

  ChatAnswer answer_;
  // Content block index -> position in answer_.tool_calls.
  std::map<int64_t, size_t> tool_blocks_;
  bool done_ = false;
  bool failed_ = false;
  bool any_output_ = false;
  ProviderError error_;
};

}  // namespace steps

#endif  // STEPS_PROVIDERS_ANTHROPIC_H_
