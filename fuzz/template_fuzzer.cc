// Fuzz target: the template subset of resource scripts and across cells.
// The input is a template; after a NUL byte, an optional JSON context
// replaces the default one.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "pipeline/template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view text = input.substr(0, input.find('\0'));
  nlohmann::json context = {
      {"version", {{"ref", "abc'; rm -rf /"}, {"n", 3}}},
      {"params", {{"list", {1, "two", nullptr, {{"deep", true}}}}}},
      {"item", "x"},
      {"bytes", "\xff\xfe"}};
  if (text.size() < input.size()) {
    nlohmann::json given = nlohmann::json::parse(
        input.substr(text.size() + 1), nullptr, /*allow_exceptions=*/false);
    if (!given.is_discarded()) context = std::move(given);
  }
  steps::pipeline::CheckTemplate(text);
  steps::pipeline::RenderTemplate(text, context);
  steps::pipeline::RenderTemplateRoots(text, context, {"version", "item"});
  steps::pipeline::ShellQuote(text);
  return 0;
}
