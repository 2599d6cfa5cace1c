// `steps run FILE --cell -` through the binary, as a Slurm job starts it on
// a node (cli/slurm_cells.h), without a cluster: its task on stdin, its
// events on stdout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/steps_cli.h"
#include "common/temp_dir.h"
#include "core/hash.h"

namespace steps {
namespace {

using test_support::RunSteps;
using test_support::StepsOptions;
using test_support::Streams;
using test_support::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kPipeline = R"(agents:
  - name: reviewer
    source: { model: mock/reviewer }
jobs:
  - name: j
    plan:
      - across:
          - { var: n, values: [a, b] }
        runner: slurm
        do:
          - task: where
            run: echo "cell $n key=${OPENAI_API_KEY:-unset} env=${INJECTED:-unset}"
          - agent: reviewer
            messages: ["review {{ .n }}"]
mock:
  reviewer:
    - say: looks fine
)";

constexpr const char* kRunId = "20261207-130000-abcd";

class CellCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.path() + "/p.yaml") << kPipeline;
    std::ifstream in(dir_.path() + "/p.yaml", std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    sha_ = Sha256Hex(s.str());
  }

  // The JSON a run hands cell `index` on stdin.
  std::string Input(size_t index, const std::string& sha,
                    const nlohmann::json& keys) const {
    nlohmann::json task = {
        {"job", "j"}, {"path", {0}}, {"block_id", "1"}, {"cell", index}};
    return nlohmann::json{{"task", task}, {"keys", keys}, {"file_sha256", sha}}
        .dump();
  }

  // Runs the cell with `input` in the file DIR/in; its stdout alone.
  test_support::CliResult Cell(const std::string& input) {
    std::ofstream(dir_.path() + "/in") << input;
    StepsOptions o;
    o.streams = Streams::kStdoutOnly;
    return RunSteps(dir_.path(),
                    "run p.yaml --mock --cell in --run-id " +
                        std::string(kRunId) + " --state-dir st",
                    o);
  }

  // The events, one JSON value each.
  static std::vector<nlohmann::json> Events(const std::string& out) {
    std::vector<nlohmann::json> events;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      events.push_back(nlohmann::json::parse(line, nullptr, false));
      EXPECT_FALSE(events.back().is_discarded()) << line;
    }
    return events;
  }

  TempDir dir_;
  std::string sha_;
};

TEST_F(CellCliTest, ACellWritesItsEventsAndItsEndAndStoresNothing) {
  const auto r = Cell(Input(1, sha_, nlohmann::json::object()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const std::vector<nlohmann::json> events = Events(r.out);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["e"], "cell_end");
  EXPECT_EQ(events.back()["outcome"], "succeeded");
  EXPECT_THAT(r.out, HasSubstr("cell b key=unset"));
  EXPECT_THAT(r.out, HasSubstr("\"id\":\"j:1.c2.2\""));
  EXPECT_THAT(r.out, HasSubstr("looks fine"));
  // The run that sent it keeps the records: no store here.
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/st/steps.db"));
}

// Only the keys of the pipeline's own sources are taken, and tasks never
// see them: anything else in `keys` (BASH_ENV, ...) is not set.
TEST_F(CellCliTest, OnlyThePipelinesProviderKeysAreTakenAndTasksDoNotSeeThem) {
  const auto r = Cell(Input(
      0, sha_, {{"OPENAI_API_KEY", "sk-test-secret"}, {"INJECTED", "yes"}}));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("cell a key=unset env=unset"));
  EXPECT_THAT(r.out, Not(HasSubstr("sk-test-secret")));
}

// The exit code says how the cell ended, as a run's says how its job did.
TEST_F(CellCliTest, TheExitCodeSaysHowTheCellEnded) {
  std::string input = Input(5, sha_, nlohmann::json::object());
  auto r = Cell(input);
  EXPECT_EQ(r.exit_code, 2) << r.out;  // No cell 6: errored.
  std::vector<nlohmann::json> events = Events(r.out);
  ASSERT_EQ(events.size(), 1u) << r.out;
  EXPECT_EQ(events[0]["outcome"], "errored");
  std::string failing = kPipeline;
  failing.replace(failing.find("echo \"cell $n"), 4, "false;");
  std::ofstream(dir_.path() + "/p.yaml") << failing;
  r = Cell(Input(0, Sha256Hex(failing), nlohmann::json::object()));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  events = Events(r.out);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["outcome"], "failed");
}

