// Reading `sandbox:` (defaults, agent entries, steps). Its forms:
//   sandbox: bwrap | none
//   sandbox: { kind: bwrap | none, network: true | false }
#include "pipeline/loader_internal.h"

namespace steps::pipeline::internal {
namespace {

constexpr const char* kSandboxForms =
    "write 'sandbox: bwrap', 'sandbox: none' or "
    "'sandbox: { kind: bwrap, network: true }'";

std::optional<SandboxSpec::Kind> ReadKind(const YAML::Node& n,
                                          const std::string& key,
                                          Diagnostics& d) {
  std::optional<std::string> v = ReadString(n, key, d);
  if (!v) return std::nullopt;
  if (*v == "bwrap") return SandboxSpec::Kind::kBwrap;
  if (*v == "none") return SandboxSpec::Kind::kNone;
  d.Error(LineOf(n), "'" + key + "' must be bwrap or none, not '" + *v +
                         "': " + kSandboxForms);
  return std::nullopt;
}

std::optional<SandboxSpec> ReadSandboxMap(const YAML::Node& n, Diagnostics& d) {
  MapReader r(n, "'sandbox'", d);
  SandboxSpec spec;
  YAML::Node kind = r.Take("kind");
  if (!kind.IsDefined()) {
    d.Error(LineOf(n), std::string("'sandbox' needs 'kind': ") + kSandboxForms);
    r.Take("network");
    r.Finish();
    return std::nullopt;
  }
  std::optional<SandboxSpec::Kind> k = ReadKind(kind, "sandbox.kind", d);
  std::optional<bool> network =
      ReadBool(r.Take("network"), "sandbox.network", d);
  r.Finish();
  if (!k) return std::nullopt;
  spec.kind = *k;
  if (network && *network && !spec.bwrap()) {
    d.Warn(r.KeyLine("network"),
           "'network' only matters with 'kind: bwrap'; without a sandbox "
           "commands have the host's network anyway");
  }
  spec.network = network.value_or(false);
  return spec;
}

}  // namespace

void ReadSandbox(MapReader& r, Written<SandboxSpec>& out, Diagnostics& d) {
  YAML::Node n = r.Take("sandbox");
  if (!n.IsDefined()) return;
  out.line = r.KeyLine("sandbox");
  if (n.IsScalar()) {
    if (std::optional<SandboxSpec::Kind> k = ReadKind(n, "sandbox", d)) {
      out.value = SandboxSpec{*k, false};
    }
  } else if (n.IsMap()) {
    out.value = ReadSandboxMap(n, d);
  } else {
    d.Error(out.line, "'sandbox' must be a word or a mapping, not " +
                          DescribeNodeType(n) + ": " + kSandboxForms);
  }
}

void ReadStepSandbox(MapReader& r, Step& step, Diagnostics& d) {
  if (!r.Has("sandbox")) return;
  if (step.is_container()) {
    r.Take("sandbox");
    d.Error(r.KeyLine("sandbox"),
            "'sandbox' applies to task, get, put and agent steps, not to a "
            "block: set it on the steps inside, or under 'defaults:'");
    return;
  }
  if (step.kind == StepKind::kGate) {
    r.Take("sandbox");
    d.Error(r.KeyLine("sandbox"),
            "'sandbox' applies to task, get, put and agent steps; a gate "
            "runs nothing");
    return;
  }
  ReadSandbox(r, step.sandbox, d);
}

}  // namespace steps::pipeline::internal
