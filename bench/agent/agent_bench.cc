// The conversation engine against the mock provider.
//
//   agent_bench long [TURNS]            a TURNS-turn tool conversation
//                                        (default 200) over loopback HTTP,
//                                        next to the transport floor, and
//                                        the same in process
//   agent_bench fanout [N] [--http]      N concurrent 3-turn conversations
//                                        (default 1000), in process or over
//                                        loopback HTTP
//
// Each scenario prints wall time, CPU time (user + system, this process:
// the mock's side included) and peak resident memory. Run one scenario per
// process: the peak is the process's high-water mark.
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/runner.h"
#include "core/fiber.h"
#include "mock_provider/script.h"
#include "mock_provider/server.h"
#include "providers/curl_transport.h"

namespace {

using steps::agent::AgentContext;
using steps::agent::AgentInvocation;
using steps::agent::AgentResult;
using steps::agent::AgentRunnerOptions;
using steps::agent::AgentSource;
using steps::agent::ConversationRunner;
using steps::agent::MakeAgentRunner;
using SteadyClock = std::chrono::steady_clock;

struct Usage {
  double wall = 0;  // Seconds.
  double cpu = 0;   // Seconds, user + system.
};

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

long PeakRssKib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

long CurrentRssKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return 0;
}

template <typename Fn>
Usage Measure(Fn fn) {
  double cpu0 = CpuSeconds();
  auto t0 = SteadyClock::now();
  fn();
  Usage u;
  u.wall = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  u.cpu = CpuSeconds() - cpu0;
  return u;
}

steps::MockScript Script(const std::string& yaml) {
  auto script = steps::ParseMockScriptText(yaml);
  if (!script.ok()) {
    std::fprintf(stderr, "bad script: %s\n", script.status().message().c_str());
    std::exit(1);
  }
  return *script;
}

std::string MakeWorkDir() {
  std::string tmpl =
      (std::filesystem::temp_directory_path() / "agent-bench-XXXXXX").string();
  return mkdtemp(tmpl.data());
}

// TURNS - 1 tool turns reading ten 512-byte files in turn, then an answer.
std::string LongScript(int turns) {
  std::string yaml = "long:\n";
  for (int i = 0; i + 1 < turns; ++i) {
    yaml += "  - call: {name: read_file, arguments: {path: f" +
            std::to_string(i % 10) + ".txt}}\n";
  }
  yaml += "  - say: done\n";
  return yaml;
}

bool Check(const AgentResult& r, int turns) {
  if (r.outcome != steps::Outcome::kSucceeded || r.turns != turns) {
    std::fprintf(stderr, "conversation did not succeed: %s (turns %d)\n",
                 r.error.c_str(), r.turns);
    return false;
  }
  return true;
}

int Long(int turns) {
  std::string dir = MakeWorkDir();
  for (int i = 0; i < 10; ++i) {
    std::ofstream(dir + "/f" + std::to_string(i) + ".txt")
        << std::string(511, static_cast<char>('a' + i)) << "\n";
  }
  AgentInvocation inv;
  inv.agent_name = "bench";
  inv.step_name = "long";
  inv.messages = {"Read the files."};
  inv.tools = {"read_file"};
  inv.timeout = std::chrono::minutes(30);
  inv.working_dir = dir;
  long rss0 = CurrentRssKib();

  // Over loopback HTTP, through libcurl.
  auto engine = std::make_shared<steps::MockEngine>(Script(LongScript(turns)));
  steps::MockHttpServer server(engine);
  if (!server.Start().ok()) return 1;
  AgentSource source;
  source.model = "openai/long";
  source.base_url = server.base_url();
  inv.sources = {source};
  auto runner = MakeAgentRunner({});
  AgentResult result;
  Usage http = Measure([&] { result = runner->Run(inv, AgentContext{}); });
  if (!Check(result, turns)) return 1;
  std::vector<steps::MockRequestRecord> sent = engine->Requests();
  size_t bytes = 0;
  for (const auto& r : sent) bytes += r.body.size();
  server.Stop();

  // The floor: the same request bodies POSTed by the same transport to a
  // fresh server with the same script, with no engine around them (no
  // message building, no JSON encoding or decoding, no tools).
  auto floor_engine =
      std::make_shared<steps::MockEngine>(Script(LongScript(turns)));
  steps::MockHttpServer floor_server(floor_engine);
  if (!floor_server.Start().ok()) return 1;
  steps::CurlTransport transport;
  Usage floor = Measure([&] {
    for (const auto& r : sent) {
      steps::HttpRequest request;
      request.url = floor_server.base_url() + "/chat/completions";
      request.headers = {{"Content-Type", "application/json"},
                         {"X-Steps-Agent", "bench"}};
      request.body = r.body;
      auto response = transport.Post(request, steps::TransferOptions{});
      if (!response.ok() || response.response().status != 200) {
        std::fprintf(stderr, "floor request failed\n");
        std::exit(1);
      }
    }
  });
  floor_server.Stop();

  // In process: no socket, no HTTP; the mock's parsing remains.
  AgentRunnerOptions options;
  options.mock = std::make_shared<steps::MockEngine>(Script(LongScript(turns)));
  auto in_process_runner = MakeAgentRunner(std::move(options));
  source.base_url.reset();
  inv.sources = {source};
  Usage in_process =
      Measure([&] { result = in_process_runner->Run(inv, AgentContext{}); });
  if (!Check(result, turns)) return 1;

  std::printf(
      "long conversation: %d turns, %zu request bytes in all (last "
      "request %zu bytes)\n",
      turns, bytes, sent.back().body.size());
  std::printf(
      "  engine over HTTP   wall %7.3f s  cpu %7.3f s  %7.1f us cpu/turn\n",
      http.wall, http.cpu, http.cpu / turns * 1e6);
  std::printf(
      "  transport floor    wall %7.3f s  cpu %7.3f s  %7.1f us cpu/turn\n",
      floor.wall, floor.cpu, floor.cpu / turns * 1e6);
  std::printf(
      "  engine in process  wall %7.3f s  cpu %7.3f s  %7.1f us cpu/turn\n",
      in_process.wall, in_process.cpu, in_process.cpu / turns * 1e6);
  std::printf("  engine share over HTTP: %.1f us cpu/turn above the floor\n",
              (http.cpu - floor.cpu) / turns * 1e6);
  std::printf(
      "  rss before %ld KiB, peak %ld KiB (the mock keeps every "
      "request body: %zu KiB of them, three times)\n",
      rss0, PeakRssKib(), bytes / 1024);
  std::filesystem::remove_all(dir);
  return 0;
}

