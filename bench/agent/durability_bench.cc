// What durability costs a long conversation: the same TURNS-turn tool
// conversation over loopback HTTP, recorded in a run store on disk the way
// `steps run` records it (RunRecorder: the run, the step, every turn, the
// step's end), once with the conversation's checkpoints written before
// each request and each tool call (what `steps resume` needs) and once
// without them, each turn's row written as it comes (as runs were recorded
// before conversations could be resumed).
//
//   durability_bench [TURNS] [--repeat N] [--state DIR]
//
// TURNS defaults to 200 and N to 7; the two ways alternate (with, without,
// with, ...), each in a fresh store, and the medians of CPU time (user +
// system of this process, the mock's side included) and wall time are
// printed with the cost of the checkpoints as a share of the run without
// them. DIR is where the stores go (default: the system's temporary folder;
// give a folder on the disk runs use, not tmpfs, to measure what users
// pay).
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "agent/runner.h"
#include "mock_provider/script.h"
#include "mock_provider/server.h"
#include "pipeline/observer.h"
#include "store/recorder.h"
#include "store/store.h"

namespace {

using steps::agent::AgentContext;
using steps::agent::AgentInvocation;
using steps::agent::AgentResult;
using steps::agent::AgentSource;
using SteadyClock = std::chrono::steady_clock;

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

struct Usage {
  double wall = 0;
  double cpu = 0;
  int64_t checkpoints = 0;
  int64_t writes = 0;  // Transactions during the conversation.
  double write_cpu = 0;  // Inside them (this thread's CPU time).
};

// TURNS - 1 turns that each write a small file, then an answer.
std::string Script(int turns) {
  std::string yaml = "long:\n";
  for (int i = 0; i + 1 < turns; ++i) {
    yaml += "  - call: {name: write_file, arguments: {path: f" +
            std::to_string(i % 10) + ".txt, content: \"" +
            std::string(200, static_cast<char>('a' + i % 26)) + "\"}}\n";
  }
  yaml += "  - say: done\n";
  return yaml;
}

std::string MakeDir(const std::string& parent, const char* name) {
  std::string tmpl = (std::filesystem::path(parent) / name).string() +
                     "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::perror("mkdtemp");
    std::exit(1);
  }
  return tmpl;
}

