// No process outlives its step, through the real `steps` binary: daemons
// that leave the task's process group (setsid, setsid -f, a double fork, a
// cleared environment) end with the step, on abort too; run_shell's end
// with the tool call; and the process groups of a run killed with SIGKILL
// are ended by the next `steps run` on the state folder, never by a
// read-only command, and never when the recorded pid is another process.
//
// Nothing sleeps to synchronise: the test waits for files the tasks write
// and for processes to go, polling with generous bounds that only keep a
// broken binary from hanging the test.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/steps_cli.h"
#include "common/temp_dir.h"
#include "process/proc_stat.h"
#include "store/store.h"

namespace steps {
namespace {

using test_support::TempDir;

using test_support::kStepsBinary;
constexpr auto kBound = std::chrono::seconds(30);

// Polls `condition` every 10ms until it holds or `bound` passes.
bool WaitFor(const std::function<bool()>& condition,
             std::chrono::milliseconds bound = kBound) {
  const auto give_up = std::chrono::steady_clock::now() + bound;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// Gone, or a zombie nobody has reaped yet (it runs nothing any more).
bool Dead(pid_t pid) {
  std::optional<ProcStat> stat = ReadProcStat(pid);
  return !stat || stat->state == 'Z';
}

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The pid a task wrote to `path`, or 0 when it is not there yet.
pid_t PidIn(const std::string& path) {
  std::string text = ReadWhole(path);
  return text.empty() ? 0 : static_cast<pid_t>(std::stol(text));
}

// `steps ARGS...` started in the background, its output in `log`.
pid_t StartSteps(const std::vector<std::string>& args, const std::string& log) {
  return test_support::SpawnSteps(std::filesystem::current_path().string(),
                                  args, log);
}

int WaitExit(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

struct StepsRun {
  int exit_code = -1;
  std::string output;
};

StepsRun RunSteps(const std::vector<std::string>& args,
                  const std::string& log) {
  StepsRun r;
  r.exit_code = WaitExit(StartSteps(args, log));
  r.output = ReadWhole(log);
  return r;
}

// A task that starts four daemons outside its process group and writes
// their pids to DIR/NAME.pid: setsid in the background, setsid -f (which
// forks), a double fork whose grandchild has its own session, and one that
// clears its environment (unless `cleared_env` is false).
std::string DaemonScript(const std::string& dir, bool cleared_env = true) {
  return "setsid sleep 300 >/dev/null 2>&1 & echo $! > " + dir + "/a.pid\n" +
         "setsid -f bash -c 'echo $$ > " + dir +
         "/b.pid; exec sleep 300' </dev/null >/dev/null 2>&1\n" +
         "( setsid bash -c '( exec sleep 300 ) & echo $! > " + dir +
         "/c.pid' & ) </dev/null >/dev/null 2>&1\n" +
         (cleared_env ? "setsid env -i /bin/sleep 300 >/dev/null 2>&1 & "
                        "echo $! > " +
                            dir + "/d.pid\n"
                      : std::string()) +
         "for i in $(seq 3000); do\n"
         "  [ -s " +
         dir + "/b.pid ] && [ -s " + dir +
         "/c.pid ] && break\n"
         "  sleep 0.01\n"
         "done\n";
}

std::vector<pid_t> DaemonPids(const std::string& dir) {
  std::vector<pid_t> pids;
  for (const char* name : {"a", "b", "c", "d"}) {
    pids.push_back(PidIn(dir + "/" + name + ".pid"));
  }
  return pids;
}

// Kills what a failed test may have left, so that it does not outlive it.
void KillAll(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    if (pid > 1) kill(pid, SIGKILL);
  }
}

// The next step sees no trace of them (not even a zombie): the step that
// started them ended them and reaped them before it was over.
std::string CheckGoneScript(const std::string& dir) {
  return "for f in " + dir +
         "/?.pid; do\n"
         "  p=$(cat $f)\n"
         "  if [ -e /proc/$p ]; then echo \"left: $f $p $(cat /proc/$p/stat)\";"
         " exit 1; fi\n"
         "done\n"
         "echo all gone\n";
}

// `text` with every line indented by `spaces`, to sit under a `run: |`.
std::string Indented(const std::string& text, int spaces) {
  std::string out, line;
  std::istringstream in(text);
  while (std::getline(in, line)) out += std::string(spaces, ' ') + line + "\n";
  return out;
}

TEST(OrphansTest, DaemonsEndWithTheirStep) {
  TempDir dir;
  dir.Write("p.yaml",
            "jobs:\n- name: j\n  plan:\n"
            "  - task: start\n    run: |\n" +
                Indented(DaemonScript(dir.path()), 6) +
                "  - task: check\n    run: |\n" +
                Indented(CheckGoneScript(dir.path()), 6));
  StepsRun run =
      RunSteps({"run", dir / "p.yaml", "--plain", "--state-dir", dir / "state"},
               dir / "log");
  std::vector<pid_t> pids = DaemonPids(dir.path());
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("check | all gone"), std::string::npos)
      << run.output;
  for (pid_t pid : pids) {
    EXPECT_GT(pid, 0) << run.output;
    EXPECT_TRUE(Dead(pid)) << pid;
  }
  KillAll(pids);
}

TEST(OrphansTest, DaemonsEndWhenTheRunIsAbortedMidStep) {
  TempDir dir;
  dir.Write("p.yaml",
            "jobs:\n- name: j\n  plan:\n"
            "  - task: start\n    run: |\n" +
                Indented(DaemonScript(dir.path()), 6) + "      echo ready > " +
                dir / "ready" + "\n" + "      sleep 300\n");
  pid_t steps = StartSteps(
      {"run", dir / "p.yaml", "--plain", "--state-dir", dir / "state"},
      dir / "log");
  bool ready = WaitFor([&] { return !ReadWhole(dir / "ready").empty(); });
  EXPECT_TRUE(ready) << ReadWhole(dir / "log");
  kill(steps, SIGTERM);
  EXPECT_EQ(WaitExit(steps), 143) << ReadWhole(dir / "log");
  std::vector<pid_t> pids = DaemonPids(dir.path());
  for (pid_t pid : pids) {
    EXPECT_GT(pid, 0);
    // Ended before steps exited; gone from the table once their new parent
    // has reaped them.
    EXPECT_TRUE(Dead(pid)) << pid;
  }
  KillAll(pids);
}

TEST(OrphansTest, RunShellDaemonsEndWithTheToolCall) {
  TempDir dir;
  const std::string pidfile = dir / "shell.pid";
  dir.Write("p.yaml", R"(
agents:
- name: a
  source: { model: mock/a }
  tools: [run_shell]
jobs:
- name: j
  plan:
  - agent: a
    messages: [start a server]
  - task: check
    run: |
      p=$(cat )" + pidfile +
                          R"()
      if [ -e /proc/$p ]; then echo "left: $p"; exit 1; fi
      echo daemon gone
mock:
  a:
  - call:
      name: run_shell
      arguments:
        command: "setsid sleep 300 >/dev/null 2>&1 & echo $! > )" +
                          pidfile + R"("
  - expect: { tool_result: true }
    say: Started.
)");
  StepsRun run = RunSteps({"run", dir / "p.yaml", "--mock", "--plain",
                           "--state-dir", dir / "state"},
                          dir / "log");
  pid_t pid = PidIn(pidfile);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_GT(pid, 0) << run.output;
  EXPECT_NE(run.output.find("check | daemon gone"), std::string::npos)
      << run.output;
  KillAll({pid});
}

TEST(OrphansTest, ResourceScriptDaemonsEndWithTheScript) {
  TempDir dir;
  const std::string pidfile = dir / "script.pid";
  dir.Write("p.yaml", R"(
resource_types:
- name: leaky
  config:
    check: |
      setsid sleep 300 >/dev/null 2>&1 & echo $! > )" +
                          pidfile + R"(
      echo '[{"ref": "v1"}]'
    in: echo fetched > file
resources:
- name: r
  type: leaky
  source: {}
jobs:
- name: j
  plan:
  - get: r
  - task: check
    run: |
      p=$(cat )" + pidfile +
                          R"()
      if [ -e /proc/$p ]; then echo "left: $p"; exit 1; fi
      echo daemon gone
)");
  StepsRun run =
      RunSteps({"run", dir / "p.yaml", "--plain", "--state-dir", dir / "state"},
               dir / "log");
  pid_t pid = PidIn(pidfile);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_GT(pid, 0) << run.output;
  EXPECT_NE(run.output.find("check | daemon gone"), std::string::npos)
      << run.output;
  KillAll({pid});
}

// Runs `sql` on the store; the first column of each row, one per line.
std::string QueryStore(const std::string& state_dir, const std::string& sql) {
  auto store = store::Store::OpenExisting(store::StorePath(state_dir));
  if (!store.ok()) return "error: " + store.status().message();
  std::string rows;
  Status s = (*store)->Read([&](store::Db& db) -> Status {
    Result<store::StatementUse> st = db.Prepared(sql);
    if (!st.ok()) return st.status();
    return (*st)->EachRow(
        [&](const store::Statement& row) { rows += row.Text(0) + "\n"; });
  });
  if (!s.ok()) return "error: " + s.message();
  return rows;
}

// True while some run holds its lock in STATE/runs (store/run_lock.h).
bool AnyRunLocked(const std::string& state) {
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator(state + "/runs", ec)) {
    if (entry.path().extension() != ".lock") continue;
    int fd = open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    bool locked = flock(fd, LOCK_EX | LOCK_NB) != 0;
    close(fd);
    if (locked) return true;
  }
  return false;
}

