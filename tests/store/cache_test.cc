// The step cache through the executor: real pipelines, real subprocesses,
// the store as `steps run` wires it. A step's runs are counted by what it
// appends to a file outside the state folder.
#include "store/cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <future>

#include "pipeline/executor.h"
#include "pipeline/loader.h"
#include "process/local_launcher.h"
#include "store/listing.h"
#include "store/reader.h"
#include "store/recorder.h"
#include "store_test_util.h"

namespace steps::store {
namespace {

using store_testing::ReadFile;
using store_testing::TempDir;
using store_testing::WriteFile;

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \n");
  size_t e = s.find_last_not_of(" \n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Answers every conversation at once; counts them. With `write`, the agent
// also writes a file into its working folder (the job's workspace).
class CountingAgents : public agent::AgentRunner {
 public:
  agent::AgentResult Run(const agent::AgentInvocation& inv,
                         const agent::AgentContext&) override {
    int n = ++calls;
    agent::AgentResult r;
    r.outcome = Outcome::kSucceeded;
    r.answer = "answer " + std::to_string(n);
    r.turns = 1;
    r.provider_requests = 1;
    if (write) WriteFile(inv.working_dir + "/notes.txt", r.answer);
    return r;
  }
  std::atomic<int> calls{0};
  bool write = false;
};

class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = Store::Open(StorePath(state_.path()));
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    store_ = std::move(*opened);
  }

  // Runs every job of `yaml` in the shared state folder. `lookups` false is
  // --no-cache.
  pipeline::RunRecord Run(const std::string& yaml, bool lookups = true) {
    std::string text = yaml;
    for (size_t at; (at = text.find("$COUNT")) != std::string::npos;)
      text.replace(at, 6, count_path_);
    pipeline::LoadResult r = pipeline::LoadPipelineText(text, "test.yaml");
    EXPECT_TRUE(r.pipeline) << r.diagnostics.FormatAll();
    if (!r.pipeline) return {};
    pipeline::ResolvedPlan plan(r.pipeline);
    pipeline::ExecutorOptions opts;
    opts.launcher = &launcher_;
    opts.agents = &agents_;
    opts.state_dir = state_.path();
    opts.run_id = pipeline::NewRunId(RealClock());
    RunRecorder recorder(*store_);
    StoreStepCache cache(*store_, CacheDir(state_.path()), opts.run_id,
                         lookups);
    opts.observer = &recorder;
    opts.cache = &cache;
    pipeline::Executor ex(plan, opts);
    return ex.Run({});
  }

  // How many times tasks appended to the count file.
  int Runs() {
    std::string text = ReadFile(count_path_);
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  }

  static const pipeline::StepRecord* Step(const pipeline::RunRecord& run,
                                          const std::string& name) {
    for (const auto& job : run.jobs) {
      for (const auto& s : job.steps) {
        if (s.ref.name == name) return &s;
      }
    }
    return nullptr;
  }
  static bool Cached(const pipeline::RunRecord& run, const std::string& name) {
    const pipeline::StepRecord* s = Step(run, name);
    EXPECT_NE(s, nullptr) << name;
    return s && s->cached;
  }

  TempDir state_;
  TempDir outside_;
  std::string count_path_ = outside_ / "count";
  std::unique_ptr<Store> store_;
  LocalProcessLauncher launcher_;
  CountingAgents agents_;
};

constexpr const char* kHello = R"(
jobs:
- name: build
  plan:
  - task: hello
    run: echo run >> $COUNT; echo hello
)";

