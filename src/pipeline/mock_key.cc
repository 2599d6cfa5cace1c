// The top-level `mock:` key: a script written inline, or `{file: PATH}`
// naming a script file (docs/mock.md), read here so every command sees the
// same script.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/yaml_limits.h"
#include "mock_provider/script.h"
#include "pipeline/loader.h"
#include "pipeline/loader_internal.h"

namespace steps::pipeline::internal {
namespace {

// `path` as written, relative to the folder of the pipeline `file`.
std::string ResolveNextTo(const std::string& file, const std::string& path) {
  std::filesystem::path p(path);
  if (p.is_absolute() || file.empty() || file == "<stdin>") return path;
  std::filesystem::path dir = std::filesystem::path(file).parent_path();
  return dir.empty() ? path : (dir / p).string();
}

// The script file's YAML, or an error message naming it (with its line).
std::optional<YAML::Node> ReadScriptFile(const std::string& path,
                                         std::string& why) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    why = "'" + path + "' does not exist";
    return std::nullopt;
  }
  if (std::filesystem::is_directory(path, ec)) {
    why = "'" + path + "' is a directory, not a script file";
    return std::nullopt;
  }
  // A FIFO would block the load until a writer came, a device such as
  // /dev/zero would never end: neither is opened. The size is checked
  // before reading, not after.
  if (!std::filesystem::is_regular_file(path, ec)) {
    why = "'" + path + "' is not a regular file (a FIFO, socket or device)";
    return std::nullopt;
  }
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxPipelineBytes) {
    why = "'" + path + "' is larger than " + std::to_string(kMaxPipelineBytes) +
          " bytes";
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  if (!in || !(buffer << in.rdbuf())) {
    why = "'" + path + "' cannot be read";
    return std::nullopt;
  }
  std::string text = buffer.str();
  if (text.size() > kMaxPipelineBytes) {
    why = "'" + path + "' is larger than " + std::to_string(kMaxPipelineBytes) +
          " bytes";
    return std::nullopt;
  }
  if (auto problem = CheckYamlLimits(text)) {
    why = path + ":" + std::to_string(problem->line) + ": " + problem->message;
    return std::nullopt;
  }
  try {
    YAML::Node node = YAML::Load(text);
    if (!node.IsMap()) {
      why = path + ":" + std::to_string(LineOf(node)) +
            ": a mock script is a mapping of agent or model names to lists of "
            "entries";
      return std::nullopt;
    }
    return node;
  } catch (const YAML::Exception& e) {
    why = path + ":" + std::to_string(e.mark.line + 1) +
          ": YAML syntax: " + e.msg;
    return std::nullopt;
  }
}

// True when `mock` is {file: PATH}: one key, `file`, with a scalar value.
// (A script for an agent named `file` is a list or a mapping.)
bool IsFileReference(const YAML::Node& mock) {
  if (mock.size() != 1) return false;
  YAML::Node file = mock["file"];
  return file.IsDefined() && file.IsScalar();
}

// `gates: {NAME: approve|reject}`: gate steps decided at once.
void ReadMockGates(const YAML::Node& gates, Pipeline& p, Diagnostics& d) {
  if (!gates.IsMap()) {
    d.Error(LineOf(gates),
            "mock: 'gates' must map gate names to approve or reject, e.g. "
            "{deploy: approve}");
    return;
  }
  for (const auto& kv : gates) {
    const std::string name = kv.first.Scalar();
    const std::string value = kv.second.IsScalar() ? kv.second.Scalar() : "";
    if (value == "approve") {
      p.mock_gates[name] = GateDecision::kApprove;
    } else if (value == "reject") {
      p.mock_gates[name] = GateDecision::kReject;
    } else {
      d.Error(LineOf(kv.second), "mock: gates: '" + name +
                                     "' must be approve or reject, not '" +
                                     value + "'");
    }
  }
}

}  // namespace

void ReadMock(const YAML::Node& mock, int key_line, Pipeline& p,
              Diagnostics& d) {
  if (!mock.IsMap()) {
    d.Error(LineOf(mock),
            "'mock' must be a mapping of scripts, or {file: PATH} (see "
            "docs/mock.md)");
    return;
  }
  p.mock_line = key_line;
  if (mock.size() > 1 && mock["file"].IsDefined() && mock["file"].IsScalar()) {
    d.Error(LineOf(mock["file"]),
            "mock: 'file' names a script file and stands alone; move the "
            "other scripts into that file");
    return;
  }
  YAML::Node script_node = mock;
  if (IsFileReference(mock)) {
    const int line = LineOf(mock["file"]);
    p.mock_file = ResolveNextTo(p.file, mock["file"].Scalar());
    std::string why;
    std::optional<YAML::Node> read = ReadScriptFile(p.mock_file, why);
    if (!read) {
      d.Error(line, "mock: file: " + why +
                        " (a path is relative to the pipeline's folder; "
                        "`steps run FILE --record` writes one)");
      return;
    }
    script_node.reset(*read);  // Rebinds (operator= would write into `mock`).
  }
  // `gates:` decides gate steps; the rest is the mock provider's script.
  if (script_node.IsMap() && script_node["gates"].IsDefined()) {
    ReadMockGates(script_node["gates"], p, d);
    YAML::Node rest(YAML::NodeType::Map);
    for (const auto& kv : script_node) {
      if (kv.first.Scalar() != "gates") rest[kv.first] = kv.second;
    }
    script_node.reset(rest);
  }
  // The mock provider reads the script; its errors carry their line.
  Result<MockScript> script = ParseMockScript(script_node);
  if (!script.ok()) {
    const std::string& m = script.status().message();
    size_t colon = m.find(": ");
    int line =
        colon == std::string::npos ? 0 : std::atoi(m.substr(0, colon).c_str());
    std::string text = line > 0 ? m.substr(colon + 2) : m;
    if (!p.mock_file.empty()) {
      d.Error(LineOf(mock["file"]), "mock: file: " + p.mock_file + ":" +
                                        std::to_string(line) + ": " + text);
    } else {
      d.Error(line > 0 ? line : key_line, "mock: " + text);
    }
    return;
  }
  p.mock = script_node;
}

}  // namespace steps::pipeline::internal
