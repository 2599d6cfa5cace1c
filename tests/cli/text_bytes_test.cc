// Text is bytes until shown: a task, a model answer, a tool call and a mock
// script that carry invalid UTF-8 never abort `steps`, and every JSON and
// XML writer (show --json, runs --json, JUnit) still emits valid output.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace {

namespace test_support = steps::test_support;
using Result = test_support::CliResult;

// A task whose output is not UTF-8: a lone 0xFF, a reversed BOM byte, a
// truncated sequence, and control characters (ESC colour codes, 0x01).
const char kBadTask[] = R"(jobs:
- name: bytes
  plan:
  - task: emit
    run: |
      printf 'caf\xff\xfe \xe2\x82 \001\033[31mred\033[0m\n'
)";

// An agent on the mock whose tool call path and answer are not UTF-8 (raw
// bytes in the file, not YAML escapes).
const char kBadAgent[] =
    "agents:\n"
    "- name: reader\n"
    "  source: { model: mock/reader }\n"
    "  tools: [read_file]\n"
    "jobs:\n"
    "- name: talk\n"
    "  plan:\n"
    "  - agent: reader\n"
    "    messages: [\"Read it.\"]\n"
    "mock:\n"
    "  reader:\n"
    "  - call: { name: read_file, arguments: { path: \"\xff.txt\" } }\n"
    "  - say: \"read \xff\xfe done\"\n";

class TextBytesTest : public ::testing::Test {
 protected:
  void Write(const std::string& name, const std::string& text) {
    dir_.Write(name, text);
  }

  // Runs steps with `args` in the temporary folder; stdout is read, stderr
  // goes to err.txt.
  Result Steps(const std::string& args) {
    return test_support::RunSteps(dir_.path(), args + " 2>>err.txt");
  }

  std::string Err() { return dir_.Read("err.txt"); }

  // Parses `text` strictly (nlohmann refuses invalid UTF-8).
  static nlohmann::json Parse(const std::string& text) {
    return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  }

  test_support::TempDir dir_;
};

TEST_F(TextBytesTest, ShowAndRunsJsonStayValidAfterATaskPrintsBytes) {
  Write("p.yaml", kBadTask);
  Result run = Steps("run p.yaml --plain --state-dir state");
  ASSERT_EQ(run.exit_code, 0) << run.out << Err();

  Result show = Steps("show --json --state-dir state");
  ASSERT_EQ(show.exit_code, 0) << Err();
  nlohmann::json j = Parse(show.out);
  ASSERT_FALSE(j.is_discarded()) << show.out;
  // The bad bytes are shown as U+FFFD; the rest of the line survives.
  EXPECT_NE(show.out.find("caf\xEF\xBF\xBD"), std::string::npos) << show.out;

  Result runs = Steps("runs --json --state-dir state");
  ASSERT_EQ(runs.exit_code, 0) << Err();
  EXPECT_FALSE(Parse(runs.out).is_discarded()) << runs.out;

  Result listing = Steps("show --state-dir state");
  EXPECT_EQ(listing.exit_code, 0) << Err();
}

TEST_F(TextBytesTest, AnAgentWhoseAnswerAndToolCallAreBytesDoesNotCrash) {
  Write("p.yaml", kBadAgent);
  Result run = Steps("run p.yaml --plain --mock --state-dir state");
  // The read fails (no such file) and the conversation goes on to the
  // answer; what matters is an outcome, not an abort.
  ASSERT_EQ(run.exit_code, 0) << run.out << Err();
  EXPECT_NE(run.out.find("agent: reader succeeded"), std::string::npos)
      << run.out;

  Result show = Steps("show --json --state-dir state");
  ASSERT_EQ(show.exit_code, 0) << Err();
  ASSERT_FALSE(Parse(show.out).is_discarded()) << show.out;
  EXPECT_NE(show.out.find("read \xEF\xBF\xBD\xEF\xBF\xBD done"),
            std::string::npos)
      << show.out;
}

TEST_F(TextBytesTest, ValidateAcceptsAScriptWithBytes) {
  Write("p.yaml", kBadAgent);
  Result v = Steps("validate p.yaml");
  EXPECT_EQ(v.exit_code, 0) << v.out << Err();
}

TEST_F(TextBytesTest, JunitIsWellFormedWhenTheLogHoldsBytes) {
  // Fails on purpose, so the log (with the bytes) lands in the XML.
  Write("p.yaml", std::string(kBadTask) + "      exit 1\n");
  Result test = Steps("test p.yaml --junit out.xml");
  ASSERT_EQ(test.exit_code, 1) << test.out << Err();
  const std::string xml = dir_.Read("out.xml");
  EXPECT_NE(xml.find("<failure"), std::string::npos) << xml;
  EXPECT_NE(xml.find("caf\xEF\xBF\xBD"), std::string::npos) << xml;
  // Control characters are written visibly, not dropped.
  EXPECT_NE(xml.find("\\x1b[31mred"), std::string::npos) << xml;
  // xmllint (libxml2-utils) is the judge of well-formed.
  Result lint =
      test_support::RunInShell(dir_.path(), "xmllint --noout out.xml");
  EXPECT_EQ(lint.exit_code, 0) << lint.out << xml;
}

}  // namespace
