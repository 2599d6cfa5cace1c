// `steps run` on a terminal: what is left on the screen, and what bytes are
// written, when steps run in parallel under a live status block while the
// process log warns.
//
// The screen comes from tmux, a real terminal emulator with its own line
// wrapping and cursor handling (a home-made emulator would share the
// printer's assumptions); tmux is in scripts/install-deps. The bytes come
// from a pseudo-terminal the test opens itself (forkpty), for the styling
// checks that a rendered screen cannot show.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/steps_cli.h"

namespace {

namespace fs = std::filesystem;
using steps::test_support::kStepsBinary;
using steps::test_support::RunInShell;
using steps::test_support::ShellQuote;

// Wider than the 100-column terminal, with two-byte and three-byte
// characters (the CJK ones two columns wide) where it gets cut.
const std::string kLongName =
    "a-long-task-name-that-goes-on-so-its-status-line-is-wider-than-the-"
    "terminal-\xC3\xA9\xC3\xA8\xC3\xA0-\xC3\xBCn\xC3\xAF\x63\xC3\xB8\x64\xC3"
    "\xA9-\xE4\xB8\xAD\xE6\x96\x87\xE5\x90\x8D\xE5\xAD\x97";

// A model's answer whose 100th byte is inside a two-byte character: the
// turn line shows the first 100 bytes of an answer, in whole characters.
const std::string kLongAnswer = std::string(99, 'a') + "\xC3\xA9\xC3\xA9";

// Five steps at once: a long-running task with a long name, two tasks that
// print, and two agents whose first request fails (each logs one
// WRN agent.request_retry while the status block is up) and whose retry
// succeeds.
std::string Pipeline() {
  return "agents:\n"
         "- name: alpha\n"
         "  source: { model: mock/alpha }\n"
         "- name: beta\n"
         "  source: { model: mock/beta }\n"
         "jobs:\n"
         "- name: tty\n"
         "  plan:\n"
         "  - in_parallel:\n"
         "    - task: " +
         kLongName +
         "\n"
         "      run: sleep 1.5; echo done\n"
         "    - agent: alpha\n"
         "      messages: [hi]\n"
         "    - agent: beta\n"
         "      messages: [hi]\n"
         "    - task: talk\n"
         "      run: for i in 1 2 3; do echo line $i; done\n"
         // Output that tries to move the cursor up and clear the screen,
         // and to leave a colour on.
         "    - task: rude\n"
         "      run: printf 'up\\033[3A\\033[Jhere\\n\\033[31mred\\n'\n"
         "mock:\n"
         "  alpha:\n"
         "  - status: 500\n"
         "    headers: { retry-after-ms: \"400\" }\n"
         "  - say: " +
         kLongAnswer +
         "\n"
         "  beta:\n"
         "  - status: 503\n"
         "    headers: { retry-after-ms: \"700\" }\n"
         "  - say: beta done\n";
}

// Twelve tasks at once (no agents), more than the status block of an 8-row
// terminal can show.
std::string ManyStepsPipeline() {
  std::string text = "jobs:\n- name: many\n  plan:\n  - in_parallel:\n";
  for (int i = 1; i <= 12; ++i) {
    text += "    - { task: t" + std::to_string(i) +
            ", run: sleep 0.6; echo done }\n";
  }
  return text + "mock:\n  default: { say: unused }\n";  // For --mock.
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

int CountStartingWith(const std::vector<std::string>& lines,
                      const std::string& prefix) {
  int n = 0;
  for (const std::string& l : lines) n += l.rfind(prefix, 0) == 0;
  return n;
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class TtyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/steps-tty-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::ofstream(dir_ + "/p.yaml") << Pipeline();
    std::ofstream(dir_ + "/many.yaml") << ManyStepsPipeline();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  struct Screen {
    int exit_code = -1;
    std::string text;  // Every line the pane ever showed, wrapped lines joined.
  };

  // Runs `steps run FILE --mock --no-cache` in a tmux pane of 100 columns
  // and `rows` rows with `env` (NAME=VALUE words) and reads the screen once
  // steps has exited. The pane signals a tmux channel when steps is done,
  // then idles in `cat` so the screen stays to be read.
  Screen TmuxRun(const std::string& env, const std::string& file = "p.yaml",
                 int rows = 40) {
    const std::string sock = dir_ + "/tmux.sock";
    const std::string tmux = "tmux -u -f /dev/null -S " + ShellQuote(sock);
    std::ofstream(dir_ + "/pane.sh")
        << "cd " << ShellQuote(dir_) << "\n"
        << "env -u NO_COLOR TERM=screen " << env << " "
        << ShellQuote(kStepsBinary) << " run " << file
        << " --mock --no-cache --state-dir st\n"
        << "echo $? > rc\n"
        << tmux << " wait-for -S steps-done\n"
        << "exec cat >/dev/null\n";
    Screen screen;
    auto started = RunInShell(dir_, tmux + " new-session -d -x 100 -y " +
                                        std::to_string(rows) +
                                        " 'sh pane.sh' && "
                                        "timeout 120 " +
                                        tmux + " wait-for steps-done && " +
                                        tmux + " capture-pane -p -J -S -");
    RunInShell(dir_, tmux + " kill-server");
    EXPECT_EQ(started.exit_code, 0)
        << "tmux runs this test (scripts/install-deps installs it)\n"
        << started.out;
    screen.text = started.out;
    std::ifstream rc(dir_ + "/rc");
    rc >> screen.exit_code;
    return screen;
  }

  // Runs `steps run p.yaml --mock --no-cache` on a pseudo-terminal of 100x40
  // with `env` set, and returns every byte it wrote there. Waits for steps to
  // exit (bounded), then drains what it left in the terminal.
  std::string PtyRun(
      const std::vector<std::pair<std::string, std::string>>& env) {
    struct winsize ws {};
    ws.ws_col = 100;
    ws.ws_row = 40;
    int master = -1;
    pid_t pid = forkpty(&master, nullptr, nullptr, &ws);
    if (pid == 0) {
      if (chdir(dir_.c_str()) != 0) _exit(127);
      unsetenv("NO_COLOR");
      for (const auto& [name, value] : env)
        setenv(name.c_str(), value.c_str(), 1);
      execl(kStepsBinary.c_str(), "steps", "run", "p.yaml", "--mock",
            "--no-cache", "--state-dir", "st", static_cast<char*>(nullptr));
      _exit(127);
    }
    EXPECT_GT(pid, 0) << "forkpty failed";
    if (pid < 0) return "";
    std::string bytes;
    auto read_ready = [&](int timeout_ms) {
      pollfd p{master, POLLIN, 0};
      if (poll(&p, 1, timeout_ms) <= 0) return false;
      char buf[4096];
      ssize_t n = read(master, buf, sizeof buf);
      if (n <= 0) return false;  // EIO: no process has the terminal open.
      bytes.append(buf, static_cast<size_t>(n));
      return true;
    };
    auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    int status = 0;
    bool exited = false;
    while (!exited && std::chrono::steady_clock::now() < deadline) {
      read_ready(200);
      exited = waitpid(pid, &status, WNOHANG) == pid;
    }
    if (!exited) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "steps did not exit within 2 minutes\n" << bytes;
    }
    while (read_ready(0)) {
    }
    close(master);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << bytes;
    return bytes;
  }

  std::string dir_;
};

// Warnings and output lines are never erased by the status block, no status
// line outlives its step, and the job's last line is the last on the screen.
TEST_F(TtyTest, FinalScreenKeepsEveryLineAndNoStatus) {
  Screen screen = TmuxRun("");
  ASSERT_EQ(screen.exit_code, 0) << screen.text;
  std::vector<std::string> lines = Lines(screen.text);
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(CountStartingWith(lines,
                              "WRN agent.request_retry agent=alpha model=alpha "
                              "attempt=1 attempts=3 status=500"),
            1)
      << screen.text;
  EXPECT_EQ(CountStartingWith(lines,
                              "WRN agent.request_retry agent=beta model=beta "
                              "attempt=1 attempts=3 status=503"),
            1)
      << screen.text;
  for (const char* end :
       {"task: talk succeeded in ", "agent: alpha succeeded in ",
        "agent: beta succeeded in ", "  talk | line 1", "  talk | line 2",
        "  talk | line 3", "task: rude succeeded in ", "  rude | uphere",
        "  rude | red", "  alpha \xE2\x96\xB8 turn 1 (2 requests)",
        "  beta \xE2\x96\xB8 turn 1 (2 requests)"}) {
    EXPECT_EQ(CountStartingWith(lines, end), 1) << end << "\n" << screen.text;
  }
  EXPECT_EQ(CountStartingWith(lines, "task: " + kLongName + " succeeded in "),
            1)
      << screen.text;
  EXPECT_EQ(CountStartingWith(lines, "job tty"), 2) << screen.text;
  EXPECT_FALSE(Has(screen.text, "\xE2\x8F\xB5"))
      << "a status line (⏵) is left\n"
      << screen.text;
  EXPECT_EQ(lines.back().rfind("job tty succeeded in ", 0), 0) << screen.text;
}

// The same without colour: still live, the same final screen.
TEST_F(TtyTest, NoColorFinalScreenKeepsEveryLine) {
  Screen screen = TmuxRun("NO_COLOR=1");
  ASSERT_EQ(screen.exit_code, 0) << screen.text;
  std::vector<std::string> lines = Lines(screen.text);
  EXPECT_EQ(CountStartingWith(lines, "WRN agent.request_retry agent=alpha "), 1)
      << screen.text;
  EXPECT_EQ(CountStartingWith(lines, "WRN agent.request_retry agent=beta "), 1)
      << screen.text;
  EXPECT_FALSE(Has(screen.text, "\xE2\x8F\xB5")) << screen.text;
}

// More running steps than the terminal has rows: the block stays within
// the screen (the last row counts the rest), so none of it scrolls away
// out of reach of the redraw.
TEST_F(TtyTest, StatusBlockFitsAShortTerminal) {
  Screen screen = TmuxRun("", "many.yaml", 8);
  ASSERT_EQ(screen.exit_code, 0) << screen.text;
  std::vector<std::string> lines = Lines(screen.text);
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  ASSERT_FALSE(lines.empty());
  for (int i = 1; i <= 12; ++i) {
    std::string t = "t" + std::to_string(i);
    EXPECT_EQ(CountStartingWith(lines, "task: " + t + " succeeded in "), 1)
        << t << "\n"
        << screen.text;
    EXPECT_EQ(CountStartingWith(lines, "  " + t + " | done"), 1) << t << "\n"
                                                                 << screen.text;
  }
  EXPECT_FALSE(Has(screen.text, "\xE2\x8F\xB5")) << screen.text;
  EXPECT_EQ(lines.back().rfind("job many succeeded in ", 0), 0) << screen.text;
}

// Styling on a terminal: dim status lines by default, none with NO_COLOR
// (still redrawn), and with TERM=dumb plain lines without one escape of
// steps' own.
TEST_F(TtyTest, StylingFollowsTermAndNoColor) {
  std::string styled = PtyRun({{"TERM", "xterm"}});
  EXPECT_TRUE(Has(styled, "\033[2m")) << styled;
  EXPECT_TRUE(Has(styled, "\033[J")) << styled;
  // A task's colour stays, reset at the end of its line; its cursor
  // movements do not.
  EXPECT_TRUE(Has(styled, "  rude | uphere")) << styled;
  EXPECT_TRUE(Has(styled, "  rude | \033[31mred\033[0m")) << styled;
  EXPECT_FALSE(Has(styled, "up\033[")) << styled;

  std::string no_color = PtyRun({{"TERM", "xterm"}, {"NO_COLOR", "1"}});
  EXPECT_FALSE(Has(no_color, "\033[2m")) << no_color;
  EXPECT_TRUE(Has(no_color, "\033[J")) << "still live\n" << no_color;
  EXPECT_TRUE(Has(no_color, "WRN agent.request_retry agent=alpha "))
      << no_color;

  // Plain lines: nothing of steps' own but text; a task's output as it
  // came.
  std::string dumb = PtyRun({{"TERM", "dumb"}});
  EXPECT_TRUE(Has(dumb, "  alpha \xE2\x96\xB8 turn 1 (2 requests)  " +
                            std::string(99, 'a') + "\xE2\x80\xA6\r\n"))
      << dumb;
  for (const std::string& as_written :
       {std::string("up\033[3A\033[Jhere"), std::string("\033[31mred")}) {
    size_t at = dumb.find(as_written);
    ASSERT_NE(at, std::string::npos) << as_written << "\n" << dumb;
    dumb.erase(at, as_written.size());
  }
  EXPECT_FALSE(Has(dumb, "\033")) << dumb;
  EXPECT_FALSE(Has(dumb, "\xE2\x8F\xB5")) << dumb;
  EXPECT_TRUE(Has(dumb, "WRN agent.request_retry agent=alpha ")) << dumb;
  EXPECT_TRUE(Has(dumb, "WRN agent.request_retry agent=beta ")) << dumb;
  EXPECT_TRUE(Has(dumb, "task: talk succeeded in ")) << dumb;
  EXPECT_TRUE(Has(dumb, "job tty succeeded in ")) << dumb;
}

// A gate that waits for a decision shows in the live status block like any
// running step: the time it has waited and a countdown of the time left to
// its deadline. Decided from another shell, the run goes on and ends.
TEST_F(TtyTest, AWaitingGateShowsItsCountdown) {
  std::ofstream(dir_ + "/gate.yaml")
      << "jobs:\n- name: j\n  plan:\n  - gate: deploy\n    timeout: 2m\n"
         "  - task: ship\n    run: echo shipped\n";
  struct winsize ws {};
  ws.ws_col = 100;
  ws.ws_row = 40;
  int master = -1;
  pid_t pid = forkpty(&master, nullptr, nullptr, &ws);
  if (pid == 0) {
    if (chdir(dir_.c_str()) != 0) _exit(127);
    setenv("TERM", "xterm", 1);
    execl(kStepsBinary.c_str(), "steps", "run", "gate.yaml", "--state-dir",
          "st", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(pid, 0) << "forkpty failed";
  std::string bytes;
  auto read_some = [&](int timeout_ms) {
    pollfd p{master, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    char buf[4096];
    ssize_t n = read(master, buf, sizeof buf);
    if (n <= 0) return false;
    bytes.append(buf, static_cast<size_t>(n));
    return true;
  };
  // "1m59s" -> 119.
  auto seconds = [](const std::string& t) {
    std::smatch m;
    std::regex_match(t, m, std::regex(R"((?:(\d+)m)?(?:(\d+)s)?)"));
    return (m[1].matched ? std::stoi(m[1]) * 60 : 0) +
           (m[2].matched ? std::stoi(m[2]) : 0);
  };
  // Every countdown the status block drew for the gate, in order, until
  // one is lower than the first (bounded).
  const std::regex line(R"(gate: deploy  \S+  \(([0-9ms]+) left\))");
  std::vector<int> lefts;
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < give_up &&
         (lefts.empty() || lefts.back() >= lefts.front())) {
    read_some(200);
    lefts.clear();
    for (std::sregex_iterator it(bytes.begin(), bytes.end(), line), end;
         it != end; ++it) {
      lefts.push_back(seconds((*it)[1]));
    }
  }
  ASSERT_FALSE(lefts.empty()) << "no status line for the gate\n" << bytes;
  EXPECT_LE(lefts.front(), 120) << bytes;
  EXPECT_GT(lefts.front(), 100) << bytes;
  EXPECT_LT(lefts.back(), lefts.front()) << "the countdown decreases\n"
                                         << bytes;
  EXPECT_TRUE(Has(bytes, "waits for a decision: steps approve ")) << bytes;

  auto approve =
      RunInShell(dir_, "\"$STEPS\" approve '' deploy --state-dir st");
  EXPECT_EQ(approve.exit_code, 0) << approve.out;
  int status = 0;
  bool exited = false;
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!exited && std::chrono::steady_clock::now() < until) {
    read_some(200);
    exited = waitpid(pid, &status, WNOHANG) == pid;
  }
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  while (read_some(0)) {
  }
  close(master);
  EXPECT_TRUE(exited && WIFEXITED(status) && WEXITSTATUS(status) == 0) << bytes;
  EXPECT_TRUE(Has(bytes, "ship | shipped")) << bytes;
}

}  // namespace