// A run killed with SIGKILL: its guardian ends the twelve running task
// groups and the daemons one task started outside its group, and only then
// lets the run's lock go. So a read-only `steps runs` right after finds the
// run interrupted and nothing of it running.
TEST(OrphansTest, ARunKilledWithSigkillLeavesNoProcess) {
  TempDir dir;
  constexpr int kTasks = 12;
  std::string yaml =
      "jobs:\n- name: j\n  plan:\n  - in_parallel:\n      limit: 12\n"
      "      steps:\n";
  for (int i = 0; i < kTasks; ++i) {
    yaml += "      - task: t" + std::to_string(i) + "\n        run: |\n";
    // One task also leaves daemons outside its group (not the one that
    // clears its environment: see the test below).
    if (i == 0) {
      yaml += Indented(DaemonScript(dir.path(), /*cleared_env=*/false), 10);
    }
    yaml += "          echo $$ > " + dir / ("t" + std::to_string(i) + ".pid") +
            "; exec sleep 300\n";
  }
  dir.Write("slow.yaml", yaml);
  dir.Write("other.yaml",
            "jobs:\n- name: k\n  plan:\n  - { task: t, run: echo fine }\n");
  const std::string state = dir / "state";
  pid_t steps = StartSteps(
      {"run", dir / "slow.yaml", "--plain", "--state-dir", state}, dir / "log");
  std::vector<pid_t> pids(kTasks, 0);
  auto all_started = [&] {
    for (int i = 0; i < kTasks; ++i) {
      pids[i] = PidIn(dir / ("t" + std::to_string(i) + ".pid"));
      if (pids[i] == 0) return false;
    }
    return true;
  };
  bool started = WaitFor(all_started);
  // A pid file is written before the task's group is recorded: wait for
  // the records too, or the kill could come between the two.
  bool recorded = WaitFor([&] {
    return QueryStore(state, "SELECT count(*) FROM process_groups") == "12\n";
  });
  std::vector<pid_t> daemons = DaemonPids(dir.path());
  daemons.pop_back();  // No d.pid: that daemon was not started.
  kill(steps, SIGKILL);
  EXPECT_EQ(WaitExit(steps), 128 + SIGKILL);
  ASSERT_TRUE(started && recorded) << ReadWhole(dir / "log");
  for (pid_t pid : daemons) ASSERT_GT(pid, 0) << ReadWhole(dir / "log");

  // The guardian holds the lock until it is done.
  EXPECT_TRUE(WaitFor([&] { return !AnyRunLocked(state); }));
  StepsRun runs = RunSteps({"runs", "--state-dir", state}, dir / "runs.log");
  EXPECT_EQ(runs.exit_code, 0) << runs.output;
  EXPECT_NE(runs.output.find("interrupted"), std::string::npos) << runs.output;
  for (pid_t pid : pids) EXPECT_TRUE(Dead(pid)) << pid;
  for (pid_t pid : daemons) EXPECT_TRUE(Dead(pid)) << pid;
  const std::string log = ReadWhole(dir / "log");
  EXPECT_NE(log.find("WRN run.orphans_killed run="), std::string::npos) << log;
  EXPECT_NE(log.find(" groups=12 escaped=3"), std::string::npos) << log;
  EXPECT_EQ(QueryStore(state, "SELECT DISTINCT status FROM process_groups"),
            "killed\n");
  EXPECT_EQ(QueryStore(state, "PRAGMA integrity_check"), "ok\n");

  // Said once: the next run finds nothing left to end.
  StepsRun next =
      RunSteps({"run", dir / "other.yaml", "--plain", "--state-dir", state},
               dir / "next.log");
  EXPECT_EQ(next.exit_code, 0) << next.output;
  EXPECT_EQ(next.output.find("orphans_killed"), std::string::npos)
      << next.output;
  KillAll(pids);
  KillAll(daemons);
}

