// Reading `env:` (steps, defaults, CLI sources) and `secrets:`.
#include <cctype>
#include <cstring>

#include "pipeline/environment.h"
#include "pipeline/loader_internal.h"

namespace steps::pipeline::internal {
namespace {

constexpr const char* kNameRule =
    "an environment variable name is letters, digits and '_', not starting "
    "with a digit";

// Reports and returns false when `name` (at `line`) is no variable name.
bool CheckName(const std::string& name, int line, const std::string& key,
               Diagnostics& d) {
  if (IsEnvName(name)) return true;
  d.Error(line, "'" + key + "' names '" + name + "': " + kNameRule);
  return false;
}

// The list form: each name is passed through, NAME: ${NAME}.
std::optional<std::map<std::string, std::string>> ReadEnvNames(
    const YAML::Node& n, const std::string& key, Diagnostics& d) {
  std::map<std::string, std::string> out;
  bool ok = true;
  for (const YAML::Node& item : n) {
    if (!item.IsScalar()) {
      d.Error(LineOf(item), "each entry of '" + key +
                                "' must be a variable name, not " +
                                DescribeNodeType(item));
      ok = false;
      continue;
    }
    const std::string& name = item.Scalar();
    if (!CheckName(name, LineOf(item), key, d)) {
      ok = false;
      continue;
    }
    out[name] = "${" + name + "}";
  }
  if (!ok) return std::nullopt;
  return out;
}

}  // namespace

std::optional<std::map<std::string, std::string>> ReadEnv(
    const YAML::Node& n, const std::string& key, Diagnostics& d) {
  if (!n.IsDefined() || n.IsNull()) return std::nullopt;
  if (n.IsSequence()) return ReadEnvNames(n, key, d);
  std::optional<std::map<std::string, std::string>> env =
      ReadStringMap(n, key, d);
  if (!env) return std::nullopt;
  bool ok = true;
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string name = it->first.Scalar();
    ok = CheckName(name, LineOf(it->first), key, d) && ok;
    if (Status s = CheckEnvReferences(it->second.Scalar()); !s.ok()) {
      d.Error(LineOf(it->second), "'" + key + "." + name + "': " + s.message());
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return env;
}

void ReadSourceEnv(MapReader& r, const std::string& key, ModelSource& s) {
  YAML::Node n = r.Take("env");
  if (!n.IsDefined()) return;
  Diagnostics& d = r.diags();
  if (!s.is_cli()) {
    d.Error(r.KeyLine("env"),
            "'" + key +
                ".env' is only for a CLI source: a hosted model's key is read "
                "by steps itself (see api_key_env)");
    return;
  }
  if (auto env = ReadEnv(n, key + ".env", d)) s.env = *env;
}

namespace {

// RFC 9110 token characters.
bool IsHeaderName(const std::string& name) {
  if (name.empty()) return false;
  for (unsigned char c : name) {
    if (std::isalnum(c) || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr) {
      continue;
    }
    return false;
  }
  return true;
}

// Headers the transport or the engine sets itself.
bool IsOwnedHeader(std::string name, const std::vector<std::string>& also) {
  for (char& c : name) c = static_cast<char>(std::tolower(c));
  for (const std::string& a : also) {
    if (name == a) return true;
  }
  return name == "content-type" || name == "content-length" || name == "host" ||
         name == "transfer-encoding" || name == "connection" ||
         name.rfind("x-steps-", 0) == 0;
}

}  // namespace

std::optional<std::map<std::string, std::string>> ReadHeaderMap(
    const YAML::Node& n, const std::string& where,
    const std::vector<std::string>& also_owned, Diagnostics& d) {
  std::optional<std::map<std::string, std::string>> headers =
      ReadStringMap(n, where, d);
  if (!headers) return std::nullopt;
  bool ok = true;
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string name = it->first.Scalar();
    const std::string& value = it->second.Scalar();
    if (!IsHeaderName(name)) {
      d.Error(LineOf(it->first),
              "'" + where + "' names '" + name +
                  "': a header name is letters, digits and !#$%&'*+-.^_`|~");
      ok = false;
    } else if (IsOwnedHeader(name, also_owned)) {
      d.Error(LineOf(it->first),
              "'" + where + "." + name + "' is set by steps itself; remove it");
      ok = false;
    }
    if (value.find_first_of(std::string("\r\n\0", 3)) != std::string::npos) {
      d.Error(LineOf(it->second),
              "'" + where + "." + name + "' holds a line break or NUL byte");
      ok = false;
    } else if (Status st = CheckEnvReferences(value); !st.ok()) {
      d.Error(LineOf(it->second),
              "'" + where + "." + name + "': " + st.message());
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return headers;
}

void ReadSourceHeaders(MapReader& r, const std::string& key, ModelSource& s) {
  YAML::Node n = r.Take("headers");
  if (!n.IsDefined() || n.IsNull()) return;
  Diagnostics& d = r.diags();
  const std::string where = key + ".headers";
  if (s.is_cli()) {
    d.Error(r.KeyLine("headers"), "'" + where +
                                      "' is for a hosted model: a CLI source "
                                      "sends no HTTP requests");
    return;
  }
  if (auto headers = ReadHeaderMap(n, where, {}, d)) {
    s.headers = std::move(*headers);
  }
}

void ReadSecrets(const YAML::Node& n, Pipeline& p, Diagnostics& d) {
  if (!n.IsDefined() || n.IsNull()) return;
  if (!n.IsSequence()) {
    d.Error(LineOf(n),
            "'secrets' must be a list of environment variable names, e.g. "
            "[DEPLOY_TOKEN], not " +
                DescribeNodeType(n));
    return;
  }
  for (const YAML::Node& item : n) {
    if (!item.IsScalar()) {
      d.Error(LineOf(item),
              "each entry of 'secrets' must be a variable name, not " +
                  DescribeNodeType(item));
      continue;
    }
    if (CheckName(item.Scalar(), LineOf(item), "secrets", d))
      p.secrets.push_back(item.Scalar());
  }
}

}  // namespace steps::pipeline::internal