TEST_F(CacheTest, AnUnchangedTaskIsNotRunAgain) {
  pipeline::RunRecord first = Run(kHello);
  EXPECT_FALSE(Cached(first, "hello"));
  EXPECT_EQ(Runs(), 1);
  pipeline::RunRecord second = Run(kHello);
  ASSERT_EQ(second.jobs.size(), 1u);
  EXPECT_EQ(second.jobs[0].outcome, Outcome::kSucceeded);
  EXPECT_TRUE(Cached(second, "hello"));
  EXPECT_EQ(Runs(), 1);
  const pipeline::StepRecord* s = Step(second, "hello");
  EXPECT_EQ(Trim(s->output), "hello");
  ASSERT_EQ(s->attempts.size(), 1u);
  EXPECT_EQ(s->attempts[0].outcome, Outcome::kSucceeded);
  EXPECT_EQ(s->identity, Step(first, "hello")->identity);

  // The listing says so, and names where the result came from.
  Result<StoredRun> stored = LoadRun(*store_, second.id);
  ASSERT_TRUE(stored.ok());
  const std::string listing = FormatRun(*stored);
  EXPECT_NE(listing.find("(attempt 1/1)  cached   "), std::string::npos)
      << listing;
  EXPECT_NE(listing.find("Cached from: run " + first.id), std::string::npos)
      << listing;
}

TEST_F(CacheTest, NoCacheRunsEverythingAndStillRemembers) {
  Run(kHello);
  pipeline::RunRecord forced = Run(kHello, /*lookups=*/false);
  EXPECT_FALSE(Cached(forced, "hello"));
  EXPECT_EQ(Runs(), 2);
  EXPECT_TRUE(Cached(Run(kHello), "hello"));
  EXPECT_EQ(Runs(), 2);
}

TEST_F(CacheTest, AFailedStepIsNeverRemembered) {
  const char* kFails = R"(
jobs:
- name: build
  plan:
  - task: flaky
    run: echo run >> $COUNT; exit 1
)";
  Run(kFails);
  pipeline::RunRecord again = Run(kFails);
  EXPECT_FALSE(Cached(again, "flaky"));
  EXPECT_EQ(Runs(), 2);
}

TEST_F(CacheTest, ChangingTheCommandOrEnvironmentRunsTheStep) {
  Run(kHello);
  pipeline::RunRecord changed = Run(R"(
jobs:
- name: build
  plan:
  - task: hello
    run: echo run >> $COUNT; echo hello world
)");
  EXPECT_FALSE(Cached(changed, "hello"));
  pipeline::RunRecord env = Run(R"(
jobs:
- name: build
  plan:
  - task: hello
    env: { GREETING: hi }
    run: echo run >> $COUNT; echo hello
)");
  EXPECT_FALSE(Cached(env, "hello"));
  EXPECT_EQ(Runs(), 3);
}

TEST_F(CacheTest, TimeoutAttemptsAndRetryNeverInvalidate) {
  Run(kHello);
  for (const char* dial :
       {"    timeout: 30s\n", "    attempts: 3\n",
        "    timeout: 10s\n    retry: { max_attempts: 4, backoff: linear, "
        "base_delay_ms: 10 }\n"}) {
    pipeline::RunRecord r = Run(std::string(kHello) + dial);
    EXPECT_TRUE(Cached(r, "hello")) << dial;
  }
  EXPECT_EQ(Runs(), 1);
}

TEST_F(CacheTest, OutputFoldersAreRestoredForLaterSteps) {
  const char* kChain = R"(
jobs:
- name: build
  plan:
  - task: make
    outputs: [out]
    run: echo run >> $COUNT; echo built > out/result.txt
  - task: use
    inputs: [out]
    run: echo run >> $COUNT; cat out/result.txt
    assert: { stdout: built }
)";
  Run(kChain);
  EXPECT_EQ(Runs(), 2);
  pipeline::RunRecord second = Run(kChain);
  EXPECT_TRUE(Cached(second, "make"));
  EXPECT_TRUE(Cached(second, "use"));
  EXPECT_EQ(Runs(), 2);
  // The restored folder is in the new run's workspace.
  EXPECT_EQ(ReadFile(state_ /
                     ("runs/" + second.id + "/build/artifacts/out/result.txt")),
            "built\n");
}

