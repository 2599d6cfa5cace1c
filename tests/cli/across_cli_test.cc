// Across cells told apart: every line of live output, every record in
// `steps show` and `--json`, and the not-started record of a cell that
// never ran name the cell by its values, through the real binary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace {

namespace test_support = steps::test_support;

class AcrossCliTest : public ::testing::Test {
 protected:
  test_support::CliResult Steps(const std::string& args) {
    return test_support::RunInShell(temp_.path(),
                                    "timeout -s KILL 120 \"$STEPS\" " + args);
  }
  test_support::TempDir temp_;
};

// Two variables, a nested sequence and a step hook inside each cell: the
// same step names run four times and must be told apart everywhere.
constexpr const char* kMatrix = R"(jobs:
- name: matrix
  plan:
  - across:
    - { var: os, values: [linux, mac], max_in_flight: 1 }
    - { var: arch, values: [x86, arm], max_in_flight: 1 }
    do:
    - task: build
      run: "echo built-{{ .os | shellquote }}-{{ .arch | shellquote }}"
      ensure: { task: tidy, run: echo tidy }
)";

TEST_F(AcrossCliTest, LiveOutputNamesEachCell) {
  temp_.Write("p.yaml", kMatrix);
  test_support::CliResult r = Steps("run p.yaml --no-cache");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* cell :
       {"os=linux arch=x86", "os=linux arch=arm", "os=mac arch=x86",
        "os=mac arch=arm"}) {
    const std::string name = std::string("build [") + cell + "]";
    EXPECT_NE(r.out.find("task: " + name + " succeeded"), std::string::npos)
        << cell << "\n" << r.out;
    EXPECT_NE(r.out.find("ensure task: tidy [" + std::string(cell) +
                         "] succeeded"),
              std::string::npos)
        << cell << "\n" << r.out;
  }
  // The output line carries its cell, and the right one.
  EXPECT_NE(r.out.find("build [os=mac arch=arm] | built-mac-arm"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("build | "), std::string::npos) << r.out;
}

TEST_F(AcrossCliTest, ShowAndJsonNameEachCell) {
  temp_.Write("p.yaml", kMatrix);
  ASSERT_EQ(Steps("run p.yaml --no-cache").exit_code, 0);
  test_support::CliResult show = Steps("show");
  ASSERT_EQ(show.exit_code, 0) << show.out;
  EXPECT_NE(show.out.find("build [os=linux arch=arm]"), std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find("tidy [os=mac arch=x86]"), std::string::npos)
      << show.out;

  test_support::CliResult json = Steps("show --json 2>/dev/null");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  nlohmann::json run = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_FALSE(run.is_discarded()) << json.out;
  int builds = 0;
  std::set<std::string> cells;
  for (const auto& job : run["jobs"]) {
    for (const auto& step : job["steps"]) {
      if (step["name"] != "build") continue;
      ++builds;
      ASSERT_TRUE(step["cell"].is_string()) << step.dump();
      cells.insert(step["cell"].get<std::string>());
    }
  }
  EXPECT_EQ(builds, 4);
  EXPECT_EQ(cells, (std::set<std::string>{"os=linux arch=x86",
                                          "os=linux arch=arm",
                                          "os=mac arch=x86", "os=mac arch=arm"}));
}

// Nested across blocks join their values; a cell cut by fail_fast before it
// started is recorded under its own values.
TEST_F(AcrossCliTest, NestedAndNotStartedCellsCarryTheirValues) {
  temp_.Write("p.yaml", R"(jobs:
- name: nested
  plan:
  - across:
    - { var: os, values: [linux], max_in_flight: 1 }
    do:
    - across:
      - { var: n, values: ["1", "2", "3"], max_in_flight: 1 }
      fail_fast: true
      do:
      - task: check
        run: "test {{ .n | shellquote }} != 2"
)");
  test_support::CliResult r = Steps("run p.yaml --no-cache");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("task: check [os=linux n=1] succeeded"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("task: check [os=linux n=2] failed"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("task: check [os=linux n=3] not started"),
            std::string::npos)
      << r.out;
  test_support::CliResult show = Steps("show");
  EXPECT_NE(show.out.find("check [os=linux n=3]"), std::string::npos)
      << show.out;
}

}  // namespace
