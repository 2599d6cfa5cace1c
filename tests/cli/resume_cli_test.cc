// `steps resume` through the real binary: a run killed with SIGKILL (by one
// of its own tasks, at a chosen point) or aborted with SIGINT continues
// under its own id; what ended is not run again; a changed pipeline file is
// refused; the time already spent counts against deadlines.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>
#include <httplib.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/chat_completion.h"
#include "common/steps_cli.h"
#include "common/store_sql.h"
#include "common/temp_dir.h"

namespace steps {
namespace {

using nlohmann::json;
using test_support::ChatAnswer;
using test_support::Has;
using test_support::RunSteps;
using test_support::ShellCall;
using test_support::TempDir;
using namespace std::chrono_literals;

// Shell text that sends `signal` to the `steps` process running this task
// (found by walking up the process tree), the first time only: `mark` is
// created then, and later runs of the task go on.
std::string SignalStepsOnce(const std::string& mark,
                            const std::string& signal) {
  return "if [ ! -e " + mark + " ]; then touch " + mark +
         "; p=$PPID; while [ \"$(cat /proc/$p/comm)\" != steps ]; do "
         "p=$(cut -d' ' -f4 /proc/$p/stat); done; kill -" +
         signal + " $p; exec sleep 600; fi; echo went on";
}

// Runs `sql` on the store through a connection of its own; the first
// column of the first row, or "" when there is none.
std::string Sql(const std::string& db_path, const std::string& sql) {
  return test_support::StoreSql(db_path, sql);
}

class ResumeCliTest : public ::testing::Test {
 protected:
  // A job of three tasks: the first appends to lines.txt, the second kills
  // (or interrupts) `steps` the first time it runs, the third appends.
  void WritePipeline(const std::string& signal,
                     const std::string& job_extra = "") {
    dir_.Write("p.yaml",
               "jobs:\n"
               "- name: j\n" +
                   job_extra +
                   "  plan:\n"
                   "  - task: first\n"
                   "    run: echo one >> " +
                   dir_.path() +
                   "/lines.txt\n"
                   "  - task: second\n"
                   "    run: |\n"
                   "      " +
                   SignalStepsOnce(dir_.path() + "/mark", signal) +
                   "\n"
                   "  - task: third\n"
                   "    run: echo three >> " +
                   dir_.path() + "/lines.txt\n");
  }
  test_support::CliResult Steps(const std::string& args) {
    return RunSteps(dir_.path(), args + " --plain --state-dir state",
                    {.prefix = "",
                     .streams = test_support::Streams::kMerged,
                     .kill_after = std::chrono::seconds(60)});
  }
  test_support::CliResult Show(const std::string& run) {
    return RunSteps(dir_.path(), "show " + run + " --state-dir state");
  }
  std::string Db() const { return dir_.path() + "/state/steps.db"; }
  // The lock file of run `id` (store/run_lock.h).
  std::string LockFile(const std::string& id) const {
    return dir_.path() + "/state/runs/" + id + ".lock";
  }

