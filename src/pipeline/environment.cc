#include "pipeline/environment.h"

#include <cstdlib>
#include <set>

namespace steps::pipeline {
namespace {

// At `value[pos]` == '$': the length of a `${NAME}` reference starting
// there and its name, or 0.
size_t ReferenceAt(std::string_view value, size_t pos, std::string* name) {
  if (pos + 1 >= value.size() || value[pos + 1] != '{') return 0;
  size_t close = value.find('}', pos + 2);
  if (close == std::string_view::npos) return 0;
  std::string_view inner = value.substr(pos + 2, close - pos - 2);
  if (!IsEnvName(inner)) return 0;
  *name = std::string(inner);
  return close - pos + 1;
}

void AddSourceKey(const ModelSource& s, std::set<std::string>& names) {
  if (s.api_key_env && IsEnvName(*s.api_key_env)) names.insert(*s.api_key_env);
}

}  // namespace

EnvLookup ProcessEnvLookup() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

const std::vector<std::string>& BuiltinProviderKeyVariables() {
  static const std::vector<std::string> kNames = {
      "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY",
      "OLLAMA_API_KEY"};
  return kNames;
}

std::vector<std::string> ProviderKeyVariables(const Pipeline& p) {
  std::set<std::string> names(BuiltinProviderKeyVariables().begin(),
                              BuiltinProviderKeyVariables().end());
  if (p.defaults.source) AddSourceKey(*p.defaults.source, names);
  for (const AgentEntry& a : p.agents) {
    if (a.source) AddSourceKey(*a.source, names);
    for (const ModelSource& f : a.fallback) AddSourceKey(f, names);
  }
  return {names.begin(), names.end()};
}

std::vector<std::string> SecretVariables(const Pipeline& p) {
  std::vector<std::string> names = ProviderKeyVariables(p);
  std::set<std::string> seen(names.begin(), names.end());
  for (const std::string& s : p.secrets) {
    if (seen.insert(s).second) names.push_back(s);
  }
  return names;
}

bool IsEnvName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

std::string ExpandEnvReferences(std::string_view value, const EnvLookup& lookup,
                                std::vector<std::string>* unset) {
  std::string out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] != '$') {
      out += value[i];
      continue;
    }
    if (value.substr(i, 3) == "$${") {
      out += "${";
      i += 2;
      continue;
    }
    std::string name;
    if (size_t len = ReferenceAt(value, i, &name)) {
      std::optional<std::string> v = lookup(name);
      if (v) {
        out += *v;
      } else if (unset) {
        unset->push_back(name);
      }
      i += len - 1;
      continue;
    }
    out += '$';
  }
  return out;
}

Status CheckEnvReferences(std::string_view value) {
  for (size_t i = 0; i + 1 < value.size(); ++i) {
    if (value[i] != '$') continue;
    if (value.substr(i, 3) == "$${") {
      i += 2;
      continue;
    }
    if (value[i + 1] != '{') continue;
    std::string name;
    size_t len = ReferenceAt(value, i, &name);
    if (len == 0) {
      return InvalidArgument(
          "'" + std::string(value) +
          "' has a '${' that is not a reference: write ${NAME} with NAME an "
          "environment variable (letters, digits, '_'), or $${ for a "
          "literal ${");
    }
    i += len - 1;
  }
  return Status::Ok();
}

std::map<std::string, std::string> ExpandEnv(
    const std::map<std::string, std::string>& env, const EnvLookup& lookup,
    std::vector<std::string>* unset) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : env) {
    out[name] = ExpandEnvReferences(value, lookup, unset);
  }
  return out;
}

}  // namespace steps::pipeline
