#include "core/log.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace steps
