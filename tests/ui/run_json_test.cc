// One JSON shape for a run: a pipeline with a retried task, a cached step
// and an agent that calls tools runs through the real `steps` binary on the
// mock provider; then `steps show --json`, `steps runs --json` and the API
// of `steps ui` must carry the same objects, with exactly the keys
// docs/json.md documents (its key tables are parsed here, so the document
// and the code cannot drift apart), tool calls as objects, tool results
// bounded, and spends that add up.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "common/steps_cli.h"
#include "common/temp_dir.h"
#include "core/outcome.h"

extern char** environ;

namespace steps {
namespace {

using nlohmann::json;
using test_support::RunInShell;
using test_support::TempDir;

// The task fails once, then succeeds; `same-a` and `same-b` run the same
// command, so `same-b` is taken from the cache. The agent reads a file the
// task left in the job's artifacts, bigger than a tool result keeps, then
// sends arguments that are not JSON.
constexpr const char* kPipeline = R"(
agents:
- name: reader
  source: { model: mock/reader }
  tools: [read_file]
jobs:
- name: build
  plan:
  - task: flaky
    attempts: 2
    run: |
      head -c 10000 /dev/zero | tr '\0' x > "$STEPS_ARTIFACTS/big.txt"
      n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n
      [ "$n" -ge 2 ]
  - task: same-a
    run: echo same
  - task: same-b
    run: echo same
  - agent: reader
    messages: ["Read big.txt."]
  - gate: ship
    message: Ship it?
    timeout: 200ms
    default: approve
mock:
  reader:
  - call: {name: read_file, arguments: {path: big.txt}}
    usage: { prompt_tokens: 100, completion_tokens: 10, cost: 0.25 }
  - call: {name: read_file, arguments: '{"path": "big'}
    usage: { prompt_tokens: 200, completion_tokens: 20, cost: 0.5 }
  - say: It is all x.
    usage: { prompt_tokens: 300, completion_tokens: 30, cost: 0.125 }
)";

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// docs/json.md's key tables: object name -> its keys; and the run's keys
// marked as in the summary.
struct DocumentedKeys {
  std::map<std::string, std::set<std::string>> objects;
  std::set<std::string> summary;
};

DocumentedKeys ParseDoc(const std::string& text) {
  DocumentedKeys doc;
  const std::regex heading(R"(^### `(\w+)`\s*$)");
  const std::regex row(R"(^\| `(\w+)` \| [^|]+ \| ([^|]*)\|)");
  std::string object;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, heading)) {
      object = m[1];
      doc.objects[object];
    } else if (line.rfind("## ", 0) == 0) {
      object.clear();
    } else if (!object.empty() && std::regex_search(line, m, row)) {
      doc.objects[object].insert(m[1]);
      if (object == "run" && m[2].str().find("yes") != std::string::npos)
        doc.summary.insert(m[1]);
    }
  }
  return doc;
}

std::set<std::string> Keys(const json& object) {
  std::set<std::string> keys;
  for (const auto& [k, v] : object.items()) keys.insert(k);
  return keys;
}

// Checks `value` is an object with exactly the keys documented for `kind`
// (noting that `kind` was seen), then its nested objects the same way.
class Checker {
 public:
  explicit Checker(const DocumentedKeys& doc) : doc_(doc) {}

  void Object(const json& value, const std::string& kind) {
    ASSERT_TRUE(value.is_object()) << kind << ": " << value.dump();
    seen_.insert(kind);
    EXPECT_EQ(Keys(value), doc_.objects.at(kind)) << kind << ": " << value;
    for (const auto& [k, v] : value.items()) Nested(kind, k, v);
  }
  const std::set<std::string>& seen() const { return seen_; }

