// A `steps run` killed with SIGKILL mid-step leaves a readable store in
// which the run shows as interrupted. The task tells the test it is running
// through a FIFO, so nothing sleeps to synchronise.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/reader.h"
#include "store/store.h"
#include "store_test_util.h"

namespace steps::store {
namespace {

using namespace store_testing;

TEST(SigkillTest, AKilledRunReadsAsInterrupted) {
  TempDir dir;
  TempDir state;
  const std::string fifo = dir / "started";
  const std::string pidfile = dir / "task.pid";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  WriteFile(dir / "slow.yaml", R"(
jobs:
- name: slow
  plan:
  - task: quick
    run: echo done
  - task: wait
    run: |
      echo $$ > )" + pidfile + R"(
      echo started > )" + fifo + R"(
      exec sleep 60
)");
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    const std::string bin = StepsBinary();
    const std::string file = dir / "slow.yaml";
    execl(bin.c_str(), bin.c_str(), "run", file.c_str(), "--plain",
          "--state-dir", state.path().c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Readable once the task has written to the FIFO: the step is running.
  // The bound only keeps a broken binary from hanging the test.
  int fd = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(fd, 0);
  pollfd p{fd, POLLIN, 0};
  int ready = poll(&p, 1, 30000);
  close(fd);
  if (ready != 1) kill(child, SIGKILL);
  ASSERT_EQ(ready, 1) << "the task never started";
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  // The task's process group outlived its runner: end it.
  const pid_t task = static_cast<pid_t>(std::stol(ReadFile(pidfile)));
  kill(-task, SIGKILL);
  kill(task, SIGKILL);

  auto store = Store::OpenExisting(StorePath(state.path()));
  ASSERT_TRUE(store.ok()) << store.status().message();
  Result<StoredRun> run = LoadRun(**store, "");
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->status, "interrupted");
  ASSERT_EQ(run->jobs.size(), 1u);
  EXPECT_EQ(run->jobs[0].status, "interrupted");
  ASSERT_EQ(run->jobs[0].steps.size(), 2u);
  EXPECT_EQ(run->jobs[0].steps[0].name, "quick");
  EXPECT_EQ(run->jobs[0].steps[0].status, "succeeded");
  EXPECT_EQ(run->jobs[0].steps[1].name, "wait");
  EXPECT_EQ(run->jobs[0].steps[1].status, "interrupted");
  ASSERT_EQ(run->jobs[0].steps[1].attempts.size(), 1u);
  EXPECT_EQ(run->jobs[0].steps[1].attempts[0].status, "interrupted");

  // The file is whole, and the binary shows and lists the run.
  ASSERT_TRUE((*store)
                  ->Read([](Db& db) -> Status {
                    Result<StatementUse> st =
                        db.Prepared("PRAGMA integrity_check");
                    if (!st.ok()) return st.status();
                    Result<bool> row = (*st)->Step();
                    if (!row.ok()) return row.status();
                    EXPECT_EQ((*st)->Text(0), "ok");
                    return Status::Ok();
                  })
                  .ok());
  CommandResult show = RunSteps("show --state-dir " + Quote(state.path()));
  EXPECT_EQ(show.exit_code, 0);
  EXPECT_NE(show.out.find("  interrupted  "), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("(attempt 1/1)  interrupted"), std::string::npos)
      << show.out;
  CommandResult runs = RunSteps("runs --state-dir " + Quote(state.path()));
  EXPECT_NE(runs.out.find("interrupted"), std::string::npos) << runs.out;
}

}  // namespace
}  // namespace steps::store