// When the guardian is gone too (killed with the run, as a whole cgroup
// would be), the next `steps run` on the state folder ends the recorded
// groups, never a read-only command.
TEST(OrphansTest, WithoutItsGuardianTheNextRunEndsTheGroupsOfADeadRun) {
  TempDir dir;
  constexpr int kTasks = 3;
  std::string yaml =
      "jobs:\n- name: j\n  plan:\n  - in_parallel:\n      steps:\n";
  for (int i = 0; i < kTasks; ++i) {
    yaml += "      - task: t" + std::to_string(i) +
            "\n        run: echo $$ > " +
            dir / ("t" + std::to_string(i) + ".pid") + "; exec sleep 300\n";
  }
  dir.Write("slow.yaml", yaml);
  dir.Write("other.yaml",
            "jobs:\n- name: k\n  plan:\n  - { task: t, run: echo fine }\n");
  const std::string state = dir / "state";
  pid_t steps = StartSteps(
      {"run", dir / "slow.yaml", "--plain", "--state-dir", state}, dir / "log");
  std::vector<pid_t> pids(kTasks, 0);
  bool started = WaitFor([&] {
    for (int i = 0; i < kTasks; ++i) {
      pids[i] = PidIn(dir / ("t" + std::to_string(i) + ".pid"));
      if (pids[i] == 0) return false;
    }
    return QueryStore(state, "SELECT count(*) FROM process_groups") == "3\n";
  });
  // The guardian is the child of steps in a session of its own.
  pid_t guardian = 0;
  for (const ProcStat& p : ListProcesses()) {
    if (p.ppid == steps && p.session == p.pid) guardian = p.pid;
  }
  ASSERT_TRUE(started) << ReadWhole(dir / "log");
  ASSERT_GT(guardian, 0);
  kill(guardian, SIGKILL);
  kill(steps, SIGKILL);
  EXPECT_EQ(WaitExit(steps), 128 + SIGKILL);

  StepsRun runs = RunSteps({"runs", "--state-dir", state}, dir / "runs.log");
  EXPECT_NE(runs.output.find("interrupted"), std::string::npos) << runs.output;
  for (pid_t pid : pids) EXPECT_FALSE(Dead(pid)) << pid;

  StepsRun next =
      RunSteps({"run", dir / "other.yaml", "--plain", "--state-dir", state},
               dir / "next.log");
  EXPECT_EQ(next.exit_code, 0) << next.output;
  EXPECT_NE(next.output.find("WRN run.orphans_killed run="), std::string::npos)
      << next.output;
  EXPECT_NE(next.output.find(" groups=3"), std::string::npos) << next.output;
  for (pid_t pid : pids) {
    EXPECT_TRUE(WaitFor([&] { return Dead(pid); })) << pid;
  }
  EXPECT_EQ(QueryStore(state, "SELECT DISTINCT status FROM process_groups"),
            "killed\n");
  KillAll(pids);
}

