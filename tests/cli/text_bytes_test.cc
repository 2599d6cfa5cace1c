// Text is bytes until shown: a task, a model answer, a tool call and a mock
// script that carry invalid UTF-8 never abort `steps`, and every JSON and
// XML writer (show --json, runs --json, JUnit) still emits valid output.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

namespace fs = std::filesystem;

const std::string kSteps = std::string(STEPS_BINARY_DIR) + "/src/cli/steps";

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
  void SetUp() override {
    char tmpl[] = "/tmp/steps-bytes-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  struct Result {
    int exit_code = -1;  // -1: killed by a signal (an abort, a crash).
    std::string out;     // stdout only.
  };

  // Runs steps with `args` in the temporary folder; stderr goes to err.txt.
  Result Steps(const std::string& args) {
    std::string cmd =
        "cd '" + dir_ + "' && '" + kSteps + "' " + args + " 2>>err.txt";
    Result r;
    FILE* p = popen(cmd.c_str(), "r");
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
      r.out.append(buf.data(), n);
    int status = pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
  }

  std::string Err() {
    std::ifstream in(dir_ + "/err.txt", std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // Parses `text` strictly (nlohmann refuses invalid UTF-8).
  static nlohmann::json Parse(const std::string& text) {
    return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  }

  std::string dir_;
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
  std::ifstream in(dir_ + "/out.xml", std::ios::binary);
  std::string xml(std::istreambuf_iterator<char>(in), {});
  EXPECT_NE(xml.find("<failure"), std::string::npos) << xml;
  EXPECT_NE(xml.find("caf\xEF\xBF\xBD"), std::string::npos) << xml;
  // Control characters are written visibly, not dropped.
  EXPECT_NE(xml.find("\\x1b[31mred"), std::string::npos) << xml;
  // xmllint (libxml2-utils) is the judge of well-formed.
  std::string cmd = "xmllint --noout '" + dir_ + "/out.xml' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  std::string lint;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
    lint.append(buf.data(), n);
  int status = pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << lint << xml;
}

}  // namespace