 private:
  void Nested(const std::string& kind, const std::string& key, const json& v) {
    static const std::map<std::pair<std::string, std::string>, std::string>
        kChildren = {{{"run", "jobs"}, "job"},
                     {{"job", "plan"}, "planned_step"},
                     {{"job", "steps"}, "step"},
                     {{"step", "cached_from"}, "cached_from"},
                     {{"step", "attempts"}, "attempt"},
                     {{"step", "agent"}, "agent"},
                     {{"step", "gate"}, "gate"},
                     {{"step", "turns"}, "turn"},
                     {{"turn", "tool_calls"}, "tool_call"},
                     {{"tool_call", "result"}, "tool_result"}};
    auto child = kChildren.find({kind, key});
    if (child == kChildren.end() || v.is_null()) return;
    if (v.is_array()) {
      for (const json& item : v) Object(item, child->second);
    } else {
      Object(v, child->second);
    }
  }

  const DocumentedKeys& doc_;
  std::set<std::string> seen_;
};

// `steps ui` on a loopback port, stopped at the end.
class UiProcess {
 public:
  explicit UiProcess(const std::string& state_dir) {
    std::vector<std::string> args = {test_support::kStepsBinary,
                                     "ui",
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--state-dir",
                                     state_dir};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    if (posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ) != 0)
      pid_ = 0;
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    out_ = fds[0];
  }
  ~UiProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) close(out_);
  }

  // The port it says it serves on (bounded wait); 0 if it never says.
  int Port() {
    std::string seen;
    const std::regex serving(R"(serving http://127\.0\.0\.1:(\d+)/)");
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char buf[256];
      ssize_t n = read(out_, buf, sizeof buf);
      if (n <= 0) break;
      seen.append(buf, static_cast<size_t>(n));
      std::smatch m;
      if (std::regex_search(seen, m, serving)) return std::stoi(m[1]);
    }
    return 0;
  }

 private:
  pid_t pid_ = 0;
  int out_ = -1;
};

json Get(httplib::Client& client, const std::string& path) {
  auto res = client.Get(path.c_str());
  if (!res || res->status != 200) return nullptr;
  return json::parse(res->body, nullptr, false);
}

const json* FindStep(const json& run, const std::string& name) {
  for (const json& job : run["jobs"]) {
    for (const json& s : job["steps"]) {
      if (s["name"] == name) return &s;
    }
  }
  return nullptr;
}

// Sums of prompt tokens, completion tokens and usd over `items`.
struct Sum {
  int64_t prompt = 0;
  int64_t completion = 0;
  double usd = 0;
};
Sum SumOf(const json& items) {
  Sum s;
  for (const json& i : items) {
    s.prompt += i["prompt_tokens"].get<int64_t>();
    s.completion += i["completion_tokens"].get<int64_t>();
    s.usd += i["usd"].get<double>();
  }
  return s;
}
void ExpectSpend(const json& object, const Sum& sum, const std::string& what) {
  EXPECT_EQ(object["prompt_tokens"], sum.prompt) << what;
  EXPECT_EQ(object["completion_tokens"], sum.completion) << what;
  EXPECT_NEAR(object["usd"].get<double>(), sum.usd, 1e-9) << what;
}

class RunJsonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_ / "pipeline.yaml") << kPipeline;
    auto run = RunInShell(dir_.path(),
                          "\"$STEPS\" run pipeline.yaml --mock --plain "
                          "--state-dir state");
    ASSERT_EQ(run.exit_code, 0) << run.out;
    auto show = RunInShell(
        dir_.path(), "\"$STEPS\" show --json --state-dir state 2>/dev/null");
    ASSERT_EQ(show.exit_code, 0) << show.out;
    show_ = json::parse(show.out, nullptr, false);
    ASSERT_TRUE(show_.is_object()) << show.out;
    auto runs = RunInShell(
        dir_.path(), "\"$STEPS\" runs --json --state-dir state 2>/dev/null");
    ASSERT_EQ(runs.exit_code, 0) << runs.out;
    runs_ = json::parse(runs.out, nullptr, false);
    ASSERT_TRUE(runs_.is_array() && runs_.size() == 1) << runs.out;
  }

  TempDir dir_;
  json show_;
  json runs_;
};

