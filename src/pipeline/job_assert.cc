#include "pipeline/job_assert.h"

#include <cstdlib>
#include <functional>
#include <map>

#include "pipeline/yaml_reader.h"

namespace steps::pipeline {
namespace {

constexpr int64_t kMaxMs = int64_t{1} << 40;

std::optional<Outcome> ReadOutcome(const YAML::Node& n, const std::string& key,
                                   Diagnostics& d) {
  std::optional<std::string> s = ReadString(n, key, d);
  if (!s) return std::nullopt;
  std::optional<Outcome> o = ParseOutcome(*s);
  if (!o) {
    d.Error(LineOf(n), "'" + key +
                           "' must be succeeded, failed, errored or aborted, "
                           "not '" + *s + "'");
  }
  return o;
}

template <typename T>
std::optional<std::vector<T>> ReadList(
    const YAML::Node& n, const std::string& key, Diagnostics& d,
    const std::function<std::optional<T>(const YAML::Node&)>& read_one) {
  if (!n.IsDefined()) return std::nullopt;
  if (!n.IsSequence()) {
    d.Error(LineOf(n), "'" + key + "' must be a list, e.g. [" +
                           (key.find("waits") != std::string::npos
                                ? "200, 400]"
                                : "failed, succeeded]"));
    return std::nullopt;
  }
  std::vector<T> out;
  for (const YAML::Node& item : n) {
    std::optional<T> v = read_one(item);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

std::optional<StepCheck> ReadStepCheck(const YAML::Node& n, Diagnostics& d) {
  if (!n.IsMap()) {
    d.Error(LineOf(n),
            "each entry of 'assert.steps' must be a mapping with a 'name', "
            "e.g. {name: fetch, attempts: 2}");
    return std::nullopt;
  }
  MapReader r(n, "an 'assert.steps' entry", d);
  StepCheck c;
  c.line = LineOf(n);
  std::optional<std::string> name = ReadString(r.Take("name"), "name", d);
  if (!name) {
    d.Error(c.line, "an 'assert.steps' entry needs the 'name' of the step");
    r.Finish();
    return std::nullopt;
  }
  c.name = *name;
  c.outcome = ReadOutcome(r.Take("outcome"), "assert.steps.outcome", d);
  if (auto v = ReadInt(r.Take("attempts"), "assert.steps.attempts", 0, 1000000,
                       "a whole number, 0 or more", d))
    c.attempts = static_cast<int>(*v);
  c.attempt_outcomes = ReadList<Outcome>(
      r.Take("attempt_outcomes"), "assert.steps.attempt_outcomes", d,
      [&](const YAML::Node& item) {
        return ReadOutcome(item, "assert.steps.attempt_outcomes", d);
      });
  if (YAML::Node e = r.Take("error"); e.IsDefined())
    c.error = ReadString(e, "assert.steps.error", d);
  if (YAML::Node e = r.Take("exhausted_by"); e.IsDefined())
    c.exhausted_by = e.IsNull() ? std::optional<std::string>("")
                                : ReadString(e, "assert.steps.exhausted_by", d);
  if (YAML::Node e = r.Take("clipped_to_ms"); e.IsDefined()) {
    c.clipped_to_ms = e.IsNull()
                          ? std::optional<int64_t>(-1)
                          : ReadInt(e, "assert.steps.clipped_to_ms", 0, kMaxMs,
                                    "milliseconds, 0 or more (null: not "
                                    "clipped)",
                                    d);
  }
  c.waits_ms = ReadList<int64_t>(
      r.Take("waits_ms"), "assert.steps.waits_ms", d,
      [&](const YAML::Node& item) {
        return ReadInt(item, "assert.steps.waits_ms", 0, kMaxMs,
                       "a list of milliseconds, each 0 or more", d);
      });
  if (auto v = ReadInt(r.Take("tolerance_ms"), "assert.steps.tolerance_ms", 0,
                       kMaxMs, "milliseconds, 0 or more", d))
    c.tolerance_ms = *v;
  if (auto v = ReadInt(r.Take("provider_requests"),
                       "assert.steps.provider_requests", 0, 1000000,
                       "a whole number, 0 or more", d))
    c.provider_requests = static_cast<int>(*v);
  c.deadline_disclosed = ReadBool(r.Take("deadline_disclosed"),
                                  "assert.steps.deadline_disclosed", d);
  r.Finish();
  return c;
}

std::string Join(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i)
    out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::string JoinOutcomes(const std::vector<Outcome>& v) {
  std::vector<std::string> names;
  for (Outcome o : v) names.emplace_back(OutcomeName(o));
  return FormatList(names);
}

bool Near(int64_t actual, int64_t expected, int64_t tolerance) {
  return std::llabs(actual - expected) <= tolerance;
}

// What in one step's record misses its check; empty when all holds.
std::vector<std::string> JudgeStep(const StepCheck& c, const StepRecord& s) {
  std::vector<std::string> why;
  const auto& attempts = s.attempts;
  if (c.outcome && *c.outcome != s.outcome) {
    why.push_back("outcome " + std::string(OutcomeName(s.outcome)) +
                  ", expected " + std::string(OutcomeName(*c.outcome)));
  }
  if (c.attempts && *c.attempts != static_cast<int>(attempts.size())) {
    why.push_back(std::to_string(attempts.size()) + " attempts, expected " +
                  std::to_string(*c.attempts));
  }
  if (c.attempt_outcomes) {
    std::vector<Outcome> got;
    for (const AttemptRecord& a : attempts) got.push_back(a.outcome);
    if (got != *c.attempt_outcomes) {
      why.push_back("attempt outcomes " + JoinOutcomes(got) + ", expected " +
                    JoinOutcomes(*c.attempt_outcomes));
    }
  }
  if (c.error && s.error.find(*c.error) == std::string::npos) {
    why.push_back("error \"" + s.error + "\", expected it to contain \"" +
                  *c.error + "\"");
  }
  const std::string exhausted =
      attempts.empty() ? "" : attempts.back().exhausted_by;
  if (c.exhausted_by && *c.exhausted_by != exhausted) {
    why.push_back("exhausted_by '" + exhausted + "', expected '" +
                  *c.exhausted_by + "'");
  }
  if (c.clipped_to_ms) {
    std::optional<Millis> clipped =
        attempts.empty() ? std::nullopt : attempts.back().clipped_to;
    const int64_t got = clipped ? clipped->count() : -1;
    const bool ok = *c.clipped_to_ms < 0
                        ? got < 0
                        : got >= 0 && Near(got, *c.clipped_to_ms,
                                           c.tolerance_ms);
    if (!ok) {
      why.push_back(
          "last attempt clipped to " +
          (got < 0 ? std::string("nothing") : std::to_string(got) + "ms") +
          ", expected " +
          (*c.clipped_to_ms < 0 ? std::string("no clipping")
                                : std::to_string(*c.clipped_to_ms) + "ms ±" +
                                      std::to_string(c.tolerance_ms) + "ms"));
    }
  }
  if (c.waits_ms) {
    std::vector<int64_t> got = RecordedWaits(s);
    bool ok = got.size() == c.waits_ms->size();
    for (size_t i = 0; ok && i < got.size(); ++i)
      ok = Near(got[i], (*c.waits_ms)[i], c.tolerance_ms);
    if (!ok) {
      why.push_back("waits " + Join(got) + "ms, expected " +
                    Join(*c.waits_ms) + "ms ±" +
                    std::to_string(c.tolerance_ms) + "ms");
    }
  }
  if (c.provider_requests || c.deadline_disclosed) {
    if (!s.agent) {
      why.push_back("not an agent step (provider_requests and "
                    "deadline_disclosed are checked on agent steps)");
      return why;
    }
    if (c.provider_requests &&
        *c.provider_requests != s.agent->provider_requests) {
      why.push_back(std::to_string(s.agent->provider_requests) +
                    " provider requests, expected " +
                    std::to_string(*c.provider_requests));
    }
    if (c.deadline_disclosed &&
        *c.deadline_disclosed != s.agent->deadline_disclosed) {
      why.push_back(std::string("deadline ") +
                    (s.agent->deadline_disclosed ? "disclosed"
                                                 : "not disclosed") +
                    ", expected " +
                    (*c.deadline_disclosed ? "disclosed" : "not disclosed"));
    }
  }
  return why;
}

// Each `steps:` entry against the matching record; appends to `why`.
void JudgeSteps(const std::vector<StepCheck>& checks, const JobRecord& record,
                std::string& why) {
  std::map<std::string, int> seen;  // Name -> entries of it so far.
  for (const StepCheck& c : checks) {
    const int index = seen[c.name]++;
    const StepRecord* found = nullptr;
    int n = 0;
    for (const StepRecord& s : record.steps) {
      if (s.ref.name == c.name && n++ == index) {
        found = &s;
        break;
      }
    }
    std::vector<std::string> misses;
    if (!found) {
      misses.push_back("did not run (assert.steps, line " +
                       std::to_string(c.line) + ")");
    } else {
      misses = JudgeStep(c, *found);
    }
    if (misses.empty()) continue;
    if (!why.empty()) why += "; ";
    why += "step '" + c.name + "'" +
           (index ? " (#" + std::to_string(index + 1) + ")" : "") + ": ";
    for (size_t i = 0; i < misses.size(); ++i)
      why += (i ? ", " : "") + misses[i];
  }
}

}  // namespace

std::vector<StepCheck> ReadStepChecks(const YAML::Node& n, Diagnostics& d) {
  std::vector<StepCheck> out;
  if (!n.IsDefined() || n.IsNull()) return out;
  if (!n.IsSequence()) {
    d.Error(LineOf(n),
            "'assert.steps' must be a list of {name, ...} entries, e.g. "
            "[{name: fetch, attempts: 2}]");
    return out;
  }
  for (const YAML::Node& item : n) {
    if (auto c = ReadStepCheck(item, d)) out.push_back(std::move(*c));
  }
  return out;
}

std::vector<int64_t> RecordedWaits(const StepRecord& step) {
  std::vector<int64_t> waits;
  for (size_t i = 1; i < step.attempts.size(); ++i) {
    const AttemptRecord& before = step.attempts[i - 1];
    const AttemptRecord& after = step.attempts[i];
    if (after.outcome == Outcome::kAborted && after.duration.count() == 0)
      break;  // Aborted while waiting: no attempt started.
    waits.push_back(std::chrono::duration_cast<Millis>(
                        after.started - (before.started + before.duration))
                        .count());
  }
  return waits;
}

std::string FormatList(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out + "]";
}

std::optional<std::string> JudgeJob(const Job& job, const JobRecord& record) {
  std::string why;
  if (!job.check) {
    if (record.outcome == Outcome::kSucceeded) return std::nullopt;
    return "the job " + std::string(OutcomeName(record.outcome)) +
           (record.error.empty() ? "" : ": " + record.error) +
           " (a job without 'assert:' passes only when it succeeds)";
  }
  const JobAssert& a = *job.check;
  if (a.outcome && *a.outcome != record.outcome) {
    why = "outcome " + std::string(OutcomeName(record.outcome)) +
          ", expected " + std::string(OutcomeName(*a.outcome));
    if (!record.error.empty()) why += " (" + record.error + ")";
  }
  if (a.execution && *a.execution != record.execution) {
    if (!why.empty()) why += "; ";
    why += "execution " + FormatList(record.execution) + ", expected " +
           FormatList(*a.execution);
  }
  JudgeSteps(a.steps, record, why);
  if (why.empty()) return std::nullopt;
  return why;
}

}  // namespace steps::pipeline