int Fanout(int n, bool http) {
  std::string dir = MakeWorkDir();
  std::ofstream(dir + "/a.txt") << "alpha\n";
  std::ofstream(dir + "/b.txt") << "beta\n";
  // Every conversation has its own script (keyed by its agent name): two
  // tool turns and an answer, each answer 1s late so that all of them are
  // in flight at once.
  std::string yaml;
  for (int i = 0; i < n; ++i) {
    yaml += "a" + std::to_string(i) +
            ":\n"
            "  - {delay: 1s, call: {name: read_file, arguments: {path: "
            "a.txt}}}\n"
            "  - {delay: 1s, call: {name: read_file, arguments: {path: "
            "b.txt}}}\n"
            "  - {delay: 1s, say: done}\n";
  }
  auto engine = std::make_shared<steps::MockEngine>(Script(yaml));
  std::unique_ptr<steps::MockHttpServer> server;
  AgentSource source;
  source.model = "openai/fan";
  AgentRunnerOptions options;
  if (http) {
    server = std::make_unique<steps::MockHttpServer>(engine);
    if (!server->Start().ok()) return 1;
    source.base_url = server->base_url();
  } else {
    options.mock = engine;
  }
  auto runner = MakeAgentRunner(std::move(options));
  long rss0 = CurrentRssKib();

  std::atomic<int> failed{0};
  std::atomic<long> sampled_peak{0};
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done) {
      long now = CurrentRssKib();
      if (now > sampled_peak) sampled_peak = now;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  Usage u = Measure([&] {
    // As the engine runs an across: each conversation a fiber of the
    // shared pool.
    steps::FiberPool& pool = steps::SharedFiberPool();
    for (int i = 0; i < n; ++i) {
      pool.Spawn([&, i] {
        AgentInvocation inv;
        inv.agent_name = "a" + std::to_string(i);
        inv.step_name = "cell";
        inv.sources = {source};
        inv.messages = {"Read both files."};
        inv.tools = {"read_file"};
        inv.timeout = std::chrono::minutes(30);
        inv.working_dir = dir;
        AgentResult r = runner->Run(inv, AgentContext{});
        if (!Check(r, 3)) failed.fetch_add(1);
      });
    }
    pool.Join();
  });
  done = true;
  sampler.join();
  if (server) server->Stop();
  std::printf(
      "fanout: %d concurrent 3-turn conversations (%s), answers 1s "
      "late\n",
      n, http ? "loopback HTTP" : "in process");
  std::printf(
      "  wall %.3f s (3 s is the scripted floor)  cpu %.3f s  "
      "%.1f us cpu/conversation\n",
      u.wall, u.cpu, u.cpu / n * 1e6);
  std::printf(
      "  rss before %ld KiB, sampled peak %ld KiB, peak %ld KiB  "
      "failed %d\n",
      rss0, sampled_peak.load(), PeakRssKib(), failed.load());
  std::filesystem::remove_all(dir);
  return failed > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string what = argc > 1 ? argv[1] : "long";
  if (what == "long") return Long(argc > 2 ? std::atoi(argv[2]) : 200);
  if (what == "fanout") {
    int n = 1000;
    bool http = false;
    for (int i = 2; i < argc; ++i) {
      if (std::string(argv[i]) == "--http") {
        http = true;
      } else {
        n = std::atoi(argv[i]);
      }
    }
    return Fanout(n, http);
  }
  std::fprintf(stderr,
               "usage: agent_bench long [TURNS] | fanout [N] [--http]\n");
  return 64;
}
