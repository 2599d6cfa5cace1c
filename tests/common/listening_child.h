// A long-running child (mock_provider, steps ui, a test collector) whose
// first line on standard output says where it listens. Killed with SIGTERM
// and reaped on destruction.
#ifndef STEPS_TESTS_COMMON_LISTENING_CHILD_H_
#define STEPS_TESTS_COMMON_LISTENING_CHILD_H_

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <regex>
#include <string>
#include <vector>

extern char** environ;

namespace steps::test_support {

class ListeningChild {
 public:
  // `args[0]` is a path; the child inherits the environment.
  explicit ListeningChild(const std::vector<std::string>& args) {
    int out[2];
    if (pipe(out) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    std::vector<char*> argv;
    for (const std::string& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, args[0].c_str(), &actions, nullptr, argv.data(),
                    environ) != 0) {
      pid_ = -1;
    }
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    out_ = out[0];
  }
  ~ListeningChild() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status;
      waitpid(pid_, &status, 0);
    }
    if (out_ >= 0) close(out_);
  }
  ListeningChild(const ListeningChild&) = delete;
  ListeningChild& operator=(const ListeningChild&) = delete;

  // The port in the first line that says "127.0.0.1:PORT"; 0 when the
  // child wrote none before closing its output.
  int Port() {
    std::string line;
    char c;
    while (out_ >= 0 && read(out_, &c, 1) == 1) {
      if (c != '\n') {
        line += c;
        continue;
      }
      std::smatch m;
      if (std::regex_search(line, m, std::regex(R"(127\.0\.0\.1:(\d+))")))
        return std::stoi(m[1]);
      line.clear();
    }
    return 0;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

}  // namespace steps::test_support

#endif  // STEPS_TESTS_COMMON_LISTENING_CHILD_H_
