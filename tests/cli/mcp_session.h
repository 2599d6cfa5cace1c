// `steps mcp` started with its standard input and output on pipes, for the
// tests of the MCP server: sending requests and reading their answers, each
// read bounded (kReadTimeout, far above what any case needs).
#ifndef STEPS_TESTS_CLI_MCP_SESSION_H_
#define STEPS_TESTS_CLI_MCP_SESSION_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/steps_cli.h"

namespace steps::test_support {

inline constexpr std::chrono::seconds kReadTimeout{60};

// `steps mcp` started with its stdin and stdout on pipes (stderr to a file
// in the served folder, or to `stderr_fd` when given). Kills it if still
// running at the end.
class McpSession {
 public:
  McpSession(const std::string& root, std::vector<std::string> args = {},
             int stderr_fd = -1) {
    int in[2], out[2];
    EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
    std::vector<std::string> words = {kStepsBinary, "mcp", "--root", root};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    const std::string log = root + "/mcp-server.log";
    if (stderr_fd >= 0) {
      posix_spawn_file_actions_adddup2(&fa, stderr_fd, 2);
    } else {
      posix_spawn_file_actions_addopen(&fa, 2, log.c_str(),
                                       O_WRONLY | O_CREAT | O_APPEND, 0644);
    }
    EXPECT_EQ(posix_spawn(&pid_, kStepsBinary.c_str(), &fa, nullptr,
                          argv.data(), environ),
              0);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~McpSession() {
    CloseInput();
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(from_);
  }

  void SendLine(const std::string& line) {
    const std::string framed = line + "\n";
    ASSERT_EQ(write(to_, framed.data(), framed.size()),
              static_cast<ssize_t>(framed.size()));
  }
  void Send(const nlohmann::json& message) { SendLine(message.dump()); }

  // The next message line, or nullopt at end of output or after the timeout.
  std::optional<nlohmann::json> Next() {
    const auto give_up = std::chrono::steady_clock::now() + kReadTimeout;
    while (true) {
      if (size_t nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        EXPECT_FALSE(j.is_discarded()) << "not JSON on stdout: " << line;
        seen_.push_back(j);
        return j;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          give_up - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{from_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
      char buf[65536];
      ssize_t n = read(from_, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      buffer_.append(buf, static_cast<size_t>(n));
    }
  }

  // Sends a request and returns its answer (other messages are skipped).
  nlohmann::json Request(int id, const std::string& method,
                         nlohmann::json params = nlohmann::json::object()) {
    Send({{"jsonrpc", "2.0"},
          {"id", id},
          {"method", method},
          {"params", params}});
    return AnswerTo(id);
  }
  // The answer to request `id`, read now or earlier (answers to calls
  // running at once come in any order). Ids are not reused in a session.
  nlohmann::json AnswerTo(int id) {
    for (const nlohmann::json& m : seen_)
      if (m.contains("id") && m["id"] == id) return m;
    while (std::optional<nlohmann::json> m = Next()) {
      if (m->contains("id") && (*m)["id"] == id) return *m;
    }
    ADD_FAILURE() << "no answer to request " << id;
    return nlohmann::json();
  }
  nlohmann::json Call(int id, const std::string& tool,
                      nlohmann::json arguments) {
    return Request(id, "tools/call",
                   {{"name", tool}, {"arguments", arguments}});
  }
  nlohmann::json Initialize() {
    nlohmann::json r =
        Request(0, "initialize",
                {{"protocolVersion", "2025-06-18"},
                 {"capabilities", nlohmann::json::object()},
                 {"clientInfo", {{"name", "test"}, {"version", "1"}}}});
    Send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
    return r;
  }

  void CloseInput() {
    if (to_ >= 0) close(to_);
    to_ = -1;
  }
  // Every message read so far.
  const std::vector<nlohmann::json>& seen() const { return seen_; }

  // The exit code once the server has ended (bounded by kReadTimeout:
  // its output reaching end of file first); -1 if it did not.
  int WaitExit() {
    while (Next()) {
    }
    int status = 0;
    for (int i = 0; i < 600; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      usleep(100 * 1000);
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int to_ = -1;
  int from_ = -1;
  std::string buffer_;
  std::vector<nlohmann::json> seen_;
};

inline std::string Text(const nlohmann::json& answer) {
  return answer["result"]["content"][0]["text"].get<std::string>();
}
inline bool IsError(const nlohmann::json& answer) {
  return answer["result"]["isError"].get<bool>();
}

}  // namespace steps::test_support

#endif  // STEPS_TESTS_CLI_MCP_SESSION_H_