// A step's cache folder holds its outputs; a step without outputs is all in
// its row, and gets no folder.
TEST_F(CacheTest, OnlyAStepWithOutputsGetsAFolderInTheCache) {
  const char* kTwo = R"(
jobs:
- name: build
  plan:
  - task: plain
    run: echo run >> $COUNT; echo plain
  - task: make
    outputs: [out]
    run: echo run >> $COUNT; echo built > out/result.txt
)";
  Run(kTwo);
  size_t folders = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(CacheDir(state_.path()))) {
    EXPECT_TRUE(e.is_directory()) << e.path();
    ++folders;
  }
  EXPECT_EQ(folders, 1u) << "only `make` keeps a folder";
  pipeline::RunRecord second = Run(kTwo);
  EXPECT_TRUE(Cached(second, "plain"));
  EXPECT_EQ(Trim(Step(second, "plain")->output), "plain");
  EXPECT_TRUE(Cached(second, "make"));
  EXPECT_EQ(Runs(), 2);
}

TEST_F(CacheTest, ChangedInputContentsRunTheStep) {
  // `source` always runs (it writes to the workspace directly, so it is
  // never remembered); `use` reads what it wrote.
  const std::string src = outside_ / "src.txt";
  const std::string yaml = R"(
jobs:
- name: build
  plan:
  - task: source
    run: cat )" + src + R"( > "$STEPS_ARTIFACTS/data.txt"
  - task: use
    run: echo run >> $COUNT; cat "$STEPS_ARTIFACTS/data.txt"
)";
  WriteFile(src, "one\n");
  pipeline::RunRecord first = Run(yaml);
  EXPECT_FALSE(Cached(first, "source"));
  EXPECT_TRUE(Cached(Run(yaml), "use"));
  EXPECT_FALSE(Cached(Run(yaml), "source"));
  EXPECT_EQ(Runs(), 1);
  WriteFile(src, "two\n");
  pipeline::RunRecord changed = Run(yaml);
  EXPECT_FALSE(Cached(changed, "use"));
  EXPECT_EQ(Trim(Step(changed, "use")->output), "two");
  EXPECT_EQ(Runs(), 2);
}

TEST_F(CacheTest, AcrossCellsAreCachedPerValue) {
  auto yaml = [](const std::string& values) {
    return R"(
jobs:
- name: build
  plan:
  - across:
    - var: n
      values: [)" +
           values + R"(]
    do:
    - task: cell
      run: echo run >> $COUNT; echo {{ .n | shellquote }}
)";
  };
  Run(yaml("a, b"));
  EXPECT_EQ(Runs(), 2);
  Run(yaml("a, b, c"));
  EXPECT_EQ(Runs(), 3);  // Only the new cell ran.
}

std::string AgentPipeline(const std::string& entry, const std::string& step) {
  return R"(
agents:
- name: reviewer
  source: { model: openai/model-a }
  persona: You review code.
  tools: [read_file]
)" + entry +
         R"(
jobs:
- name: review
  plan:
  - agent: reviewer
    messages: ["Review the change."]
)" + step;
}

TEST_F(CacheTest, AgentStepDialsThatNeverInvalidate) {
  Run(AgentPipeline("", ""));
  EXPECT_EQ(agents_.calls, 1);
  for (const auto& [entry, step] :
       std::vector<std::pair<std::string, std::string>>{
           {"", "    timeout: 5m\n"},
           {"  timeout: \"0\"\n", ""},
           {"", "    attempts: 5\n"},
           {"  max_context_bytes: 1000\n", ""},
           {"", "    max_context_bytes: 2000\n"},
       }) {
    pipeline::RunRecord r = Run(AgentPipeline(entry, step));
    EXPECT_TRUE(Cached(r, "reviewer")) << entry << step;
  }
  EXPECT_EQ(agents_.calls, 1);
}

TEST_F(CacheTest, AgentStepFieldsThatInvalidate) {
  Run(AgentPipeline("", ""));
  int expected = 1;
  for (const std::string& yaml : {
           AgentPipeline("", "    max_turns: 200\n"),
           AgentPipeline("  max_turns: 0\n", ""),
           std::string(R"(
agents:
- name: reviewer
  source: { model: openai/model-b }
  persona: You review code.
  tools: [read_file]
jobs:
- name: review
  plan:
  - agent: reviewer
    messages: ["Review the change."]
)"),
           std::string(R"(
agents:
- name: reviewer
  source: { model: openai/model-a }
  persona: You review code carefully.
  tools: [read_file]
jobs:
- name: review
  plan:
  - agent: reviewer
    messages: ["Review the change."]
)"),
           std::string(R"(
agents:
- name: reviewer
  source: { model: openai/model-a }
  persona: You review code.
  tools: [read_file, list_files]
jobs:
- name: review
  plan:
  - agent: reviewer
    messages: ["Review the change."]
)"),
           std::string(R"(
agents:
- name: reviewer
  source: { model: openai/model-a }
  persona: You review code.
  tools: [read_file]
jobs:
- name: review
  plan:
  - agent: reviewer
    messages: ["Review the other change."]
)"),
       }) {
    pipeline::RunRecord r = Run(yaml);
    EXPECT_FALSE(Cached(r, "reviewer")) << yaml;
    EXPECT_EQ(agents_.calls, ++expected) << yaml;
  }
}

