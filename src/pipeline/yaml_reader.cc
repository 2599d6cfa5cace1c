#include "pipeline/yaml_reader.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/utf8.h"

namespace steps::pipeline {
namespace {

bool IsQuoted(const YAML::Node& n) { return n.Tag() == "!"; }

std::string Quote(const std::string& s) {
  if (s.size() > 60) return "'" + s.substr(0, 57) + "...'";
  return "'" + s + "'";
}

}  // namespace

int LineOf(const YAML::Node& node) {
  if (!node.IsDefined()) return 0;
  const YAML::Mark m = node.Mark();
  return m.line < 0 ? 0 : m.line + 1;
}

std::string DescribeNodeType(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  return "the value " + Quote(node.Scalar());
}

MapReader::MapReader(const YAML::Node& map, std::string what,
                     Diagnostics& diags)
    : what_(std::move(what)), diags_(diags) {
  if (!map.IsMap()) return;
  for (auto it = map.begin(); it != map.end(); ++it) {
    std::string key = it->first.IsScalar() ? it->first.Scalar() : "?";
    int line = LineOf(it->first);
    auto [first, inserted] = first_.emplace(key, entries_.size());
    if (!inserted) {
      diags_.Error(
          line, "duplicate key '" + key + "' in " + what_ + " (first at line " +
                    std::to_string(entries_[first->second].line) + ")");
    }
    entries_.push_back({key, line, it->second});
  }
}

const MapReader::Entry* MapReader::Find(const std::string& key) const {
  auto it = first_.find(key);
  return it == first_.end() ? nullptr : &entries_[it->second];
}

YAML::Node MapReader::Take(const std::string& key) {
  taken_.insert(key);
  if (const Entry* e = Find(key)) return e->value;
  return YAML::Node(YAML::NodeType::Undefined);
}

bool MapReader::Has(const std::string& key) const {
  return Find(key) != nullptr;
}

int MapReader::KeyLine(const std::string& key) const {
  const Entry* e = Find(key);
  return e ? e->line : 0;
}

std::vector<std::string> MapReader::Untaken() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) {
    if (!taken_.count(e.key)) out.push_back(e.key);
  }
  return out;
}

void MapReader::Finish() {
  for (const Entry& e : entries_) {
    if (taken_.count(e.key)) continue;
    taken_.insert(e.key);
    diags_.Warn(e.line,
                "unknown key '" + e.key + "' in " + what_ + " — ignored");
  }
}

std::optional<std::string> ReadString(const YAML::Node& n,
                                      const std::string& key, Diagnostics& d) {
  if (!n.IsDefined()) return std::nullopt;
  if (!n.IsScalar()) {
    d.Error(LineOf(n),
            "'" + key + "' must be a string, not " + DescribeNodeType(n));
    return std::nullopt;
  }
  return n.Scalar();
}

std::optional<std::string> ReadName(const YAML::Node& n, const std::string& key,
                                    Diagnostics& d) {
  std::optional<std::string> name = ReadString(n, key, d);
  if (!name) return name;
  if (!IsValidUtf8(*name)) {
    d.Error(LineOf(n), "'" + key + "' " + ShownEscaped(SanitizeUtf8(*name)) +
                           " is not valid UTF-8: names are carried in "
                           "records and events, which are UTF-8");
    return std::nullopt;
  }
  if (HasControlCharacter(*name)) {
    d.Error(LineOf(n), "'" + key + "' " + ShownEscaped(*name) +
                           " holds a control character: names are shown "
                           "on terminals and in logs");
    return std::nullopt;
  }
  return name;
}

bool HasControlCharacter(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (ControlCharacterAt(text, i) > 0) return true;
  }
  return false;
}