TEST_F(RunJsonTest, ShowRunsAndTheUiServeOneDocumentedShape) {
  const DocumentedKeys doc =
      ParseDoc(ReadText(std::string(STEPS_SOURCE_DIR) + "/docs/json.md"));
  ASSERT_EQ(doc.objects.size(), 11u) << "docs/json.md's key tables";
  ASSERT_FALSE(doc.summary.empty());

  // The version, on the run and on its summary.
  EXPECT_EQ(show_["schema"], "steps.run/1");
  const json& summary = runs_[0];
  EXPECT_EQ(summary["schema"], "steps.run/1");
  EXPECT_EQ(summary["id"], show_["id"]);

  // Every object has exactly its documented keys, and every documented
  // object shows up.
  Checker check(doc);
  check.Object(show_, "run");
  std::set<std::string> documented;
  for (const auto& [name, keys] : doc.objects) documented.insert(name);
  EXPECT_EQ(check.seen(), documented);
  // The summary: the run's keys marked so, with the run's values.
  EXPECT_EQ(Keys(summary), doc.summary);
  for (const auto& [k, v] : summary.items()) EXPECT_EQ(v, show_[k]) << k;

  // The UI's API serves the same objects.
  UiProcess ui((dir_ / "state"));
  const int port = ui.Port();
  ASSERT_GT(port, 0) << "steps ui never said where it serves";
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5, 0);
  const std::string id = show_["id"];
  json api_run = Get(client, "/api/runs/" + id);
  ASSERT_TRUE(api_run.is_object() && api_run.contains("run")) << api_run;
  EXPECT_EQ(api_run["run"], show_);
  json api_runs = Get(client, "/api/runs");
  ASSERT_TRUE(api_runs.is_object()) << api_runs;
  ASSERT_EQ(api_runs["runs"].size(), 1u) << api_runs;
  EXPECT_EQ(api_runs["runs"][0], summary);
  const std::regex time(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  EXPECT_TRUE(std::regex_match(api_run["now"].get<std::string>(), time));
}

TEST_F(RunJsonTest, ValuesFollowTheDocumentedConventions) {
  const std::regex time(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  const std::regex hex64("[0-9a-f]{64}");
  EXPECT_TRUE(std::regex_match(show_["started"].get<std::string>(), time));
  std::set<std::string> outcomes = {"running", "interrupted", "pending"};
  for (Outcome o : {Outcome::kSucceeded, Outcome::kFailed, Outcome::kErrored,
                    Outcome::kAborted, Outcome::kNotStarted}) {
    outcomes.insert(std::string(OutcomeName(o)));
  }
  EXPECT_EQ(show_["outcome"], "succeeded");
  for (const json& job : show_["jobs"]) {
    EXPECT_TRUE(outcomes.count(job["outcome"])) << job["outcome"];
    for (const json& s : job["steps"]) {
      EXPECT_TRUE(outcomes.count(s["outcome"])) << s["outcome"];
      EXPECT_TRUE(std::regex_match(s["started"].get<std::string>(), time));
      if (s["kind"] == "gate") {
        EXPECT_EQ(s["identity"], "") << "a gate has no cache key";
      } else {
        EXPECT_TRUE(std::regex_match(s["identity"].get<std::string>(), hex64))
            << s["identity"];
      }
      for (const json& a : s["attempts"]) {
        EXPECT_TRUE(outcomes.count(a["outcome"])) << a["outcome"];
        if (s["kind"] == "gate") {
          EXPECT_EQ(a["identity"], "");
        } else {
          EXPECT_TRUE(
              std::regex_match(a["identity"].get<std::string>(), hex64));
        }
      }
    }
  }

  // The retried task: a failed attempt, a wait, a succeeded one.
  const json* flaky = FindStep(show_, "flaky");
  ASSERT_NE(flaky, nullptr);
  const json& attempts = (*flaky)["attempts"];
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0]["outcome"], "failed");
  EXPECT_EQ(attempts[0]["exit_code"], 1);
  EXPECT_TRUE(attempts[0]["waited_ms"].is_null());
  EXPECT_EQ(attempts[1]["outcome"], "succeeded");
  ASSERT_TRUE(attempts[1]["waited_ms"].is_number_integer()) << attempts[1];
  EXPECT_GE(attempts[1]["waited_ms"].get<int64_t>(), 0);
  EXPECT_TRUE(attempts[1]["exhausted_by"].is_null());

  // The cached step names where its result came from.
  const json* same_a = FindStep(show_, "same-a");
  const json* same_b = FindStep(show_, "same-b");
  ASSERT_TRUE(same_a && same_b);
  EXPECT_EQ((*same_a)["cached"], false);
  EXPECT_TRUE((*same_a)["cached_from"].is_null());
  EXPECT_EQ((*same_b)["cached"], true);
  EXPECT_EQ((*same_b)["outcome"], "succeeded");
  EXPECT_EQ((*same_b)["cached_from"]["run"], show_["id"]);
  EXPECT_EQ((*same_b)["cached_from"]["step"], (*same_a)["id"]);
}

