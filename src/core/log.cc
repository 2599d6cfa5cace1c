#include "core/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>

#include "core/redact.h"

namespace steps {
namespace {

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};
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
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || c == '\n' ||
        c == '\t' || c == '\r') {
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
        out += c;
    }
  }
  out += '"';
}

}  // namespace

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

void LogEvent(LogLevel level, std::string_view event,
              std::initializer_list<LogField> fields) {
  LogEvent(level, event, std::vector<LogField>(fields));
}

void LogEvent(LogLevel level, std::string_view event,
              const std::vector<LogField>& fields) {
  if (static_cast<int>(level) < g_min_level.load()) return;
  std::string line = FormatLogEvent(level, event, fields);
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

LogSink SetLogSink(LogSink sink) {
  std::lock_guard<std::mutex> lock(g_sink_mu);
  std::swap(g_sink, sink);
  return sink;
}

}  // namespace steps
