// The model parameter keys of a source or an agent entry: temperature,
// top_p, seed, max_output_tokens, stop and response_format, each checked
// against the range every provider accepts.
#include <limits>

#include "pipeline/loader_internal.h"

namespace steps::pipeline::internal {

namespace {

// A number in [min, max], with `min` itself refused when `open_min`.
std::optional<double> ReadBounded(MapReader& r, const std::string& key,
                                  const std::string& where, double min,
                                  bool open_min, double max,
                                  const std::string& rule, Diagnostics& d) {
  YAML::Node n = r.Take(key);
  if (!n.IsDefined()) return std::nullopt;
  auto v = ReadNumber(n, where + key, -std::numeric_limits<double>::max(),
                      rule, d);
  if (!v) return std::nullopt;
  // Written so that NaN (`.nan`) fails too.
  if (!(*v >= min && *v <= max) || (open_min && *v == min)) {
    d.Error(LineOf(n), "'" + where + key + "' must be " + rule);
    return std::nullopt;
  }
  return v;
}

void ReadStop(MapReader& r, const std::string& where, ModelParameters& p,
              Diagnostics& d) {
  YAML::Node n = r.Take("stop");
  if (!n.IsDefined()) return;
  auto list = ReadStringList(n, where + "stop", d);
  if (!list) return;
  bool ok = !list->empty() && list->size() <= 4;
  for (const std::string& s : *list) ok = ok && !s.empty();
  if (!ok) {
    d.Error(LineOf(n), "'" + where +
                           "stop' must be one to four non-empty strings "
                           "(the most every provider accepts)");
    return;
  }
  p.stop = *list;
}

void ReadResponseFormat(MapReader& r, const std::string& where,
                        ModelParameters& p, Diagnostics& d) {
  YAML::Node n = r.Take("response_format");
  if (!n.IsDefined()) return;
  const std::string key = where + "response_format";
  if (!n.IsMap()) {
    d.Error(LineOf(n), "'" + key +
                           "' must be { json_schema: SCHEMA }, SCHEMA a JSON "
                           "Schema object for the answer");
    return;
  }
  MapReader fr(n, "'" + key + "'", d);
  YAML::Node schema_node = fr.Take("json_schema");
  fr.Finish();
  if (!schema_node.IsDefined()) {
    d.Error(LineOf(n), "'" + key + "' needs 'json_schema: SCHEMA'");
    return;
  }
  auto schema = ReadJson(schema_node, key + ".json_schema", d);
  if (!schema) return;
  if (!schema->is_object() || schema->value("type", "") != "object") {
    d.Error(LineOf(schema_node),
            "'" + key +
                ".json_schema' must be a JSON Schema with 'type: object' at "
                "the top (providers take an object as a structured answer)");
    return;
  }
  p.json_schema = schema->dump();
}

}  // namespace

void ReadModelParameters(MapReader& r, const std::string& where,
                         ModelParameters& p, int& first_line, Diagnostics& d) {
  for (const char* key : {"temperature", "top_p", "seed", "max_output_tokens",
                          "stop", "response_format"}) {
    if (r.Has(key) && first_line == 0) first_line = r.KeyLine(key);
  }
  p.temperature = ReadBounded(r, "temperature", where, 0, false, 2,
                              "a number from 0 to 2", d);
  p.top_p = ReadBounded(r, "top_p", where, 0, true, 1,
                        "a number above 0, at most 1", d);
  if (YAML::Node n = r.Take("seed"); n.IsDefined()) {
    // Exact in every JSON reader (a double holds 53 bits).
    constexpr int64_t kSafe = (int64_t{1} << 53) - 1;
    p.seed = ReadInt(n, where + "seed", -kSafe, kSafe,
                     "an integer from -(2^53 - 1) to 2^53 - 1", d);
  }
  if (YAML::Node n = r.Take("max_output_tokens"); n.IsDefined()) {
    p.max_output_tokens =
        ReadInt(n, where + "max_output_tokens", 1, int64_t{1} << 31,
                "a positive integer (tokens the model may generate per turn)",
                d);
  }
  ReadStop(r, where, p, d);
  ReadResponseFormat(r, where, p, d);
}

}  // namespace steps::pipeline::internal
