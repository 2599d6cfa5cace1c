#include "core/log.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/log_lines.h"
#include "core/redact.h"

namespace steps {
namespace {

TEST(LogTest, FormatsTheContractLines) {
  EXPECT_EQ(FormatLogEvent(LogLevel::kWarn, "agent.request_retry",
                           {{"agent", "coder"},
                            {"model", "deepseek-v4-pro"},
                            {"attempt", "1"},
                            {"attempts", "3"},
                            {"status", "500"}}),
            "WRN agent.request_retry agent=coder model=deepseek-v4-pro "
            "attempt=1 attempts=3 status=500");
  EXPECT_EQ(FormatLogEvent(LogLevel::kWarn, "agent.conversation_failed",
                           {{"agent", "coder"},
                            {"provider_requests", "3"},
                            {"error", "HTTP 500: \"oops\""}}),
            "WRN agent.conversation_failed agent=coder provider_requests=3 "
            "error=\"HTTP 500: \\\"oops\\\"\"");
}

// A server's answer in a field cannot drive the terminal: control bytes
// other than the named ones are written as \xNN.
TEST(LogTest, ControlBytesAreShownNotObeyed) {
  EXPECT_EQ(FormatLogEvent(LogLevel::kWarn, "e",
                           {{"error", "a\x1b[31mb\x7f\x01"}, {"n", "x\ty"}}),
            "WRN e error=\"a\\x1b[31mb\\x7f\\x01\" n=\"x\\ty\"");
}

TEST(LogTest, SinkCapturesAndMinLevelFilters) {
  std::vector<std::string> lines;
  LogSink old =
      SetLogSink([&](LogLevel, const std::string& l) { lines.push_back(l); });
  SetMinLogLevel(LogLevel::kWarn);
  LogEvent(LogLevel::kInfo, "dropped", {});
  LogEvent(LogLevel::kWarn, "kept", {{"k", ""}});
  SetMinLogLevel(LogLevel::kInfo);
  SetLogSink(old);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "WRN kept k=\"\"");
}

std::chrono::system_clock::time_point At(int64_t unix_ms) {
  return std::chrono::system_clock::time_point(
      std::chrono::milliseconds(unix_ms));
}

TEST(LogJsonTest, WritesOneObjectWithTypedFieldsInOrder) {
  std::string line = FormatLogEventJson(LogLevel::kWarn, "agent.request_retry",
                                        {{"agent", "coder"},
                                         {"model", "deepseek-v4-pro"},
                                         {"attempt", 1},
                                         {"attempts", 3},
                                         {"status", 500},
                                         {"final", false}},
                                        At(1796556000123));
  EXPECT_EQ(line,
            "{\"time\":\"2026-12-06T11:20:00.123Z\",\"level\":\"warn\","
            "\"event\":\"agent.request_retry\",\"fields\":{\"agent\":"
            "\"coder\",\"model\":\"deepseek-v4-pro\",\"attempt\":1,"
            "\"attempts\":3,\"status\":500,\"final\":false}}");
  EXPECT_EQ(line.find('\n'), std::string::npos);
}

TEST(LogJsonTest, TimesBeforeTheEpochAndLevelsAreWrittenPlainly) {
  nlohmann::json j = nlohmann::json::parse(
      FormatLogEventJson(LogLevel::kDebug, "e", {}, At(-1)));
  EXPECT_EQ(j["time"], "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(j["level"], "debug");
  EXPECT_TRUE(j["fields"].is_object());
  EXPECT_TRUE(j["fields"].empty());
  EXPECT_EQ(nlohmann::json::parse(
                FormatLogEventJson(LogLevel::kError, "e", {}, At(0)))["level"],
            "error");
}

TEST(LogJsonTest, TextThatIsNotUtf8OrHoldsControlsStaysOneValidLine) {
  const std::string hostile = std::string("a\nb\"c\\\x01\xff\xc3") + "\t";
  std::string line =
      FormatLogEventJson(LogLevel::kInfo, "x\ny", {{"k\"ey", hostile}}, At(0));
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["event"], "x\ny");
  EXPECT_EQ(j["fields"]["k\"ey"], "a\nb\"c\\\x01\xEF\xBF\xBD\xEF\xBF\xBD\t");
}

TEST(LogJsonTest, SecretsAreMaskedAsInPlainLinesNumbersIncluded) {
  AddProcessSecrets({"sk-live-123456", "987654321"});
  std::vector<LogField> fields = {{"error", "bad key sk-live-123456 sent"},
                                  {"port", 987654321},
                                  {"count", 7}};
  nlohmann::json j = nlohmann::json::parse(
      FormatLogEventJson(LogLevel::kWarn, "e", fields, At(0)));
  std::string plain = FormatLogEvent(LogLevel::kWarn, "e", fields);
  EXPECT_EQ(j["fields"]["error"], "bad key *** sent");
  EXPECT_EQ(j["fields"]["port"], "***");  // A secret number is text.
  EXPECT_EQ(j["fields"]["count"], 7);
  EXPECT_EQ(plain, "WRN e error=\"bad key *** sent\" port=*** count=7");
}

// Every event line the spec texts and DESIGN.md show, and the guards'
// lines: the JSON line carries the plain line's fields, key for key and
// value for value, in the same order.
TEST(LogJsonTest, CarriesThePlainLinesFields) {
  struct Event {
    LogLevel level;
    std::string name;
    std::vector<LogField> fields;
  };
  const std::vector<Event> events = {
      {LogLevel::kWarn,
       "agent.request_retry",
       {{"agent", "coder"},
        {"model", "deepseek-v4-pro"},
        {"attempt", 1},
        {"attempts", 3},
        {"status", 500}}},
      {LogLevel::kWarn,
       "agent.request_retry",
       {{"agent", "coder"},
        {"model", "m"},
        {"attempt", 2},
        {"attempts", 3},
        {"status", "connection"}}},
      {LogLevel::kWarn,
       "agent.conversation_failed",
       {{"agent", "coder"},
        {"provider_requests", 3},
        {"error", "gave up after 3 requests: HTTP 500: \"oops\""}}},
      {LogLevel::kInfo,
       "agent.nudge",
       {{"agent", "coder"}, {"remaining", "59.9s"}, {"of", "5m"}}},
      {LogLevel::kWarn,
       "agent.retry_denied",
       {{"agent", "a"},
        {"model", "m"},
        {"attempt", 1},
        {"host", "api.example.com"},
        {"retries", 20},
        {"calls", 100}}},
      {LogLevel::kWarn,
       "provider.circuit_open",
       {{"host", "h"}, {"failures", 5}, {"probe_after", "10s"}}},
      {LogLevel::kWarn, "store.disk_full", {{"reserve_freed", size_t{0}}}},
      {LogLevel::kWarn, "e", {{"empty", ""}, {"eq", "a=b c"}}},
      {LogLevel::kWarn,
       "telemetry.export_failed",
       {{"error", "HTTP 500: \x1b[31mred\x1b[0m \x7f\x01"}}},
  };
  for (const Event& e : events) {
    std::string plain = FormatLogEvent(e.level, e.name, e.fields);
    std::string json = FormatLogEventJson(e.level, e.name, e.fields, At(0));
    test_support::PlainLogLine p = test_support::ParsePlainLogLine(plain);
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(json);
    EXPECT_EQ(p.level, std::string(LogLevelTag(e.level))) << plain;
    EXPECT_EQ(j["event"], p.event) << json;
    EXPECT_EQ(test_support::JsonLogFields(j), p.fields) << plain << "\n"
                                                        << json;
  }
}

TEST(LogJsonTest, TheFormatChosenIsWhatTheSinkReceives) {
  std::vector<std::string> lines;
  LogSink old =
      SetLogSink([&](LogLevel, const std::string& l) { lines.push_back(l); });
  SetLogFormat(LogFormat::kJson);
  EXPECT_EQ(CurrentLogFormat(), LogFormat::kJson);
  LogEvent(LogLevel::kWarn, "kept", {{"n", 2}});
  SetLogFormat(LogFormat::kText);
  LogEvent(LogLevel::kWarn, "kept", {{"n", 2}});
  SetLogSink(old);
  ASSERT_EQ(lines.size(), 2u);
  nlohmann::json j = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(j["fields"]["n"], 2);
  EXPECT_EQ(lines[1], "WRN kept n=2");
  EXPECT_EQ(ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_EQ(ParseLogFormat("text"), LogFormat::kText);
  EXPECT_EQ(ParseLogFormat("JSON"), std::nullopt);
  EXPECT_EQ(ParseLogFormat(""), std::nullopt);
}

}  // namespace
}  // namespace steps
