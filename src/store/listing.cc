#include "store/listing.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <sstream>

namespace steps::store {

namespace {

std::string Ms(const std::optional<int64_t>& ms) {
  return ms ? std::to_string(*ms) + "ms" : "-";
}

std::string ShortHash(const std::string& hex) { return hex.substr(0, 8); }

std::string Usd(double usd) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "$%.4f", usd);
  return buf;
}

std::string Join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The first line of `text`, cut to `max` characters.
std::string OneLine(const std::string& text, size_t max = 160) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > max) line = line.substr(0, max) + "...";
  return line;
}

std::string StepTitle(const StoredStep& s) {
  std::string title = s.name;
  if (!s.cell.empty()) title += " [" + s.cell + "]";
  std::vector<std::string> notes;
  if (!s.hook.empty()) notes.push_back(s.hook + " hook");
  if (s.fixer) notes.push_back("fix");
  if (s.kind == "agent" && !s.fixer) notes.push_back("agent");
  if (s.cached) notes.push_back("cached");
  if (!notes.empty()) title += "  (" + Join(notes, ", ") + ")";
  return title;
}

void FormatAgent(std::ostringstream& out, const StoredStep& s) {
  if (s.agent) {
    const StoredAgent& a = *s.agent;
    out << "       Agent: " << a.turns
        << (a.turns == 1 ? " turn, " : " turns, ") << a.provider_requests
        << (a.provider_requests == 1 ? " request, " : " requests, ")
        << a.prompt_tokens + a.completion_tokens << " tokens ("
        << a.prompt_tokens << " prompt, " << a.completion_tokens
        << " completion), " << Usd(a.usd) << "\n";
    if (a.nudge_sent) out << "       Nudge sent\n";
    if (!a.fallbacks_taken.empty())
      out << "       Fallbacks taken: " << Join(a.fallbacks_taken, ", ")
          << "\n";
  }
  for (const StoredTurn& t : s.turns) {
    out << "         turn " << t.turn << "  " << t.source << "  "
        << t.provider_requests
        << (t.provider_requests == 1 ? " request  " : " requests  ")
        << t.prompt_tokens << "+" << t.completion_tokens << " tokens";
    if (!t.tool_calls.empty())
      out << "  " << OneLine(Join(t.tool_calls, "; "), 120);
    out << "\n";
  }
}

void FormatStep(std::ostringstream& out, const StoredStep& s, int number) {
  out << "  " << number << ". " << StepTitle(s) << "\n";
  for (const StoredAttempt& a : s.attempts) {
    out << "     (attempt " << a.number << "/" << a.of << ")  "
        << (s.cached ? "cached" : a.status) << "   " << Ms(a.duration_ms)
        << "   hash: "
        << ShortHash(a.identity.empty() ? s.identity : a.identity) << "\n";
    out << "       Taken by: " << a.taken_by << "\n";
    if (s.cached && !s.cached_from_run.empty()) {
      out << "       Cached from: run " << s.cached_from_run << ", step "
          << s.cached_from_step << "\n";
    }
    if (a.clipped_to_ms)
      out << "       clipped_to_ms: " << *a.clipped_to_ms << "\n";
    if (!a.exhausted_by.empty())
      out << "       exhausted_by: " << a.exhausted_by << "\n";
    if (!a.error.empty() && a.status != "succeeded")
      out << "       " << OneLine(a.error) << "\n";
  }
  FormatAgent(out, s);
  if (s.status == "not started") {
    out << "     not started: " << OneLine(s.error, 400) << "\n";
  } else if (s.status != "succeeded" && !s.error.empty()) {
    out << "     " << OneLine(s.error, 400) << "\n";
  } else if (s.status != "succeeded" && s.attempts.empty()) {
    out << "     " << s.status << "\n";
  }
}

