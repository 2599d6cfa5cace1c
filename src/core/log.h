// Structured log lines: "LVL event key=value key=value ...".
// Values with spaces, quotes or '=' are double-quoted with backslash escapes,
// so a line splits unambiguously. Lines go to stderr through spdlog, or to
// the sink installed in its place. In the JSON format (SetLogFormat) each
// event is one JSON object on a line instead, its fields typed
// (docs/observability.md).
#ifndef STEPS_CORE_LOG_H_
#define STEPS_CORE_LOG_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace steps {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

// A field's value is kept as the text the plain format shows; `kind` says
// how the JSON format writes it (a number or a boolean unquoted).
struct LogField {
  enum class Kind { kText, kInteger, kBool };

  LogField(std::string k, std::string v)
      : key(std::move(k)), value(std::move(v)) {}
  LogField(std::string k, const char* v) : key(std::move(k)), value(v) {}
  LogField(std::string k, std::string_view v) : key(std::move(k)), value(v) {}
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>,
                             int> = 0>
  LogField(std::string k, T v)
      : key(std::move(k)), value(std::to_string(v)), kind(Kind::kInteger) {}
  LogField(std::string k, bool v)
      : key(std::move(k)), value(v ? "true" : "false"), kind(Kind::kBool) {}

  std::string key;
  std::string value;
  Kind kind = Kind::kText;
};

enum class LogFormat { kText, kJson };

// "text" or "json"; nullopt for anything else.
std::optional<LogFormat> ParseLogFormat(std::string_view name);

// "DBG", "INF", "WRN", "ERR".
std::string_view LogLevelTag(LogLevel level);

// The line for an event, without a trailing newline. Secret values
// (core/redact.h) in field values are masked as "***": every log line is
// made here, so none carries a secret.
std::string FormatLogEvent(LogLevel level, std::string_view event,
                           const std::vector<LogField>& fields);

// The same event as one line of JSON, without a trailing newline:
// {"time":"2026-12-07T10:00:00.123Z","level":"warn","event":"...",
//  "fields":{"key":value,...}}, fields in order, integers and booleans
// unquoted, text masked as in FormatLogEvent and written as valid UTF-8
// (an invalid byte becomes U+FFFD).
std::string FormatLogEventJson(LogLevel level, std::string_view event,
                               const std::vector<LogField>& fields,
                               std::chrono::system_clock::time_point time);

// Emits an event at `level` if it passes the minimum level.
void LogEvent(LogLevel level, std::string_view event,
              std::initializer_list<LogField> fields);
void LogEvent(LogLevel level, std::string_view event,
              const std::vector<LogField>& fields);

// Minimum level written (default kInfo). Thread-safe.
void SetMinLogLevel(LogLevel level);

// How LogEvent writes its lines (default kText). Thread-safe. A sink
// (SetLogSink) receives lines in this format.
void SetLogFormat(LogFormat format);
LogFormat CurrentLogFormat();

// Replaces where lines go (nullptr restores stderr). Returns the old sink.
// For tests, and for a live terminal printer that writes the lines to stderr
// above its status block (cli/terminal_printer.h). Thread-safe; the sink is
// called under a lock that SetLogSink also takes, so once it returns the
// old sink is no longer running.
using LogSink = std::function<void(LogLevel, const std::string& line)>;
LogSink SetLogSink(LogSink sink);

}  // namespace steps

#endif  // STEPS_CORE_LOG_H_
