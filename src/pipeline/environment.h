// What the processes a pipeline starts see of the environment `steps` runs
// in, and which of its variables are secret (docs/secrets.md).
//
// Provider key variables are withheld from tasks, resource scripts and
// run_shell: they reach a process only through an `env:` entry that names
// them, `NAME: ${NAME}` (or the list form `env: [NAME]`). CLI sources see a
// minimal base plus their own `env:`. The values of secret variables are
// masked as "***" wherever steps shows or keeps text.
#ifndef STEPS_PIPELINE_ENVIRONMENT_H_
#define STEPS_PIPELINE_ENVIRONMENT_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "pipeline/model.h"

namespace steps::pipeline {

// Reads a variable of the environment steps runs in; nullopt when unset.
using EnvLookup =
    std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (getenv).
EnvLookup ProcessEnvLookup();

// The key variables of the built-in providers: OPENAI_API_KEY,
// ANTHROPIC_API_KEY, OPENROUTER_API_KEY, OLLAMA_API_KEY.
const std::vector<std::string>& BuiltinProviderKeyVariables();

// The built-in key variables and every `api_key_env` a source of `p` names
// (agent entries, fallbacks, defaults). Withheld from tasks and run_shell.
std::vector<std::string> ProviderKeyVariables(const Pipeline& p);

// Provider key variables and the pipeline's `secrets:`: the variables whose
// values are masked.
std::vector<std::string> SecretVariables(const Pipeline& p);

// True for a valid environment variable name: letters, digits and '_', not
// starting with a digit.
bool IsEnvName(std::string_view name);

// `value` with every `${NAME}` replaced by NAME's value from `lookup` (an
// unset variable gives "" and is added to `unset` when given) and every
// `$${` by a literal `${`. Other `$` signs are kept as written.
std::string ExpandEnvReferences(std::string_view value, const EnvLookup& lookup,
                                std::vector<std::string>* unset = nullptr);

// Why `value` cannot be expanded (a `${` that opens no `${NAME}`), or OK.
Status CheckEnvReferences(std::string_view value);

// Each value of `env` expanded (ExpandEnvReferences).
std::map<std::string, std::string> ExpandEnv(
    const std::map<std::string, std::string>& env, const EnvLookup& lookup,
    std::vector<std::string>* unset = nullptr);

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_ENVIRONMENT_H_
