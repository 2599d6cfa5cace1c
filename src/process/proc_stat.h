// What the kernel says about one process, read from /proc: the few fields
// that tell whether a pid is still the process we started, which group and
// session it is in, and who its children are.
#ifndef STEPS_PROCESS_PROC_STAT_H_
#define STEPS_PROCESS_PROC_STAT_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace steps {

// Fields of /proc/PID/stat (proc(5)).
struct ProcStat {
  pid_t pid = 0;
  char state = '?';   // Field 3: 'R', 'S', 'D', 'Z' (zombie), ...
  pid_t ppid = 0;     // Field 4.
  pid_t pgid = 0;     // Field 5.
  pid_t session = 0;  // Field 6.
  // Field 22: clock ticks after boot at which the process started. With the
  // pid it names one process for good: a recycled pid has a later one.
  uint64_t start_time = 0;
};

// nullopt when there is no such process (or no /proc).
std::optional<ProcStat> ReadProcStat(pid_t pid);

// The pids whose parent is `pid` (every thread's children, zombies
// included), from /proc/PID/task/*/children; when the kernel has no such
// file, from a scan of every /proc/N/stat. Empty for a process that is gone.
std::vector<pid_t> ListChildren(pid_t pid);

// The processes a sweep of this process's orphans looks at: the children
// of the main thread and of the calling thread. Since Linux 3.19 the kernel
// hands an orphan re-parented to a child subreaper, and the children of a
// thread that ends, to the first live thread of the group: the main thread
// while it lives. The calling thread's own children are added for a
// process its child started with clone(CLONE_PARENT). Every thread's
// children (ListChildren) where that rule does not hold: kernels before
// 3.19, a main thread that has ended, no children files. Cheap next to
// ListChildren in a process with many threads: two files, not one per
// thread. A child another live thread started is not listed.
std::vector<pid_t> ListSweepCandidates();

// Every process on the machine this user can see, with its stat fields.
std::vector<ProcStat> ListProcesses();

// The value of `name` in the environment the process started with
// (/proc/PID/environ); nullopt when it has no such variable or the file
// cannot be read (gone, a zombie, another user's, or not dumpable).
std::optional<std::string> ReadProcEnv(pid_t pid, const std::string& name);

}  // namespace steps

#endif  // STEPS_PROCESS_PROC_STAT_H_