TEST_F(CellCliTest, AFileThatChangedSinceTheRunStartedIsRefused) {
  const auto r = Cell(Input(0, std::string(64, '0'), nlohmann::json::object()));
  EXPECT_EQ(r.exit_code, 65) << r.out;
  const std::vector<nlohmann::json> events = Events(r.out);
  ASSERT_EQ(events.size(), 1u) << r.out;
  EXPECT_EQ(events[0]["e"], "cell_end");
  EXPECT_EQ(events[0]["outcome"], "errored");
  EXPECT_THAT(events[0]["error"].get<std::string>(),
              HasSubstr("is not the file the run started with"));
  EXPECT_THAT(r.out, Not(HasSubstr("cell a")));
}

TEST_F(CellCliTest, ATaskThatDoesNotReadIsRefusedSayingWhy) {
  for (const std::string& bad :
       {std::string("not json"), std::string("[1]"), std::string(100000, '['),
        std::string(R"({"task":{"job":"j"}})"),
        std::string(R"({"task":{"job":"j","path":[0],"cell":-3}})")}) {
    const auto r = Cell(bad);
    EXPECT_EQ(r.exit_code, 64) << bad.substr(0, 80) << "\n" << r.out;
    const std::vector<nlohmann::json> events = Events(r.out);
    ASSERT_EQ(events.size(), 1u) << r.out;
    EXPECT_EQ(events[0]["outcome"], "errored");
  }
  const auto wrong_cell = Cell(Input(7, sha_, nlohmann::json::object()));
  EXPECT_THAT(wrong_cell.out, HasSubstr("has no cell 8 (it has 2 cells;"));
}

// The job's budget marker, as the run that sent the cell writes it on the
// shared state folder: only a regular file is one, and its text is shown
// printable.
TEST_F(CellCliTest, OnlyARegularFileIsABudgetMarkerAndItsTextIsShownPrintable) {
  std::string budgeted = kPipeline;
  budgeted.replace(budgeted.find("    plan:"), 9,
                   "    budget: { tokens: 1000 }\n    plan:");
  std::ofstream(dir_.path() + "/p.yaml") << budgeted;
  const std::string sha = Sha256Hex(budgeted);
  const std::string marker = dir_.path() + "/st/slurm/budget-" + kRunId + "-" +
                             Sha256Hex("j").substr(0, 16);
  std::filesystem::create_directories(dir_.path() + "/st/slurm");
  // A FIFO there would block a reader that opened it as a file.
  ASSERT_EQ(mkfifo(marker.c_str(), 0600), 0);
  auto r = Cell(Input(0, sha, nlohmann::json::object()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("looks fine"));
  std::filesystem::remove(marker);

  std::ofstream(marker) << "token budget of 1000 spent \x1b[31m"
                           "(1000 used)\x07\r\n\xff";
  r = Cell(Input(0, sha, nlohmann::json::object()));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr("looks fine")));
  EXPECT_THAT(r.out, HasSubstr("token budget of 1000 spent  [31m(1000 used)"));
  EXPECT_THAT(r.out, Not(HasSubstr("\\u001b")));
  EXPECT_THAT(r.out, Not(HasSubstr("\\u0007")));
}

// A run killed after its job's budget was spent left the marker: the run
// resumed under its id (or any run of that id) starts without it, and
// other runs' markers stay.
TEST_F(CellCliTest, ARunStartsWithoutTheBudgetMarkersItsIdLeft) {
  std::ofstream(dir_.path() + "/plain.yaml")
      << "jobs:\n- name: j\n  plan:\n  - task: t\n    run: \"true\"\n";
  std::filesystem::create_directories(dir_.path() + "/st/slurm");
  const std::string ours = dir_.path() + "/st/slurm/budget-" +
                           std::string(kRunId) + "-" +
                           Sha256Hex("j").substr(0, 16);
  const std::string theirs =
      dir_.path() + "/st/slurm/budget-20261207-120000-ffff-0123456789abcdef";
  std::ofstream(ours) << "job budget: token budget of 10 spent (10 used)";
  std::ofstream(theirs) << "job budget: token budget of 10 spent (10 used)";
  const auto r =
      RunSteps(dir_.path(), "run plain.yaml --run-id " + std::string(kRunId) +
                                " --state-dir st");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(std::filesystem::exists(ours));
  EXPECT_TRUE(std::filesystem::exists(theirs));
}

}  // namespace
}  // namespace steps