// One conversation recorded in a fresh store under `parent`.
Usage RunOnce(const std::string& parent, int turns, bool checkpoints) {
  const std::string state = MakeDir(parent, "durability-state");
  const std::string work = MakeDir(parent, "durability-work");
  auto opened = steps::store::Store::Open(steps::store::StorePath(state));
  if (!opened.ok()) {
    std::fprintf(stderr, "store: %s\n", opened.status().message().c_str());
    std::exit(1);
  }
  std::unique_ptr<steps::store::Store> store = std::move(*opened);
  steps::store::RunRecorder recorder(*store);

  auto script = steps::ParseMockScriptText(Script(turns));
  if (!script.ok()) std::exit(1);
  auto engine = std::make_shared<steps::MockEngine>(*script);
  steps::MockHttpServer server(engine);
  if (!server.Start().ok()) std::exit(1);

  AgentInvocation inv;
  inv.agent_name = "bench";
  inv.step_name = "long";
  inv.messages = {"Write the files."};
  inv.tools = {"write_file"};
  inv.timeout = std::chrono::minutes(30);
  inv.working_dir = work;
  AgentSource source;
  source.model = "openai/long";
  source.base_url = server.base_url();
  inv.sources = {source};
  auto runner = steps::agent::MakeAgentRunner({});

  steps::pipeline::RunRecord run;
  run.id = "20261201-000000-0001";
  run.file = "bench.yaml";
  run.started = steps::RealClock().WallNow();
  steps::pipeline::StepRef ref;
  ref.id = "j:1";
  ref.job = "j";
  ref.name = "long";
  ref.kind = steps::pipeline::StepKind::kAgent;

  Usage u;
  AgentContext ctx;
  ctx.events.on_turn = [&](const steps::agent::AgentTurnRecord& t) {
    recorder.OnAgentTurn(ref, t);
    // Without checkpoints, each turn row is written as it comes, as runs
    // were recorded before conversations could be resumed; with them, it
    // goes with the next durable point.
    if (!checkpoints) {
      const double before = ThreadCpuSeconds();
      recorder.WriteReportedTurns(ref);
      u.write_cpu += ThreadCpuSeconds() - before;
      ++u.writes;
    }
  };
  if (checkpoints) {
    ctx.events.on_checkpoints =
        [&](const std::vector<steps::agent::ConversationCheckpoint>& cps) {
          const double before = ThreadCpuSeconds();
          recorder.OnCheckpoints(ref, cps);
          u.write_cpu += ThreadCpuSeconds() - before;
          u.checkpoints += static_cast<int64_t>(cps.size());
          ++u.writes;
        };
  }
  const double cpu0 = CpuSeconds();
  const auto t0 = SteadyClock::now();
  recorder.OnRunStart(run);
  recorder.OnJobStart("j", std::nullopt);
  recorder.OnStepStart(ref, std::nullopt);
  AgentResult result = runner->Run(inv, ctx);
  steps::pipeline::StepRecord step;
  step.ref = ref;
  step.outcome = result.outcome;
  step.output = result.answer;
  step.started = run.started;
  step.agent = result;
  recorder.OnStepEnd(step);
  u.wall = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  u.cpu = CpuSeconds() - cpu0;
  server.Stop();
  if (result.outcome != steps::Outcome::kSucceeded || result.turns != turns) {
    std::fprintf(stderr, "the conversation did not succeed: %s\n",
                 result.error.c_str());
    std::exit(1);
  }
  store.reset();
  std::error_code ec;
  std::filesystem::remove_all(state, ec);
  std::filesystem::remove_all(work, ec);
  return u;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  int turns = 200;
  int repeat = 7;
  std::string parent = std::filesystem::temp_directory_path().string();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--repeat" && i + 1 < argc) {
      repeat = std::atoi(argv[++i]);
    } else if (a == "--state" && i + 1 < argc) {
      parent = argv[++i];
    } else if (!a.empty() && a[0] != '-') {
      turns = std::atoi(a.c_str());
    } else {
      std::fprintf(stderr,
                   "usage: durability_bench [TURNS] [--repeat N] "
                   "[--state DIR]\n");
      return 64;
    }
  }
  if (turns < 2 || repeat < 1) {
    std::fprintf(stderr, "durability_bench: TURNS >= 2, N >= 1\n");
    return 64;
  }
  RunOnce(parent, 10, true);  // Warm up: libcurl, the page cache.
  std::vector<double> cpu_with, cpu_without, wall_with, wall_without,
      writes_with, writes_without;
  int64_t checkpoints = 0, transactions = 0, transactions_without = 0;
  for (int i = 0; i < repeat; ++i) {
    Usage with = RunOnce(parent, turns, true);
    Usage without = RunOnce(parent, turns, false);
    cpu_with.push_back(with.cpu);
    wall_with.push_back(with.wall);
    cpu_without.push_back(without.cpu);
    wall_without.push_back(without.wall);
    writes_with.push_back(with.write_cpu);
    writes_without.push_back(without.write_cpu);
    checkpoints = with.checkpoints;
    transactions = with.writes;
    transactions_without = without.writes;
  }
  const double wc = Median(writes_with), wn = Median(writes_without);
  const double cw = Median(cpu_with), co = Median(cpu_without);
  const double ww = Median(wall_with), wo = Median(wall_without);
  std::printf(
      "durability: %d-turn conversation over loopback HTTP, recorded in %s, "
      "medians of %d runs each\n",
      turns, parent.c_str(), repeat);
  std::printf(
      "  with checkpoints (%lld in %lld transactions)  cpu %7.3f s  wall "
      "%7.3f s\n",
      static_cast<long long>(checkpoints), static_cast<long long>(transactions),
      cw, ww);
  std::printf("  without checkpoints                          cpu %7.3f s  "
              "wall %7.3f s\n",
              co, wo);
  std::printf("  checkpoints cost %+.1f%% cpu, %+.1f%% wall\n",
              (cw - co) / co * 100, (ww - wo) / wo * 100);
  std::printf(
      "  writes during the conversation: %.4f s cpu in %lld transactions "
      "with checkpoints, %.4f s in %lld without\n",
      wc, static_cast<long long>(transactions), wn,
      static_cast<long long>(transactions_without));
  std::printf("  durability writes cost %.1f%% of the run without them\n",
              (wc - wn) / co * 100);
  std::printf("{\"turns\":%d,\"repeat\":%d,\"cpu_with\":%.4f,"
              "\"cpu_without\":%.4f,\"wall_with\":%.4f,\"wall_without\":%.4f,"
              "\"cpu_cost\":%.4f,\"wall_cost\":%.4f,\"writes_with\":%.4f,"
              "\"writes_without\":%.4f,\"durability_cost\":%.4f}\n",
              turns, repeat, cw, co, ww, wo, (cw - co) / co, (ww - wo) / wo,
              wc, wn, (wc - wn) / co);
  return 0;
}
