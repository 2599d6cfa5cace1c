// `steps ui` while a pipeline with a slow agent step runs on the mock in
// another process: the API shows the running step with its resolved
// deadline, the countdown decreases, and the finished run shows its outcome
// and attempt rows.
#include <fcntl.h>
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
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <thread>

#include "common/loopback.h"
#include "common/steps_cli.h"
#include "ui/server.h"

extern char** environ;

namespace steps::ui {
namespace {

namespace fs = std::filesystem;

const char kPipeline[] = R"(agents:
- name: slowpoke
  source: { model: mock/slow }
  timeout: 2m
jobs:
- name: slow-review
  plan:
  - task: prepare
    run: echo ready
  - agent: slowpoke
    messages: ["Take your time."]
mock:
  slowpoke:
  - delay: 3s
    say: Done reviewing.
)";

nlohmann::json Get(httplib::Client& client, const std::string& path) {
  auto res = client.Get(path.c_str());
  if (!res || res->status != 200) return nullptr;
  return nlohmann::json::parse(res->body, nullptr, false);
}

// An RFC 3339 time of the API ("2026-11-30T06:30:00.123Z") in ms since the
// epoch; -1 for anything else.
int64_t Ms(const nlohmann::json& time) {
  if (!time.is_string()) return -1;
  std::tm tm{};
  int millis = 0;
  if (std::sscanf(time.get<std::string>().c_str(),
                  "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon,
                  &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec,
                  &millis) != 7) {
    return -1;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm)) * 1000 + millis;
}

