// Reading YAML nodes into typed values with messages that name the key and
// its line. Every reader reports into a Diagnostics and returns nullopt on a
// bad value, so one pass finds every problem in a file.
#ifndef STEPS_PIPELINE_YAML_READER_H_
#define STEPS_PIPELINE_YAML_READER_H_

#include <yaml-cpp/yaml.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/duration.h"
#include "pipeline/diagnostics.h"

namespace steps::pipeline {

// 1-based line of a node (0 for a null node without a mark).
int LineOf(const YAML::Node& node);

// "a mapping", "a list", "a string", "nothing": for type errors.
std::string DescribeNodeType(const YAML::Node& node);

// Reads the keys of one mapping. Take() marks a key as known; Finish() warns
// about every key that was not taken, with its line.
class MapReader {
 public:
  // `what` names the mapping in messages, e.g. "a task step", "retry".
  MapReader(const YAML::Node& map, std::string what, Diagnostics& diags);

  // The value of `key`, or an undefined node when absent.
  YAML::Node Take(const std::string& key);
  bool Has(const std::string& key) const;
  // Line of `key` itself (0 when absent).
  int KeyLine(const std::string& key) const;
  // Keys not taken yet, in file order.
  std::vector<std::string> Untaken() const;
  // Warns "unknown key 'K' in WHAT — ignored" for each key not taken.
  void Finish();

  Diagnostics& diags() { return diags_; }
  void set_what(std::string what) { what_ = std::move(what); }
  const std::string& what() const { return what_; }

 private:
  struct Entry {
    std::string key;
    int line;
    YAML::Node value;
  };
  const Entry* Find(const std::string& key) const;

  std::vector<Entry> entries_;  // In file order.
  // Key -> its first entry: a mapping may have 100,000 keys, and looking
  // each one up by a scan made reading it quadratic.
  std::unordered_map<std::string, size_t> first_;
  std::set<std::string> taken_;
  std::string what_;
  Diagnostics& diags_;
};

// Scalar readers. `key` is the name shown in messages (e.g. "retry.backoff").
// Each returns nullopt (after reporting an error) when the value is absent
// and required, or present and malformed.
std::optional<std::string> ReadString(const YAML::Node& n,
                                      const std::string& key, Diagnostics& d);
// ReadString for a name (of a job, agent, resource or step): valid UTF-8
// without control characters too.
std::optional<std::string> ReadName(const YAML::Node& n, const std::string& key,
                                    Diagnostics& d);
// True when `text` holds a C0 or C1 control character or DEL.
bool HasControlCharacter(std::string_view text);
// `text` quoted, its control characters written \xNN (C0, DEL) or \u00NN
// (C1), for messages.
std::string ShownEscaped(std::string_view text);
std::optional<bool> ReadBool(const YAML::Node& n, const std::string& key,
                             Diagnostics& d);
// An integer in [min, max]; `rule` completes "'KEY' must be RULE" on error.
std::optional<int64_t> ReadInt(const YAML::Node& n, const std::string& key,
                               int64_t min, int64_t max,
                               const std::string& rule, Diagnostics& d);
std::optional<double> ReadNumber(const YAML::Node& n, const std::string& key,
                                 double min, const std::string& rule,
                                 Diagnostics& d);
// The longest duration a file may write, either way: 100 years.
inline constexpr Millis kMaxWrittenDuration = std::chrono::hours(876000);

// A duration ("30s", "1h30m"). A bare integer is read in `bare_unit` when
// given; otherwise only a bare 0 is accepted (zero in any unit). Negative
// values are returned for the caller to refuse with its own wording; one
// beyond kMaxWrittenDuration either way is refused here.
std::optional<Millis> ReadDuration(const YAML::Node& n, const std::string& key,
                                   std::optional<Millis> bare_unit,
                                   Diagnostics& d);
// A list of strings; a single string is taken as a list of one.
std::optional<std::vector<std::string>> ReadStringList(const YAML::Node& n,
                                                       const std::string& key,
                                                       Diagnostics& d);
// A mapping of string to scalar (e.g. env).
std::optional<std::map<std::string, std::string>> ReadStringMap(
    const YAML::Node& n, const std::string& key, Diagnostics& d);

// Converts any YAML value to JSON (plain scalars become numbers, booleans or
// null where they read as such). Refuses documents that expand past
// `max_nodes` nodes (alias bombs) or `max_depth` levels.
std::optional<nlohmann::json> ReadJson(const YAML::Node& n,
                                       const std::string& key, Diagnostics& d,
                                       int max_nodes = 100000,
                                       int max_depth = 64);

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_YAML_READER_H_
