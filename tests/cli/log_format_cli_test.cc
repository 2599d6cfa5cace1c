// `--log-format json` and STEPS_LOG_FORMAT through the binary: the same run
// logs the same events with the same fields in both formats, each JSON line
// one object that parses, numbers as numbers.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/log_lines.h"
#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace steps {
namespace {

using test_support::CliResult;
using test_support::JsonLogFields;
using test_support::LogPairs;
using test_support::ParsePlainLogLine;
using test_support::RunSteps;
using test_support::StepsOptions;
using test_support::Streams;
using test_support::TempDir;

// Two retried requests that then succeed, and an outage through a
// fallback: request_retry, fallback and conversation_failed lines.
constexpr const char* kPipeline = R"(agents:
- name: coder
  source: { model: openai/deepseek-v4-pro }
- name: down
  source: { model: openai/first }
  fallback: [{ model: openai/second }]
jobs:
- name: retried
  plan:
  - agent: coder
    messages: [go]
    attempts: 3
- name: outage
  plan:
  - agent: down
    messages: [go]
    attempts: 2
mock:
  coder:
  - status: 500
  - status: 503
  - say: done
  default:
    status: 500
    body: '{"error": {"message": "internal error"}}'
)";

struct Event {
  std::string level;
  std::string event;
  LogPairs fields;
  bool operator==(const Event& o) const {
    return level == o.level && event == o.event && fields == o.fields;
  }
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The stderr of `steps ARGS` (standard output dropped).
CliResult Stderr(const TempDir& dir, const std::string& args,
                 const std::string& prefix = "") {
  StepsOptions opts;
  opts.prefix = prefix;
  opts.streams = Streams::kStdoutOnly;
  opts.kill_after = std::chrono::seconds(60);
  return RunSteps(dir.path(), args + " 2>&1 >/dev/null", opts);
}

std::string TagOf(const std::string& level) {
  if (level == "debug") return "DBG";
  if (level == "info") return "INF";
  if (level == "warn") return "WRN";
  if (level == "error") return "ERR";
  return "?" + level;
}

TEST(LogFormatCliTest, JsonLinesCarryThePlainLinesEventsAndFields) {
  TempDir dir;
  dir.Write("p.yaml", kPipeline);
  CliResult plain = Stderr(dir, "run p.yaml --mock --plain --no-cache");
  CliResult json =
      Stderr(dir, "run p.yaml --mock --plain --no-cache --log-format json");
  EXPECT_EQ(plain.exit_code, 2) << plain.out;
  EXPECT_EQ(json.exit_code, 2) << json.out;

  std::vector<Event> from_plain, from_json;
  for (const std::string& l : Lines(plain.out)) {
    if (l.size() < 4 || l[3] != ' ') continue;
    auto p = ParsePlainLogLine(l);
    if (p.level == "WRN" || p.level == "INF" || p.level == "ERR")
      from_plain.push_back({p.level, p.event, p.fields});
  }
  for (const std::string& l : Lines(json.out)) {
    if (l.empty() || l[0] != '{') continue;
    nlohmann::ordered_json j =
        nlohmann::ordered_json::parse(l);  // Throws if not.
    ASSERT_EQ(j.size(), 4u) << l;
    EXPECT_TRUE(j["time"].get<std::string>().size() == 24 &&
                j["time"].get<std::string>().back() == 'Z')
        << l;
    from_json.push_back(
        {TagOf(j["level"]), j["event"].get<std::string>(), JsonLogFields(j)});
  }
  ASSERT_EQ(from_plain.size(), 6u) << plain.out;
  EXPECT_TRUE(from_json == from_plain) << plain.out << "\n" << json.out;
  // No plain event line in the JSON run's stderr.
  for (const std::string& l : Lines(json.out))
    EXPECT_FALSE(l.rfind("WRN ", 0) == 0) << l;

  // The spec's lines, typed: numbers are numbers, the agent is text.
  bool saw_retry = false, saw_failed = false;
  for (const std::string& l : Lines(json.out)) {
    if (l.empty() || l[0] != '{') continue;
    nlohmann::json j = nlohmann::json::parse(l);
    const nlohmann::json& f = j["fields"];
    if (j["event"] == "agent.request_retry" && f["agent"] == "coder" &&
        f["attempt"] == 1) {
      saw_retry = true;
      EXPECT_EQ(j["level"], "warn");
      EXPECT_TRUE(f["attempt"].is_number_integer()) << l;
      EXPECT_EQ(f["attempts"], 3) << l;
      EXPECT_EQ(f["status"], 500) << l;
      EXPECT_EQ(f["model"], "deepseek-v4-pro") << l;
    }
    if (j["event"] == "agent.conversation_failed") {
      saw_failed = true;
      EXPECT_EQ(f["agent"], "down");
      EXPECT_EQ(f["provider_requests"], 4) << l;
      EXPECT_TRUE(f["error"].is_string()) << l;
    }
  }
  EXPECT_TRUE(saw_retry) << json.out;
  EXPECT_TRUE(saw_failed) << json.out;
}

TEST(LogFormatCliTest, TheEnvironmentChoosesAndTheFlagOverrides) {
  TempDir dir;
  dir.Write("p.yaml", kPipeline);
  CliResult env = Stderr(dir, "run p.yaml --mock --plain --no-cache",
                         "STEPS_LOG_FORMAT=json");
  EXPECT_NE(env.out.find("{\"time\":"), std::string::npos) << env.out;
  EXPECT_EQ(env.out.find("WRN agent."), std::string::npos) << env.out;
  CliResult flag =
      Stderr(dir, "run p.yaml --mock --plain --no-cache --log-format text",
             "STEPS_LOG_FORMAT=json");
  EXPECT_NE(flag.out.find("WRN agent.request_retry agent=coder"),
            std::string::npos)
      << flag.out;
  EXPECT_EQ(flag.out.find("{\"time\":"), std::string::npos) << flag.out;
}

TEST(LogFormatCliTest, AFormatThatIsNotOneIsRefusedWithTheChoices) {
  TempDir dir;
  dir.Write("p.yaml", kPipeline);
  CliResult env = Stderr(dir, "run p.yaml --mock", "STEPS_LOG_FORMAT=yaml");
  EXPECT_EQ(env.exit_code, 64) << env.out;
  EXPECT_NE(env.out.find("STEPS_LOG_FORMAT=yaml is not a log format: use "
                         "text or json"),
            std::string::npos)
      << env.out;
  // The flag wins over a bad variable; --help is not stopped by one.
  CliResult wins = Stderr(dir, "run p.yaml --mock --no-cache --log-format json",
                          "STEPS_LOG_FORMAT=yaml");
  EXPECT_EQ(wins.exit_code, 2) << wins.out;
  EXPECT_NE(wins.out.find("{\"time\":"), std::string::npos) << wins.out;
  EXPECT_EQ(wins.out.find("is not a log format"), std::string::npos);
  CliResult help = Stderr(dir, "run --help", "STEPS_LOG_FORMAT=yaml");
  EXPECT_EQ(help.exit_code, 0) << help.out;
  CliResult flag = Stderr(dir, "run p.yaml --mock --log-format xml");
  EXPECT_EQ(flag.exit_code, 64) << flag.out;
  EXPECT_NE(flag.out.find("--log-format"), std::string::npos) << flag.out;
  EXPECT_NE(flag.out.find("xml"), std::string::npos) << flag.out;
}

}  // namespace
}  // namespace steps
