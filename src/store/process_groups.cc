#include "store/process_groups.h"

#include <utility>

#include "core/log.h"

namespace steps::store {

ProcessGroupRecorder::ProcessGroupRecorder(Store& store, std::string run_id)
    : store_(store), run_id_(std::move(run_id)) {}

void ProcessGroupRecorder::Check(const Status& s) { store_.WarnWriteFailed(s); }

void ProcessGroupRecorder::OnGroupStart(
    const ProcessGroupId& group,
    std::optional<std::chrono::steady_clock::time_point> wait_until) {
  Check(store_.Write([&](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        "INSERT OR REPLACE INTO process_groups (run_id, pgid, leader_start,"
        " status) VALUES (?1, ?2, ?3, 'running')");
    if (!st.ok()) return st.status();
    (*st)->Bind(1, run_id_);
    (*st)->Bind(2, int64_t{group.pgid});
    (*st)->Bind(3, static_cast<int64_t>(group.leader_start_time));
    return (*st)->Run();
  }, wait_until));
}

void ProcessGroupRecorder::OnGroupEnd(const ProcessGroupId& group) {
  // A row left behind names a group whose leader is gone or another
  // process: KillRecordedGroup tells them apart, so the delete can wait.
  store_.WriteSoon([run_id = run_id_, group](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        "DELETE FROM process_groups WHERE run_id = ?1 AND pgid = ?2 AND"
        " leader_start = ?3");
    if (!st.ok()) return st.status();
    (*st)->Bind(1, run_id);
    (*st)->Bind(2, int64_t{group.pgid});
    (*st)->Bind(3, static_cast<int64_t>(group.leader_start_time));
    return (*st)->Run();
  });
}

Result<std::vector<RecordedGroup>> RunningGroups(Store& store) {
  std::vector<RecordedGroup> groups;
  Status s = store.Read([&](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        "SELECT g.run_id, g.pgid, g.leader_start, r.host, r.pid,"
        " r.pid_start FROM process_groups g LEFT JOIN runs r"
        " ON r.id = g.run_id WHERE g.status = 'running'"
        " ORDER BY g.run_id, g.pgid");
    if (!st.ok()) return st.status();
    return (*st)->EachRow([&](const Statement& row) {
      RecordedGroup g;
      g.run_id = row.Text(0);
      g.group.pgid = static_cast<int>(row.Int(1));
      g.group.leader_start_time = static_cast<uint64_t>(row.Int(2));
      g.host = row.Text(3);
      g.pid = row.OptionalInt(4).value_or(0);
      g.pid_start = row.Text(5);
      groups.push_back(std::move(g));
    });
  });
  if (!s.ok()) return s;
  return groups;
}

Status MarkGroup(Store& store, const RecordedGroup& group,
                 const std::string& status) {
  return store.Write([&](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        "UPDATE process_groups SET status = ?4 WHERE run_id = ?1 AND"
        " pgid = ?2 AND leader_start = ?3");
    if (!st.ok()) return st.status();
    (*st)->Bind(1, group.run_id);
    (*st)->Bind(2, int64_t{group.group.pgid});
    (*st)->Bind(3, static_cast<int64_t>(group.group.leader_start_time));
    (*st)->Bind(4, status);
    return (*st)->Run();
  });
}

}  // namespace steps::store
