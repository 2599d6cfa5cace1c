#include "chaos_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

extern char** environ;

namespace steps::chaos {
namespace {

constexpr const char* kKillVariable = "STEPS_CHAOS_KILL_AFTER_COMMITS";

// This process's environment without the kill variable, with the key the
// sources read and the plan's kill variable.
std::vector<std::string> ChildEnvironment(const KillPlan& plan) {
  std::vector<std::string> env;
  const std::string prefix = std::string(kKillVariable) + "=";
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind(prefix, 0) != 0) env.emplace_back(*e);
  }
  env.emplace_back("OPENAI_API_KEY=chaos-key");
  if (plan.kind == KillPlan::Kind::kAfterCommits)
    env.push_back(prefix + std::to_string(plan.commits));
  return env;
}

pid_t Spawn(const std::string& steps_binary, const std::string& out,
            const std::string& log, const KillPlan& plan) {
  std::vector<std::string> words = {
      steps_binary, "run",     "p.yaml",      "--resume-if-interrupted",
      "--no-cache", "--plain", "--state-dir", "state"};
  std::vector<std::string> env = ChildEnvironment(plan);
  std::vector<char*> argv, envp;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addchdir_np(&fa, out.c_str());
  pid_t pid = -1;
  if (posix_spawn(&pid, steps_binary.c_str(), &fa, nullptr, argv.data(),
                  envp.data()) != 0)
    pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// Waits up to `wait` for `pid` to exit; true when it did (not yet reaped).
bool ExitsWithin(int pidfd, std::chrono::milliseconds wait) {
  pollfd p = {pidfd, POLLIN, 0};
  int left = static_cast<int>(wait.count());
  while (true) {
    const auto start = std::chrono::steady_clock::now();
    const int n = poll(&p, 1, left);
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
    left -=
        static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - start)
                             .count());
    if (left <= 0) return false;
  }
}

// Waits until every run lock in the trial's state folder is free: the
// guardian of a killed run holds it until it has ended what the run left
// running. A lock still held after 30 s is left (the next incarnation's
// checks then see what the stray process does).
void WaitForLocks(const std::string& out) {
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator(out + "/state/runs", ec)) {
    if (entry.path().extension() != ".lock") continue;
    const int fd = open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (flock(fd, LOCK_EX | LOCK_NB) != 0 &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    close(fd);
  }
}

}  // namespace

std::string KillPlan::Describe() const {
  switch (kind) {
    case Kind::kNone:
      return "no kill";
    case Kind::kAfterCommits:
      return "kill after commit " + std::to_string(commits);
    case Kind::kAfterTime:
      return "kill after " + std::to_string(time.count()) + " us";
  }
  return "";
}

void WritePipeline(const std::string& out, int port) {
  const std::string source =
      "{model: openai/chaos, base_url: http://127.0.0.1:" +
      std::to_string(port) + "/v1}";
  auto task = [&](const std::string& name, const std::string& indent) {
    return indent + "- task: " + name + "\n" + indent + "  run: echo " + name +
           " >> " + out + "/tasks.txt; echo " + name + " done\n";
  };
  std::ofstream(out + "/p.yaml")
      << "agents:\n"
         "- name: worker\n"
         "  source: "
      << source
      << "\n"
         "  tools: [run_shell]\n"
         "- name: fixer\n"
         "  source: "
      << source
      << "\n"
         "  tools: [run_shell]\n"
         "jobs:\n"
         "- name: chaos\n"
         "  plan:\n"
         "  - in_parallel:\n"
      << task("left", "    ") << task("middle", "    ") << task("right", "    ")
      << "  - agent: worker\n"
         "    messages: [\"Append your lines.\"]\n"
         "  - task: checked\n"
         "    run: echo checked >> "
      << out << "/tasks.txt; test -e " << out
      << "/fixed && echo fixed\n"
         "    fix: fixer\n"
      << task("last", "  ");
}

Incarnation RunIncarnation(const std::string& steps_binary,
                           const std::string& out, int n, const KillPlan& plan,
                           std::chrono::seconds bound) {
  Incarnation inc;
  std::filesystem::create_directories(out + "/logs");
  inc.log = out + "/logs/incarnation-" + std::to_string(n) + ".txt";
  const pid_t pid = Spawn(steps_binary, out, inc.log, plan);
  if (pid < 0) return inc;
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  bool killed_by_us = false;
  if (plan.kind == KillPlan::Kind::kAfterTime) {
    if (!ExitsWithin(
            pidfd,
            std::chrono::duration_cast<std::chrono::milliseconds>(plan.time))) {
      kill(pid, SIGKILL);
      killed_by_us = true;
    }
  }
  bool hung = false;
  if (!killed_by_us && !ExitsWithin(pidfd, bound)) {
    kill(pid, SIGKILL);
    hung = true;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (pidfd >= 0) close(pidfd);
  WaitForLocks(out);
  if (hung) {
    inc.end = Incarnation::End::kHung;
  } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
    inc.end = Incarnation::End::kKilled;
  } else {
    inc.end = Incarnation::End::kExited;
    inc.exit_code =
        WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return inc;
}

}  // namespace steps::chaos
