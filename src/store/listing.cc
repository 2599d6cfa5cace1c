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

// "Spent: 1234 tokens (1000 prompt, 234 completion), $0.0123\n"; empty when
// nothing was.
std::string SpentLine(const StoredSpend& s) {
  if (s.prompt_tokens + s.completion_tokens == 0 && s.usd <= 0) return "";
  return "Spent: " + std::to_string(s.prompt_tokens + s.completion_tokens) +
         " tokens (" + std::to_string(s.prompt_tokens) + " prompt, " +
         std::to_string(s.completion_tokens) + " completion), " +
         FormatUsd(s.usd) + "\n";
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
  if (s.judge) notes.push_back("judge");
  if (s.kind == "agent" && !s.fixer && !s.judge) notes.push_back("agent");
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
        << " completion), " << FormatUsd(a.usd) << "\n";
    if (a.retries || a.retries_denied || a.rate_wait_ms) {
      out << "       Provider: " << a.retries
          << (a.retries == 1 ? " retry, " : " retries, ") << a.retries_denied
          << " retries denied, waited "
          << FormatDuration(Millis(a.rate_wait_ms)) << " for rate limits\n";
    }
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
    if (!t.tool_calls.empty()) {
      std::vector<std::string> labels;
      for (const agent::ToolCallRecord& c : t.tool_calls)
        labels.push_back(c.Label());
      out << "  " << OneLine(Join(labels, "; "), 120);
    }
    out << "\n";
  }
}

// How a gate ended, and why: "Approved: looks good", "Rejected by its
// default on expiry", "Waiting: Deploy build 42?".
void FormatGate(std::ostringstream& out, const GateRow& g) {
  std::string how;
  if (g.state == "waiting") {
    how = "Waiting: " + OneLine(g.message);
  } else if (g.state == "approved" || g.state == "rejected") {
    how = g.state == "approved" ? "Approved" : "Rejected";
    if (g.via == "default") how += " by its default on expiry";
    // A person's reason, whole: its later lines indented under the first.
    if (!g.reason.empty()) {
      std::string reason = g.reason;
      for (size_t at = reason.find('\n'); at != std::string::npos;
           at = reason.find('\n', at + 1)) {
        reason.insert(at + 1, "         ");
      }
      how += ": " + reason;
    }
  } else if (g.state == "expired") {
    how = "Expired without a decision";
  } else if (g.state == "cut") {
    how = "Ended at its job's deadline without a decision";
  } else {
    how = "Aborted while waiting";
  }
  out << "       " << how << "\n";
}

void FormatStep(std::ostringstream& out, const StoredStep& s, int number) {
  out << "  " << number << ". " << StepTitle(s) << "\n";
  for (const StoredAttempt& a : s.attempts) {
    out << "     (attempt " << a.number << "/" << a.of << ")  "
        << (s.cached ? "cached" : a.status) << "   " << Ms(a.duration_ms);
    // A gate has no cache key; who decided it is who took it.
    if (s.gate) {
      const std::string decider = DecidedBy(*s.gate);
      out << "\n       Taken by: "
          << (decider.empty() ? a.taken_by : decider) << "\n";
      FormatGate(out, *s.gate);
    } else {
      out << "   hash: "
          << ShortHash(a.identity.empty() ? s.identity : a.identity) << "\n";
      out << "       Taken by: " << a.taken_by << "\n";
      if (a.queued_ms) out << "       Queued: " << Ms(a.queued_ms) << "\n";
    }
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

}  // namespace

std::string FormatUsd(double usd) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "$%.4f", usd);
  return buf;
}

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
  for (const StoredInterruption& i : run.interruptions) {
    out << "Interrupted " << FormatTimestamp(i.died_ms) << " (" << i.status
        << "), resumed " << FormatTimestamp(i.resumed_ms) << " by "
        << i.taken_by << "\n";
  }
  std::vector<StoredSpend> job_spends;
  StoredSpend run_spend;
  for (const StoredJob& job : run.jobs) {
    StoredSpend& spend = job_spends.emplace_back();
    for (const StoredStep& s : job.steps) spend.Add(StepSpend(s));
    run_spend.Add(spend);
  }
  out << SpentLine(run_spend);
  for (size_t j = 0; j < run.jobs.size(); ++j) {
    const StoredJob& job = run.jobs[j];
    out << "\nJob " << job.name << "  " << job.status << "  "
        << Ms(job.duration_ms) << "\n";
    out << SpentLine(job_spends[j]);
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

std::string FormatRunList(const std::vector<StoredRun>& runs) {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof line, "%-22s  %-11s  %-24s  %9s  %9s  %10s  %s\n",
                "RUN", "OUTCOME", "STARTED", "DURATION", "TOKENS", "COST",
                "FILE");
  out << line;
  for (const StoredRun& r : runs) {
    std::snprintf(line, sizeof line,
                  "%-22s  %-11s  %-24s  %9s  %9lld  %10s  %s\n", r.id.c_str(),
                  r.status.c_str(), FormatTimestamp(r.started_ms).c_str(),
                  Ms(r.duration_ms).c_str(),
                  static_cast<long long>(r.prompt_tokens + r.completion_tokens),
                  FormatUsd(r.usd).c_str(), r.file.c_str());
    out << line;
  }
  return out.str();
}

}  // namespace steps::store
