// Protecting a provider, through the real binary against loopback model
// servers that keep their own request log: a retry budget caps the load an
// across of failing conversations puts on a host that answers 500, a
// circuit breaker holds requests while the host is down and closes on the
// probe that finds it back, and rate limits keep 200 cells from ever
// drawing a 429 from a server that enforces its own limit, following the
// lower limit its headers announce.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/chat_completion.h"
#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace steps {
namespace {

using nlohmann::json;
using test_support::Has;
using test_support::RunSteps;
using test_support::TempDir;
using Steady = std::chrono::steady_clock;

// 200 connections arrive at once, and the library listens with a backlog
// of 5: connection attempts past it are dropped and retried by the kernel
// 1 s, 3 s, 7 s, 15 s... later. Listening again on the bound socket sets
// a backlog that takes them all.
void RaiseBacklog(int port) {
  for (int fd = 0; fd < 1024; ++fd) {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    int listening = 0;
    socklen_t optlen = sizeof listening;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
        addr.sin_family == AF_INET && ntohs(addr.sin_port) == port &&
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &optlen) == 0 &&
        listening) {
      listen(fd, 1024);
    }
  }
}

// A model server on 127.0.0.1 with up to 256 requests held at once; each
// request is logged (arrival time) before `answer` decides its reply.
class ModelServer {
 public:
  using Answer = std::function<void(int index, httplib::Response& res)>;
  explicit ModelServer(Answer answer) : answer_(std::move(answer)) {
    server_.new_task_queue = [] { return new httplib::ThreadPool(256); };
    // One request per connection: stopping never waits for idle ones.
    server_.set_keep_alive_max_count(1);
    server_.Post("/v1/chat/completions",
                 [this](const httplib::Request&, httplib::Response& res) {
                   int index;
                   {
                     std::lock_guard<std::mutex> lock(mu_);
                     index = static_cast<int>(arrivals_.size());
                     arrivals_.push_back(Steady::now());
                   }
                   answer_(index, res);
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    RaiseBacklog(port_);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~ModelServer() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  std::vector<Steady::time_point> arrivals() {
    std::lock_guard<std::mutex> lock(mu_);
    return arrivals_;
  }

 private:
  Answer answer_;
  httplib::Server server_;
  std::thread thread_;
  std::mutex mu_;
  std::vector<Steady::time_point> arrivals_;
  int port_ = 0;
};

void Reply200(httplib::Response& res) {
  res.set_content(
      test_support::ChatAnswer({{"role", "assistant"}, {"content", "done"}})
          .dump(),
      "application/json");
}

void Reply500(httplib::Response& res) {
  res.status = 500;
  res.set_content(R"({"error":{"message":"the host is down"}})",
                  "application/json");
}

// `cells` cells of one agent step, all in flight together.
std::string AcrossPipeline(int port, int cells, const std::string& agent_keys,
                           const std::string& source_keys = "") {
  std::string values;
  for (int i = 1; i <= cells; ++i) {
    values += (i > 1 ? ", " : "") + std::to_string(i);
  }
  return "agents:\n"
         "- name: a\n"
         "  source: {model: openai/m, base_url: \"http://127.0.0.1:" +
         std::to_string(port) + "/v1\"" + source_keys +
         "}\n"
         "  timeout: 2m\n" +
         agent_keys +
         "jobs:\n"
         "- name: j\n"
         "  plan:\n"
         "  - across:\n"
         "    - var: n\n"
         "      values: [" +
         values +
         "]\n"
         "      max_in_flight: " +
         std::to_string(cells) +
         "\n"
         "    do:\n"
         "    - agent: a\n"
         "      messages: [\"cell {{ .n }}\"]\n";
}

// The outcomes of the run's agent steps, from `steps show --json`.
std::map<std::string, int> AgentOutcomes(const std::string& dir) {
  auto show = RunSteps(dir, "show --json --state-dir state");
  std::map<std::string, int> out;
  json run = json::parse(show.out, nullptr, false);
  std::function<void(const json&)> walk = [&](const json& j) {
    if (j.is_object()) {
      if (j.value("kind", "") == "agent" && j.contains("outcome")) {
        ++out[j["outcome"].get<std::string>()];
      }
      for (const auto& [k, v] : j.items()) walk(v);
    } else if (j.is_array()) {
      for (const auto& v : j) walk(v);
    }
  };
  walk(run);
  return out;
}

int Lines(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos;
       at = text.find(part, at + 1)) {
    ++n;
  }
  return n;
}

// The first `n` requests are held until all `n` have arrived (bounded at
// 60 s), so that they are in flight together; then every request fails.
class HeldOutage {
 public:
  explicit HeldOutage(int n) : n_(n) {}
  void operator()(int index, httplib::Response& res) {
    if (index < n_) {
      std::unique_lock<std::mutex> lock(mu_);
      ++arrived_;
      cv_.notify_all();
      cv_.wait_for(lock, std::chrono::seconds(60),
                   [&] { return arrived_ >= n_; });
    }
    Reply500(res);
  }

 private:
  const int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
};

TEST(ProviderGuardCliTest, ARetryBudgetCapsTheRetriesOfAnOutage) {
  constexpr int kCells = 100;
  // Without a budget: every cell makes its 3 attempts.
  {
    TempDir dir;
    HeldOutage outage(kCells);
    ModelServer server(std::ref(outage));
    dir.Write("p.yaml",
              AcrossPipeline(server.port(), kCells, "  attempts: 3\n"));
    auto run = RunSteps(dir.path(), "run p.yaml --plain --state-dir state",
                        {.prefix = "OPENAI_API_KEY=k"});
    EXPECT_EQ(run.exit_code, 2) << run.out;
    EXPECT_EQ(server.arrivals().size(), 3u * kCells);
  }
  // With retry_budget {ratio: 0.2, min_retries: 3}: 100 first requests
  // and at most 20 retries.
  TempDir dir;
  HeldOutage outage(kCells);
  ModelServer server(std::ref(outage));
  dir.Write("p.yaml",
            AcrossPipeline(server.port(), kCells,
                           "  attempts: 3\n"
                           "  retry_budget: {ratio: 0.2, min_retries: 3}\n"));
  auto run = RunSteps(dir.path(), "run p.yaml --plain --state-dir state",
                      {.prefix = "OPENAI_API_KEY=k"});
  EXPECT_EQ(run.exit_code, 2) << run.out;
  const size_t requests = server.arrivals().size();
  EXPECT_GE(requests, static_cast<size_t>(kCells));
  EXPECT_LE(requests, 120u);
  EXPECT_GE(Lines(run.out, "WRN agent.retry_denied agent=a model=m"), 80)
      << run.out;
  // Every cell still ends errored, as its failure was.
  EXPECT_EQ(AgentOutcomes(dir.path()),
            (std::map<std::string, int>{{"errored", kCells}}));
  // steps show counts each step's retries, made and denied.
  auto show = RunSteps(dir.path(), "show --state-dir state");
  EXPECT_TRUE(Has(show.out, "retries denied")) << show.out;
}

TEST(ProviderGuardCliTest, ACircuitHoldsRequestsUntilAProbeFindsTheHostBack) {
  // Down for the first 4 requests, then back.
  ModelServer server([](int index, httplib::Response& res) {
    if (index < 4) {
      Reply500(res);
    } else {
      Reply200(res);
    }
  });
  TempDir dir;
  std::string p =
      AcrossPipeline(server.port(), 6,
                     "  attempts: 1\n"
                     "  circuit: {failures: 3, probe_after: 300ms}\n");
  // One cell at a time.
  p.replace(p.find("max_in_flight: 6"), 16, "max_in_flight: 1");
  dir.Write("p.yaml", p);
  auto run = RunSteps(dir.path(), "run p.yaml --plain --state-dir state",
                      {.prefix = "OPENAI_API_KEY=k"});
  EXPECT_EQ(run.exit_code, 2) << run.out;
  const auto at = server.arrivals();
  ASSERT_EQ(at.size(), 6u) << run.out;
  using std::chrono::milliseconds;
  // Cells 1-3 fail and open the circuit; cell 4 waits 300 ms and is the
  // probe, which fails; cell 5 waits 300 ms more, is the probe, and closes
  // it; cell 6 goes at once.
  EXPECT_GE(at[3] - at[2], milliseconds(300));
  EXPECT_GE(at[4] - at[3], milliseconds(300));
  EXPECT_EQ(Lines(run.out, "WRN provider.circuit_open host=127.0.0.1:"), 1)
      << run.out;
  EXPECT_EQ(Lines(run.out, "INF provider.circuit_closed host=127.0.0.1:"), 1)
      << run.out;
  EXPECT_EQ(AgentOutcomes(dir.path()),
            (std::map<std::string, int>{{"errored", 4}, {"succeeded", 2}}));
}

TEST(ProviderGuardCliTest, AnOpenCircuitHandsOverToTheFallbackAtOnce) {
  ModelServer down([](int, httplib::Response& res) { Reply500(res); });
  ModelServer up([](int, httplib::Response& res) { Reply200(res); });
  TempDir dir;
  // The probe would go in 60 s, past every cell's 10 s deadline: the
  // circuit refuses at once and the fallback answers.
  std::string p = AcrossPipeline(
      down.port(), 3,
      "  fallback: [{model: openai/m, base_url: \"http://127.0.0.1:" +
          std::to_string(up.port()) +
          "/v1\"}]\n"
          "  attempts: 1\n"
          "  circuit: {failures: 1, probe_after: 60s}\n");
  p.replace(p.find("timeout: 2m"), 11, "timeout: 10s");
  p.replace(p.find("max_in_flight: 3"), 16, "max_in_flight: 1");
  dir.Write("p.yaml", p);
  const auto start = Steady::now();
  auto run = RunSteps(dir.path(), "run p.yaml --plain --state-dir state",
                      {.prefix = "OPENAI_API_KEY=k"});
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_LT(Steady::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(down.arrivals().size(), 1u);
  EXPECT_EQ(up.arrivals().size(), 3u);
  EXPECT_EQ(Lines(run.out, "the circuit to 127.0.0.1:"), 2) << run.out;
}

// A server that enforces `per_second` requests a second (a bucket of 5,
// refilled evenly) and answers 429 past it; it announces `announced` as
// its limit per minute.
class LimitedServer {
 public:
  LimitedServer(double per_second, int announced)
      : per_second_(per_second), announced_(announced) {}
  void operator()(int, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Steady::now();
    if (last_) {
      const double s = std::chrono::duration<double>(now - *last_).count();
      tokens_ = std::min(kBucket, tokens_ + s * per_second_);
    }
    last_ = now;
    res.set_header("x-ratelimit-limit-requests", std::to_string(announced_));
    if (tokens_ < 1) {
      ++refused_;
      res.status = 429;
      res.set_header("retry-after-ms", "50");
      res.set_content(R"({"error":{"message":"rate limited"}})",
                      "application/json");
      return;
    }
    tokens_ -= 1;
    res.set_header("x-ratelimit-remaining-requests",
                   std::to_string(static_cast<int>(tokens_)));
    res.set_header("x-ratelimit-reset-requests",
                   std::to_string(static_cast<int>(1000 / per_second_)) + "ms");
    Reply200(res);
  }
  int refused() {
    std::lock_guard<std::mutex> lock(mu_);
    return refused_;
  }

 private:
  static constexpr double kBucket = 5;
  const double per_second_;
  const int announced_;
  std::mutex mu_;
  double tokens_ = kBucket;
  std::optional<Steady::time_point> last_;
  int refused_ = 0;
};

TEST(ProviderGuardCliTest, RateLimitedCellsNeverDrawA429) {
  constexpr int kCells = 200;
  // Without a rate limit, 200 cells at once overrun the server.
  {
    LimitedServer limited(100, 6000);
    ModelServer server(std::ref(limited));
    TempDir dir;
    dir.Write("p.yaml", AcrossPipeline(server.port(), kCells, ""));
    RunSteps(dir.path(), "run p.yaml --plain --state-dir state",
             {.prefix = "OPENAI_API_KEY=k"});
    EXPECT_GT(limited.refused(), 0);
  }
  // 6000 a minute is the server's 100 a second: none refused.
  LimitedServer limited(100, 6000);
  ModelServer server(std::ref(limited));
  TempDir dir;
  dir.Write("p.yaml", AcrossPipeline(server.port(), kCells, "",
                                     ", rate_limit: {requests_per_minute: "
                                     "6000}"));
  auto run = RunSteps(dir.path(), "run p.yaml --plain --state-dir state",
                      {.prefix = "OPENAI_API_KEY=k"});
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(limited.refused(), 0);
  EXPECT_EQ(server.arrivals().size(), static_cast<size_t>(kCells));
  EXPECT_GT(Lines(run.out, "INF provider.rate_wait agent=a host=127.0.0.1:"),
            0);
}

TEST(ProviderGuardCliTest, RateLimitsFollowALowerLimitTheServerAnnounces) {
  constexpr int kCells = 200;
  // Declared 6000 a minute; the server allows and announces 3000.
  LimitedServer limited(50, 3000);
  ModelServer server(std::ref(limited));
  TempDir dir;
  dir.Write("p.yaml", AcrossPipeline(server.port(), kCells, "",
                                     ", rate_limit: {requests_per_minute: "
                                     "6000}"));
  auto run = RunSteps(dir.path(), "run p.yaml --plain --state-dir state",
                      {.prefix = "OPENAI_API_KEY=k"});
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(limited.refused(), 0);
  const auto at = server.arrivals();
  ASSERT_EQ(at.size(), static_cast<size_t>(kCells));
  // 200 requests at 50 a second, less the bucket's 5: at least 3.9 s.
  EXPECT_GE(at.back() - at.front(), std::chrono::milliseconds(3900));
}

}  // namespace
}  // namespace steps