nlohmann::json OptionalJson(const std::optional<int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json OptionalTime(const std::optional<int64_t>& v) {
  return v ? nlohmann::json(FormatTimestamp(*v)) : nlohmann::json(nullptr);
}

nlohmann::json StepToJson(const StoredStep& s, int number) {
  nlohmann::json attempts = nlohmann::json::array();
  for (const StoredAttempt& a : s.attempts) {
    attempts.push_back({
        {"number", a.number},
        {"of", a.of},
        {"outcome", s.cached ? "cached" : a.status},
        {"status", a.status},
        {"started", FormatTimestamp(a.started_ms)},
        {"duration_ms", OptionalJson(a.duration_ms)},
        {"deadline", OptionalTime(a.deadline_ms)},
        {"hash", a.identity.empty() ? s.identity : a.identity},
        {"exit_code", OptionalJson(a.exit_code)},
        {"timed_out", a.timed_out},
        {"clipped_to_ms", OptionalJson(a.clipped_to_ms)},
        {"exhausted_by", a.exhausted_by.empty()
                             ? nlohmann::json(nullptr)
                             : nlohmann::json(a.exhausted_by)},
        {"error", a.error},
        {"output", a.output},
        {"fixed", a.fixed},
        {"taken_by", a.taken_by},
    });
  }
  nlohmann::json j = {
      {"number", number},
      {"id", s.id},
      {"job", s.job},
      {"name", s.name},
      {"cell", s.cell.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.cell)},
      {"kind", s.kind},
      {"hook",
       s.hook.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.hook)},
      {"fixer", s.fixer},
      {"line", s.line},
      {"outcome", s.status},
      {"error", s.error},
      {"output", s.output},
      {"started", FormatTimestamp(s.started_ms)},
      {"duration_ms", OptionalJson(s.duration_ms)},
      {"deadline", OptionalTime(s.deadline_ms)},
      {"identity", s.identity},
      {"cached", s.cached},
      {"attempts", attempts},
  };
  if (s.cached && !s.cached_from_run.empty()) {
    j["cached_from"] = {{"run", s.cached_from_run},
                        {"step", s.cached_from_step}};
  }
  if (s.agent || !s.turns.empty()) {
    nlohmann::json agent = nlohmann::json::object();
    if (s.agent) {
      agent = {{"turns", s.agent->turns},
               {"provider_requests", s.agent->provider_requests},
               {"prompt_tokens", s.agent->prompt_tokens},
               {"completion_tokens", s.agent->completion_tokens},
               {"usd", s.agent->usd},
               {"nudge_sent", s.agent->nudge_sent},
               {"deadline_disclosed", s.agent->deadline_disclosed},
               {"fallbacks_taken", s.agent->fallbacks_taken}};
    }
    nlohmann::json turns = nlohmann::json::array();
    for (const StoredTurn& t : s.turns) {
      turns.push_back({{"turn", t.turn},
                       {"provider_requests", t.provider_requests},
                       {"source", t.source},
                       {"prompt_tokens", t.prompt_tokens},
                       {"completion_tokens", t.completion_tokens},
                       {"usd", t.usd},
                       {"tool_calls", t.tool_calls},
                       {"text", t.text}});
    }
    agent["turn_records"] = turns;
    j["agent"] = agent;
  }
  return j;
}

nlohmann::json RunHeaderJson(const StoredRun& r) {
  return {{"id", r.id},
          {"file", r.file},
          {"outcome", r.status},
          {"started", FormatTimestamp(r.started_ms)},
          {"duration_ms", OptionalJson(r.duration_ms)},
          {"taken_by", r.taken_by},
          {"host", r.host},
          {"pid", r.pid}};
}

}  // namespace

std::string FormatTimestamp(int64_t epoch_ms) {
  std::time_t secs = static_cast<std::time_t>(epoch_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf,
                static_cast<int>(epoch_ms % 1000));
  return out;
}

std::string FormatRun(const StoredRun& run) {
  std::ostringstream out;
  out << "Run " << run.id << "  " << run.status << "  " << Ms(run.duration_ms)
      << "  " << run.file << "\n";
  out << "Started " << FormatTimestamp(run.started_ms) << "\n";
  out << "Taken by: " << run.taken_by << "\n";
  for (const StoredJob& job : run.jobs) {
    out << "\nJob " << job.name << "  " << job.status << "  "
        << Ms(job.duration_ms) << "\n";
    int number = 0;
    for (const StoredStep& s : job.steps) FormatStep(out, s, ++number);
    // The job's own error, unless it is its last step's, already shown.
    if (job.status != "succeeded" && !job.error.empty() &&
        std::none_of(
            job.steps.begin(), job.steps.end(),
            [&](const StoredStep& s) { return s.error == job.error; })) {
      out << "  " << OneLine(job.error, 400) << "\n";
    }
  }
  return out.str();
}

nlohmann::json RunToJson(const StoredRun& run) {
  nlohmann::json j = RunHeaderJson(run);
  nlohmann::json jobs = nlohmann::json::array();
  for (const StoredJob& job : run.jobs) {
    nlohmann::json steps = nlohmann::json::array();
    int number = 0;
    for (const StoredStep& s : job.steps)
      steps.push_back(StepToJson(s, ++number));
    jobs.push_back({{"name", job.name},
                    {"outcome", job.status},
                    {"error", job.error},
                    {"caused_by_error", job.caused_by_error},
                    {"execution", job.execution},
                    {"started", FormatTimestamp(job.started_ms)},
                    {"duration_ms", OptionalJson(job.duration_ms)},
                    {"deadline", OptionalTime(job.deadline_ms)},
                    {"steps", steps}});
  }
  j["jobs"] = jobs;
  return j;
}

std::string FormatRunList(const std::vector<StoredRun>& runs) {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof line, "%-22s  %-11s  %-24s  %9s  %s\n", "RUN",
                "OUTCOME", "STARTED", "DURATION", "FILE");
  out << line;
  for (const StoredRun& r : runs) {
    std::snprintf(line, sizeof line, "%-22s  %-11s  %-24s  %9s  %s\n",
                  r.id.c_str(), r.status.c_str(),
                  FormatTimestamp(r.started_ms).c_str(),
                  Ms(r.duration_ms).c_str(), r.file.c_str());
    out << line;
  }
  return out.str();
}

nlohmann::json RunListToJson(const std::vector<StoredRun>& runs) {
  nlohmann::json out = nlohmann::json::array();
  for (const StoredRun& r : runs) out.push_back(RunHeaderJson(r));
  return out;
}

}  // namespace steps::store