TEST_F(CacheTest, AnAgentThatChangedTheWorkspaceIsNotRemembered) {
  agents_.write = true;
  Run(AgentPipeline("", ""));
  pipeline::RunRecord again = Run(AgentPipeline("", ""));
  EXPECT_FALSE(Cached(again, "reviewer"));
  EXPECT_EQ(agents_.calls, 2);
}

TEST_F(CacheTest, HooksAlwaysRunEvenAroundACachedStep) {
  const char* kHooked = R"(
jobs:
- name: build
  ensure: { task: tidy, run: echo run >> $COUNT }
  plan:
  - task: hello
    run: echo hello
    on_success: { task: notify, run: echo run >> $COUNT }
)";
  Run(kHooked);
  EXPECT_EQ(Runs(), 2);
  pipeline::RunRecord again = Run(kHooked);
  EXPECT_TRUE(Cached(again, "hello"));
  EXPECT_FALSE(Cached(again, "notify"));
  EXPECT_FALSE(Cached(again, "tidy"));
  EXPECT_EQ(Runs(), 4);
}

// An entry this run remembered is found while its row is still queued,
// without committing the queue: a lookup never waits for a store another
// process holds (it would hold the step past its time). Once committed, the
// entry is read from the store as any other.
TEST_F(CacheTest, AnEntryRememberedByThisRunIsFoundWhileTheStoreIsHeld) {
  CancelToken abort;
  store_->WaitForLocksUntil(abort);  // As `steps run` does.
  StoreStepCache cache(*store_, CacheDir(state_.path()), "run-1", true);
  pipeline::StepRef ref;
  ref.id = "build:1";
  ref.job = "build";
  ref.name = "hello";
  pipeline::CachedStep entry;
  entry.output = "hello\n";
  entry.exit_code = 0;
  std::optional<store_testing::HeldStore> held;
  held.emplace(StorePath(state_.path()));
  cache.Remember("key-1", ref, entry);
  auto found = std::async(std::launch::async, [&] {
    return std::make_pair(cache.Find("key-1"), cache.Find("key-2"));
  });
  // Generous: no wait at all is expected.
  const bool soon =
      found.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  held->Release();  // Without the answer from memory, Find waits for this.
  auto [hit, miss] = found.get();
  EXPECT_TRUE(soon);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->output, "hello\n");
  EXPECT_EQ(hit->from_run, "run-1");
  EXPECT_EQ(hit->from_step, "build:1");
  EXPECT_FALSE(miss.has_value());
  ASSERT_TRUE(store_->Flush().ok());
  std::optional<pipeline::CachedStep> stored = cache.Find("key-1");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->output, "hello\n");
  EXPECT_EQ(stored->exit_code, 0);
}

TEST_F(CacheTest, GetsAndPutsAreNeverCached) {
  const std::string yaml = R"(
resource_types:
- name: counter
  config:
    check: echo '[{"ref":"1"}]'
    in: echo run >> $COUNT
    out: echo run >> $COUNT
resources:
- name: thing
  type: counter
  source: {}
jobs:
- name: build
  plan:
  - get: thing
  - put: thing
)";
  Run(yaml);
  EXPECT_EQ(Runs(), 2);
  pipeline::RunRecord again = Run(yaml);
  EXPECT_EQ(Runs(), 4);
  for (const auto& s : again.jobs[0].steps) EXPECT_FALSE(s.cached);
}

}  // namespace
}  // namespace steps::store
