#include "core/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "core/json_text.h"
#include "core/redact.h"

namespace steps {
namespace {

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};
std::mutex g_sink_mu;
LogSink g_sink;

spdlog::logger& StderrLogger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>(
        "steps", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern("%v");
    l->set_level(spdlog::level::trace);
    return l;
  }();
  return *logger;
}

bool NeedsQuotes(std::string_view v) {
  if (v.empty()) return true;
  for (char c : v) {
    const auto u = static_cast<unsigned char>(c);
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || u < 0x20 ||
        u == 0x7f) {
      return true;
    }
  }
  return false;
}

void AppendValue(std::string& out, std::string_view v) {
  if (!NeedsQuotes(v)) {
    out += v;
    return;
  }
  out += '"';
  for (char c : v) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        // No other control byte reaches a terminal: an escape sequence in
        // a server's answer is shown, not obeyed.
        if (static_cast<unsigned char>(c) < 0x20 ||
            static_cast<unsigned char>(c) == 0x7f) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\x";
          out += kHex[static_cast<unsigned char>(c) >> 4];
          out += kHex[static_cast<unsigned char>(c) & 15];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

std::string_view LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "unknown";
}

// "2026-12-07T10:00:00.123Z".
std::string Rfc3339Millis(std::chrono::system_clock::time_point time) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      time.time_since_epoch())
                      .count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  int frac = static_cast<int>(ms % 1000);
  if (frac < 0) {
    frac += 1000;
    --secs;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                tm.tm_min, tm.tm_sec, frac);
  return buf;
}

}  // namespace

std::optional<LogFormat> ParseLogFormat(std::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return std::nullopt;
}

std::string_view LogLevelTag(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DBG";
    case LogLevel::kInfo:
      return "INF";
    case LogLevel::kWarn:
      return "WRN";
    case LogLevel::kError:
      return "ERR";
  }
  return "???";
}

std::string FormatLogEvent(LogLevel level, std::string_view event,
                           const std::vector<LogField>& fields) {
  // Values are masked before they are quoted, so a secret holding a quote
  // or a backslash is still found as written.
  std::shared_ptr<const Redactor> redactor = ProcessRedactor();
  std::string line;
  line += LogLevelTag(level);
  line += ' ';
  line += event;
  for (const LogField& f : fields) {
    line += ' ';
    line += f.key;
    line += '=';
    AppendValue(line, redactor->empty() ? f.value : redactor->Redact(f.value));
  }
  return line;
}

std::string FormatLogEventJson(LogLevel level, std::string_view event,
                               const std::vector<LogField>& fields,
                               std::chrono::system_clock::time_point time) {
  std::shared_ptr<const Redactor> redactor = ProcessRedactor();
  std::string line = "{\"time\":\"";
  line += Rfc3339Millis(time);
  line += "\",\"level\":\"";
  line += LevelName(level);
  line += "\",\"event\":";
  AppendJsonString(line, event);
  line += ",\"fields\":{";
  bool first = true;
  for (const LogField& f : fields) {
    if (!first) line += ',';
    first = false;
    AppendJsonString(line, f.key);
    line += ':';
    std::string masked =
        redactor->empty() ? f.value : redactor->Redact(f.value);
    // Made from an integer or a bool, the text is valid JSON as it is;
    // a number that holds a secret is masked as text, as in a plain line.
    if (f.kind != LogField::Kind::kText && masked == f.value) {
      line += f.value;
    } else {
      AppendJsonString(line, masked);
    }
  }
  line += "}}";
  return line;
}

void LogEvent(LogLevel level, std::string_view event,
              std::initializer_list<LogField> fields) {
  LogEvent(level, event, std::vector<LogField>(fields));
}

void LogEvent(LogLevel level, std::string_view event,
              const std::vector<LogField>& fields) {
  if (static_cast<int>(level) < g_min_level.load()) return;
  std::string line = static_cast<LogFormat>(g_format.load()) == LogFormat::kJson
                         ? FormatLogEventJson(level, event, fields,
                                              std::chrono::system_clock::now())
                         : FormatLogEvent(level, event, fields);
  {
    std::lock_guard<std::mutex> lock(g_sink_mu);
    if (g_sink) {
      g_sink(level, line);
      return;
    }
  }
  StderrLogger().info(line);
}

void SetMinLogLevel(LogLevel level) { g_min_level = static_cast<int>(level); }

void SetLogFormat(LogFormat format) { g_format = static_cast<int>(format); }

LogFormat CurrentLogFormat() { return static_cast<LogFormat>(g_format.load()); }

LogSink SetLogSink(LogSink sink) {
  std::lock_guard<std::mutex> lock(g_sink_mu);
  std::swap(g_sink, sink);
  return sink;
}

}  // namespace steps
