// Reading /proc, and ending a recorded group only while its leader is the
// recorded process.
#include "process/proc_stat.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "core/fiber.h"
#include "process/recorded_group.h"

namespace steps {
namespace {

// `sleep 300` as the leader of a group of its own, as a task's leader is.
pid_t StartGroupLeader() {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    execl("/bin/sleep", "sleep", "300", static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);  // Whichever of the two runs first.
  return pid;
}

TEST(ProcStatTest, ReadsThisProcess) {
  std::optional<ProcStat> self = ReadProcStat(getpid());
  ASSERT_TRUE(self.has_value());
  EXPECT_EQ(self->pid, getpid());
  EXPECT_EQ(self->ppid, getppid());
  EXPECT_EQ(self->pgid, getpgrp());
  EXPECT_EQ(self->session, getsid(0));
  EXPECT_EQ(self->state, 'R');
  EXPECT_GT(self->start_time, 0u);
  // Fixed for the life of the process.
  EXPECT_EQ(ReadProcStat(getpid())->start_time, self->start_time);
}

TEST(ProcStatTest, NoSuchProcess) {
  EXPECT_FALSE(ReadProcStat(0).has_value());
  EXPECT_FALSE(ReadProcStat(-1).has_value());
  EXPECT_FALSE(ReadProcEnv(0, "PATH").has_value());
}

TEST(ProcStatTest, ReadsTheEnvironmentAProcessStartedWith) {
  const char* path = getenv("PATH");
  ASSERT_NE(path, nullptr);
  EXPECT_EQ(ReadProcEnv(getpid(), "PATH"), std::string(path));
  EXPECT_FALSE(ReadProcEnv(getpid(), "PAT").has_value());
  EXPECT_FALSE(ReadProcEnv(getpid(), "STEPS_NO_SUCH_VARIABLE").has_value());
}

TEST(ProcStatTest, ListsChildren) {
  pid_t child = StartGroupLeader();
  std::vector<pid_t> children = ListChildren(getpid());
  EXPECT_NE(std::find(children.begin(), children.end(), child), children.end());
  EXPECT_TRUE(ListChildren(child).empty());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

bool Holds(const std::vector<pid_t>& pids, pid_t pid) {
  return std::find(pids.begin(), pids.end(), pid) != pids.end();
}

// Polls `list` for up to ~2 s until it holds `pid`: a thread's end hands
// its children over after pthread_join has returned.
template <typename List>
bool EventuallyHolds(List list, pid_t pid) {
  for (int i = 0; i < 2000; ++i) {
    if (Holds(list(), pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// What a sweep relies on: an orphan handed to this process, as a child
// subreaper, is a child of the main thread, however far from it the
// process started; so is the child of a thread that ended. A child that
// another live thread started is not listed, except to that thread itself.
TEST(ProcStatTest, SweepCandidatesHoldOrphansNotOtherThreadsChildren) {
  const std::string main_children_file = "/proc/" + std::to_string(getpid()) +
                                         "/task/" + std::to_string(getpid()) +
                                         "/children";
  if (access(main_children_file.c_str(), R_OK) != 0) {
    GTEST_SKIP() << "no " << main_children_file
                 << " (a kernel without CONFIG_PROC_CHILDREN): every "
                    "thread's children are listed";
  }
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  pid_t from_thread = -1;
  pid_t orphan = -1;
  std::thread other([&] {
    from_thread = StartGroupLeader();
    // A child that starts a grandchild and exits at once: the grandchild
    // is re-parented to this process.
    pid_t middle = fork();
    if (middle == 0) {
      pid_t grandchild = fork();
      if (grandchild == 0) {
        execl("/bin/sleep", "sleep", "300", static_cast<char*>(nullptr));
        _exit(127);
      }
      (void)!write(pipe_fds[1], &grandchild, sizeof grandchild);
      _exit(0);
    }
    waitpid(middle, nullptr, 0);
  });
  other.join();  // Started from a thread that has ended, too.
  close(pipe_fds[1]);
  ASSERT_EQ(read(pipe_fds[0], &orphan, sizeof orphan),
            static_cast<ssize_t>(sizeof orphan));
  close(pipe_fds[0]);
  EXPECT_TRUE(EventuallyHolds(ListSweepCandidates, orphan));
  EXPECT_TRUE(EventuallyHolds(ListSweepCandidates, from_thread));

  pid_t from_live_thread = -1;
  bool listed_to_its_thread = false;
  Waiter started;
  Waiter looked;
  std::thread live([&] {
    from_live_thread = StartGroupLeader();
    started.Give(1);
    looked.Wait();  // Alive while the main thread looks.
    listed_to_its_thread = Holds(ListSweepCandidates(), from_live_thread);
  });
  started.Wait();
  EXPECT_FALSE(Holds(ListSweepCandidates(), from_live_thread));
  EXPECT_TRUE(Holds(ListChildren(getpid()), from_live_thread));
  looked.Give(1);
  live.join();
  EXPECT_TRUE(listed_to_its_thread);
  for (pid_t pid : {orphan, from_thread, from_live_thread}) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0), 0);
}

TEST(RecordedGroupTest, KillsTheGroupWhileItsLeaderIsTheRecordedProcess) {
  pid_t leader = StartGroupLeader();
  std::optional<ProcStat> stat = ReadProcStat(leader);
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(KillRecordedGroup({leader, stat->start_time}),
            RecordedGroupEnd::kKilled);
  int status = 0;
  ASSERT_EQ(waitpid(leader, &status, 0), leader);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  // Gone now: nothing to kill.
  EXPECT_EQ(KillRecordedGroup({leader, stat->start_time}),
            RecordedGroupEnd::kGone);
}

TEST(RecordedGroupTest, LeavesAProcessThatReusesTheRecordedPid) {
  pid_t other = StartGroupLeader();
  std::optional<ProcStat> stat = ReadProcStat(other);
  ASSERT_TRUE(stat.has_value());
  // The recorded leader started at another time: `other` only has its pid.
  EXPECT_EQ(KillRecordedGroup({other, stat->start_time - 1}),
            RecordedGroupEnd::kGone);
  EXPECT_EQ(KillRecordedGroup({other, stat->start_time + 1}),
            RecordedGroupEnd::kGone);
  EXPECT_EQ(waitpid(other, nullptr, WNOHANG), 0);  // Still running.
  EXPECT_EQ(KillRecordedGroup({1, 0}), RecordedGroupEnd::kGone);
  kill(other, SIGKILL);
  waitpid(other, nullptr, 0);
}

}  // namespace
}  // namespace steps