// A group whose row the run could not delete as it ended (another process
// held the store, and the run's writes gave up): the run's lock file went
// with its clean end, so its recorded process decides that it died, and the
// next run marks the group gone rather than keep it `running` for ever.
TEST(OrphansTest, TheNextRunEndsTheGroupRowsOfARunThatEndedCleanly) {
  TempDir dir;
  dir.Write("p.yaml", "jobs:\n- name: k\n  plan:\n  - { task: t, run: echo fine }\n");
  const std::string state = dir / "state";
  StepsRun first = RunSteps({"run", dir / "p.yaml", "--plain", "--state-dir", state},
                            dir / "first.log");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // A group no process has any more (the pid of a reaped child).
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_EQ(WaitExit(child), 0);
  {
    auto store = store::Store::OpenExisting(store::StorePath(state));
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Write([&](store::Db& db) -> Status {
      return db.Exec("INSERT INTO process_groups (run_id, pgid, leader_start,"
                     " status) SELECT id, " + std::to_string(child) +
                     ", 12345, 'running' FROM runs");
    }).ok());
  }
  ASSERT_EQ(QueryStore(state, "SELECT status FROM process_groups"), "running\n");
  StepsRun next = RunSteps({"run", dir / "p.yaml", "--plain", "--state-dir", state},
                           dir / "next.log");
  EXPECT_EQ(next.exit_code, 0) << next.output;
  EXPECT_EQ(QueryStore(state, "SELECT status FROM process_groups"), "gone\n");
}

