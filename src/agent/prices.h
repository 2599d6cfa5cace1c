// A prices table in LiteLLM's format (model_prices_and_context_window.json):
// one object whose keys are model names and whose entries give
// `input_cost_per_token` and `output_cost_per_token` in USD. Users keep such
// a table already; `steps run --prices FILE` (or STEPS_PRICES) prices the
// answers of sources that have no `price:` and whose provider reports no
// cost (docs/observability.md, "What a run cost").
//
//   Result<PriceTable> table = PriceTable::Parse(text, "prices.json");
//   if (!table.ok()) ...                     // "prices.json: gpt-4o: ..."
//   std::optional<SourcePrice> p = table->Find("openrouter/openai/gpt-4o");
#ifndef STEPS_AGENT_PRICES_H_
#define STEPS_AGENT_PRICES_H_

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "agent/agent.h"
#include "core/status.h"

namespace steps::agent {

class PriceTable {
 public:
  // `origin` names the text in errors (the file's path). Refused: text
  // that is not one JSON object, a cost that is not a finite number >= 0.
  // Entries with neither cost (LiteLLM's `sample_spec`, image models
  // priced per pixel) are left out.
  static Result<PriceTable> Parse(std::string_view text,
                                  const std::string& origin);

  // The price of a source's model, "PROVIDER/MODEL": the entry named
  // exactly so, else the name without its provider ("openai/gpt-4o" for
  // "openrouter/openai/gpt-4o", "gpt-4o" for "openai/gpt-4o"), else its
  // last part. A cost an entry leaves out is 0.
  std::optional<SourcePrice> Find(const std::string& model) const;

  size_t size() const { return prices_.size(); }

  // True the first time it is asked of `model` (a model the table does not
  // price, said once per run). Thread-safe.
  bool FirstMiss(const std::string& model) const;

 private:
  std::map<std::string, SourcePrice, std::less<>> prices_;
  struct Misses {
    std::mutex mu;
    std::set<std::string> models;
  };
  std::unique_ptr<Misses> missed_ = std::make_unique<Misses>();
};

}  // namespace steps::agent

#endif  // STEPS_AGENT_PRICES_H_
