// Ending a process group recorded by an earlier process (one that died
// before it could end the group itself), without ever signalling a process
// that merely reuses a recorded pid.
#ifndef STEPS_PROCESS_RECORDED_GROUP_H_
#define STEPS_PROCESS_RECORDED_GROUP_H_

#include "process/local_launcher.h"

namespace steps {

enum class RecordedGroupEnd {
  kKilled,  // The group was still the recorded one: it got SIGKILL.
  kGone,    // Its leader is gone, or its pid now names another process.
};

// Sends SIGKILL to the group `group` names if its leader is still there
// with the recorded start time (alive, or an unreaped zombie). Nothing is
// signalled otherwise: a pid with another start time is another process,
// and once the leader is gone nothing tells the group's remaining members
// from those of a later group that reuses the id, so they are left alone.
RecordedGroupEnd KillRecordedGroup(const ProcessGroupId& group);

}  // namespace steps

#endif  // STEPS_PROCESS_RECORDED_GROUP_H_
