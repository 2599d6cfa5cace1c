// `steps ui` as an attacker meets it, through real loopback sockets: only
// requests for this server's own names are answered (DNS rebinding), slow
// clients cannot hold the server, and runs whose output is not UTF-8 are
// still served as valid JSON.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "ui/http_guard.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Steady = std::chrono::steady_clock;

const std::string kSteps = std::string(STEPS_BINARY_DIR) + "/src/cli/steps";

// Runs `steps ARGS` to completion in `dir`; returns its exit code.
int RunSteps(const std::string& dir, const std::string& args) {
  std::string cmd =
      "cd '" + dir + "' && '" + kSteps + "' " + args + " >/dev/null 2>&1";
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// `steps ui` on a free loopback port, stopped with SIGTERM at the end.
class UiProcess {
 public:
  UiProcess(const std::string& state_dir, std::vector<std::string> extra) {
    int out[2];
    EXPECT_EQ(pipe(out), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    std::vector<std::string> args = {kSteps,        "ui",          "--listen",
                                     "127.0.0.1:0", "--state-dir", state_dir};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, kSteps.c_str(), &actions, nullptr, argv.data(),
                          environ),
              0);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    // The first line names the address: "steps ui: serving http://...".
    std::string line;
    char c;
    while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
    close(out[0]);
    std::smatch m;
    if (std::regex_search(line, m, std::regex(R"(127\.0\.0\.1:(\d+)/)"))) {
      port_ = std::stoi(m[1]);
    }
  }
  ~UiProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

// A GET with `host` as the Host header; the response, or null.
httplib::Result GetWithHost(int port, const std::string& path,
                            const std::string& host) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(10, 0);
  return client.Get(path.c_str(), {{"Host", host}});
}

// A connected loopback socket, or -1.
int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

class UiGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/steps-ui-guard-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_;
};

TEST_F(UiGuardTest, AnswersOnlyItsOwnHostNames) {
  UiProcess ui(dir_ + "/state", {});
  ASSERT_GT(ui.port(), 0);
  const std::string port = std::to_string(ui.port());
  for (const std::string& host : {"127.0.0.1:" + port, "localhost:" + port,
                                  "LocalHost:" + port, "[::1]:" + port}) {
    auto res = GetWithHost(ui.port(), "/api/runs", host);
    ASSERT_TRUE(res) << host;
    EXPECT_EQ(res->status, 200) << host;
  }
  // A page on another site whose name now resolves to 127.0.0.1, the
  // right name on the wrong port, and a name that only starts right.
  const std::vector<std::string> foreign = {
      "evil.example:" + port, "evil.example", "localhost:1",
      "localhost.evil.example:" + port, "127.0.0.1:" + port + "x"};
  for (const std::string& host : foreign) {
    for (const char* path : {"/api/runs", "/api/runs/latest", "/"}) {
      auto res = GetWithHost(ui.port(), path, host);
      ASSERT_TRUE(res) << host;
      EXPECT_EQ(res->status, 421) << host << " " << path;
      EXPECT_NE(res->body.find("--allow-host"), std::string::npos) << res->body;
      EXPECT_EQ(res->body.find("runs\""), std::string::npos) << res->body;
    }
  }
}

TEST_F(UiGuardTest, ARequestWithoutHostIsRefused) {
  UiProcess ui(dir_ + "/state", {});
  ASSERT_GT(ui.port(), 0);
  int fd = Connect(ui.port());
  ASSERT_GE(fd, 0);
  const std::string request = "GET /api/runs HTTP/1.0\r\n\r\n";
  ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  std::string answer;
  char buf[512];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) answer.append(buf, n);
  close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 403", 0), 0u) << answer;
}

