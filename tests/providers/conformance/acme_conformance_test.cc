// The example adapter of docs/providers.md (docs/examples/adapters/acme.cc,
// compiled into this binary as its one file) through the conformance kit.
#include <nlohmann/json.hpp>

#include "conformance/adapter_conformance.h"

namespace steps {
void RegisterAdapter_acme(ProviderRegistry& registry);
}  // namespace steps

namespace steps::conformance {
namespace {

using nlohmann::json;

std::string Event(const json& data, const std::string& name = "") {
  return (name.empty() ? "" : "event: " + name + "\n") +
         "data: " + data.dump() + "\n\n";
}

WireFormat AcmeWire() {
  WireFormat w;
  w.path = "/generate";
  w.carries_key = [](const std::string& request, const std::string& key) {
    return request.find("Authorization: Bearer " + key) != std::string::npos;
  };
  w.text_answer = [](const std::string& text, int64_t in, int64_t out) {
    return json{{"output", text}, {"tokens", {{"in", in}, {"out", out}}}}
        .dump();
  };
  w.tool_call_answer = [](const ToolCall& c) {
    return json{
        {"output", ""},
        {"calls", {{{"id", c.id}, {"name", c.name}, {"args", c.arguments}}}}}
        .dump();
  };
  w.text_stream = [](const std::vector<std::string>& pieces, int64_t in,
                     int64_t out) {
    std::string s;
    for (const std::string& p : pieces) s += Event({{"text", p}});
    return s + Event({{"done", true}, {"tokens", {{"in", in}, {"out", out}}}});
  };
  w.tool_call_stream = [](const ToolCall& c,
                          const std::vector<std::string>& pieces) {
    std::string s = Event({{"call", {{"id", c.id}, {"name", c.name}}}});
    for (const std::string& p : pieces) s += Event({{"args", p}});
    return s + Event({{"done", true}});
  };
  w.stream_start = [] { return Event({{"text", "Hel"}}); };
  w.error_stream = [] {
    return Event({{"text", "Hel"}}) +
           Event({{"message", "overloaded"}}, "error");
  };
  w.bad_usage_answer = [](const std::string& raw_in) {
    return R"({"output":"x","tokens":{"in":)" + raw_in + R"(,"out":1}})";
  };
  w.parameters = {{"temperature", {"/temperature", 0.25}},
                  {"max_output_tokens", {"/max_tokens", 77}}};
  return w;
}

INSTANTIATE_TEST_SUITE_P(Example, AdapterConformanceTest,
                         ::testing::Values(AdapterUnderTest{
                             "acme", RegisterAdapter_acme, AcmeWire()}),
                         AdapterConformanceName);

}  // namespace
}  // namespace steps::conformance
