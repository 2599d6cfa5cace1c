// Structured log lines: "LVL event key=value key=value ...".
// Values with spaces, quotes or '=' are double-quoted with backslash escapes,
// so a line splits unambiguously. Lines go to stderr through spdlog, or to
// the sink installed in its place.
#ifndef STEPS_CORE_LOG_H_
#define STEPS_CORE_LOG_H_

#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace steps {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

struct LogField {
  std::string key;
  std::string value;
};

// "DBG", "INF", "WRN", "ERR".
std::string_view LogLevelTag(LogLevel level);

// The line for an event, without a trailing newline. Secret values
// (core/redact.h) in field values are masked as "***": every log line is
// made here, so none carries a secret.
std::string FormatLogEvent(LogLevel level, std::string_view event,
                           const std::vector<LogField>& fields);

// Emits an event at `level` if it passes the minimum level.
void LogEvent(LogLevel level, std::string_view event,
              std::initializer_list<LogField> fields);
void LogEvent(LogLevel level, std::string_view event,
              const std::vector<LogField>& fields);

// Minimum level written (default kInfo). Thread-safe.
void SetMinLogLevel(LogLevel level);

// Replaces where lines go (nullptr restores stderr). Returns the old sink.
// For tests, and for a live terminal printer that writes the lines to stderr
// above its status block (cli/terminal_printer.h). Thread-safe; the sink is
// called under a lock that SetLogSink also takes, so once it returns the
// old sink is no longer running.
using LogSink = std::function<void(LogLevel, const std::string& line)>;
LogSink SetLogSink(LogSink sink);

}  // namespace steps

#endif  // STEPS_CORE_LOG_H_