TEST_F(UiGuardTest, AllowHostAddsNames) {
  UiProcess ui(dir_ + "/state", {"--allow-host", "steps.example",
                                 "--allow-host", "ci.example:9000"});
  ASSERT_GT(ui.port(), 0);
  auto any_port = GetWithHost(ui.port(), "/api/runs", "steps.example:443");
  ASSERT_TRUE(any_port);
  EXPECT_EQ(any_port->status, 200);
  auto no_port = GetWithHost(ui.port(), "/api/runs", "STEPS.example");
  ASSERT_TRUE(no_port);
  EXPECT_EQ(no_port->status, 200);
  auto that_port = GetWithHost(ui.port(), "/api/runs", "ci.example:9000");
  ASSERT_TRUE(that_port);
  EXPECT_EQ(that_port->status, 200);
  auto other_port = GetWithHost(ui.port(), "/api/runs", "ci.example:9001");
  ASSERT_TRUE(other_port);
  EXPECT_EQ(other_port->status, 421);
  auto other = GetWithHost(ui.port(), "/api/runs", "evil.example");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 421);
}

// Ten clients that send their headers a byte at a time never finish a
// request. A normal client is answered at once regardless (the bound below
// is generous: on loopback it takes milliseconds), and the slow ones are cut
// off soon after the 5 s request deadline instead of holding a thread.
TEST_F(UiGuardTest, TricklingClientsDoNotBlockOthersAndAreCutOff) {
  UiProcess ui(dir_ + "/state", {});
  ASSERT_GT(ui.port(), 0);
  constexpr int kSlow = 10;
  std::vector<int> slow;
  for (int i = 0; i < kSlow; ++i) {
    int fd = Connect(ui.port());
    ASSERT_GE(fd, 0);
    slow.push_back(fd);
  }
  const std::string head = "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (int fd : slow) send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  const Steady::time_point started = Steady::now();
  // One byte per connection every 100 ms, until the server hangs up on
  // all of them (or 20 s pass: the assertions below then fail).
  std::vector<Steady::time_point> cut(kSlow, Steady::time_point::max());
  std::thread trickler([&] {
    const std::string more = "X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
    int open = kSlow;
    for (size_t k = 0;
         open > 0 && Steady::now() - started < std::chrono::seconds(20); ++k) {
      for (int i = 0; i < kSlow; ++i) {
        if (cut[i] != Steady::time_point::max()) continue;
        char c = more[k % more.size()];
        char probe;
        if (send(slow[i], &c, 1, MSG_NOSIGNAL) != 1 ||
            recv(slow[i], &probe, 1, MSG_DONTWAIT) == 0) {
          cut[i] = Steady::now();
          --open;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  // The slow clients connected first, so they hold workers before this
  // request arrives.
  const Steady::time_point asked = Steady::now();
  auto res = GetWithHost(ui.port(), "/api/runs",
                         "127.0.0.1:" + std::to_string(ui.port()));
  const auto waited = Steady::now() - asked;
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_LT(waited, std::chrono::seconds(2))
      << "a normal request waited "
      << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()
      << " ms behind trickling clients";

  trickler.join();
  for (int i = 0; i < kSlow; ++i) {
    EXPECT_LT(cut[i] - started, std::chrono::seconds(9))
        << "slow client " << i << " was never cut off";
    close(slow[i]);
  }
}

// A client that reads a large answer a little at a time (so no single
// write stalls for long) is cut off once the answer's deadline passes: it
// cannot hold a worker for as long as it likes.
TEST(GuardedServerTest, ASlowReaderIsCutOffAtTheAnswersDeadline) {
  steps::ui::GuardedServer::Options options;
  options.answer_deadline = std::chrono::milliseconds(1000);
  options.write_stall = std::chrono::milliseconds(10000);
  steps::ui::GuardedServer server(options);
  const std::string big(8 << 20, 'a');
  server.Get("/big", [&big](const httplib::Request&, httplib::Response& res) {
    res.set_content(big, "text/plain");
  });
  // Small kernel buffers on both sides (accepted sockets inherit the
  // listener's), so what they hold once the server cuts drains quickly.
  server.set_socket_options([](socket_t sock) {
    const int yes = 1, buffer = 16384;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&server] { server.listen_after_bind(); });

  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const Steady::time_point started = Steady::now();
  const std::string ask = "GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  ASSERT_EQ(send(fd, ask.data(), ask.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(ask.size()));
  // 1 KiB every 20 ms (50 KiB/s) for 2 s: 8 MiB would take nearly three
  // minutes at that pace. Then everything left, as fast as it comes: the
  // rest of the answer if the server still sends it, or what the kernel
  // held when the server cut the connection, then its end.
  size_t got = 0;
  std::optional<Steady::duration> ended;
  while (!ended) {
    const Steady::duration since = Steady::now() - started;
    if (since > std::chrono::seconds(20)) break;
    char buffer[1024];
    const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) {
      ended = since;
      break;
    }
    got += static_cast<size_t>(n);
    if (since < std::chrono::seconds(2)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  close(fd);
  server.stop();
  serving.join();
  ASSERT_TRUE(ended) << "the connection never ended";
  EXPECT_GE(*ended, std::chrono::milliseconds(900)) << "cut before its time";
  EXPECT_LT(got, big.size()) << "the whole answer was sent to a slow reader";
}

// A run whose task printed bytes that are not UTF-8 is served by every API
// endpoint with 200 and valid JSON (U+FFFD in place of each bad byte).
TEST_F(UiGuardTest, ServesRunsWhoseOutputIsNotUtf8) {
  std::ofstream(dir_ + "/p.yaml")
      << "jobs:\n- name: bytes\n  plan:\n  - task: emit\n    run: |\n"
         "      printf 'caf\\xff\\xfe \\001\\033[31mred\\n'\n";
  ASSERT_EQ(RunSteps(dir_, "run p.yaml --plain --state-dir state"), 0);
  UiProcess ui(dir_ + "/state", {});
  ASSERT_GT(ui.port(), 0);
  const std::string host = "127.0.0.1:" + std::to_string(ui.port());
  auto strict = [](const std::string& body) {
    return nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  };
  for (const char* path : {"/api/runs", "/api/runs/latest"}) {
    auto res = GetWithHost(ui.port(), path, host);
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << path << ": " << res->body;
    EXPECT_FALSE(strict(res->body).is_discarded()) << res->body;
  }
  auto run = strict(GetWithHost(ui.port(), "/api/runs/latest", host)->body);
  const std::string step = run["run"]["jobs"][0]["steps"][0]["id"];
  auto log = GetWithHost(ui.port(), "/api/runs/latest/log?step=" + step, host);
  ASSERT_TRUE(log);
  ASSERT_EQ(log->status, 200) << log->body;
  nlohmann::json lines = strict(log->body);
  ASSERT_FALSE(lines.is_discarded()) << log->body;
  ASSERT_FALSE(lines["lines"].empty()) << log->body;
  EXPECT_EQ(lines["lines"][0]["text"].get<std::string>().rfind(
                "caf\xEF\xBF\xBD\xEF\xBF\xBD", 0),
            0u)
      << log->body;
  auto text =
      GetWithHost(ui.port(), "/api/runs/latest/log.txt?step=" + step, host);
  ASSERT_TRUE(text);
  ASSERT_EQ(text->status, 200);
  EXPECT_EQ(text->body.rfind("caf\xEF\xBF\xBD\xEF\xBF\xBD", 0), 0u)
      << text->body;
}

TEST(HostAllowListTest, ParsesHostHeadersStrictly) {
  steps::ui::HostAllowList hosts("0.0.0.0", 8080,
                                 {"Name.Example", "[fd00::1]:81"});
  EXPECT_TRUE(hosts.Allows("0.0.0.0:8080"));
  EXPECT_TRUE(hosts.Allows("localhost:8080"));
  EXPECT_TRUE(hosts.Allows("name.example"));
  EXPECT_TRUE(hosts.Allows("[FD00::1]:81"));
  EXPECT_FALSE(hosts.Allows("[fd00::1]:8080"));
  EXPECT_FALSE(hosts.Allows("localhost"));  // Port 80.
  EXPECT_FALSE(hosts.Allows(""));
  EXPECT_FALSE(hosts.Allows(":8080"));
  EXPECT_FALSE(hosts.Allows("[::1"));
  EXPECT_FALSE(hosts.Allows("::1:8080"));  // IPv6 needs brackets.
  EXPECT_FALSE(hosts.Allows("localhost:8080:1"));
  EXPECT_FALSE(hosts.Allows("localhost:99999999999"));
  steps::ui::HostAllowList v6("::1", 80, {});
  EXPECT_TRUE(v6.Allows("[::1]"));
  EXPECT_TRUE(v6.Allows("[::1]:80"));
}

}  // namespace
