// `steps providers [--json]`: the model providers this `steps` has, with
// what a source needs to use each one (docs/providers.md).
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "core/json_text.h"
#include "providers/adapter.h"
#include "providers/model_parameters.h"
#include "providers/registry.h"

namespace steps::cli {
namespace {

using nlohmann::json;

struct ProviderRow {
  std::string name;
  std::string base_url;   // Empty: none (the mock).
  std::string key_env;    // Empty: the provider reads no key.
  bool key_required = false;
  bool key_set = false;
  bool can_stream = false;
  std::string mock;       // "wire", "interface" or "itself".
  std::string mock_wire;  // "openai_chat", "anthropic" or empty.
  std::vector<std::string> parameters;
};

std::string WireName(MockWireFormat f) {
  switch (f) {
    case MockWireFormat::kOpenAiChat: return "openai_chat";
    case MockWireFormat::kAnthropic: return "anthropic";
    case MockWireFormat::kNone: break;
  }
  return "";
}

bool IsSet(const std::string& var) {
  const char* v = var.empty() ? nullptr : std::getenv(var.c_str());
  return v != nullptr && *v != '\0';
}

std::vector<ProviderRow> Rows() {
  ProviderRegistry registry;
  RegisterBuiltinProviders(registry);
  std::vector<ProviderRow> rows;
  for (const std::string& name : registry.Names()) {
    auto adapter = registry.FindAdapter(name);
    if (adapter == nullptr) continue;
    const AdapterInfo& info = adapter->info();
    ProviderRow row{.name = name,
                    .base_url = info.default_base_url,
                    .key_env = info.key_env,
                    .key_required = info.key_required,
                    .key_set = IsSet(info.key_env),
                    .can_stream = info.can_stream,
                    .mock = info.mock_wire == MockWireFormat::kNone
                                ? "interface"
                                : "wire",
                    .mock_wire = WireName(info.mock_wire),
                    .parameters = info.parameters};
    rows.push_back(std::move(row));
  }
  // `mock/NAME` sources: answered from the pipeline's mock: block, always.
  ProviderRow mock;
  mock.name = "mock";
  mock.mock = "itself";
  mock.parameters = ModelParameters::AllKeys();
  rows.push_back(std::move(mock));
  return rows;
}

std::string KeyText(const ProviderRow& r) {
  if (r.key_env.empty()) return "-";
  std::string text = r.key_env + (r.key_set ? " (set)" : " (not set)");
  if (!r.key_required) text += ", optional";
  return text;
}

std::string MockText(const ProviderRow& r) {
  if (r.mock == "wire") return "on the wire (" + r.mock_wire + ")";
  if (r.mock == "interface") return "at the interface";
  return "answers from mock:";
}

// "all", "none", or the list.
std::string ParametersText(const std::vector<std::string>& listed) {
  if (listed.size() == ModelParameters::AllKeys().size()) return "all";
  if (listed.empty()) return "none";
  std::string text;
  for (const std::string& p : listed) text += (text.empty() ? "" : ", ") + p;
  return text;
}

void PrintTable(const std::vector<ProviderRow>& rows) {
  std::vector<std::vector<std::string>> cells = {
      {"PROVIDER", "DEFAULT BASE URL", "KEY", "STREAMS", "MOCK",
       "PARAMETERS"}};
  for (const ProviderRow& r : rows) {
    const std::string streams =
        r.mock == "itself" ? "-" : (r.can_stream ? "yes" : "no");
    cells.push_back({r.name, r.base_url.empty() ? "-" : r.base_url,
                     KeyText(r), streams, MockText(r),
                     ParametersText(r.parameters)});
  }
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& line : cells) {
    for (size_t i = 0; i < line.size(); ++i) {
      width[i] = std::max(width[i], line[i].size());
    }
  }
  for (const auto& line : cells) {
    std::string text;
    for (size_t i = 0; i < line.size(); ++i) {
      text += line[i];
      if (i + 1 < line.size()) {
        text += std::string(width[i] - line[i].size() + 2, ' ');
      }
    }
    std::cout << text << "\n";
  }
}

json RowsJson(const std::vector<ProviderRow>& rows) {
  json out = json::array();
  for (const ProviderRow& r : rows) {
    json j{{"name", r.name},
           {"default_base_url", r.base_url.empty() ? json() : json(r.base_url)},
           {"key_env", r.key_env.empty() ? json() : json(r.key_env)},
           {"key_required", r.key_required},
           {"key_set", r.key_set},
           {"streams", r.can_stream},
           {"mock", r.mock},
           {"mock_wire", r.mock_wire.empty() ? json() : json(r.mock_wire)},
           {"parameters", r.parameters}};
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

Command ProvidersCommand() {
  return {"providers",
          "List the model providers: default base URL, key variable, "
          "mock, model parameters",
          [](CLI::App& app) -> std::function<int()> {
            auto as_json = std::make_shared<bool>(false);
            app.add_flag("--json", *as_json, "Print the list as JSON");
            return [as_json] {
              const std::vector<ProviderRow> rows = Rows();
              if (*as_json) {
                std::cout << DumpJson(RowsJson(rows), 2) << "\n";
              } else {
                PrintTable(rows);
              }
              return kExitOk;
            };
          }};
}

}  // namespace steps::cli