std::string ShownEscaped(std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const size_t control = ControlCharacterAt(text, i);
    if (control == 0) {
      out += text[i];
      continue;
    }
    // C0 and DEL as \xNN; a C1 control (C2 NN) as \u00NN.
    if (control == 2) ++i;
    const auto code = static_cast<unsigned char>(text[i]);
    out += control == 2 ? "\\u00" : "\\x";
    out += kHex[code >> 4];
    out += kHex[code & 15];
  }
  return "'" + out + "'";
}

std::optional<bool> ReadBool(const YAML::Node& n, const std::string& key,
                             Diagnostics& d) {
  if (!n.IsDefined()) return std::nullopt;
  if (n.IsScalar() && !IsQuoted(n)) {
    const std::string& s = n.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  d.Error(LineOf(n),
          "'" + key + "' must be true or false, not " + DescribeNodeType(n));
  return std::nullopt;
}

std::optional<int64_t> ReadInt(const YAML::Node& n, const std::string& key,
                               int64_t min, int64_t max,
                               const std::string& rule, Diagnostics& d) {
  if (!n.IsDefined()) return std::nullopt;
  auto fail = [&] {
    d.Error(LineOf(n), "'" + key + "' must be " + rule + " (got " +
                           DescribeNodeType(n) + ")");
    return std::nullopt;
  };
  if (!n.IsScalar()) return fail();
  const std::string& s = n.Scalar();
  if (s.empty() || s.size() > 18) return fail();
  size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size()) return fail();
  for (size_t j = i; j < s.size(); ++j) {
    if (s[j] < '0' || s[j] > '9') return fail();
  }
  int64_t v = std::strtoll(s.c_str(), nullptr, 10);
  if (v < min || v > max) return fail();
  return v;
}

std::optional<double> ReadNumber(const YAML::Node& n, const std::string& key,
                                 double min, const std::string& rule,
                                 Diagnostics& d) {
  if (!n.IsDefined()) return std::nullopt;
  auto fail = [&] {
    d.Error(LineOf(n), "'" + key + "' must be " + rule + " (got " +
                           DescribeNodeType(n) + ")");
    return std::nullopt;
  };
  if (!n.IsScalar() || n.Scalar().empty() || n.Scalar().size() > 40)
    return fail();
  const std::string& s = n.Scalar();
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v) ||
      v < min) {
    return fail();
  }
  return v;
}

std::optional<Millis> ReadDuration(const YAML::Node& n, const std::string& key,
                                   std::optional<Millis> bare_unit,
                                   Diagnostics& d) {
  if (!n.IsDefined()) return std::nullopt;
  if (!n.IsScalar() || n.Scalar().empty()) {
    d.Error(LineOf(n),
            "'" + key + "' must be a duration such as 30s, 2m or 1h30m, not " +
                DescribeNodeType(n));
    return std::nullopt;
  }
  const std::string& s = n.Scalar();
  if (s == "0" || s == "-0" || s == "+0") return Millis(0);
  Result<Millis> r =
      bare_unit ? ParseDurationWithUnit(s, *bare_unit) : ParseDuration(s);
  if (!r.ok()) {
    bool bare = s.find_first_not_of("+-0123456789") == std::string::npos;
    if (bare && !bare_unit) {
      d.Error(LineOf(n), "'" + key + "' needs a unit: write e.g. " + s +
                             "s or " + s +
                             "m (a bare number has no unit here)");
    } else {
      d.Error(LineOf(n), "'" + key + "': " + r.status().message());
    }
    return std::nullopt;
  }
  // A deadline is a point on the steady clock, counted in nanoseconds: a
  // longer time would overflow it (and two such times added, too).
  if (r->count() > kMaxWrittenDuration.count() ||
      r->count() < -kMaxWrittenDuration.count()) {
    d.Error(LineOf(n), "'" + key + "' is at most " +
                           FormatDuration(kMaxWrittenDuration) +
                           " (100 years), not " + s);
    return std::nullopt;
  }
  return *r;
}

