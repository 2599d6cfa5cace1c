// The one way JSON becomes text. nlohmann::json::dump() throws (type_error
// 316) on a string that is not valid UTF-8, and such strings reach us from
// task output, tool results, model answers and mock scripts. Every JSON
// writer (the run store, `steps show --json`, `steps runs --json`, the UI
// API, request bodies, the mock provider) goes through DumpJson, which
// never throws: each invalid byte is written as U+FFFD.
#ifndef STEPS_CORE_JSON_TEXT_H_
#define STEPS_CORE_JSON_TEXT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace steps {

// `value` serialised as valid UTF-8 JSON. `indent` as for dump(): -1 is
// compact, N >= 0 pretty-prints with N spaces.
std::string DumpJson(const nlohmann::json& value, int indent = -1);

// Whether `text`, read as JSON, nests arrays and objects at most
// `max_depth` deep (brackets inside strings do not count). Linear, no
// recursion: checked before a parser that recurses sees untrusted text.
bool JsonDepthWithin(std::string_view text, int max_depth);

// Appends `text` to `out` as a JSON string, quotes included, byte for byte
// as DumpJson writes it (invalid UTF-8 included), without building a json
// value: for writers that lay out JSON themselves on a hot path.
void AppendJsonString(std::string& out, std::string_view text);

}  // namespace steps

#endif  // STEPS_CORE_JSON_TEXT_H_
