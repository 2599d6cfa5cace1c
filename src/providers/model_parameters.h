// Model parameters a pipeline may set on a source or an agent entry, the
// same for every provider; each adapter sends them in its own dialect and
// the loader refuses one a provider cannot honour (docs/agents.md).
#ifndef STEPS_PROVIDERS_MODEL_PARAMETERS_H_
#define STEPS_PROVIDERS_MODEL_PARAMETERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace steps {

struct ModelParameters {
  std::optional<double> temperature;         // [0, 2]
  std::optional<double> top_p;               // (0, 1]
  std::optional<int64_t> seed;               // Any integer.
  std::optional<int64_t> max_output_tokens;  // >= 1
  std::vector<std::string> stop;             // At most 4; empty: none.
  // `response_format: {json_schema: SCHEMA}`: the answer must be JSON
  // matching SCHEMA (compact JSON text here); unset: free text.
  std::optional<std::string> json_schema;

  bool empty() const {
    return !temperature && !top_p && !seed && !max_output_tokens &&
           stop.empty() && !json_schema;
  }
  // Field by field: this one's value where set, else `under`'s.
  ModelParameters Over(const ModelParameters& under) const {
    ModelParameters out = *this;
    if (!out.temperature) out.temperature = under.temperature;
    if (!out.top_p) out.top_p = under.top_p;
    if (!out.seed) out.seed = under.seed;
    if (!out.max_output_tokens) out.max_output_tokens = under.max_output_tokens;
    if (out.stop.empty()) out.stop = under.stop;
    if (!out.json_schema) out.json_schema = under.json_schema;
    return out;
  }
  // Every key, as a pipeline writes it, in the order SetKeys lists them.
  static std::vector<std::string> AllKeys() {
    return {"temperature",       "top_p", "seed",
            "max_output_tokens", "stop",  "response_format"};
  }
  // The keys that are set, as a pipeline writes them: "temperature",
  // "top_p", "seed", "max_output_tokens", "stop", "response_format".
  std::vector<std::string> SetKeys() const {
    std::vector<std::string> keys;
    if (temperature) keys.push_back("temperature");
    if (top_p) keys.push_back("top_p");
    if (seed) keys.push_back("seed");
    if (max_output_tokens) keys.push_back("max_output_tokens");
    if (!stop.empty()) keys.push_back("stop");
    if (json_schema) keys.push_back("response_format");
    return keys;
  }
};

}  // namespace steps

#endif  // STEPS_PROVIDERS_MODEL_PARAMETERS_H_