// Percent-encodes everything but letters and digits, for a query value.
std::string Escape(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c)) {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

const nlohmann::json* FindStep(const nlohmann::json& run,
                               const std::string& name) {
  for (const auto& job : run["jobs"]) {
    for (const auto& s : job["steps"]) {
      if (s["name"] == name) return &s;
    }
  }
  return nullptr;
}

TEST(UiServerTest, ShowsALiveRunAndItsCountdown) {
  char tmpl[] = "/tmp/steps-ui-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/slow.yaml") << kPipeline;

  UiServer server(dir + "/state");
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(5, 0);

  // The page itself, served from the binary.
  auto page = client.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("<title>steps</title>"), std::string::npos);
  // No store yet: an empty list, and a clear 404 for a run.
  EXPECT_EQ(Get(client, "/api/runs")["runs"].size(), 0u);
  EXPECT_EQ(client.Get("/api/runs/latest")->status, 404);

  std::string steps = std::string(STEPS_BINARY_DIR) + "/src/cli/steps";
  std::string state = dir + "/state";
  std::string file = dir + "/slow.yaml";
  std::vector<std::string> args = {steps,     "run",         file, "--mock",
                                   "--plain", "--state-dir", state};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  ASSERT_EQ(
      posix_spawn(&pid, steps.c_str(), &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);

  // Poll (bounded) until the agent step shows as running.
  nlohmann::json first;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    nlohmann::json j = Get(client, "/api/runs/latest");
    if (!j.is_null() && j.contains("run")) {
      const nlohmann::json* s = FindStep(j["run"], "slowpoke");
      if (s && (*s)["outcome"] == "running") {
        first = j;
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(first.is_null()) << "the running agent step never showed";
  EXPECT_EQ(first["run"]["outcome"], "running");
  // The plan's outline, from the run's start, and the execution list so
  // far while the job runs.
  const nlohmann::json& job = first["run"]["jobs"][0];
  ASSERT_EQ(job["plan"].size(), 2u) << job.dump();
  EXPECT_EQ(job["plan"][0]["id"], "slow-review:1");
  EXPECT_EQ(job["plan"][0]["name"], "prepare");
  EXPECT_EQ(job["plan"][0]["kind"], "task");
  EXPECT_EQ(job["plan"][0]["line"], 8);
  EXPECT_TRUE(job["plan"][0]["timeout_ms"].is_null());
  EXPECT_EQ(job["plan"][1]["id"], "slow-review:2");
  EXPECT_EQ(job["plan"][1]["kind"], "agent");
  EXPECT_EQ(job["plan"][1]["timeout_ms"], 120000);
  EXPECT_EQ(job["execution"], nlohmann::json::array({"prepare"}));
  const nlohmann::json& step = *FindStep(first["run"], "slowpoke");
  ASSERT_TRUE(step["deadline"].is_string()) << step.dump();
  int64_t left1 = Ms(step["deadline"]) - Ms(first["now"]);
  EXPECT_GT(left1, 0);
  EXPECT_LE(left1, 120000) << "the resolved deadline is the entry's 2m";
  EXPECT_GT(left1, 110000);

  // A later read: same deadline, less time left.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  nlohmann::json second = Get(client, "/api/runs/latest");
  const nlohmann::json* again = FindStep(second["run"], "slowpoke");
  ASSERT_NE(again, nullptr);
  if ((*again)["outcome"] == "running") {
    EXPECT_EQ((*again)["deadline"], step["deadline"]);
    int64_t left2 = Ms((*again)["deadline"]) - Ms(second["now"]);
    EXPECT_LT(left2, left1) << "the countdown decreases";
  }

  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  nlohmann::json done = Get(client, "/api/runs/latest");
  EXPECT_EQ(done["run"]["outcome"], "succeeded") << done.dump();
  const nlohmann::json* finished = FindStep(done["run"], "slowpoke");
  ASSERT_NE(finished, nullptr);
  EXPECT_EQ((*finished)["outcome"], "succeeded");
  ASSERT_EQ((*finished)["attempts"].size(), 1u);
  EXPECT_EQ((*finished)["attempts"][0]["number"], 1);
  EXPECT_FALSE(
      (*finished)["attempts"][0]["taken_by"].get<std::string>().empty());
  EXPECT_EQ((*finished)["agent"]["turns"], 1);
  // Tokens and cost: the step's, its job's and the run's; the index too.
  const nlohmann::json tokens = (*finished)["prompt_tokens"];
  EXPECT_GT(tokens.get<int64_t>(), 0);
  EXPECT_EQ((*finished)["turns"][0]["prompt_tokens"], tokens);
  EXPECT_EQ((*FindStep(done["run"], "prepare"))["prompt_tokens"], 0);
  EXPECT_EQ(done["run"]["jobs"][0]["prompt_tokens"], tokens);
  EXPECT_EQ(done["run"]["prompt_tokens"], tokens);
  EXPECT_EQ(done["run"]["jobs"][0]["execution"],
            nlohmann::json::array({"prepare", "slowpoke"}));
  nlohmann::json index = Get(client, "/api/runs");
  ASSERT_EQ(index["runs"].size(), 1u);
  EXPECT_EQ(index["runs"][0]["prompt_tokens"], tokens);
  EXPECT_TRUE(index["runs"][0]["usd"].is_number());
  // The turn's time lies within the step; the 2m deadline stays known.
  ASSERT_EQ((*finished)["turns"].size(), 1u);
  const int64_t at = Ms((*finished)["turns"][0]["at"]);
  const int64_t from = Ms((*finished)["started"]);
  EXPECT_GE(at, from + 2900) << "the mock answers after 3 s";
  // Times are wall-clock milliseconds, truncated; the duration is measured
  // on the steady clock: allow the few ms the two roundings can differ.
  EXPECT_LE(at, from + (*finished)["duration_ms"].get<int64_t>() + 5);
  EXPECT_EQ((*finished)["deadline"], step["deadline"]);
  EXPECT_TRUE((*finished)["nudge_at"].is_null());

  // A step's lines, from the log API.
  const nlohmann::json* prepare = FindStep(done["run"], "prepare");
  ASSERT_NE(prepare, nullptr);
  EXPECT_EQ((*prepare)["log_lines"], 1);
  const std::string step_id = (*prepare)["id"];
  const std::string log_path = "/api/runs/" +
                               done["run"]["id"].get<std::string>() +
                               "/log?step=" + Escape(step_id);
  nlohmann::json log = Get(client, log_path);
  ASSERT_TRUE(log.is_object()) << log_path;
  EXPECT_EQ(log["last_seq"], 1);
  ASSERT_EQ(log["lines"].size(), 1u);
  EXPECT_EQ(log["lines"][0]["text"], "ready");
  EXPECT_EQ(log["lines"][0]["stream"], "stdout");
  EXPECT_EQ(log["lines"][0]["seq"], 1);
  EXPECT_EQ(Get(client, log_path + "&after=1")["lines"].size(), 0u);
  auto text = client.Get("/api/runs/latest/log.txt?step=" + Escape(step_id));
  ASSERT_TRUE(text);
  EXPECT_EQ(text->status, 200);
  EXPECT_EQ(text->body, "ready\n");
  // Bad requests say what is wrong.
  auto no_step = client.Get("/api/runs/latest/log");
  ASSERT_TRUE(no_step);
  EXPECT_EQ(no_step->status, 400);
  EXPECT_NE(no_step->body.find("?step=STEP_ID"), std::string::npos);
  EXPECT_EQ(client.Get(log_path + "&after=-3")->status, 400);
  EXPECT_EQ(client.Get(log_path + "&after=x")->status, 400);
  auto unknown = client.Get("/api/runs/latest/log?step=nope");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_NE(unknown->body.find("no step 'nope'"), std::string::npos);

  server.Stop();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST(ListenAddressTest, HostAndPortOrAClearError) {
  Result<ListenAddress> v4 = ParseListenAddress("127.0.0.1:8080");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 8080);
  Result<ListenAddress> v6 = ParseListenAddress("[::1]:0");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);
  for (const char* bad : {"nonsense", ":80", "host:", "host:-1", "host:65536",
                          "host:99999999999", "host:8o", "[]:80"}) {
    Result<ListenAddress> r = ParseListenAddress(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(),
              std::string("expected HOST:PORT, e.g. 127.0.0.1:8080 (got '") +
                  bad + "')");
  }
  EXPECT_EQ(BaseUrl("127.0.0.1", 8080), "http://127.0.0.1:8080/");
  EXPECT_EQ(BaseUrl("::1", 80), "http://[::1]:80/");
}

// `steps run ARGS...` with stderr on a pipe; stdout goes to /dev/null.
struct Child {
  pid_t pid = 0;
  int stderr_fd = -1;
};

Child SpawnSteps(std::vector<std::string> args) {
  args.insert(args.begin(), std::string(STEPS_BINARY_DIR) + "/src/cli/steps");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (pipe(fds) != 0) return {};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  Child c;
  if (posix_spawn(&c.pid, argv[0], &fa, nullptr, argv.data(), environ) != 0)
    c.pid = 0;
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  c.stderr_fd = fds[0];
  return c;
}

// Reads `fd` until a line contains `marker` (bounded); returns that line.
std::string ReadLineWith(int fd, const std::string& marker,
                         std::chrono::seconds limit) {
  std::string seen;
  auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char buf[512];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    seen.append(buf, static_cast<size_t>(n));
    size_t at = seen.find(marker);
    if (at != std::string::npos) {
      size_t end = seen.find('\n', at);
      if (end != std::string::npos) {
        size_t start = seen.rfind('\n', at);
        start = start == std::string::npos ? 0 : start + 1;
        return seen.substr(start, end - start);
      }
    }
  }
  return "";
}

