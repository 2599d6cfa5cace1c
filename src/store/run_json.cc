#include "store/run_json.h"

#include <optional>

#include "store/listing.h"

namespace steps::store {

namespace {

using nlohmann::json;

json Time(int64_t epoch_ms) { return FormatTimestamp(epoch_ms); }

json OptionalTime(const std::optional<int64_t>& v) {
  return v ? json(FormatTimestamp(*v)) : json(nullptr);
}

json OptionalInt(const std::optional<int64_t>& v) {
  return v ? json(*v) : json(nullptr);
}

json TextOrNull(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

// `spend`'s keys into `j`.
void SpendInto(const StoredSpend& spend, json& j) {
  j["prompt_tokens"] = spend.prompt_tokens;
  j["completion_tokens"] = spend.completion_tokens;
  j["usd"] = spend.usd;
}

// Arguments as JSON when they are whole, valid JSON; else the raw text.
json Arguments(const agent::ToolCallRecord& c) {
  if (!c.arguments_truncated) {
    json parsed = json::parse(c.arguments, nullptr, false);
    if (!parsed.is_discarded()) return parsed;
  }
  return c.arguments;
}

json ToolCallJson(const agent::ToolCallRecord& c) {
  json result = nullptr;
  if (c.result) {
    result = {{"text", *c.result},
              {"bytes", c.result_bytes},
              {"truncated", c.result_truncated},
              {"is_error", c.is_error}};
  }
  return {{"name", c.name},
          {"arguments", Arguments(c)},
          {"arguments_truncated", c.arguments_truncated},
          {"result", result}};
}

json TurnJson(const StoredTurn& t) {
  json calls = json::array();
  for (const agent::ToolCallRecord& c : t.tool_calls)
    calls.push_back(ToolCallJson(c));
  json j = {{"turn", t.turn},     {"at", OptionalTime(t.at_ms)},
            {"source", t.source}, {"provider_requests", t.provider_requests},
            {"text", t.text},     {"tool_calls", calls}};
  SpendInto({t.prompt_tokens, t.completion_tokens, t.usd}, j);
  return j;
}

json AttemptJson(const StoredAttempt& a, const StoredAttempt* previous,
                 const std::string& step_identity) {
  // The wait before a retry: from the previous attempt's end to this one's
  // start, when both are known.
  json waited = nullptr;
  if (previous && previous->duration_ms) {
    const int64_t ended = previous->started_ms + *previous->duration_ms;
    if (a.started_ms >= ended) waited = a.started_ms - ended;
  }
  return {{"number", a.number},
          {"of", a.of},
          {"outcome", a.status},
          {"started", Time(a.started_ms)},
          {"duration_ms", OptionalInt(a.duration_ms)},
          {"deadline", OptionalTime(a.deadline_ms)},
          {"waited_ms", waited},
          {"identity", a.identity.empty() ? step_identity : a.identity},
          {"exit_code", OptionalInt(a.exit_code)},
          {"timed_out", a.timed_out},
          {"clipped_to_ms", OptionalInt(a.clipped_to_ms)},
          {"exhausted_by", TextOrNull(a.exhausted_by)},
          {"error", a.error},
          {"output", a.output},
          {"fixed", a.fixed},
          {"taken_by", a.taken_by},
          {"slurm_job", a.slurm_job ? json(*a.slurm_job) : json()},
          {"queued_ms", OptionalInt(a.queued_ms)}};
}

json AgentJson(const StoredStep& s) {
  if (!s.agent) return nullptr;
  return {{"turns", s.agent->turns},
          {"provider_requests", s.agent->provider_requests},
          {"retries", s.agent->retries},
          {"retries_denied", s.agent->retries_denied},
          {"rate_wait_ms", s.agent->rate_wait_ms},
          {"nudge_sent", s.agent->nudge_sent},
          {"deadline_disclosed", s.agent->deadline_disclosed},
          {"fallbacks_taken", s.agent->fallbacks_taken}};
}

json GateJson(const StoredStep& s) {
  if (!s.gate) return nullptr;
  const GateRow& g = *s.gate;
  const std::string by = DecidedBy(g);
  return {{"message", g.message},
          {"approvers", g.approvers},
          {"state", g.state},
          {"taken_by", TextOrNull(by)},
          {"default", TextOrNull(g.on_expiry)},
          {"decided_by_default", g.via == "default"},
          {"reason", g.reason},
          {"opened", Time(g.opened_ms)},
          {"deadline", OptionalTime(g.deadline_ms)},
          {"decided", OptionalTime(g.decided_ms)}};
}

json StepJson(const StoredStep& s, int number) {
  json attempts = json::array();
  for (size_t i = 0; i < s.attempts.size(); ++i) {
    attempts.push_back(AttemptJson(
        s.attempts[i], i > 0 ? &s.attempts[i - 1] : nullptr, s.identity));
  }
  json turns = json::array();
  for (const StoredTurn& t : s.turns) turns.push_back(TurnJson(t));
  json cached_from = nullptr;
  if (s.cached && !s.cached_from_run.empty()) {
    cached_from = {{"run", s.cached_from_run}, {"step", s.cached_from_step}};
  }
  json j = {{"number", number},
            {"id", s.id},
            {"job", s.job},
            {"name", s.name},
            {"cell", TextOrNull(s.cell)},
            {"kind", s.kind},
            {"hook", TextOrNull(s.hook)},
            {"fixer", s.fixer},
            {"judge", s.judge},
            {"line", s.line},
            {"outcome", s.status},
            {"cached", s.cached},
            {"cached_from", cached_from},
            {"error", s.error},
            {"output", s.output},
            {"started", Time(s.started_ms)},
            {"duration_ms", OptionalInt(s.duration_ms)},
            {"deadline", OptionalTime(s.deadline_ms)},
            {"identity", s.identity},
            {"log_lines", s.log_lines},
            {"nudge_at", OptionalTime(s.nudge_ms)},
            {"agent", AgentJson(s)},
            {"gate", GateJson(s)},
            {"turns", turns},
            {"attempts", attempts}};
  SpendInto(StepSpend(s), j);
  return j;
}

json PlanJson(const PlannedJob& job) {
  json steps = json::array();
  for (const PlannedStep& p : job.steps) {
    steps.push_back({{"id", p.id},
                     {"name", p.name},
                     {"kind", p.kind},
                     {"hook", TextOrNull(p.hook)},
                     {"line", p.line},
                     {"timeout_ms", OptionalInt(p.timeout_ms)}});
  }
  return steps;
}

// A job's `execution:` list: as recorded once the job ended; while it runs,
// the names of its steps that ended so far, in the order they did (the
// order the store reads them in).
std::vector<std::string> Execution(const StoredJob& job) {
  if (job.status != "running" && job.status != "interrupted")
    return job.execution;
  std::vector<std::string> names;
  for (const StoredStep& s : job.steps) {
    if (s.status != "running" && s.status != "interrupted")
      names.push_back(s.name);
  }
  return names;
}

json JobJson(const StoredJob& job, const StoredRun& run) {
  json steps = json::array();
  StoredSpend spend;
  int number = 0;
  for (const StoredStep& s : job.steps) {
    steps.push_back(StepJson(s, ++number));
    spend.Add(StepSpend(s));
  }
  json plan = json::array();
  bool plan_truncated = false;
  for (const PlannedJob& p : run.plan) {
    if (p.name != job.name) continue;
    plan = PlanJson(p);
    plan_truncated = p.truncated;
  }
  json j = {{"name", job.name},
            {"outcome", job.status},
            {"error", job.error},
            {"caused_by_error", job.caused_by_error},
            {"execution", Execution(job)},
            {"started", Time(job.started_ms)},
            {"duration_ms", OptionalInt(job.duration_ms)},
            {"deadline", OptionalTime(job.deadline_ms)},
            {"plan", plan},
            {"plan_truncated", plan_truncated},
            {"steps", steps}};
  SpendInto(spend, j);
  return j;
}

// A job of the plan that never started.
json WaitingJobJson(const PlannedJob& p, const StoredRun& run) {
  json j = {{"name", p.name},
            {"outcome", run.status == "running" ? "pending" : "not started"},
            {"error", ""},
            {"caused_by_error", false},
            {"execution", json::array()},
            {"started", nullptr},
            {"duration_ms", nullptr},
            {"deadline", nullptr},
            {"plan", PlanJson(p)},
            {"plan_truncated", p.truncated},
            {"steps", json::array()}};
  SpendInto({}, j);
  return j;
}

}  // namespace

json RunSummaryToJson(const StoredRun& r) {
  json j = {{"schema", kRunJsonSchema},
            {"id", r.id},
            {"file", r.file},
            {"outcome", r.status},
            {"started", Time(r.started_ms)},
            {"duration_ms", OptionalInt(r.duration_ms)},
            {"taken_by", r.taken_by},
            {"host", r.host},
            {"pid", r.pid}};
  SpendInto({r.prompt_tokens, r.completion_tokens, r.usd}, j);
  return j;
}

json RunToJson(const StoredRun& run) {
  json j = RunSummaryToJson(run);
  json jobs = json::array();
  for (const StoredJob& job : run.jobs) jobs.push_back(JobJson(job, run));
  // Jobs the plan names that have not started, in file order.
  for (const PlannedJob& p : run.plan) {
    bool started = false;
    for (const StoredJob& job : run.jobs) started |= job.name == p.name;
    if (!started) jobs.push_back(WaitingJobJson(p, run));
  }
  j["jobs"] = jobs;
  json stops = json::array();
  for (const StoredInterruption& i : run.interruptions) {
    stops.push_back({{"number", i.number},
                     {"outcome", i.status},
                     {"died", Time(i.died_ms)},
                     {"resumed", Time(i.resumed_ms)},
                     {"resumed_by", i.taken_by}});
  }
  j["interruptions"] = stops;
  return j;
}

json RunListToJson(const std::vector<StoredRun>& runs) {
  json out = json::array();
  for (const StoredRun& r : runs) out.push_back(RunSummaryToJson(r));
  return out;
}

}  // namespace steps::store
