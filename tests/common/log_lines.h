// Reads log lines back: a plain line ("WRN event key=value ...") and a JSON
// line's fields, as the same list of (key, text) pairs, so a test can say
// the two formats carry the same fields.
#ifndef STEPS_TESTS_COMMON_LOG_LINES_H_
#define STEPS_TESTS_COMMON_LOG_LINES_H_

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace steps::test_support {

using LogPairs = std::vector<std::pair<std::string, std::string>>;

struct PlainLogLine {
  std::string level;  // "WRN"
  std::string event;
  LogPairs fields;  // Values unquoted and unescaped.
};

// Splits a line FormatLogEvent wrote; a quoted value is read back whole.
inline PlainLogLine ParsePlainLogLine(const std::string& line) {
  PlainLogLine out;
  size_t i = line.find(' ');
  out.level = line.substr(0, i);
  if (i == std::string::npos) return out;
  size_t j = line.find(' ', i + 1);
  out.event = line.substr(i + 1, j == std::string::npos ? j : j - i - 1);
  i = j;
  while (i != std::string::npos && i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t eq = line.find('=', i);
    if (eq == std::string::npos) break;
    std::string key = line.substr(i, eq - i);
    std::string value;
    i = eq + 1;
    if (i < line.size() && line[i] == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 3 < line.size() && line[i + 1] == 'x') {
          value +=
              static_cast<char>(std::stoi(line.substr(i + 2, 2), nullptr, 16));
          i += 3;
        } else if (line[i] == '\\' && i + 1 < line.size()) {
          char c = line[++i];
          value += c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' : c;
        } else {
          value += line[i];
        }
      }
      ++i;  // The closing quote.
    } else {
      size_t end = line.find(' ', i);
      value = line.substr(i, end == std::string::npos ? end : end - i);
      i = end;
    }
    out.fields.emplace_back(key, value);
  }
  return out;
}

// A JSON line's "fields" (parsed as ordered_json, which keeps their
// order), each value as the plain line shows it: text as
// it is, a number or a boolean as its JSON text.
inline LogPairs JsonLogFields(const nlohmann::ordered_json& line) {
  LogPairs out;
  for (const auto& [key, value] : line.at("fields").items()) {
    out.emplace_back(
        key, value.is_string() ? value.get<std::string>() : value.dump());
  }
  return out;
}

}  // namespace steps::test_support

#endif  // STEPS_TESTS_COMMON_LOG_LINES_H_
