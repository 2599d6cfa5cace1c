#include "cli/run_ui.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <thread>

#include "process/spawn.h"
#include "process/subreaper.h"

extern char** environ;

namespace steps::cli {
namespace {

// How long the UI may take to listen.
constexpr std::chrono::seconds kStartWait{10};
// How long it may take to stop, beyond the 3 s it gives watchers.
constexpr std::chrono::seconds kStopWait{2};

// What the UI says once it listens: "port N token HEX\n".
struct UiHello {
  int port = -1;  // -1: it ended, said something else, or took longer
                  // than kStartWait.
  std::string token;
};

UiHello ReadHello(int fd) {
  const auto give_up = std::chrono::steady_clock::now() + kStartWait;
  std::string said;
  while (said.find('\n') == std::string::npos && said.size() < 160) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        give_up - std::chrono::steady_clock::now());
    if (left.count() <= 0) return {};
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return {};
    char buffer[64];
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return {};
    said.append(buffer, static_cast<size_t>(n));
  }
  int port = -1;
  char token[65] = {0};
  if (std::sscanf(said.c_str(), "port %d token %64[0-9a-f]\n", &port, token) !=
          2 ||
      port <= 0 || port > 65535) {
    return {};
  }
  return {port, token};
}

// Waits for `pid` to end, killing it after `limit`.
void Reap(pid_t pid, std::chrono::steady_clock::duration limit) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (true) {
    const pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid || (got < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() >= give_up) {
      kill(-pid, SIGKILL);  // Its group: it leads one.
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  UnregisterChild(pid);
}

}  // namespace

Result<std::string> FindUiProgram() {
  const std::string self = SelfPath();
  std::string program = CompanionProgram(self, kUiProgram);
  if (program.empty()) {
    return NotFound(std::string("the web UI's program, ") + kUiProgram +
                    ", is neither beside " + self +
                    " nor in ../libexec/steps/ from it; reinstall steps");
  }
  return program;
}

Result<std::unique_ptr<RunUi>> RunUi::Start(
    const std::string& listen, const std::string& state_dir,
    const std::vector<std::string>& allow_hosts) {
  Result<std::string> found = FindUiProgram();
  if (!found.ok()) return found.status();
  const std::string& program = *found;
  // The UI's stdin: a socket, so that telling a UI that is gone already
  // raises no SIGPIPE here (MSG_NOSIGNAL).
  int to_ui[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, to_ui) != 0) {
    return ErrnoStatus("starting the web UI", errno);
  }
  UniqueFd ours_in(to_ui[0]), theirs_in(to_ui[1]);
  int from_ui[2];
  if (pipe2(from_ui, O_CLOEXEC) != 0) {
    return ErrnoStatus("starting the web UI", errno);
  }
  UniqueFd ours_out(from_ui[0]), theirs_out(from_ui[1]);

  std::vector<std::string> argv = {kUiProgram,    "--listen", listen,
                                   "--state-dir", state_dir,  "--with-run"};
  for (const std::string& h : allow_hosts) {
    argv.push_back("--allow-host");
    argv.push_back(h);
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  SpawnSetup setup(SpawnGroup::kOwnGroup);
  posix_spawn_file_actions_t* actions = setup.actions();
  posix_spawn_file_actions_adddup2(actions, theirs_in.get(), STDIN_FILENO);
  posix_spawn_file_actions_adddup2(actions, theirs_out.get(), STDOUT_FILENO);
  posix_spawn_file_actions_addclosefrom_np(actions, 3);
  Result<pid_t> pid = setup.Spawn(program, std::move(argv), std::move(env),
                                  "starting the web UI " + program);
  if (!pid.ok()) return pid.status();
  theirs_in.Reset();
  theirs_out.Reset();
  UiHello hello = ReadHello(ours_out.get());
  if (hello.port < 0) {
    ours_in.Reset();
    Reap(*pid, kStopWait);
    return Internal("the web UI did not start");
  }
  return std::unique_ptr<RunUi>(
      new RunUi(*pid, std::move(ours_in), hello.port, std::move(hello.token)));
}

void RunUi::Finish(bool let_watchers_catch_up) {
  if (finished_) return;
  finished_ = true;
  if (let_watchers_catch_up) {
    static constexpr char kDone[] = "done\n";
    (void)send(to_ui_.get(), kDone, sizeof kDone - 1, MSG_NOSIGNAL);
  }
  to_ui_.Reset();
  Reap(pid_, (let_watchers_catch_up ? std::chrono::seconds(3)
                                    : std::chrono::seconds(0)) +
                 kStopWait);
}

RunUi::~RunUi() { Finish(false); }

}  // namespace steps::cli
