#include "process/recorded_group.h"

#include <signal.h>

#include "process/proc_stat.h"

namespace steps {

RecordedGroupEnd KillRecordedGroup(const ProcessGroupId& group) {
  if (group.pgid <= 1) return RecordedGroupEnd::kGone;
  std::optional<ProcStat> leader = ReadProcStat(group.pgid);
  if (!leader || leader->start_time != group.leader_start_time) {
    return RecordedGroupEnd::kGone;
  }
  // The leader (alive, or an unreaped zombie) pins the group id: the group is
  // the recorded one.
  kill(-group.pgid, SIGKILL);
  // A leader that moved to another group goes too.
  if (leader->pgid != group.pgid) kill(group.pgid, SIGKILL);
  return RecordedGroupEnd::kKilled;
}

}  // namespace steps