// The guardian of a run started by steps `pid`: its child in a session of
// its own; 0 when there is none.
pid_t GuardianOf(pid_t pid) {
  for (const ProcStat& p : ListProcesses()) {
    if (p.ppid == pid && p.session == p.pid) return p.pid;
  }
  return 0;
}

// A one-task pipeline whose task writes its pid to DIR/t.pid, prints lines
// that hold the letter the guardian's protocol uses, and waits for DIR/go.
std::string GatedTask(const std::string& dir) {
  return "jobs:\n- name: j\n  plan:\n  - task: t\n    run: |\n"
         "      echo $$ > " + dir + "/t.pid\n"
         "      echo done and dusted\n"
         "      while [ ! -e " + dir + "/go ]; do sleep 0.01; done\n";
}

// Started with standard input and output closed, steps opens its lock and
// the guardian's socket where they were; the run's output must not reach
// the guardian, nor the guardian lose the lock.
TEST(OrphansTest, ARunStartedWithoutStandardDescriptorsIsStillGuarded) {
  TempDir dir;
  dir.Write("p.yaml", GatedTask(dir.path()));
  const std::string state = dir / "state";
  pid_t steps = fork();
  if (steps == 0) {
    int log = open((dir / "log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(log, STDERR_FILENO);
    close(log);
    close(STDIN_FILENO);
    close(STDOUT_FILENO);
    execl(kStepsBinary.c_str(), kStepsBinary.c_str(), "run",
          (dir / "p.yaml").c_str(), "--plain", "--state-dir", state.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  pid_t task = 0;
  bool started = WaitFor([&] {
    task = PidIn(dir / "t.pid");
    return task > 0 &&
           QueryStore(state, "SELECT count(*) FROM process_groups") == "1\n";
  });
  ASSERT_TRUE(started) << ReadWhole(dir / "log");
  pid_t guardian = GuardianOf(steps);
  EXPECT_GT(guardian, 0);
  kill(steps, SIGKILL);
  EXPECT_EQ(WaitExit(steps), 128 + SIGKILL);
  EXPECT_TRUE(WaitFor([&] { return !AnyRunLocked(state); }));
  EXPECT_TRUE(Dead(task)) << ReadWhole(dir / "log");
  KillAll({task});
}

// Where this process's binary is, as /proc says: "" when it cannot.
std::string ExeOf(pid_t pid) {
  char buffer[4096];
  ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(),
                       buffer, sizeof buffer - 1);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "";
}

// Runs the gated task with the `steps` binary at `binary`, kills steps with
// SIGKILL once the task runs, and returns the program its guardian ran (its
// /proc/PID/exe) after checking that the guardian ended the task and let
// the lock go.
// `before_kill`, when given, runs just before the kill.
std::string GuardedBy(const std::string& binary, const TempDir& dir,
                      const std::function<void()>& before_kill = nullptr) {
  dir.Write("p.yaml", GatedTask(dir.path()));
  const std::string state = dir / "state";
  pid_t steps = fork();
  if (steps == 0) {
    int log = open((dir / "log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    close(log);
    execl(binary.c_str(), binary.c_str(), "run", (dir / "p.yaml").c_str(),
          "--plain", "--state-dir", state.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  pid_t task = 0;
  pid_t guardian = 0;
  bool started = WaitFor([&] {
    task = PidIn(dir / "t.pid");
    guardian = GuardianOf(steps);
    return task > 0 && guardian > 0 &&
           QueryStore(state, "SELECT count(*) FROM process_groups") == "1\n";
  });
  const std::string program = guardian > 0 ? ExeOf(guardian) : "";
  if (before_kill) before_kill();
  kill(steps, SIGKILL);
  EXPECT_EQ(WaitExit(steps), 128 + SIGKILL);
  EXPECT_TRUE(started) << ReadWhole(dir / "log");
  EXPECT_TRUE(WaitFor([&] { return !AnyRunLocked(state); }));
  EXPECT_TRUE(task > 0 && Dead(task)) << ReadWhole(dir / "log");
  if (task > 0) KillAll({task});
  return program;
}

// The guardian is its own small program, built beside `steps`: a run does
// not load libcurl and the rest a second time to guard itself.
TEST(OrphansTest, TheGuardianIsTheSmallProgramBesideSteps) {
  TempDir dir;
  const std::string beside =
      std::filesystem::path(kStepsBinary).parent_path() / "steps-guardian";
  EXPECT_EQ(GuardedBy(kStepsBinary, dir),
            std::filesystem::canonical(beside).string());
}

// The guardian every run starts maps the C library alone (each run's start
// pays for what it loads); the store and the sweeps come only with the
// `steps __guard` a dead run's guardian becomes (the test above).
TEST(OrphansTest, TheGuardianOfARunningRunLoadsNoLibraryButC) {
  TempDir dir;
  dir.Write("p.yaml", GatedTask(dir.path()));
  pid_t steps = StartSteps(
      {"run", dir / "p.yaml", "--plain", "--state-dir", dir / "state"},
      dir / "log");
  pid_t guardian = 0;
  ASSERT_TRUE(WaitFor([&] {
    guardian = GuardianOf(steps);
    return guardian > 0 && PidIn(dir / "t.pid") > 0;
  })) << ReadWhole(dir / "log");
  const std::string maps =
      ReadWhole("/proc/" + std::to_string(guardian) + "/maps");
  dir.Write("go", "");
  EXPECT_EQ(WaitExit(steps), 0) << ReadWhole(dir / "log");
  ASSERT_NE(maps.find("libc.so"), std::string::npos) << maps;
  std::vector<const char*> absent = {"libsqlite3", "libspdlog", "libcurl"};
#ifndef __SANITIZE_ADDRESS__
  // (The sanitizers' runtime brings the C++ library along.)
  absent.push_back("libstdc++");
#endif
  for (const char* lib : absent) {
    EXPECT_EQ(maps.find(lib), std::string::npos) << lib << "\n" << maps;
  }
}

// `steps` alone in `dir` (a hard link, else a copy): no guardian program
// beside it. "" when neither could be made.
std::string StepsAlone(const TempDir& dir) {
  const std::string alone = dir / "steps";
  std::error_code ec;
  std::filesystem::create_hard_link(kStepsBinary, alone, ec);
  if (ec) std::filesystem::copy_file(kStepsBinary, alone, ec);
  return ec ? "" : std::filesystem::canonical(alone).string();
}

// Copies of `steps` and its guardian program in `dir`: files of their
// own, which a test may replace or chmod without touching the build's.
// "" when they could not be made.
std::string StepsCopiedWithItsGuardian(const TempDir& dir) {
  const std::filesystem::path build =
      std::filesystem::path(kStepsBinary).parent_path();
  std::error_code ec;
  std::filesystem::copy_file(kStepsBinary, dir / "steps", ec);
  if (!ec) {
    std::filesystem::copy_file(build / "steps-guardian",
                               dir / "steps-guardian", ec);
  }
  return ec ? "" : std::filesystem::canonical(dir / "steps").string();
}

// A `steps` without its guardian program beside it (copied alone) guards
// its run with itself (`steps __guard`), as well.
TEST(OrphansTest, AStepsWithoutItsGuardianProgramGuardsItsRunItself) {
  TempDir dir;
  const std::string alone = StepsAlone(dir);
  ASSERT_FALSE(alone.empty());
  EXPECT_EQ(GuardedBy(alone, dir), alone);
}

// A dead run's guardian becomes the `steps` that started the run, even
// when that file was replaced on disk since (an upgrade while it ran).
TEST(OrphansTest, ADeadRunIsEndedByItsOwnStepsEvenIfItsFileWasReplaced) {
  TempDir dir;
  const std::string alone = StepsCopiedWithItsGuardian(dir);
  ASSERT_FALSE(alone.empty());
  const std::string program = GuardedBy(alone, dir, [&] {
    std::filesystem::remove(alone);
    dir.Write("steps", "#!/bin/sh\nexit 3\n");
    std::filesystem::permissions(alone, std::filesystem::perms::owner_all);
  });
  EXPECT_EQ(program, std::filesystem::canonical(dir / "steps-guardian").string());
}

// A dead run whose `steps` cannot be started any more (made
// non-executable since it started) still has its processes ended: the
// guardian finds them by their scope itself.
TEST(OrphansTest, ADeadRunWhoseStepsCannotStartAnyMoreIsStillEnded) {
  TempDir dir;
  const std::string alone = StepsCopiedWithItsGuardian(dir);
  ASSERT_FALSE(alone.empty());
  GuardedBy(alone, dir, [&] {
    std::filesystem::permissions(alone, std::filesystem::perms::owner_read);
  });
  EXPECT_NE(ReadWhole(dir / "log").find("could not be started"),
            std::string::npos)
      << ReadWhole(dir / "log");
}

// A guardian program beside `steps` that cannot be started (not a program
// for this machine) is passed over: `steps` guards its run itself.
TEST(OrphansTest, AGuardianProgramThatCannotStartIsPassedOver) {
  TempDir dir;
  const std::string alone = StepsAlone(dir);
  ASSERT_FALSE(alone.empty());
  dir.Write("steps-guardian", "not a program for this machine\n");
  std::filesystem::permissions(dir / "steps-guardian",
                               std::filesystem::perms::owner_all);
  EXPECT_EQ(GuardedBy(alone, dir), alone);
}

// A guardian that cannot exit (stopped) holds the run's end for at most
// its bound, and one that is gone is said at the end of the run.
TEST(OrphansTest, AStoppedOrLostGuardianNeverHoldsTheRun) {
  for (int sig : {SIGSTOP, SIGKILL}) {
    TempDir dir;
    dir.Write("p.yaml", GatedTask(dir.path()));
    pid_t steps = StartSteps({"run", dir / "p.yaml", "--plain", "--state-dir",
                              dir / "state"},
                             dir / "log");
    pid_t guardian = 0;
    ASSERT_TRUE(WaitFor([&] {
      guardian = GuardianOf(steps);
      return guardian > 0 && PidIn(dir / "t.pid") > 0;
    })) << ReadWhole(dir / "log");
    kill(guardian, sig);
    // A guardian lost before the run ends is what is reported: let the kill
    // land (the guardian a zombie of steps) before the run may end.
    if (sig == SIGKILL) {
      ASSERT_TRUE(WaitFor([&] { return Dead(guardian); })) << guardian;
    }
    dir.Write("go", "");
    int status = 0;
    // 2 s for the guardian, and plenty for a loaded machine.
    bool ended = WaitFor([&] { return waitpid(steps, &status, WNOHANG) == steps; },
                         std::chrono::seconds(20));
    if (!ended) kill(steps, SIGKILL);
    ASSERT_TRUE(ended) << sig;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    const std::string log = ReadWhole(dir / "log");
    if (sig == SIGKILL) {
      EXPECT_NE(log.find("WRN run.guardian_lost"), std::string::npos) << log;
    }
    EXPECT_TRUE(Dead(guardian)) << sig;
  }
}

// SIGHUP (a closed terminal) aborts like SIGTERM: hooks and cleanup run,
// the daemons go, exit 129.
TEST(OrphansTest, SighupAbortsTheRunAndEndsWhatItStarted) {
  TempDir dir;
  dir.Write("p.yaml",
            "jobs:\n- name: j\n  plan:\n"
            "  - task: start\n    run: |\n" +
                Indented(DaemonScript(dir.path()), 6) + "      echo ready > " +
                dir / "ready" + "\n" + "      sleep 300\n" +
                "  on_abort:\n    task: bye\n    run: echo hook ran\n");
  pid_t steps = StartSteps(
      {"run", dir / "p.yaml", "--plain", "--state-dir", dir / "state"},
      dir / "log");
  bool ready = WaitFor([&] { return !ReadWhole(dir / "ready").empty(); });
  EXPECT_TRUE(ready) << ReadWhole(dir / "log");
  kill(steps, SIGHUP);
  EXPECT_EQ(WaitExit(steps), 129) << ReadWhole(dir / "log");
  EXPECT_NE(ReadWhole(dir / "log").find("hook ran"), std::string::npos)
      << ReadWhole(dir / "log");
  std::vector<pid_t> pids = DaemonPids(dir.path());
  for (pid_t pid : pids) EXPECT_TRUE(Dead(pid)) << pid;
  KillAll(pids);
}

// A live run whose lock file was removed by hand is not taken for dead by
// the next run.
TEST(OrphansTest, ALiveRunWithoutItsLockFileIsLeftAlone) {
  TempDir dir;
  const std::string state = dir / "state";
  dir.Write("p.yaml", GatedTask(dir.path()));
  dir.Write("other.yaml",
            "jobs:\n- name: k\n  plan:\n  - { task: t, run: echo fine }\n");
  pid_t steps = StartSteps({"run", dir / "p.yaml", "--plain", "--state-dir",
                            state},
                           dir / "log");
  pid_t task = 0;
  ASSERT_TRUE(WaitFor([&] {
    task = PidIn(dir / "t.pid");
    return task > 0 &&
           QueryStore(state, "SELECT count(*) FROM process_groups") == "1\n";
  })) << ReadWhole(dir / "log");
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(state + "/runs", ec))
    if (e.path().extension() == ".lock") std::filesystem::remove(e.path(), ec);
  StepsRun next =
      RunSteps({"run", dir / "other.yaml", "--plain", "--state-dir", state},
               dir / "next.log");
  EXPECT_EQ(next.output.find("orphans_killed"), std::string::npos)
      << next.output;
  EXPECT_FALSE(Dead(task));
  dir.Write("go", "");
  EXPECT_EQ(WaitExit(steps), 0) << ReadWhole(dir / "log");
}

// A process in a group of its own, as a task's leader is.
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

TEST(OrphansTest, ARecordedGroupWhosePidIsAnotherProcessIsLeftAlone) {
  TempDir dir;
  const std::string state = dir / "state";
  dir.Write("ok.yaml",
            "jobs:\n- name: k\n  plan:\n  - { task: t, run: echo fine }\n");
  // A first run creates the store.
  ASSERT_EQ(RunSteps({"run", dir / "ok.yaml", "--plain", "--state-dir", state},
                     dir / "log")
                .exit_code,
            0);
  pid_t ours = StartGroupLeader();
  pid_t stranger = StartGroupLeader();
  std::optional<ProcStat> ours_stat, stranger_stat;
  ASSERT_TRUE(WaitFor([&] {
    ours_stat = ReadProcStat(ours);
    stranger_stat = ReadProcStat(stranger);
    return ours_stat && stranger_stat && ours_stat->pgid == ours &&
           stranger_stat->pgid == stranger;
  }));
  // A run that died (it holds no lock) recorded both groups; the second
  // pid now names a process that started at another time.
  auto store = store::Store::Open(store::StorePath(state));
  ASSERT_TRUE(store.ok()) << store.status().message();
  Status s = (*store)->Write([&](store::Db& db) -> Status {
    return db.Exec(
        "INSERT INTO process_groups VALUES ('20200101-000000-dead', " +
        std::to_string(ours) + ", " + std::to_string(ours_stat->start_time) +
        ", 'running'), ('20200101-000000-dead', " + std::to_string(stranger) +
        ", " + std::to_string(stranger_stat->start_time + 1) + ", 'running')");
  });
  ASSERT_TRUE(s.ok()) << s.message();
  store->reset();
  // Its lock file is left, and free: the run died with its guardian.
  std::filesystem::create_directories(state + "/runs");
  dir.Write("state/runs/20200101-000000-dead.lock", "");

  StepsRun next =
      RunSteps({"run", dir / "ok.yaml", "--plain", "--state-dir", state},
               dir / "next.log");
  EXPECT_NE(next.output.find(
                "WRN run.orphans_killed run=20200101-000000-dead groups=1"),
            std::string::npos)
      << next.output;
  int status = 0;
  EXPECT_EQ(waitpid(ours, &status, 0), ours);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_FALSE(Dead(stranger));
  EXPECT_EQ(
      QueryStore(state, "SELECT status FROM process_groups ORDER BY pgid = " +
                            std::to_string(stranger)),
      "killed\ngone\n");
  kill(stranger, SIGKILL);
  waitpid(stranger, &status, 0);
}

}  // namespace
}  // namespace steps
