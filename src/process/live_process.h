// LiveProcess: a child that runs beside its caller rather than to
// completion — a server spoken to over its standard streams (an MCP server,
// say). ProcessLauncher::Run waits for the end; ProcessLauncher::Start hands
// back one of these, and the caller reads and writes the pipes itself.
#ifndef STEPS_PROCESS_LIVE_PROCESS_H_
#define STEPS_PROCESS_LIVE_PROCESS_H_

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

#include "core/duration.h"

namespace steps {

// A started child, the leader of its own process group, with three pipes:
// stdin (ours to write), stdout and stderr (ours to read). The parent's ends
// are non-blocking and close-on-exec, and stay owned by this object.
//
// The child is ended by Stop, or by the destructor (which stops it with no
// grace): nothing it started in its group outlives this object, and in a
// subreaper process (process/subreaper.h) neither does what left the group.
//
// Not thread-safe: one owner at a time (the descriptors may be polled from
// that owner's thread while nobody calls Stop).
class LiveProcess {
 public:
  virtual ~LiveProcess() = default;

  // Process id, and so process group id, of the child.
  virtual int pid() const = 0;
  // Parent ends of the pipes; -1 once closed (stdin: CloseStdin).
  virtual int stdin_fd() const = 0;
  virtual int stdout_fd() const = 0;
  virtual int stderr_fd() const = 0;
  // Closes our end of the child's stdin (the child reads end-of-file).
  virtual void CloseStdin() = 0;
  // A descriptor that becomes readable once the child has exited (a pidfd),
  // or -1 where the kernel has none: then callers check Exited() at short
  // intervals.
  virtual int exit_fd() const = 0;

  // True once the child has exited (it is not reaped until Stop).
  virtual bool Exited() = 0;
  // "exited with code 3", "killed by signal 9 (SIGKILL)"; nullopt while the
  // child runs.
  virtual std::optional<std::string> DescribeExit() = 0;

  // Ends the child: SIGTERM to its process group, SIGKILL to the group
  // `grace` later (at once when grace <= 0, or as soon as the leader has
  // exited), then reaps it. Blocks at most about `grace` (plus the bounded
  // sweep of a subreaper). Later calls do nothing.
  virtual void Stop(Millis grace) = 0;
};

// write(2) to a child's pipe without letting SIGPIPE reach the process:
// the signal is blocked on this thread for the call and, if the write
// raised it, consumed. A closed pipe is then EPIPE, as from any write.
ssize_t WriteWithoutSigpipe(int fd, const char* data, size_t size);

}  // namespace steps

#endif  // STEPS_PROCESS_LIVE_PROCESS_H_
