#include "chaos_state.h"

#include <sqlite3.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

namespace steps::chaos {
namespace {

// An answer's tag, as ChaosModel tags it: the id of its first tool call, or
// its text.
constexpr const char* kAnswerTag =
    "coalesce(json_extract(checkpoint, '$.messages[0].tool_calls[0].id'),"
    " json_extract(checkpoint, '$.messages[0].content'))";

std::string Join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

// Each row's first column, keyed by it; the rest joined as its value.
void AddRows(std::map<std::string, std::string>& into, const std::string& db,
             const std::string& prefix, const std::string& sql) {
  for (const std::vector<std::string>& row : Query(db, sql)) {
    if (row.empty()) continue;
    std::vector<std::string> rest(row.begin() + 1, row.end());
    into[prefix + row[0]] = Join(rest, " | ");
  }
}

std::vector<std::string> FirstColumn(const std::string& db,
                                     const std::string& sql) {
  std::vector<std::string> out;
  for (const std::vector<std::string>& row : Query(db, sql)) {
    if (!row.empty()) out.push_back(row[0]);
  }
  return out;
}

// The file's distinct lines in the order they first occur.
std::string DistinctLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> seen;
  for (std::string line; std::getline(in, line);) {
    if (std::find(seen.begin(), seen.end(), line) == seen.end())
      seen.push_back(line);
  }
  return Join(seen, ",");
}

// A job's execution list with the steps that run side by side (whose order
// of ending is theirs to choose) sorted, the others in the order recorded.
std::string NormalExecution(const std::string& text) {
  const nlohmann::json names = nlohmann::json::parse(text, nullptr, false);
  if (!names.is_array()) return "unreadable: " + text;
  std::vector<std::string> side_by_side, in_order;
  for (const nlohmann::json& n : names) {
    const std::string name = n.is_string() ? n.get<std::string>() : n.dump();
    bool parallel = false;
    for (const char* p : kParallelTasks) parallel = parallel || name == p;
    (parallel ? side_by_side : in_order).push_back(name);
  }
  std::sort(side_by_side.begin(), side_by_side.end());
  return Join(side_by_side, ",") + " then " + Join(in_order, ",");
}

}  // namespace

std::string StoreOf(const std::string& out) { return out + "/state/steps.db"; }

std::vector<std::vector<std::string>> Query(const std::string& db_path,
                                            const std::string& sql) {
  std::vector<std::vector<std::string>> rows;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) !=
      SQLITE_OK) {
    sqlite3_close(db);
    return rows;
  }
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        const unsigned char* text = sqlite3_column_text(st, i);
        row.emplace_back(text ? reinterpret_cast<const char*>(text) : "");
      }
      rows.push_back(std::move(row));
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rows;
}

std::map<std::string, int> LineCounts(const std::string& path) {
  std::map<std::string, int> counts;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) ++counts[line];
  return counts;
}

Snapshot TakeSnapshot(const std::string& out) {
  const std::string db = StoreOf(out);
  Snapshot s;
  for (const std::string& tag :
       FirstColumn(db, std::string("SELECT ") + kAnswerTag +
                           " FROM conversation_log WHERE kind = 'answer'"))
    s.stored_answers.insert(tag);
  for (const std::string& id :
       FirstColumn(db,
                   "SELECT json_extract(checkpoint, '$.call_id') FROM"
                   " conversation_log WHERE kind = 'tool_finished'"))
    s.finished_calls.insert(id);
  for (const std::string& name :
       FirstColumn(db,
                   "SELECT name FROM steps WHERE kind = 'task' AND hook IS NULL"
                   " AND status != 'running'"))
    s.ended_tasks.insert(name);
  s.appended = LineCounts(out + "/appended.txt");
  s.tasks = LineCounts(out + "/tasks.txt");
  AddRows(s.durable, db, "conversation_log ",
          "SELECT step_id || ' #' || seq, kind, turn, checkpoint FROM"
          " conversation_log");
  AddRows(s.durable, db, "ended step ",
          "SELECT step_id, status, output, error FROM steps WHERE status !="
          " 'running'");
  AddRows(s.durable, db, "ended attempt ",
          "SELECT step_id || ' #' || number, status, exit_code, output FROM"
          " attempts WHERE status != 'running'");
  return s;
}

std::map<std::string, std::string> FinalRecords(const std::string& out) {
  const std::string db = StoreOf(out);
  std::map<std::string, std::string> r;
  AddRows(r, db, "runs",
          "SELECT '', count(*), group_concat(status), group_concat(file) FROM"
          " runs");
  for (const std::vector<std::string>& job :
       Query(db, "SELECT name, status, execution FROM jobs")) {
    r["job " + job[0]] = job[1] + " | " + NormalExecution(job[2]);
  }
  AddRows(r, db, "step ",
          "SELECT step_id, name, kind, status, output, agent_turns,"
          " prompt_tokens, completion_tokens FROM steps");
  AddRows(r, db, "attempt ",
          "SELECT step_id || ' #' || number, of, status, exit_code, output"
          " FROM attempts");
  AddRows(r, db, "turn ",
          "SELECT step_id || ' #' || turn, tool_calls, text FROM agent_turns");
  AddRows(r, db, "answers of ",
          std::string("SELECT step_id, group_concat(tag, ',') FROM (SELECT"
                      " step_id, ") +
              kAnswerTag +
              " AS tag FROM conversation_log WHERE kind = 'answer' ORDER BY"
              " step_id, seq) GROUP BY step_id");
  AddRows(r, db, "tool results of ",
          "SELECT step_id, group_concat(id, ',') FROM (SELECT step_id,"
          " json_extract(checkpoint, '$.call_id') AS id FROM conversation_log"
          " WHERE kind = 'tool_finished' ORDER BY step_id, seq) GROUP BY"
          " step_id");
  // The trial's own folder is in every command the model sent: read as OUT.
  for (auto& [key, value] : r) {
    for (size_t at = value.find(out); at != std::string::npos;
         at = value.find(out, at + 3))
      value.replace(at, out.size(), "OUT");
  }
  r["file appended.txt"] = DistinctLines(out + "/appended.txt");
  std::vector<std::string> tasks;
  for (const auto& [line, n] : LineCounts(out + "/tasks.txt"))
    tasks.push_back(line);
  r["file tasks.txt"] = Join(tasks, ",");
  return r;
}

}  // namespace steps::chaos
