// Reading JSON that came from a model server: the limits every answer is
// held to and the checked reads the adapters use, so that no value on the
// wire (a string where a number belongs, 1e300, -1, nesting 100,000 deep)
// can crash the process or be taken at a wrong value. Anything outside the
// limits makes the answer kMalformed, which is retried like a 5xx.
#ifndef STEPS_PROVIDERS_WIRE_JSON_H_
#define STEPS_PROVIDERS_WIRE_JSON_H_

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/json_text.h"  // DumpJson, for the parsers
#include "providers/chat.h"
#include "providers/provider.h"

namespace steps {

// Deepest nesting of arrays and objects accepted in an answer, an event or
// a tool call's arguments. The serialiser recurses once per level, so deep
// input must be refused before it is parsed.
inline constexpr int kMaxWireJsonDepth = 128;

// Tool calls one answer may carry. More is a malformed answer.
inline constexpr size_t kMaxToolCallsPerAnswer = 256;

// Largest stream index (OpenAI tool_calls[].index, Anthropic content block
// index) accepted.
inline constexpr int64_t kMaxStreamIndex = 1 << 20;

// Ceiling on each token count of one answer (prompt, completion). Counts
// must be whole, non-negative numbers at most this.
inline constexpr int64_t kMaxTokenCount = 1'000'000'000;

// Ceiling on the cost one answer may report, in US dollars.
inline constexpr double kMaxAnswerCostUsd = 1'000'000.0;

// Parses `text` as JSON within kMaxWireJsonDepth. Nullopt when it is not
// JSON or nests too deep; `why` (optional) then says which.
std::optional<nlohmann::json> ParseWireJson(std::string_view text,
                                            std::string* why = nullptr);

// A whole number in [0, max] from a JSON value: an integer, or a float with
// no fractional part. Nullopt for anything else (strings, fractions,
// negatives, values past max).
std::optional<int64_t> WholeNumberIn(const nlohmann::json& value, int64_t max);

// j[key] as a whole number in [0, max], `fallback` when absent or null.
// Nullopt when present with any other value.
std::optional<int64_t> ReadWholeNumber(const nlohmann::json& j, const char* key,
                                       int64_t fallback, int64_t max);

// The kMalformed error with the "malformed answer: " prefix.
ProviderError MalformedAnswer(std::string what);

// Checks a finished answer against the limits above: the number of tool
// calls, the nesting of each call's arguments, the token counts and cost.
// Nullopt when it passes.
std::optional<ProviderError> CheckAnswerLimits(const ChatAnswer& answer);

}  // namespace steps

#endif  // STEPS_PROVIDERS_WIRE_JSON_H_