// A loopback port another program listens on: `fd` listens on `port`.
void TakeALoopbackPort(int& fd, int& port) {
  fd = test_support::ListenOnLoopback(4, &port);
  ASSERT_GE(fd, 0);
}

// `steps run --ui` in a temporary folder: the pipeline file, the child's
// stderr, and the address it names.
class RunWithUiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/steps-run-ui-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    if (child_.stderr_fd >= 0) close(child_.stderr_fd);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Starts `steps run` on `pipeline` with `ui_args`.
  void Start(const std::string& pipeline, std::vector<std::string> ui_args) {
    std::ofstream(dir_ + "/p.yaml") << pipeline;
    std::vector<std::string> args = {"run", dir_ + "/p.yaml", "--plain",
                                     "--state-dir", dir_ + "/state"};
    args.insert(args.end(), ui_args.begin(), ui_args.end());
    child_ = SpawnSteps(args);
    ASSERT_GT(child_.pid, 0);
  }
  // Reads the address the run names, and connects a client to it.
  void Connect() {
    std::string line = ReadLineWith(child_.stderr_fd, "watch this run at",
                                    std::chrono::seconds(30));
    ASSERT_FALSE(line.empty()) << "steps run --ui never named its address";
    std::smatch m;
    ASSERT_TRUE(std::regex_search(
        line, m,
        std::regex(
            R"(http://127\.0\.0\.1:(\d+)/\?token=[0-9a-f]{64}#([0-9a-z-]+))")))
        << line;
    run_id_ = m[2];
    client_ = std::make_unique<httplib::Client>("127.0.0.1", std::stoi(m[1]));
    client_->set_read_timeout(5, 0);
  }
  // Polls the run (bounded) until `done` holds for it; returns the last
  // answer (null once the UI stopped). A 404 (not recorded yet) is polled
  // again.
  nlohmann::json PollRunUntil(
      const std::function<bool(const nlohmann::json& run)>& done) {
    nlohmann::json j;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < until) {
      auto res = client_->Get("/api/runs/" + run_id_);
      if (!res) return nullptr;
      j = res->status == 200 ? nlohmann::json::parse(res->body, nullptr, false)
                             : nlohmann::json();
      if (j.is_object() && j.contains("run") && done(j["run"])) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return j;
  }
  // Waits for the child; returns its exit code (-1: killed by a signal).
  int Wait() {
    int status = 0;
    waitpid(child_.pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string dir_;
  Child child_;
  std::string run_id_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(RunWithUiTest, ServesTheRunWhileItRunsThenStops) {
  // The task holds the run open until the test creates `go` (at most 60s).
  Start(
      "jobs:\n- name: held\n  plan:\n  - task: wait\n    run: |\n"
      "      echo waiting\n"
      "      for i in $(seq 1 1200); do\n"
      "        [ -f '" +
          dir_ +
          "/go' ] && break; sleep 0.05\n"
          "      done\n"
          "      echo released\n",
      {"--ui-listen", "127.0.0.1:0"});
  Connect();
  ASSERT_TRUE(client_);

  // Running: the run, its step, and the step's first line, live.
  nlohmann::json live = PollRunUntil([](const nlohmann::json& run) {
    const nlohmann::json* wait = FindStep(run, "wait");
    return wait && (*wait)["log_lines"] == 1;
  });
  ASSERT_TRUE(live.is_object() && live.contains("run")) << live.dump();
  EXPECT_EQ(live["run"]["id"], run_id_);
  EXPECT_EQ(live["run"]["outcome"], "running");
  EXPECT_EQ((*FindStep(live["run"], "wait"))["outcome"], "running");

  // Released: a page that keeps polling sees how the run ended before the
  // UI stops (the run lingers up to 3s for it).
  std::ofstream(dir_ + "/go") << "go\n";
  nlohmann::json done = PollRunUntil(
      [](const nlohmann::json& run) { return run["outcome"] != "running"; });
  ASSERT_FALSE(done.is_null()) << "the UI stopped before the page caught up";
  EXPECT_EQ(done["run"]["outcome"], "succeeded");
  EXPECT_EQ(Wait(), 0);
  EXPECT_FALSE(
      ReadLineWith(child_.stderr_fd, "the UI stopped", std::chrono::seconds(5))
          .empty());
  EXPECT_FALSE(client_->Get("/api/runs")) << "the UI stops with the run";
}

TEST_F(RunWithUiTest, CtrlCStopsAtOnceEvenWithAPageOpen) {
  Start("jobs:\n- name: held\n  plan:\n  - task: wait\n    run: sleep 60\n",
        {"--ui-listen", "127.0.0.1:0"});
  Connect();
  ASSERT_TRUE(client_);
  // A watching page: it has read the run, and the step is running.
  nlohmann::json live = PollRunUntil([](const nlohmann::json& run) {
    const nlohmann::json* wait = FindStep(run, "wait");
    return wait && (*wait)["outcome"] == "running";
  });
  ASSERT_FALSE(live.is_null());
  auto sent = std::chrono::steady_clock::now();
  kill(child_.pid, SIGINT);
  EXPECT_EQ(Wait(), 130);
  // Tolerance: the abort takes well under a second; waiting for the page
  // would add 3s.
  EXPECT_LT(std::chrono::steady_clock::now() - sent,
            std::chrono::milliseconds(2500));
}

TEST_F(RunWithUiTest, NobodyWatchingMeansNoWaitAtTheEnd) {
  auto start = std::chrono::steady_clock::now();
  Start("jobs:\n- name: quick\n  plan:\n  - task: hi\n    run: echo hi\n",
        {"--ui", "--ui-listen", "127.0.0.1:0"});
  EXPECT_EQ(Wait(), 0);
  // Tolerance: the run itself takes milliseconds; waiting for a page would
  // take 3s.
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(2500));
}

TEST_F(RunWithUiTest, ABadOrTakenAddressIsRefusedBeforeTheRun) {
  int taken = -1, port = 0;
  ASSERT_NO_FATAL_FAILURE(TakeALoopbackPort(taken, port));
  for (const std::string& listen :
       {std::string("nonsense"), std::string("127.0.0.1:99999"),
        "127.0.0.1:" + std::to_string(port)}) {
    Start("jobs:\n- name: j\n  plan:\n  - task: t\n    run: touch '" + dir_ +
              "/ran'\n",
          {"--ui-listen", listen});
    std::string line = ReadLineWith(child_.stderr_fd, "steps run: --ui",
                                    std::chrono::seconds(20));
    EXPECT_EQ(Wait(), 64) << listen;
    close(child_.stderr_fd);
    child_.stderr_fd = -1;
    EXPECT_FALSE(line.empty()) << listen;
    EXPECT_FALSE(fs::exists(dir_ + "/ran")) << "the run did not start";
  }
  close(taken);
}

// The UI of a run is a process of its own (steps-ui): a `steps` killed
// outright takes it along (the UI reads a pipe from the run, which the
// kernel closes), so no page keeps being served for a run nobody runs.
TEST_F(RunWithUiTest, AKilledRunTakesItsUiAlong) {
  Start("jobs:\n- name: held\n  plan:\n  - task: wait\n    run: sleep 60\n",
        {"--ui-listen", "127.0.0.1:0"});
  Connect();
  ASSERT_TRUE(client_);
  ASSERT_TRUE(client_->Get("/api/runs")) << "the UI serves while the run runs";
  kill(child_.pid, SIGKILL);
  EXPECT_EQ(Wait(), -1);
  // Tolerance: the UI stops within milliseconds of the pipe's end; 10 s
  // only bounds a UI that never does.
  bool stopped = false;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!stopped && std::chrono::steady_clock::now() < until) {
    stopped = !client_->Get("/api/runs");
    if (!stopped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(stopped) << "the UI outlived its run";
}

// A Stop right after Start returns: the server's loop may not have begun
// yet, and a stop before it began once left Stop waiting for its end for
// ever (a UI whose run ended at once hung, still serving). Many rounds, as
// the window is short; a watchdog turns a hang into a failure.
TEST(UiServerTest, StopRightAfterStartReturns) {
  char tmpl[] = "/tmp/steps-ui-stop-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  CancelToken done;
  std::thread watchdog([&done] {
    if (done.WaitUntil(std::chrono::steady_clock::now() +
                       std::chrono::seconds(60))) {
      std::fprintf(stderr, "UiServer::Stop hung after Start\n");
      std::_Exit(1);
    }
  });
  for (int round = 0; round < 200; ++round) {
    UiServer server(dir + "/state");
    ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
    server.Stop();
  }
  done.Cancel(CancelReason::kAbort);
  watchdog.join();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// Beside a run, the UI stops when the run closes its stdin, also at once.
TEST(UiCommandTest, TheRunsUiStopsWhenItsInputEndsAtOnce) {
  char tmpl[] = "/tmp/steps-ui-eof-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string ui = std::string(STEPS_BINARY_DIR) + "/src/cli/steps-ui";
  for (int round = 0; round < 5; ++round) {
    auto r = test_support::RunInShell(
        dir, "timeout 30 " + test_support::ShellQuote(ui) +
                 " --listen 127.0.0.1:0 --state-dir state --with-run "
                 "</dev/null; echo \"exit $?\"");
    EXPECT_NE(r.out.find("port "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("exit 0"), std::string::npos) << r.out;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// The run's UI is in the background of the run's terminal; under `stty
// tostop` its reason for not starting still reaches the terminal at once
// (it was stopped by SIGTTOU, and the run waited 12 s to say only that the
// UI did not start).
TEST(UiCommandTest, ATakenPortIsSaidAtOnceUnderTostop) {
  int taken = -1, port = 0;
  ASSERT_NO_FATAL_FAILURE(TakeALoopbackPort(taken, port));
  char tmpl[] = "/tmp/steps-ui-tostop-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/p.yaml")
      << "jobs:\n- name: j\n  plan:\n  - task: t\n    run: echo hi\n";
  const std::string inner = "stty tostop; " +
                            test_support::ShellQuote(test_support::kStepsBinary) +
                            " run p.yaml --plain --state-dir state --ui-listen "
                            "127.0.0.1:" + std::to_string(port);
  const auto start = std::chrono::steady_clock::now();
  auto r = test_support::RunInShell(
      dir, "timeout 60 script -qec " + test_support::ShellQuote(inner) +
               " /dev/null");
  // Tolerance: refusing takes well under a second; the stopped UI took 12.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(8));
  EXPECT_NE(r.out.find("cannot listen on 127.0.0.1:" + std::to_string(port) +
                       " (is the port taken?)"),
            std::string::npos)
      << r.out;
  close(taken);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// `steps ui` runs the steps-ui program beside it; a `steps` without one
// says what is missing and where it looked, and serves nothing.
TEST(UiCommandTest, AStepsWithoutItsUiProgramSaysSo) {
  char tmpl[] = "/tmp/steps-ui-alone-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  fs::copy_file(test_support::kStepsBinary, dir + "/steps");
  auto r = test_support::RunInShell(
      dir, "./steps ui --listen 127.0.0.1:0 --state-dir state");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("steps ui: the web UI's program, steps-ui, is neither "
                       "beside " +
                       dir + "/steps nor in ../libexec/steps/"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("serving"), std::string::npos) << r.out;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// What the timeline draws, from a finished run: a retried task's attempts
// with the wait between them and each attempt's deadline; an agent step
// nudged near its deadline, with its turn time and when the nudge went out.
TEST(UiServerTest, ServesWhatTheTimelineDraws) {
  char tmpl[] = "/tmp/steps-ui-timeline-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  // The first turn answers 8.6 s into a 10 s conversation: less than a
  // fifth of it is left, so the next request carries the nudge.
  std::ofstream(dir + "/t.yaml") << R"(agents:
- name: nudged
  source: { model: mock/n }
  timeout: 10s
  tools: [list_files]
jobs:
- name: t
  plan:
  - task: flaky
    run: |
      [ "$STEPS_ATTEMPT" != 1 ]
    retry: { max_attempts: 2, base_delay_ms: 400 }
    timeout: 30s
  - agent: nudged
    messages: ["Look around."]
mock:
  nudged:
  - delay: 8600ms
    call: list_files
  - say: Done.
)";
  Child child = SpawnSteps({"run", dir + "/t.yaml", "--mock", "--plain",
                            "--state-dir", dir + "/state"});
  ASSERT_GT(child.pid, 0);
  int status = 0;
  waitpid(child.pid, &status, 0);
  close(child.stderr_fd);
  EXPECT_TRUE(WIFEXITED(status)) << "the run ends on its own";

  UiServer server(dir + "/state");
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(5, 0);
  nlohmann::json j = Get(client, "/api/runs/latest");
  ASSERT_TRUE(j.is_object() && j.contains("run")) << j.dump();
  const nlohmann::json* flaky = FindStep(j["run"], "flaky");
  ASSERT_NE(flaky, nullptr);
  ASSERT_EQ((*flaky)["attempts"].size(), 2u) << flaky->dump();
  const nlohmann::json& a1 = (*flaky)["attempts"][0];
  const nlohmann::json& a2 = (*flaky)["attempts"][1];
  const int64_t end1 = Ms(a1["started"]) + a1["duration_ms"].get<int64_t>();
  EXPECT_GE(Ms(a2["started"]) - end1, 390)
      << "the 400 ms retry wait lies between the attempts";
  EXPECT_EQ(a2["waited_ms"], Ms(a2["started"]) - end1);
  for (const nlohmann::json* a : {&a1, &a2}) {
    ASSERT_TRUE((*a)["deadline"].is_string()) << a->dump();
    EXPECT_NEAR(Ms((*a)["deadline"]) - Ms((*a)["started"]), 30000, 5)
        << "each attempt's deadline is kept after it ended";
  }

  const nlohmann::json* agent = FindStep(j["run"], "nudged");
  ASSERT_NE(agent, nullptr);
  const int64_t from = Ms((*agent)["started"]);
  const int64_t to = from + (*agent)["duration_ms"].get<int64_t>();
  EXPECT_NEAR(Ms((*agent)["deadline"]) - from, 10000, 5);
  ASSERT_GE((*agent)["turns"].size(), 1u) << agent->dump();
  const int64_t turn1 = Ms((*agent)["turns"][0]["at"]);
  EXPECT_GE(turn1, from + 8500);
  ASSERT_TRUE((*agent)["nudge_at"].is_string()) << agent->dump();
  const int64_t nudge = Ms((*agent)["nudge_at"]);
  EXPECT_GE(nudge, turn1) << "the nudge goes with the request after turn 1";
  // `to` is the wall-clock start plus a duration measured on the steady
  // clock, both cut to whole ms: it may fall a few ms short of wall times
  // taken near the end.
  EXPECT_LE(nudge, to + 5);
  EXPECT_EQ((*agent)["agent"]["nudge_sent"], true);
  EXPECT_EQ(j["run"]["jobs"][0]["plan"][1]["timeout_ms"], 10000);
  EXPECT_EQ(j["run"]["jobs"][0]["plan"][0]["timeout_ms"], 30000);

  server.Stop();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST(UiServerTest, AnAgentStepsDeadlineRunsFromTheStepsStart) {
  char tmpl[] = "/tmp/steps-ui-deadline-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  // 5000 files in the job's workspace: the agent step lists them for its
  // cache key before its conversation starts, which takes tens of ms. That
  // time is the step's too: its deadline lies `timeout` after its start.
  std::ofstream(dir + "/t.yaml") << R"(agents:
- name: a
  source: { model: mock/n }
  timeout: 10s
jobs:
- name: t
  plan:
  - task: many
    run: |
      mkdir "$STEPS_ARTIFACTS/d" && cd "$STEPS_ARTIFACTS/d" && seq 1 5000 | xargs touch
  - agent: a
    messages: ["Hi."]
mock:
  a:
  - say: Done.
)";
  Child child = SpawnSteps({"run", dir + "/t.yaml", "--mock", "--plain",
                            "--state-dir", dir + "/state"});
  ASSERT_GT(child.pid, 0);
  int status = 0;
  waitpid(child.pid, &status, 0);
  close(child.stderr_fd);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  UiServer server(dir + "/state");
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(5, 0);
  nlohmann::json j = Get(client, "/api/runs/latest");
  ASSERT_TRUE(j.is_object() && j.contains("run")) << j.dump();
  const nlohmann::json* agent = FindStep(j["run"], "a");
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE((*agent)["deadline"].is_string()) << agent->dump();
  // Both are wall times cut to whole ms, taken next to each other.
  EXPECT_NEAR(Ms((*agent)["deadline"]) - Ms((*agent)["started"]), 10000, 2)
      << agent->dump();

  server.Stop();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace steps::ui