std::optional<std::vector<std::string>> ReadStringList(const YAML::Node& n,
                                                       const std::string& key,
                                                       Diagnostics& d) {
  if (!n.IsDefined() || n.IsNull()) return std::nullopt;
  if (n.IsScalar()) return std::vector<std::string>{n.Scalar()};
  if (!n.IsSequence()) {
    d.Error(LineOf(n), "'" + key + "' must be a list of strings, not " +
                           DescribeNodeType(n));
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (const YAML::Node& item : n) {
    if (!item.IsScalar()) {
      d.Error(LineOf(item), "each entry of '" + key +
                                "' must be a string, not " +
                                DescribeNodeType(item));
      ok = false;
      continue;
    }
    out.push_back(item.Scalar());
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::map<std::string, std::string>> ReadStringMap(
    const YAML::Node& n, const std::string& key, Diagnostics& d) {
  if (!n.IsDefined() || n.IsNull()) return std::nullopt;
  if (!n.IsMap()) {
    d.Error(LineOf(n), "'" + key +
                           "' must be a mapping of names to values, not " +
                           DescribeNodeType(n));
    return std::nullopt;
  }
  std::map<std::string, std::string> out;
  bool ok = true;
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!it->first.IsScalar() || !it->second.IsScalar()) {
      d.Error(
          LineOf(it->first),
          "each entry of '" + key + "' must be NAME: value with a plain value");
      ok = false;
      continue;
    }
    out[it->first.Scalar()] = it->second.Scalar();
  }
  if (!ok) return std::nullopt;
  return out;
}

namespace {

struct JsonBudget {
  int nodes_left;
  int max_depth;
  bool exceeded = false;
};

nlohmann::json ScalarToJson(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (IsQuoted(n)) return s;
  if (s == "null" || s == "~" || s.empty()) return nullptr;
  if (s == "true" || s == "True") return true;
  if (s == "false" || s == "False") return false;
  if (!s.empty() && s.size() < 19 &&
      s.find_first_not_of("-0123456789") == std::string::npos &&
      s.find('-', 1) == std::string::npos && s != "-") {
    return std::strtoll(s.c_str(), nullptr, 10);
  }
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() + s.size() && std::isfinite(v) &&
      s.find_first_of("0123456789") != std::string::npos &&
      s.find_first_not_of("+-0123456789.eE") == std::string::npos) {
    return v;
  }
  return s;
}

nlohmann::json ToJson(const YAML::Node& n, int depth, JsonBudget& b) {
  if (b.exceeded) return nullptr;
  if (--b.nodes_left < 0 || depth > b.max_depth) {
    b.exceeded = true;
    return nullptr;
  }
  if (!n.IsDefined() || n.IsNull()) return nullptr;
  if (n.IsScalar()) return ScalarToJson(n);
  if (n.IsSequence()) {
    nlohmann::json arr = nlohmann::json::array();
    for (const YAML::Node& item : n) arr.push_back(ToJson(item, depth + 1, b));
    return arr;
  }
  nlohmann::json obj = nlohmann::json::object();
  for (auto it = n.begin(); it != n.end(); ++it) {
    std::string k = it->first.IsScalar() ? it->first.Scalar() : "?";
    obj[k] = ToJson(it->second, depth + 1, b);
  }
  return obj;
}

}  // namespace

std::optional<nlohmann::json> ReadJson(const YAML::Node& n,
                                       const std::string& key, Diagnostics& d,
                                       int max_nodes, int max_depth) {
  if (!n.IsDefined()) return std::nullopt;
  JsonBudget budget{max_nodes, max_depth};
  nlohmann::json j = ToJson(n, 0, budget);
  if (budget.exceeded) {
    d.Error(LineOf(n), "'" + key +
                           "' is too large or too deeply nested (over " +
                           std::to_string(max_nodes) + " values or " +
                           std::to_string(max_depth) +
                           " levels once aliases are expanded)");
    return std::nullopt;
  }
  return j;
}

}  // namespace steps::pipeline