  TempDir dir_;
};

TEST_F(ResumeCliTest, FinishedStepIsNotRunAgain) {
  WritePipeline("KILL");
  auto killed = Steps("run p.yaml");
  EXPECT_EQ(killed.exit_code, 137) << killed.out;
  EXPECT_EQ(dir_.Read("lines.txt"), "one\n");
  const std::string id = Sql(Db(), "SELECT id FROM runs");
  auto shown = Show("");
  EXPECT_TRUE(Has(shown.out, "interrupted")) << shown.out;

  auto resumed = Steps("resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_TRUE(Has(resumed.out, "run " + id)) << resumed.out;
  // `first` ended before the kill: its line is there once.
  EXPECT_EQ(dir_.Read("lines.txt"), "one\nthree\n");
  EXPECT_EQ(Sql(Db(), "SELECT count(*) FROM runs"), "1");
  EXPECT_EQ(Sql(Db(), "SELECT status FROM runs"), "succeeded");
  EXPECT_EQ(Sql(Db(), "SELECT group_concat(status) FROM steps"),
            "succeeded,succeeded,succeeded");
  EXPECT_EQ(Sql(Db(), "SELECT status FROM run_interruptions"), "interrupted");
  shown = Show(id);
  EXPECT_TRUE(Has(shown.out, "(interrupted), resumed")) << shown.out;
  EXPECT_EQ(Sql(Db(), "SELECT output FROM steps WHERE name = 'second'"),
            "went on\n");

  // Nothing is left to resume.
  auto again = Steps("resume");
  EXPECT_EQ(again.exit_code, 64) << again.out;
  EXPECT_TRUE(Has(again.out, "no interrupted or aborted run")) << again.out;
  auto ended = Steps("resume " + id);
  EXPECT_EQ(ended.exit_code, 65) << ended.out;
  EXPECT_TRUE(Has(ended.out, "is succeeded")) << ended.out;
}

TEST_F(ResumeCliTest, AbortedRunResumes) {
  WritePipeline("INT");
  auto aborted = Steps("run p.yaml");
  EXPECT_EQ(aborted.exit_code, 130) << aborted.out;
  EXPECT_EQ(Sql(Db(), "SELECT status FROM runs"), "aborted");
  auto resumed = Steps("resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_EQ(dir_.Read("lines.txt"), "one\nthree\n");
  EXPECT_EQ(Sql(Db(), "SELECT status FROM runs"), "succeeded");
  EXPECT_EQ(Sql(Db(), "SELECT status FROM run_interruptions"), "aborted");
}

// The job's ensure ran because of the abort: the resumed run fires it
// again at its own end, and its script runs (docs/resume.md).
TEST_F(ResumeCliTest, AHookThatRanBecauseOfTheAbortRunsAgain) {
  WritePipeline("INT", "  ensure:\n    task: tidy\n    run: echo tidy >> " +
                           dir_.path() + "/hooks.txt\n");
  auto aborted = Steps("run p.yaml");
  EXPECT_EQ(aborted.exit_code, 130) << aborted.out;
  EXPECT_EQ(dir_.Read("hooks.txt"), "tidy\n");
  auto resumed = Steps("resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_EQ(dir_.Read("lines.txt"), "one\nthree\n");
  EXPECT_EQ(dir_.Read("hooks.txt"), "tidy\ntidy\n");
  EXPECT_EQ(Sql(Db(), "SELECT status FROM runs"), "succeeded");
}

TEST_F(ResumeCliTest, ChangedPipelineIsRefused) {
  WritePipeline("KILL");
  EXPECT_EQ(Steps("run p.yaml").exit_code, 137);
  std::string text = dir_.Read("p.yaml");
  text.replace(text.find("echo three"), 10, "echo four");
  dir_.Write("p.yaml", text);
  auto refused = Steps("resume");
  EXPECT_EQ(refused.exit_code, 65) << refused.out;
  EXPECT_TRUE(Has(refused.out, "pipeline file changed")) << refused.out;
  EXPECT_TRUE(Has(refused.out, "p.yaml:10: was `    run: echo three >>"))
      << refused.out;
  EXPECT_TRUE(Has(refused.out, "now `    run: echo four >>")) << refused.out;
  EXPECT_EQ(dir_.Read("lines.txt"), "one\n");
  EXPECT_EQ(Sql(Db(), "SELECT count(*) FROM run_interruptions"), "0");
  // The refusal held the run's lock for a moment and left its file: the
  // run still reads as one that died, also on another machine.
  const std::string id = Sql(Db(), "SELECT id FROM runs");
  EXPECT_TRUE(std::filesystem::exists(LockFile(id)));
}

// A run killed together with its guardian (OOM, a hand's `kill -9` of
// both): nothing ended what the run left running, and the lock is free.
// The resume takes the lock, and its own lock must not make the dead run
// read as alive: it ends the dead process's group before the step runs
// again, so the step never runs twice at once.
TEST_F(ResumeCliTest, AResumeEndsWhatARunKilledWithItsGuardianLeft) {
  const std::string d = dir_.path();
  dir_.Write("p.yaml",
             "jobs:\n"
             "- name: j\n"
             "  plan:\n"
             "  - task: second\n"
             "    run: |\n"
             "      if [ ! -e " + d + "/mark ]; then touch " + d + "/mark\n"
             "        p=$PPID; while [ \"$(cat /proc/$p/comm)\" != steps ]; do"
             " p=$(cut -d' ' -f4 /proc/$p/stat); done\n"
             "        for s in /proc/[0-9]*/stat; do"
             " read -r pid comm state ppid rest < $s 2>/dev/null || continue;"
             " if [ \"$ppid\" = \"$p\" ] && [ \"$comm\" = \"(steps-guardian)\" ];"
             " then echo $pid > " + d + "/guardian; fi; done\n"
             "        echo $$ > " + d + "/old.pid\n"
             "        kill -9 $(cat " + d + "/guardian) $p; exec sleep 600\n"
             "      fi\n"
             "      echo went on\n");
  ASSERT_EQ(Steps("run p.yaml").exit_code, 137);
  ASSERT_FALSE(dir_.Read("guardian").empty());  // Both were killed.
  const pid_t old = static_cast<pid_t>(std::stol(dir_.Read("old.pid")));
  auto resumed = Steps("resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_TRUE(Has(resumed.out, "run.orphans_killed")) << resumed.out;
  // The dead run's task is gone (or a zombie nobody reaps).
  std::string state;
  {
    std::ifstream stat("/proc/" + std::to_string(old) + "/stat");
    std::string pid, comm;
    stat >> pid >> comm >> state;
  }
  EXPECT_TRUE(state.empty() || state == "Z") << "state " << state;
  if (!state.empty() && state != "Z") kill(old, SIGKILL);
  EXPECT_EQ(Sql(Db(), "SELECT status FROM runs"), "succeeded");
}

// An aborted run removed its lock file as it ended: a resume refused (its
// pipeline changed) leaves none behind either.
TEST_F(ResumeCliTest, ARefusedResumeOfAnAbortedRunLeavesNoLockFile) {
  WritePipeline("INT");
  ASSERT_EQ(Steps("run p.yaml").exit_code, 130);
  const std::string id = Sql(Db(), "SELECT id FROM runs");
  const std::string lock_file = LockFile(id);
  ASSERT_FALSE(std::filesystem::exists(lock_file));
  dir_.Write("p.yaml", dir_.Read("p.yaml") + "# changed\n");
  auto refused = Steps("resume");
  EXPECT_EQ(refused.exit_code, 65) << refused.out;
  EXPECT_FALSE(std::filesystem::exists(lock_file));
}

// A lock that cannot be taken at all (here its file is a folder) is for a
// resume what it is for any run: a warning, and the run goes on.
TEST_F(ResumeCliTest, ALockThatCannotBeTakenIsAWarningAsForAnyRun) {
  WritePipeline("KILL");
  ASSERT_EQ(Steps("run p.yaml").exit_code, 137);
  const std::string id = Sql(Db(), "SELECT id FROM runs");
  const std::string lock_file = LockFile(id);
  // The dead run's guardian lets go of it first.
  const int fd = open(lock_file.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  close(fd);
  std::filesystem::remove(lock_file);
  std::filesystem::create_directory(lock_file);
  auto resumed = Steps("resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_TRUE(Has(resumed.out, "run.lock_failed")) << resumed.out;
  EXPECT_EQ(dir_.Read("lines.txt"), "one\nthree\n");
  EXPECT_EQ(Sql(Db(), "SELECT status FROM runs"), "succeeded");
}

// Two resumes of one run: the second finds the lock held by the first,
// waits, and once it has the lock reads the run again. The first ran it to
// its end meanwhile (here the test holds the lock and marks the run
// succeeded, as that resume would have), so the second refuses instead of
// running the run a second time, and leaves no lock file for the ended run.
TEST_F(ResumeCliTest, ASecondResumeFindsTheRunEndedOnceTheLockIsFree) {
  WritePipeline("KILL");
  ASSERT_EQ(Steps("run p.yaml").exit_code, 137);
  const std::string id = Sql(Db(), "SELECT id FROM runs");
  const std::string lock_file = LockFile(id);
  const int held = open(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(held, 0);
  // The dead run's guardian may hold it a moment longer: wait for it.
  ASSERT_EQ(flock(held, LOCK_EX), 0);
  const std::string log = dir_.path() + "/second.txt";
  const pid_t second = test_support::SpawnSteps(
      dir_.path(), {"resume", "--plain", "--state-dir", "state"}, log);
  ASSERT_GT(second, 0);
  std::string said;
  for (int i = 0; i < 3000 && !Has(said, "waiting up to"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    said = dir_.Read("second.txt");
  }
  EXPECT_TRUE(Has(said, "run " + id + " is held by another process")) << said;
  Sql(Db(), "UPDATE runs SET status = 'succeeded' WHERE id = '" + id + "'");
  close(held);
  int status = 0;
  ASSERT_EQ(waitpid(second, &status, 0), second);
  said = dir_.Read("second.txt");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 65) << said;
  EXPECT_TRUE(Has(said, "is succeeded")) << said;
  EXPECT_EQ(dir_.Read("lines.txt"), "one\n");  // Nothing ran again.
  EXPECT_FALSE(std::filesystem::exists(lock_file));
}

// A run just killed stays held by its guardian while it ends what the run
// left running (process/guardian.h). A resume started meanwhile waits for
// the lock, saying so, instead of running without it. The holder here is
// `flock`, which lets go once the resume has said that it waits.
TEST_F(ResumeCliTest, AResumeWaitsForTheLockOfARunJustKilled) {
  WritePipeline("KILL");
  ASSERT_EQ(Steps("run p.yaml").exit_code, 137);
  const std::string id = Sql(Db(), "SELECT id FROM runs");
  auto resumed = test_support::RunInShell(
      dir_.path(),
      "flock state/runs/" + id +
          ".lock -c 'touch held; for i in $(seq 3000); do"
          " grep -q \"waiting up to\" out.txt 2>/dev/null && break;"
          " sleep 0.01; done' &\n"
          "until [ -e held ]; do sleep 0.01; done\n"
          "timeout -s KILL 60 \"$STEPS\" resume --plain --state-dir state"
          " > out.txt 2>&1; echo \"exit=$?\"; wait; cat out.txt");
  EXPECT_TRUE(Has(resumed.out, "exit=0")) << resumed.out;
  EXPECT_TRUE(Has(resumed.out, "run " + id +
                                   " is held by another process"))
      << resumed.out;
  EXPECT_FALSE(Has(resumed.out, "lock_failed")) << resumed.out;
  EXPECT_EQ(dir_.Read("lines.txt"), "one\nthree\n");
  EXPECT_EQ(Sql(Db(), "SELECT status FROM runs"), "succeeded");
  // The resumed run ended as any run does: its lock file went with it.
  EXPECT_FALSE(std::filesystem::exists(LockFile(id)));
}

TEST_F(ResumeCliTest, SpentTimeCountsAgainstTheJobDeadline) {
  WritePipeline("KILL", "  timeout: 30m\n");
  EXPECT_EQ(Steps("run p.yaml").exit_code, 137);
  // The job ran for an hour before it died (its start moved back).
  Sql(Db(), "UPDATE jobs SET started_ms = started_ms - 3600000");
  auto resumed = Steps("resume");
  EXPECT_EQ(resumed.exit_code, 1) << resumed.out;
  EXPECT_TRUE(Has(resumed.out, "passed its timeout of 30m")) << resumed.out;
  EXPECT_EQ(dir_.Read("lines.txt"), "one\n");
}

// Killed outright 3 s into a task that writes nothing, the run is taken
// to have died then, not when the task started: it says it is alive on its
// row every 2 s, so a resume counts that time against its deadlines.
TEST_F(ResumeCliTest, ARunKilledDuringALongTaskHasThatTimeCounted) {
  dir_.Write("p.yaml",
             "jobs:\n- name: j\n  timeout: 30m\n  plan:\n"
             "  - task: long\n    run: |\n"
             "      if [ -e started ]; then echo went on; else touch started;"
             " exec sleep 600; fi\n");
  pid_t steps = test_support::SpawnSteps(
      dir_.path(), {"run", "p.yaml", "--plain", "--state-dir", "state"},
      dir_.path() + "/log.txt");
  ASSERT_GT(steps, 0);
  // Bound: 60 s for the task to start and the run to say it was alive
  // 3 s after (it says so every 2 s).
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  std::string lived;
  while (std::chrono::steady_clock::now() < give_up) {
    lived = Sql(Db(),
                "SELECT r.alive_ms - s.started_ms FROM runs r JOIN steps s"
                " ON s.run_id = r.id WHERE s.name = 'long'");
    if (!lived.empty() && std::stoll(lived) >= 3000) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_FALSE(lived.empty());
  ASSERT_GE(std::stoll(lived), 3000);
  kill(steps, SIGKILL);
  EXPECT_EQ(test_support::WaitForExit(steps, 30s), -1);
  auto resumed = Steps("resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  const std::string died = Sql(
      Db(),
      "SELECT i.died_ms - s.started_ms FROM run_interruptions i JOIN steps s"
      " ON s.run_id = i.run_id WHERE s.name = 'long'");
  ASSERT_FALSE(died.empty());
  EXPECT_GE(std::stoll(died), 3000);
}

TEST_F(ResumeCliTest, FreshDeadlinesGiveTheWholeTimeoutAgain) {
  WritePipeline("KILL", "  timeout: 30m\n");
  EXPECT_EQ(Steps("run p.yaml").exit_code, 137);
  Sql(Db(), "UPDATE jobs SET started_ms = started_ms - 3600000");
  auto resumed = Steps("resume --fresh-deadlines");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_EQ(dir_.Read("lines.txt"), "one\nthree\n");
}

TEST_F(ResumeCliTest, SpentTimeCountsAgainstTheStepTimeout) {
  WritePipeline("KILL");
  std::string text = dir_.Read("p.yaml");
  text.replace(text.find("  - task: second\n"), 17,
               "  - task: second\n    timeout: 30m\n");
  dir_.Write("p.yaml", text);
  EXPECT_EQ(Steps("run p.yaml").exit_code, 137);
  // `second` had run for an hour when the run died.
  Sql(Db(),
      "UPDATE steps SET started_ms = started_ms - 3600000"
      " WHERE name = 'second'");
  auto resumed = Steps("resume");
  EXPECT_EQ(resumed.exit_code, 1) << resumed.out;
  EXPECT_EQ(Sql(Db(), "SELECT status FROM steps WHERE name = 'second'"),
            "failed");
  EXPECT_EQ(dir_.Read("lines.txt"), "one\n");
}

TEST_F(ResumeCliTest, RunResumeIfInterruptedContinuesTheSameRun) {
  WritePipeline("KILL");
  EXPECT_EQ(Steps("run p.yaml").exit_code, 137);
  auto resumed = Steps("run p.yaml --resume-if-interrupted");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_TRUE(Has(resumed.out, "resuming run")) << resumed.out;
  EXPECT_EQ(dir_.Read("lines.txt"), "one\nthree\n");
  EXPECT_EQ(Sql(Db(), "SELECT count(*) FROM runs"), "1");
  // Nothing interrupted now: a new run (not from the step cache).
  auto fresh = Steps("run p.yaml --resume-if-interrupted --no-cache");
  EXPECT_EQ(fresh.exit_code, 0) << fresh.out;
  EXPECT_FALSE(Has(fresh.out, "resuming run")) << fresh.out;
  EXPECT_EQ(Sql(Db(), "SELECT count(*) FROM runs"), "2");
  EXPECT_EQ(dir_.Read("lines.txt"), "one\nthree\none\nthree\n");
}

// A state folder restored on another machine (a CI cache): the run's row
// still says `running`, on a host that is not this one, and its lock file
// is free. `--resume-if-interrupted` takes it as interrupted and resumes
// it without being told its id.
TEST_F(ResumeCliTest, ARunRestoredFromAnotherMachineResumes) {
  WritePipeline("KILL");
  EXPECT_EQ(Steps("run p.yaml").exit_code, 137);
  std::filesystem::rename(dir_.path() + "/state", dir_.path() + "/restored");
  const std::string db = dir_.path() + "/restored/steps.db";
  Sql(db, "UPDATE runs SET host = 'runner-7'");
  ASSERT_EQ(Sql(db, "SELECT status || ' ' || host FROM runs"),
            "running runner-7");
  auto listed = RunSteps(dir_.path(), "runs --state-dir restored");
  EXPECT_TRUE(Has(listed.out, "interrupted")) << listed.out;
  auto resumed = RunSteps(
      dir_.path(),
      "run p.yaml --resume-if-interrupted --plain --state-dir restored",
      {.prefix = "",
       .streams = test_support::Streams::kMerged,
       .kill_after = std::chrono::seconds(60)});
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_TRUE(Has(resumed.out, "resuming run")) << resumed.out;
  EXPECT_EQ(dir_.Read("lines.txt"), "one\nthree\n");
  EXPECT_EQ(Sql(db, "SELECT count(*) || ' ' || status FROM runs"),
            "1 succeeded");
}

// A model that calls run_shell twice, then answers "done"; it keeps every
// request it receives. The second command kills `steps` (once).
class ScriptedModel {
 public:
  explicit ScriptedModel(const std::string& dir) {
    server_.Post("/v1/chat/completions", [this, dir](
                                             const httplib::Request& req,
                                             httplib::Response& res) {
      json body = json::parse(req.body);
      // Which answer this request asks for: one per tool result so far.
      int results = 0;
      for (const json& m : body["messages"]) results += m["role"] == "tool";
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(body);
      }
      json message =
          results == 0 ? ShellCall("call_1", "echo a >> " + dir + "/calls.txt")
          : results == 1
              ? ShellCall("call_2", "echo b >> " + dir + "/calls.txt; " +
                                        SignalStepsOnce(dir + "/mark", "KILL"))
              : json{{"role", "assistant"}, {"content", "done"}};
      res.set_content(ChatAnswer(message).dump(), "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    serving_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~ScriptedModel() {
    server_.stop();
    serving_.join();
  }
  int port() const { return port_; }
  std::vector<json> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread serving_;
  std::mutex mu_;
  std::vector<json> requests_;
};

// Attempt 1 fails, attempt 2 is in flight when `steps` is killed: the
// resumed step keeps attempt 1 and restarts attempt 2, which succeeds.
TEST_F(ResumeCliTest, AttemptNumberingContinues) {
  const std::string count = dir_.path() + "/count";
  dir_.Write("p.yaml",
             "jobs:\n"
             "- name: j\n"
             "  plan:\n"
             "  - task: flaky\n"
             "    attempts: 3\n"
             "    run: |\n"
             "      n=$(( $(cat " +
                 count +
                 " 2>/dev/null || echo 0) + 1 ))\n"
                 "      echo $n > " +
                 count +
                 "\n"
                 "      if [ $n = 1 ]; then exit 1; fi\n"
                 "      " +
                 SignalStepsOnce(dir_.path() + "/mark", "KILL") + "\n");
  EXPECT_EQ(Steps("run p.yaml").exit_code, 137);
  auto resumed = Steps("resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_EQ(dir_.Read("count"), "3\n");
  EXPECT_EQ(Sql(Db(),
                "SELECT group_concat(number || ':' || status, ' ')"
                " FROM (SELECT * FROM attempts ORDER BY number)"),
            "1:failed 2:succeeded");
}

class ResumeAgentTest : public ResumeCliTest {
 protected:
  // One agent step of agent `a` served by `model`; `agent_extra` adds keys
  // to the agent's entry.
  void WriteAgentPipeline(const ScriptedModel& model,
                          const std::string& agent_extra = "",
                          const std::string& message = "go",
                          const std::string& top = "") {
    dir_.Write("p.yaml",
               top +
                   "agents:\n"
                   "- name: a\n"
                   "  source: {model: openai/m, base_url: http://127.0.0.1:" +
                   std::to_string(model.port()) +
                   "/v1}\n"
                   "  tools: [run_shell]\n" +
                   agent_extra +
                   "jobs:\n"
                   "- name: j\n"
                   "  plan:\n"
                   "  - agent: a\n"
                   "    messages: [\"" +
                   message + "\"]\n");
  }
  test_support::CliResult Run(const std::string& args) {
    return RunSteps(dir_.path(), args + " --plain --state-dir state",
                    {.prefix = "OPENAI_API_KEY=k TOKEN_X=supersecret1",
                     .streams = test_support::Streams::kMerged,
                     .kill_after = std::chrono::seconds(60)});
  }
};

TEST_F(ResumeAgentTest, ConversationContinuesWithoutResending) {
  ScriptedModel model(dir_.path());
  ASSERT_GT(model.port(), 0);
  WriteAgentPipeline(model);
  auto killed = Run("run p.yaml");
  EXPECT_EQ(killed.exit_code, 137) << killed.out;
  ASSERT_EQ(model.requests().size(), 2u);
  auto resumed = Run("resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  // Requests 1 and 2 were answered before the kill: only the third is new.
  const std::vector<json> requests = model.requests();
  ASSERT_EQ(requests.size(), 3u) << resumed.out;
  // It carries the whole conversation: system, user, then per turn an
  // assistant message and its tool result.
  const json& last = requests[2]["messages"];
  ASSERT_EQ(last.size(), 6u) << last.dump();
  EXPECT_EQ(last[1]["content"], "go");
  EXPECT_EQ(last[3]["tool_call_id"], "call_1");
  EXPECT_EQ(last[5]["tool_call_id"], "call_2");
  EXPECT_EQ(last[5]["content"], "exit code: 0\nwent on\n");
  // call_1 finished before the kill and did not run again; call_2 had
  // started and had no result: it ran again, at least once.
  EXPECT_EQ(dir_.Read("calls.txt"), "a\nb\nb\n");
  EXPECT_EQ(Sql(Db(), "SELECT output FROM steps"), "done");
  EXPECT_EQ(Sql(Db(), "SELECT agent_turns FROM steps"), "3");
  EXPECT_EQ(Sql(Db(), "SELECT prompt_tokens FROM steps"), "15");
  EXPECT_EQ(Sql(Db(),
                "SELECT count(*) FROM output_lines WHERE stream = 'log'"
                " AND line LIKE '%agent.tool_rerun%call=call_2%'"),
            "1");
}

// The checks of the step's assert see the whole conversation: the call
// made before the kill counts with the one made again after it, and the
// turn the run died in is recorded with its calls.
TEST_F(ResumeAgentTest, AssertCountsToolCallsFromBeforeTheInterruption) {
  ScriptedModel model(dir_.path());
  ASSERT_GT(model.port(), 0);
  dir_.Write("p.yaml",
             "agents:\n"
             "- name: a\n"
             "  source: {model: openai/m, base_url: http://127.0.0.1:" +
                 std::to_string(model.port()) +
                 "/v1}\n"
                 "  tools: [run_shell]\n"
                 "jobs:\n"
                 "- name: j\n"
                 "  plan:\n"
                 "  - agent: a\n"
                 "    messages: [go]\n"
                 "    assert: {tool_called: {name: run_shell, count: 2},"
                 " max_turns_used: 3}\n");
  EXPECT_EQ(Run("run p.yaml").exit_code, 137);
  auto resumed = Run("resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_EQ(Sql(Db(), "SELECT status FROM steps"), "succeeded");
  EXPECT_EQ(Sql(Db(),
                "SELECT group_concat(turn || ':' || json_array_length("
                "tool_calls), ' ') FROM (SELECT * FROM agent_turns"
                " ORDER BY turn)"),
            "1:1 2:1 3:0");
}

// Each answer costs 7 tokens: two answers spend a budget of 14 exactly. The
// resumed conversation counts them, so no third request is sent.
TEST_F(ResumeAgentTest, BudgetCountsWhatWasSpentBefore) {
  ScriptedModel model(dir_.path());
  ASSERT_GT(model.port(), 0);
  WriteAgentPipeline(model, "  budget: {tokens: 14}\n");
  EXPECT_EQ(Run("run p.yaml").exit_code, 137);
  ASSERT_EQ(model.requests().size(), 2u);
  auto resumed = Run("resume");
  EXPECT_EQ(resumed.exit_code, 1) << resumed.out;
  EXPECT_EQ(model.requests().size(), 2u);
  EXPECT_TRUE(Has(resumed.out, "token budget of 14 spent (14 used)"))
      << resumed.out;
  // The unfinished call still ran again before the budget stopped it.
  EXPECT_EQ(dir_.Read("calls.txt"), "a\nb\nb\n");
}

// The agent's timeout counts the time its step had run before: an hour
// spent of 30 minutes ends the conversation at once, with no request.
TEST_F(ResumeAgentTest, DeadlineCountsTheTimeSpentBefore) {
  ScriptedModel model(dir_.path());
  ASSERT_GT(model.port(), 0);
  WriteAgentPipeline(model, "  timeout: 30m\n");
  EXPECT_EQ(Run("run p.yaml").exit_code, 137);
  Sql(Db(), "UPDATE steps SET started_ms = started_ms - 3600000");
  auto resumed = Run("resume");
  EXPECT_EQ(resumed.exit_code, 1) << resumed.out;
  EXPECT_EQ(model.requests().size(), 2u);
  EXPECT_EQ(Sql(Db(), "SELECT status FROM steps"), "failed");
  EXPECT_TRUE(Has(Sql(Db(), "SELECT error FROM steps"), "deadline"))
      << Sql(Db(), "SELECT error FROM steps");
}

// Secret values are never stored: the resumed conversation carries `***`
// where the model had seen one.
TEST_F(ResumeAgentTest, ASecretComesBackMasked) {
  ScriptedModel model(dir_.path());
  ASSERT_GT(model.port(), 0);
  WriteAgentPipeline(model, "", "go supersecret1", "secrets: [TOKEN_X]\n");
  EXPECT_EQ(Run("run p.yaml").exit_code, 137);
  auto resumed = Run("resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  const std::vector<json> requests = model.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0]["messages"][1]["content"], "go supersecret1");
  EXPECT_EQ(requests[2]["messages"][1]["content"], "go ***");
}

}  // namespace
}  // namespace steps

namespace steps {
namespace {

// A fix agent `fixer` on loopback: it calls run_shell once with `command`,
// then answers "fixed it"; it keeps every request.
class FixerModel {
 public:
  explicit FixerModel(std::string command) : command_(std::move(command)) {
    server_.Post("/v1/chat/completions", [this](const httplib::Request& req,
                                                httplib::Response& res) {
      json body = json::parse(req.body);
      int results = 0;
      for (const json& m : body["messages"]) results += m["role"] == "tool";
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(body);
      }
      json message = results == 0
                         ? ShellCall("fix_1", command_)
                         : json{{"role", "assistant"}, {"content", "fixed it"}};
      res.set_content(ChatAnswer(message).dump(), "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    serving_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FixerModel() {
    server_.stop();
    serving_.join();
  }
  int port() const { return port_; }
  size_t requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_.size();
  }

 private:
  std::string command_;
  httplib::Server server_;
  int port_ = 0;
  std::thread serving_;
  std::mutex mu_;
  std::vector<json> requests_;
};

class ResumeFixerTest : public ResumeCliTest {
 protected:
  // Task `checked` appends to runs.txt and fails until `fixed` exists;
  // `extra` runs in it first. Its fixer is served by `model`.
  void WriteFixPipeline(const FixerModel& model, const std::string& extra) {
    const std::string d = dir_.path();
    dir_.Write("p.yaml",
               "agents:\n"
               "- name: fixer\n"
               "  source: {model: openai/m, base_url: http://127.0.0.1:" +
                   std::to_string(model.port()) +
                   "/v1}\n"
                   "  tools: [run_shell]\n"
                   "jobs:\n"
                   "- name: j\n"
                   "  plan:\n"
                   "  - task: checked\n"
                   "    run: |\n"
                   "      echo run >> " +
                   d + "/runs.txt\n      " + extra + "\n      test -e " + d +
                   "/fixed\n"
                   "    fix: fixer\n");
  }
  test_support::CliResult Run(const std::string& args) {
    return RunSteps(dir_.path(), args + " --plain --state-dir state",
                    {.prefix = "OPENAI_API_KEY=k",
                     .streams = test_support::Streams::kMerged,
                     .kill_after = std::chrono::seconds(60)});
  }
};

// The fixer's tool call kills `steps` (once): the resumed run continues
// the fixer's conversation without asking its first question again and
// without running the task before it, then re-runs the task.
TEST_F(ResumeFixerTest, AFixerInFlightContinuesItsConversation) {
  const std::string d = dir_.path();
  FixerModel model("touch " + d + "/fixed; echo f >> " + d + "/calls.txt; " +
                   SignalStepsOnce(d + "/mark", "KILL"));
  ASSERT_GT(model.port(), 0);
  WriteFixPipeline(model, "");
  EXPECT_EQ(Run("run p.yaml").exit_code, 137);
  EXPECT_EQ(model.requests(), 1u);
  auto resumed = Run("resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_EQ(model.requests(), 2u);
  EXPECT_EQ(dir_.Read("runs.txt"), "run\nrun\n");
  EXPECT_EQ(dir_.Read("calls.txt"), "f\nf\n");  // Started, no result: again.
  EXPECT_EQ(Sql(Db(), "SELECT execution FROM jobs"), "[\"fixer\",\"checked\"]");
  EXPECT_EQ(Sql(Db(),
                "SELECT group_concat(step_id || ':' || status, ' ') FROM"
                " (SELECT * FROM steps ORDER BY step_id)"),
            "j:1:succeeded j:1/fix:succeeded");
  EXPECT_EQ(Sql(Db(), "SELECT output FROM steps WHERE fixer = 1"), "fixed it");
  EXPECT_EQ(Sql(Db(), "SELECT number || ':' || fixed FROM attempts"), "1:1");
}

// The fixer had ended and the task's run after it was in flight: the
// fixer's record is replayed (no request), the task runs again.
TEST_F(ResumeFixerTest, AFixerThatEndedIsReplayed) {
  const std::string d = dir_.path();
  FixerModel model("touch " + d + "/fixed");
  ASSERT_GT(model.port(), 0);
  WriteFixPipeline(model, "if [ -e " + d + "/fixed ]; then " +
                              SignalStepsOnce(d + "/mark", "KILL") + "; fi");
  EXPECT_EQ(Run("run p.yaml").exit_code, 137);
  EXPECT_EQ(model.requests(), 2u);
  auto resumed = Run("resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_EQ(model.requests(), 2u);
  // Failed, killed after the fix, run again after the resume.
  EXPECT_EQ(dir_.Read("runs.txt"), "run\nrun\nrun\n");
  EXPECT_EQ(Sql(Db(), "SELECT execution FROM jobs"), "[\"fixer\",\"checked\"]");
  EXPECT_EQ(Sql(Db(), "SELECT count(*) FROM steps WHERE fixer = 1"), "1");
  EXPECT_EQ(Sql(Db(), "SELECT status FROM steps WHERE fixer = 0"), "succeeded");
}

}  // namespace
}  // namespace steps

namespace steps {
namespace {

// `steps` killed after each of its store commits in turn
// (STEPS_CHAOS_KILL_AFTER_COMMITS) until one leaves the task's attempt
// stored as succeeded and the step itself still running: the resumed run
// ends the step with that attempt instead of running the task again. The
// attempt's end is committed on its own when its step's end does not come
// within a millisecond: here publishing 64 MiB of outputs holds it back.
// On a loaded machine a slow commit can still carry both ends at once, so
// the kills go through every commit up to three times.
TEST_F(ResumeCliTest, AnAttemptThatSucceededIsNotRunAgain) {
  dir_.Write("p.yaml",
             "jobs:\n- name: j\n  plan:\n  - task: once\n    outputs: [out]\n"
             "    run: echo ran >> " +
                 dir_.path() +
                 "/lines.txt; mkdir -p out; head -c 64M /dev/zero > out/big;"
                 " echo out\n");
  bool found = false;
  for (int pass = 0; pass < 3 && !found; ++pass) {
    for (int n = 1; n <= 30 && !found; ++n) {
      std::filesystem::remove_all(dir_.path() + "/state");
      std::filesystem::remove(dir_.path() + "/lines.txt");
      auto killed = RunSteps(
          dir_.path(), "run p.yaml --plain --state-dir state",
          {.prefix = "STEPS_CHAOS_KILL_AFTER_COMMITS=" + std::to_string(n),
           .streams = test_support::Streams::kMerged,
           .kill_after = std::chrono::seconds(60)});
      if (killed.exit_code != 137) break;  // Past the run's last commit.
      found = Sql(Db(), "SELECT status FROM attempts") == "succeeded" &&
              Sql(Db(), "SELECT status FROM steps") == "running";
    }
  }
  ASSERT_TRUE(found) << "no commit left the attempt ended and the step not";
  auto resumed = Steps("resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_EQ(dir_.Read("lines.txt"), "ran\n");
  EXPECT_EQ(Sql(Db(), "SELECT status || ' ' || output FROM steps"),
            "succeeded out\n");
  EXPECT_EQ(Sql(Db(), "SELECT count(*) FROM attempts"), "1");
}

// A value that is not a count of commits is ignored, with a warning.
TEST_F(ResumeCliTest, ABadChaosKillCountIsIgnoredWithAWarning) {
  WritePipeline("KILL");
  for (const char* bad : {"0", "-3", "x", "99999999999999999999"}) {
    std::filesystem::remove_all(dir_.path() + "/state");
    std::filesystem::remove(dir_.path() + "/mark");
    auto run = RunSteps(
        dir_.path(), "run p.yaml --plain --state-dir state",
        {.prefix = std::string("STEPS_CHAOS_KILL_AFTER_COMMITS=") + bad,
         .streams = test_support::Streams::kMerged,
         .kill_after = std::chrono::seconds(60)});
    // Killed by its own second task, as without the variable.
    EXPECT_EQ(run.exit_code, 137) << bad << "\n" << run.out;
    EXPECT_TRUE(Has(run.out, "chaos.ignored")) << bad << "\n" << run.out;
  }
}

}  // namespace
}  // namespace steps
