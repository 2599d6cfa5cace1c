// What the chaos harness reads of a trial: its run store (through a
// connection of its own, as another process would) and the files the
// pipeline's tasks and tool calls append to.
#ifndef STEPS_TESTS_CHAOS_CHAOS_STATE_H_
#define STEPS_TESTS_CHAOS_CHAOS_STATE_H_

#include <map>
#include <set>
#include <string>
#include <vector>

namespace steps::chaos {

// The chaos pipeline's tasks that run side by side (chaos_pipeline.cc).
inline constexpr const char* kParallelTasks[] = {"left", "middle", "right"};

// Every row `sql` yields on the store at `db_path`, each column as text
// ("" for NULL). Empty when the store is missing or the query fails.
std::vector<std::vector<std::string>> Query(const std::string& db_path,
                                            const std::string& sql);

// Each line of the file at `path`, with how often it occurs.
std::map<std::string, int> LineCounts(const std::string& path);

// What was durable when a `steps` process died, taken once it and its
// guardian are gone.
struct Snapshot {
  std::set<std::string> stored_answers;  // Tags of answers in the store.
  std::set<std::string> finished_calls;  // Tool calls with a stored result.
  std::set<std::string> ended_tasks;     // Task steps recorded as ended.
  std::map<std::string, int> appended;   // OUT/appended.txt's lines.
  std::map<std::string, int> tasks;      // OUT/tasks.txt's lines.
  // Each durable record (key: what it is; value: what it holds): the
  // conversation log's rows and the steps and attempts that ended. Every
  // one must hold the same at the end of the trial.
  std::map<std::string, std::string> durable;
};
Snapshot TakeSnapshot(const std::string& out);

// The records of a finished trial that an uninterrupted run must share:
// the run's, the jobs', the steps' (outcome, output, turns, tokens), the
// attempts' and turns', the answers and tool results of each conversation
// in order, and the files' distinct lines.
std::map<std::string, std::string> FinalRecords(const std::string& out);

// The run store of the trial in `out`.
std::string StoreOf(const std::string& out);

}  // namespace steps::chaos

#endif  // STEPS_TESTS_CHAOS_CHAOS_STATE_H_
