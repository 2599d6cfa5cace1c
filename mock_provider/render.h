// Renders a scripted entry as an answer in a provider's wire format.
// Internal to the mock provider.
#ifndef STEPS_MOCK_PROVIDER_RENDER_H_
#define STEPS_MOCK_PROVIDER_RENDER_H_

#include <cstdint>
#include <string>

#include "mock_provider/engine.h"
#include "mock_provider/script.h"

namespace steps {

struct RenderInput {
  // "openai" or "anthropic".
  std::string format;
  bool stream = false;
  // OpenAI streams: send the closing usage chunk (stream_options).
  bool include_usage = false;
  std::string model;
  // 1-based request number, for ids.
  int request_index = 0;
  // Estimated prompt tokens, used when the entry sets no usage.
  int64_t prompt_tokens = 0;
};

// The reply for `entry` (whose action is not kDefault).
MockReply RenderReply(const MockEntry& entry, const RenderInput& in);

}  // namespace steps

#endif  // STEPS_MOCK_PROVIDER_RENDER_H_
