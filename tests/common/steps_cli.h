// Running the real `steps` binary from a test: a shell command in a folder,
// with $STEPS naming the binary and $MOCK_PROVIDER the mock provider, and
// its standard output and error read in the order written; or `steps`
// started in the background with its output in a log file.
#ifndef STEPS_TESTS_COMMON_STEPS_CLI_H_
#define STEPS_TESTS_COMMON_STEPS_CLI_H_

#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace steps::test_support {

inline const std::string kStepsBinary =
    std::string(STEPS_BINARY_DIR) + "/src/cli/steps";
inline const std::string kMockProviderBinary =
    std::string(STEPS_BINARY_DIR) + "/mock_provider/mock_provider";

// `text` inside single quotes for bash.
inline std::string ShellQuote(const std::string& text) {
  std::string q = "'";
  for (char c : text) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Whether `part` occurs in `text`.
inline bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct CliResult {
  int exit_code = -1;  // 128 + N when a signal N ended the shell.
  std::string out;     // Standard output and error, merged (or stdout alone).
};

// Which of the command's streams a run reads.
enum class Streams {
  kMerged,      // Standard output and error, in the order written.
  kStdoutOnly,  // Standard output; standard error is dropped.
};

// Runs `command` with bash in `dir`.
inline CliResult RunInShell(const std::string& dir, const std::string& command,
                            Streams streams = Streams::kMerged) {
  const std::string cmd =
      "cd " + ShellQuote(dir) + " && STEPS=" + ShellQuote(kStepsBinary) +
      " MOCK_PROVIDER=" + ShellQuote(kMockProviderBinary) + " bash -c " +
      ShellQuote(command) +
      (streams == Streams::kMerged ? " 2>&1" : " 2>/dev/null");
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
    r.out.append(buf.data(), n);
  int status = pclose(p);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
  return r;
}

// How RunSteps starts `steps`.
struct StepsOptions {
  // Shell words put before the binary: `NAME=value` assignments or a
  // wrapper such as `env -u NAME`. Default: none.
  std::string prefix;
  // Which streams are read. Default: both, merged.
  Streams streams = Streams::kMerged;
  // A run still going after this long is killed with SIGKILL, so a hang is
  // reported instead of hanging the suite. Default: 0, no bound.
  std::chrono::seconds kill_after{0};
};

// Runs `steps ARGS` in `dir`; ARGS is shell text (quoting, redirections and
// further commands after `;` are the shell's).
inline CliResult RunSteps(const std::string& dir, const std::string& args,
                          const StepsOptions& options = {}) {
  std::string command = options.prefix + " ";
  if (options.kill_after.count() > 0)
    command +=
        "timeout -s KILL " + std::to_string(options.kill_after.count()) + " ";
  return RunInShell(dir, command + "\"$STEPS\" " + args, options.streams);
}

// Starts `steps ARGS` in `dir` with its standard output and error written
// to the file `log`; the pid, or -1 when it could not start. The caller
// waits for it.
inline pid_t SpawnSteps(const std::string& dir,
                        const std::vector<std::string>& args,
                        const std::string& log) {
  std::vector<std::string> words = {kStepsBinary};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());
  pid_t pid = -1;
  if (posix_spawn(&pid, kStepsBinary.c_str(), &fa, nullptr, argv.data(),
                  environ) != 0)
    pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// The exit code of the child `pid` once it ends, looking every 50 ms for at
// most `limit`; then `pid` is -1. -1 when it did not end in time (or was
// killed by a signal), or `pid` is -1 already.
inline int WaitForExit(pid_t& pid, std::chrono::milliseconds limit) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (pid > 0) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      pid = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    if (std::chrono::steady_clock::now() >= give_up) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

}  // namespace steps::test_support

#endif  // STEPS_TESTS_COMMON_STEPS_CLI_H_
