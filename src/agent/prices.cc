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
  if (!std::isfinite(v) || v < 0 || v * 1e6 > kMaxPricePerMtok) {
    return InvalidArgument(where + ": " + key + " is " + it->dump() +
                           "; a cost is a number of USD per token from 0 "
                           "to 1");
  }
  return std::optional<double>(v * 1e6);
}

}  // namespace

Result<PriceTable> PriceTable::Parse(std::string_view text,
                                     const std::string& origin) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return InvalidArgument(origin +
                           ": not JSON, or a number out of range (a prices "
                           "table in LiteLLM's format: "
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
    // Keys are shown as JSON strings: a control byte in one is escaped.
    const std::string where =
        origin + ": " +
        json(name).dump(-1, ' ', false, json::error_handler_t::replace);
    if (name == "sample_spec") continue;
    if (!entry.is_object()) {
      return InvalidArgument(where + " is " + std::string(entry.type_name()) +
                             "; an entry is an object such as "
                             "{\"input_cost_per_token\": 2.5e-06, "
                             "\"output_cost_per_token\": 1e-05}");
    }
    Result<std::optional<double>> in = PerMillion(entry, kInput, where);
    if (!in.ok()) return in.status();
    Result<std::optional<double>> out = PerMillion(entry, kOutput, where);
    if (!out.ok()) return out.status();
    if (!*in && !*out) continue;
    table.prices_[name] = SourcePrice{in->value_or(0), out->value_or(0)};
  }
  return table;
}

bool PriceTable::FirstMiss(const std::string& model) const {
  std::lock_guard<std::mutex> lock(missed_->mu);
  return missed_->models.insert(model).second;
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