TEST_F(RunJsonTest, ToolCallsAreObjectsWithBoundedResultsAndSpendsAddUp) {
  const json* reader = FindStep(show_, "reader");
  ASSERT_NE(reader, nullptr);
  const json& turns = (*reader)["turns"];
  ASSERT_EQ(turns.size(), 3u) << *reader;

  // Whole JSON arguments are parsed; a big result is cut, and says so.
  ASSERT_EQ(turns[0]["tool_calls"].size(), 1u);
  const json& first = turns[0]["tool_calls"][0];
  EXPECT_EQ(first["name"], "read_file");
  EXPECT_EQ(first["arguments"], json({{"path", "big.txt"}}));
  EXPECT_EQ(first["arguments_truncated"], false);
  const json& result = first["result"];
  ASSERT_TRUE(result.is_object()) << first;
  EXPECT_EQ(result["truncated"], true);
  EXPECT_EQ(result["is_error"], false);
  EXPECT_GT(result["bytes"].get<int64_t>(), 4000);
  EXPECT_EQ(result["text"].get<std::string>().size(), 4000u);

  // Arguments that are not JSON stay the text the model sent; the tool's
  // complaint is a short, whole result.
  ASSERT_EQ(turns[1]["tool_calls"].size(), 1u);
  const json& second = turns[1]["tool_calls"][0];
  EXPECT_EQ(second["arguments"], R"({"path": "big)");
  ASSERT_TRUE(second["result"].is_object()) << second;
  EXPECT_EQ(second["result"]["is_error"], true);
  EXPECT_EQ(second["result"]["truncated"], false);
  EXPECT_EQ(second["result"]["bytes"],
            second["result"]["text"].get<std::string>().size());
  EXPECT_TRUE(turns[2]["tool_calls"].empty());
  EXPECT_EQ(turns[2]["text"], "It is all x.");

  // Turn, step, job and run spends.
  EXPECT_EQ(turns[0]["prompt_tokens"], 100);
  EXPECT_EQ(turns[2]["completion_tokens"], 30);
  const Sum of_turns = SumOf(turns);
  EXPECT_EQ(of_turns.prompt, 600);
  EXPECT_NEAR(of_turns.usd, 0.875, 1e-9);
  ExpectSpend(*reader, of_turns, "the agent step");
  ExpectSpend(*FindStep(show_, "flaky"), Sum{}, "a task spends nothing");
  ExpectSpend(*FindStep(show_, "same-b"), Sum{}, "a cached step");
  for (const json& job : show_["jobs"]) {
    ExpectSpend(job, SumOf(job["steps"]), "job " + job["name"].dump());
  }
  ExpectSpend(show_, SumOf(show_["jobs"]), "the run");
  ExpectSpend(runs_[0], SumOf(show_["jobs"]), "the run's summary");
}

}  // namespace
}  // namespace steps
