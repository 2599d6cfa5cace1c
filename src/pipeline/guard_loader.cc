// The keys that protect a provider (docs/agents.md, "Protecting a
// provider"): a source's `rate_limit:`, and `retry_budget:` and `circuit:`
// on an agent entry or under `defaults:`.
#include "pipeline/loader_internal.h"

namespace steps::pipeline::internal {
namespace {

constexpr int64_t kMaxLimit = int64_t{1} << 40;

// A mapping under `key`, or an error saying what it should be.
bool IsMapping(const YAML::Node& n, const std::string& key,
               const std::string& shape, Diagnostics& d) {
  if (n.IsMap()) return true;
  d.Error(LineOf(n), "'" + key + "' must be a mapping such as " + shape +
                         ", not " + DescribeNodeType(n));
  return false;
}

// An integer from `min` (0 or 1) to kMaxLimit; `zero_means` says what 0
// does when it is allowed ("no limit", "no minimum").
void ReadCount(MapReader& r, const std::string& key, const std::string& where,
               int64_t min, const char* zero_means, int64_t& out,
               Diagnostics& d) {
  const std::string most = " of at most " + std::to_string(kMaxLimit);
  const std::string rule = min == 0 ? std::string("0 (") + zero_means +
                                          ") or a positive integer" + most +
                                          "; negative values are refused"
                                    : "a positive integer" + most;
  if (auto v =
          ReadInt(r.Take(key), where + "." + key, min, kMaxLimit, rule, d)) {
    out = *v;
  }
}

}  // namespace

void ReadRateLimit(MapReader& r, const std::string& key, ModelSource& s,
                   Diagnostics& d) {
  YAML::Node n = r.Take("rate_limit");
  if (!n.IsDefined()) return;
  const std::string where = key + ".rate_limit";
  s.rate_limit_line = r.KeyLine("rate_limit");
  if (s.is_cli()) {
    d.Error(s.rate_limit_line,
            "'" + where + "' is for hosted models: a CLI source ('cli: " +
                s.cli + "') sends no requests to limit");
    return;
  }
  RateLimitSpec spec;
  if (!n.IsNull()) {
    if (!IsMapping(n, where,
                   "{ max_concurrent: 8, requests_per_minute: 500, "
                   "tokens_per_minute: 200000 }",
                   d)) {
      return;
    }
    MapReader m(n, "'" + where + "'", d);
    ReadCount(m, "max_concurrent", where, 0, "no limit", spec.max_concurrent,
              d);
    ReadCount(m, "requests_per_minute", where, 0, "no limit",
              spec.requests_per_minute, d);
    ReadCount(m, "tokens_per_minute", where, 0, "no limit",
              spec.tokens_per_minute, d);
    m.Finish();
  }
  s.rate_limit = spec;
}

void ReadRetryBudget(MapReader& r, const std::string& where,
                     Written<RetryBudgetSpec>& out, Diagnostics& d) {
  YAML::Node n = r.Take("retry_budget");
  if (!n.IsDefined()) return;
  const std::string key = where + "retry_budget";
  out.line = r.KeyLine("retry_budget");
  RetryBudgetSpec spec;
  if (!n.IsNull()) {
    if (!IsMapping(n, key, "{ ratio: 0.2, min_retries: 3 }", d)) return;
    MapReader m(n, "'" + key + "'", d);
    YAML::Node ratio = m.Take("ratio");
    if (auto v =
            ReadNumber(ratio, key + ".ratio", 0, "a number from 0 to 1", d)) {
      if (*v > 1) {
        d.Error(m.KeyLine("ratio"),
                "'" + key +
                    ".ratio' must be a number from 0 to 1 (the share "
                    "of the calls to a host that may be retries), not " +
                    ratio.Scalar());
        return;
      }
      spec.ratio = *v;
    }
    ReadCount(m, "min_retries", key, 0, "no minimum", spec.min_retries, d);
    m.Finish();
  }
  out.value = spec;
}

void ReadCircuit(MapReader& r, const std::string& where,
                 Written<CircuitSpec>& out, Diagnostics& d) {
  YAML::Node n = r.Take("circuit");
  if (!n.IsDefined()) return;
  const std::string key = where + "circuit";
  out.line = r.KeyLine("circuit");
  CircuitSpec spec;
  if (!n.IsNull()) {
    if (!IsMapping(n, key, "{ failures: 5, probe_after: 5s }", d)) return;
    MapReader m(n, "'" + key + "'", d);
    ReadCount(m, "failures", key, 1, "", spec.failures, d);
    if (YAML::Node p = m.Take("probe_after"); p.IsDefined()) {
      auto v = ReadDuration(p, key + ".probe_after", std::nullopt, d);
      if (v && v->count() < 0) {
        d.Error(m.KeyLine("probe_after"),
                "'" + key +
                    ".probe_after' must not be negative (\"0\" probes at "
                    "once, one request at a time; omit it for 5s)");
        return;
      }
      if (v) spec.probe_after = *v;
    }
    m.Finish();
  }
  out.value = spec;
}

}  // namespace steps::pipeline::internal
