#include "agent/prices.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace steps::agent {

namespace {

using json = nlohmann::json;

constexpr const char* kInput = "input_cost_per_token";
constexpr const char* kOutput = "output_cost_per_token";

// A cost per token as USD per million tokens; `nullopt` when absent.
Result<std::optional<double>> PerMillion(const json& entry, const char* key,
                                         const std::string& where) {
  auto it = entry.find(key);
  if (it == entry.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number()) {
    return InvalidArgument(where + ": " + key + " is " +
                           std::string(it->type_name()) +
                           "; it is a number of USD per token (0.0000025)");
  }
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < 0) {
    return InvalidArgument(where + ": " + key + " is " + it->dump() +
                           "; a cost is a number of USD >= 0");
  }
  return std::optional<double>(v * 1e6);
}

}  // namespace

Result<PriceTable> PriceTable::Parse(std::string_view text,
                                     const std::string& origin) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return InvalidArgument(origin +
                           ": not JSON (a prices table in LiteLLM's format: "
                           "{\"MODEL\": {\"input_cost_per_token\": ..., "
                           "\"output_cost_per_token\": ...}})");
  }
  if (!doc.is_object()) {
    return InvalidArgument(origin +
                           ": a prices table is one JSON object of "
                           "models, not " +
                           std::string(doc.type_name()));
  }
  PriceTable table;
  for (const auto& [name, entry] : doc.items()) {
    // LiteLLM's own example entry, with descriptions for values.
    if (name == "sample_spec" || !entry.is_object()) continue;
    const std::string where = origin + ": " + name;
    Result<std::optional<double>> in = PerMillion(entry, kInput, where);
    if (!in.ok()) return in.status();
    Result<std::optional<double>> out = PerMillion(entry, kOutput, where);
    if (!out.ok()) return out.status();
    if (!*in && !*out) continue;
    table.prices_[name] = SourcePrice{in->value_or(0), out->value_or(0)};
  }
  return table;
}

std::optional<SourcePrice> PriceTable::Find(const std::string& model) const {
  std::string_view name = model;
  for (;;) {
    if (auto it = prices_.find(name); it != prices_.end()) return it->second;
    const size_t slash = name.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    name.remove_prefix(slash + 1);
  }
}

}  // namespace steps::agent
