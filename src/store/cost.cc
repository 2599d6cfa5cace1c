#include "store/cost.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <map>
#include <set>

#include "store/listing.h"

namespace steps::store {

namespace {

// A group while it is summed: the runs and steps it counted.
struct Tally {
  CostGroup group;
  std::set<std::string> runs;
  std::set<std::pair<std::string, std::string>> steps;

  void Add(const std::string& run, const std::string& step, int64_t prompt,
           int64_t completion, double usd) {
    runs.insert(run);
    steps.insert({run, step});
    ++group.turns;
    group.prompt_tokens += prompt;
    group.completion_tokens += completion;
    group.usd += usd;
  }
  CostGroup Done() {
    group.runs = static_cast<int>(runs.size());
    group.steps = static_cast<int>(steps.size());
    return group;
  }
};

const char* ByName(CostBy by) {
  switch (by) {
    case CostBy::kAgent:
      return "agent";
    case CostBy::kModel:
      return "model";
    case CostBy::kJob:
      return "job";
    case CostBy::kRun:
      return "run";
    case CostBy::kTotal:
      break;
  }
  return "total";
}

nlohmann::json GroupJson(const CostGroup& g) {
  return {{"key", g.key},
          {"runs", g.runs},
          {"steps", g.steps},
          {"turns", g.turns},
          {"prompt_tokens", g.prompt_tokens},
          {"completion_tokens", g.completion_tokens},
          {"usd", g.usd}};
}

}  // namespace

std::optional<CostBy> ParseCostBy(std::string_view text) {
  for (CostBy by :
       {CostBy::kAgent, CostBy::kModel, CostBy::kJob, CostBy::kRun}) {
    if (text == ByName(by)) return by;
  }
  return std::nullopt;
}

Result<CostReport> SumCost(Store& store, std::optional<int64_t> since_ms,
                           CostBy by) {
  CostReport report;
  report.by = by;
  report.since_ms = since_ms;
  std::map<std::string, Tally> groups;
  Tally total;
  Status s = store.Read([&](Db& db) -> Status {
    // A step recorded before steps.agent existed is taken by its name (an
    // agent step's name is its agent's unless `name:` set another).
    Result<StatementUse> st = db.Prepared(
        "SELECT t.run_id, t.step_id, r.file, s.job,"
        " CASE WHEN s.agent = '' THEN s.name ELSE s.agent END, t.source,"
        " t.prompt_tokens, t.completion_tokens, t.usd"
        " FROM agent_turns t"
        " JOIN steps s ON s.run_id = t.run_id AND s.step_id = t.step_id"
        " JOIN runs r ON r.id = t.run_id"
        " WHERE s.cached = 0 AND r.started_ms >= ?1");
    if (!st.ok()) return st.status();
    (*st)->Bind(1, since_ms.value_or(INT64_MIN));
    return (*st)->EachRow([&](const Statement& row) {
      const std::string run = row.Text(0);
      const std::string step = row.Text(1);
      std::string key;
      switch (by) {
        case CostBy::kAgent:
          key = row.Text(4);
          break;
        case CostBy::kModel:
          key = row.Text(5);
          break;
        case CostBy::kJob:
          key = row.Text(3) + " (" + row.Text(2) + ")";
          break;
        case CostBy::kRun:
          key = run;
          break;
        case CostBy::kTotal:
          break;
      }
      const int64_t prompt = row.Int(6);
      const int64_t completion = row.Int(7);
      const double usd = row.Real(8);
      total.Add(run, step, prompt, completion, usd);
      if (by == CostBy::kTotal) return;
      Tally& t = groups[key];
      t.group.key = key;
      t.Add(run, step, prompt, completion, usd);
    });
  });
  if (!s.ok()) return s;
  for (auto& [key, tally] : groups) report.groups.push_back(tally.Done());
  std::sort(report.groups.begin(), report.groups.end(),
            [](const CostGroup& a, const CostGroup& b) {
              if (a.usd != b.usd) return a.usd > b.usd;
              const int64_t ta = a.prompt_tokens + a.completion_tokens;
              const int64_t tb = b.prompt_tokens + b.completion_tokens;
              if (ta != tb) return ta > tb;
              return a.key < b.key;
            });
  report.total = total.Done();
  report.total.key = "total";
  return report;
}

std::string FormatCost(const CostReport& report) {
  size_t width = 5;  // "TOTAL"
  std::string head = ByName(report.by);
  for (char& c : head) c = static_cast<char>(std::toupper(c));
  width = std::max(width, head.size());
  for (const CostGroup& g : report.groups)
    width = std::max(width, g.key.size());
  width = std::min<size_t>(width, 60);
  std::string out;
  char line[128];
  auto row = [&](const std::string& key, const std::string& runs,
                 const std::string& turns, const std::string& prompt,
                 const std::string& completion, const std::string& usd) {
    out += key;
    if (key.size() < width) out.append(width - key.size(), ' ');
    std::snprintf(line, sizeof line, "  %6s  %7s  %12s  %12s  %12s\n",
                  runs.c_str(), turns.c_str(), prompt.c_str(),
                  completion.c_str(), usd.c_str());
    out += line;
  };
  auto group = [&](const CostGroup& g, const std::string& key) {
    row(key, std::to_string(g.runs), std::to_string(g.turns),
        std::to_string(g.prompt_tokens), std::to_string(g.completion_tokens),
        FormatUsd(g.usd));
  };
  if (report.by == CostBy::kTotal) {
    row("", "RUNS", "TURNS", "PROMPT", "COMPLETION", "COST");
  } else {
    row(head, "RUNS", "TURNS", "PROMPT", "COMPLETION", "COST");
    for (const CostGroup& g : report.groups) group(g, g.key);
  }
  group(report.total, "TOTAL");
  if (report.since_ms) {
    out += "Runs started since " + FormatTimestamp(*report.since_ms) + ".\n";
  }
  return out;
}

nlohmann::json CostToJson(const CostReport& report) {
  nlohmann::json j = {{"by", ByName(report.by)}};
  j["since"] = report.since_ms
                   ? nlohmann::json(FormatTimestamp(*report.since_ms))
                   : nlohmann::json(nullptr);
  nlohmann::json groups = nlohmann::json::array();
  for (const CostGroup& g : report.groups) groups.push_back(GroupJson(g));
  j["groups"] = std::move(groups);
  j["total"] = GroupJson(report.total);
  return j;
}

}  // namespace steps::store
