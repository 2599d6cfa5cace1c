// `steps ui` while a pipeline with a slow agent step runs on the mock in
// another process: the API shows the running step with its resolved
// deadline, the countdown decreases, and the finished run shows its outcome
// and attempt rows.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

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
      if (s && (*s)["status"] == "running") {
        first = j;
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(first.is_null()) << "the running agent step never showed";
  EXPECT_EQ(first["run"]["status"], "running");
  const nlohmann::json& step = *FindStep(first["run"], "slowpoke");
  ASSERT_TRUE(step["deadline_ms"].is_number()) << step.dump();
  int64_t left1 =
      step["deadline_ms"].get<int64_t>() - first["now_ms"].get<int64_t>();
  EXPECT_GT(left1, 0);
  EXPECT_LE(left1, 120000) << "the resolved deadline is the entry's 2m";
  EXPECT_GT(left1, 110000);

  // A later read: same deadline, less time left.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  nlohmann::json second = Get(client, "/api/runs/latest");
  const nlohmann::json* again = FindStep(second["run"], "slowpoke");
  ASSERT_NE(again, nullptr);
  if ((*again)["status"] == "running") {
    EXPECT_EQ((*again)["deadline_ms"], step["deadline_ms"]);
    int64_t left2 = (*again)["deadline_ms"].get<int64_t>() -
                    second["now_ms"].get<int64_t>();
    EXPECT_LT(left2, left1) << "the countdown decreases";
  }

  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  nlohmann::json done = Get(client, "/api/runs/latest");
  EXPECT_EQ(done["run"]["status"], "succeeded") << done.dump();
  const nlohmann::json* finished = FindStep(done["run"], "slowpoke");
  ASSERT_NE(finished, nullptr);
  EXPECT_EQ((*finished)["status"], "succeeded");
  ASSERT_EQ((*finished)["attempts"].size(), 1u);
  EXPECT_EQ((*finished)["attempts"][0]["number"], 1);
  EXPECT_FALSE(
      (*finished)["attempts"][0]["taken_by"].get<std::string>().empty());
  EXPECT_EQ((*finished)["agent"]["turns"], 1);
  EXPECT_EQ(Get(client, "/api/runs")["runs"].size(), 1u);

  server.Stop();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace steps::ui
