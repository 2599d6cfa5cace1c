#include "pipeline/loader.h"

#include <yaml-cpp/depthguard.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "agent/agent.h"
#include "core/yaml_limits.h"
#include "pipeline/job_assert.h"
#include "pipeline/loader_internal.h"
#include "pipeline/yaml_reader.h"

namespace steps::pipeline {
namespace {

using internal::ReadBudget;
using internal::ReadList;
using internal::StepContext;

constexpr const char* kProviderHint =
    "write PROVIDER/MODEL, e.g. openai/gpt-4.1-mini, "
    "openrouter/qwen/qwen3.7-flash, "
    "anthropic/claude-sonnet-4-5, ollama/llama3, mock/any";

// A source's `price:` ({ input: USD, output: USD } per million tokens);
// nullopt when absent or wrong (reported).
std::optional<Price> ReadPrice(const YAML::Node& price, const std::string& key,
                               Diagnostics& d) {
  if (!price.IsDefined()) return std::nullopt;
  if (!price.IsMap()) {
    d.Error(LineOf(price), "'" + key +
                               ".price' must be { input: USD, output: USD } "
                               "per million tokens");
    return std::nullopt;
  }
  MapReader pr(price, "'" + key + ".price'", d);
  Price p;
  auto in = ReadNumber(pr.Take("input"), key + ".price.input", 0,
                       "a non-negative number", d);
  auto out = ReadNumber(pr.Take("output"), key + ".price.output", 0,
                        "a non-negative number", d);
  if (!pr.Has("input") || !pr.Has("output")) {
    d.Error(LineOf(price), "'" + key +
                               ".price' needs both 'input' and 'output' "
                               "(USD per million tokens)");
  }
  for (auto [v, side] : {std::pair{in, "input"}, std::pair{out, "output"}}) {
    if (v && *v > agent::kMaxPricePerMtok) {
      d.Error(LineOf(price), "'" + key + ".price." + side +
                                 "' is USD per million tokens: at most " +
                                 "1000000 ($1 a token)");
    }
  }
  if (in) p.input_per_mtok = *in;
  if (out) p.output_per_mtok = *out;
  pr.Finish();
  return p;
}

// Whether `model` names a provider and a model (PROVIDER/MODEL).
bool ValidModel(const std::string& model, int line, Diagnostics& d) {
  size_t slash = model.find('/');
  if (slash != std::string::npos && slash != 0 && slash + 1 != model.size())
    return true;
  d.Error(line, "model '" + model + "' names no provider: " + kProviderHint);
  return false;
}

// Whether a CLI source's command is there.
bool ValidCli(const std::string& cli, const std::string& key, int line,
              Diagnostics& d) {
  if (cli.find_first_not_of(" \t") != std::string::npos) return true;
  d.Error(line, "'" + key + ".cli' is empty: give the command to run");
  return false;
}

std::optional<ModelSource> ReadSource(const YAML::Node& n,
                                      const std::string& key, Diagnostics& d) {
  if (!n.IsDefined()) return std::nullopt;
  if (!n.IsMap()) {
    d.Error(LineOf(n),
            "'" + key +
                "' must be a mapping such as { model: PROVIDER/MODEL } "
                "or { cli: COMMAND }, not " +
                DescribeNodeType(n));
    return std::nullopt;
  }
  MapReader r(n, "'" + key + "'", d);
  ModelSource s;
  s.line = LineOf(n);
  auto model = ReadString(r.Take("model"), key + ".model", d);
  auto cli = ReadString(r.Take("cli"), key + ".cli", d);
  if (model && cli) {
    d.Error(s.line,
            "'" + key +
                "' has both 'model' and 'cli' — a source is one or the other");
    return std::nullopt;
  }
  if (!model && !cli) {
    if (!r.Has("model") && !r.Has("cli")) {
      d.Error(s.line,
              "'" + key + "' needs 'model: PROVIDER/MODEL' or 'cli: COMMAND'");
    }
    return std::nullopt;
  }
  if (model && !ValidModel(*model, r.KeyLine("model"), d))
    return std::nullopt;
  if (cli && !ValidCli(*cli, key, r.KeyLine("cli"), d)) return std::nullopt;
  if (model) s.model = *model;
  if (cli) s.cli = *cli;
  s.base_url = ReadString(r.Take("base_url"), key + ".base_url", d);
  s.api_key_env = ReadString(r.Take("api_key_env"), key + ".api_key_env", d);
  if (auto stream = ReadBool(r.Take("stream"), key + ".stream", d))
    s.stream = *stream;
  internal::ReadSourceEnv(r, key, s);
  internal::ReadSourceHeaders(r, key, s);
  int params_line = 0;
  internal::ReadModelParameters(r, key + ".", s.params, params_line, d);
  if (s.is_cli() && !s.params.empty()) {
    d.Error(params_line, "'" + key + "." + s.params.SetKeys().front() +
                             "' is for hosted models: a CLI source ('cli: " +
                             s.cli + "') takes no model parameters");
  }
  s.price = ReadPrice(r.Take("price"), key, d);
  internal::ReadRateLimit(r, key, s, d);
  r.Finish();
  return s;
}

// A timeout-like dial on an agent: 0 means none, negative is refused.
void ReadAgentDuration(MapReader& r, const std::string& key,
                       Written<Millis>& out, Diagnostics& d) {
  YAML::Node n = r.Take(key);
  if (!n.IsDefined()) return;
  out.line = r.KeyLine(key);
  auto v = ReadDuration(n, key, std::nullopt, d);
  if (!v) return;
  if (v->count() < 0) {
    d.Error(out.line, "'" + key +
                          "' must not be negative (write \"0\" for no limit, "
                          "or omit it for the default)");
    return;
  }
  out.value = *v;
}

void ReadCap(MapReader& r, const std::string& key, Written<int64_t>& out,
             Diagnostics& d) {
  YAML::Node n = r.Take(key);
  if (!n.IsDefined()) return;
  out.line = r.KeyLine(key);
  out.value = ReadInt(
      n, key, 0, int64_t{1} << 50,
      "0 (no cap) or a positive integer; negative values are refused", d);
}

// Appends `item` to `list` unless an earlier one has its name, which is an
// error naming both lines ("duplicate job 'build' (first at line 3)").
template <typename T>
void AddUnlessNamedTwice(std::vector<T>& list, T item, const char* what,
                         Diagnostics& d) {
  for (const T& other : list) {
    if (!item.name.empty() && other.name == item.name) {
      d.Error(item.line, std::string("duplicate ") + what + " '" + item.name +
                             "' (first at line " + std::to_string(other.line) +
                             ")");
      return;
    }
  }
  list.push_back(std::move(item));
}

void ReadAgentEntry(const YAML::Node& n, Pipeline& p, Diagnostics& d) {
  if (!n.IsMap()) {
    d.Error(
        LineOf(n),
        "each entry of 'agents' must be a mapping with a name and a source, "
        "not " +
            DescribeNodeType(n));
    return;
  }
  MapReader r(n, "an agent entry", d);
  AgentEntry a;
  a.line = LineOf(n);
  auto name = ReadName(r.Take("name"), "name", d);
  if (!name || name->empty()) {
    if (!r.Has("name")) d.Error(a.line, "agent entry has no 'name'");
  } else {
    a.name = *name;
  }
  a.source = ReadSource(r.Take("source"), "source", d);
  YAML::Node fallback = r.Take("fallback");
  if (fallback.IsDefined()) {
    if (!fallback.IsSequence()) {
      d.Error(LineOf(fallback), "'fallback' must be a list of sources, not " +
                                    DescribeNodeType(fallback));
    } else {
      for (const YAML::Node& f : fallback) {
        if (auto s = ReadSource(f, "fallback source", d))
          a.fallback.push_back(*s);
      }
    }
  }
  if (auto persona = ReadString(r.Take("persona"), "persona", d))
    a.persona = *persona;
  a.tools_line = r.KeyLine("tools");
  if (auto tools = ReadStringList(r.Take("tools"), "tools", d))
    a.tools = *tools;
  ReadAgentDuration(r, "timeout", a.timeout, d);
  if (YAML::Node att = r.Take("attempts"); att.IsDefined()) {
    a.attempts.line = r.KeyLine("attempts");
    if (auto v =
            ReadInt(att, "attempts", 1, 1000000, "a positive integer", d)) {
      a.attempts.value = static_cast<int>(*v);
    }
  }
  ReadCap(r, "max_turns", a.max_turns, d);
  ReadCap(r, "max_context_bytes", a.max_context_bytes, d);
  a.budget = ReadBudget(r.Take("budget"), "budget", d);
  ReadAgentDuration(r, "llm_timeout", a.llm_timeout, d);
  ReadAgentDuration(r, "tool_timeout", a.tool_timeout, d);
  internal::ReadSandbox(r, a.sandbox, d);
  internal::ReadModelParameters(r, "", a.params, a.params_line, d);
  internal::ReadRetryBudget(r, "", a.retry_budget, d);
  internal::ReadCircuit(r, "", a.circuit, d);
  if (YAML::Node req = r.Take("required"); req.IsDefined()) {
    auto v = ReadString(req, "required", d);
    if (v && *v == "tools") {
      a.required_tools = true;
    } else if (v) {
      d.Error(LineOf(req),
              "'required' takes one value, 'tools' (the model must answer "
              "with a tool call), not '" +
                  *v + "'");
    }
  }
  r.Finish();
  AddUnlessNamedTwice(p.agents, std::move(a), "agent", d);
}

void ReadResourceType(const YAML::Node& n, Pipeline& p, Diagnostics& d) {
  if (!n.IsMap()) {
    d.Error(LineOf(n),
            "each entry of 'resource_types' must be a mapping, not " +
                DescribeNodeType(n));
    return;
  }
  MapReader r(n, "a resource type", d);
  ResourceType t;
  t.line = LineOf(n);
  if (auto name = ReadString(r.Take("name"), "name", d)) t.name = *name;
  if (t.name.empty()) d.Error(t.line, "resource type has no 'name'");
  YAML::Node config = r.Take("config");
  if (!config.IsDefined()) {
    d.Error(t.line, "resource type '" + t.name +
                        "' has no 'config' with its check, in "
                        "and out scripts");
  } else if (!config.IsMap()) {
    d.Error(LineOf(config),
            "'config' must be a mapping of check, in and out scripts");
  } else {
    MapReader c(config, "a resource type's config", d);
    t.check_line = c.KeyLine("check");
    t.in_line = c.KeyLine("in");
    t.out_line = c.KeyLine("out");
    if (auto s = ReadString(c.Take("check"), "check", d)) t.check = *s;
    if (auto s = ReadString(c.Take("in"), "in", d)) t.in = *s;
    if (auto s = ReadString(c.Take("out"), "out", d)) t.out = *s;
    if (t.check.empty() && t.in.empty() && t.out.empty()) {
      d.Error(LineOf(config),
              "resource type '" + t.name + "' defines none of check, in, out");
    }
    c.Finish();
  }
  r.Finish();
  AddUnlessNamedTwice(p.resource_types, std::move(t), "resource type", d);
}

void ReadResource(const YAML::Node& n, Pipeline& p, Diagnostics& d) {
  if (!n.IsMap()) {
    d.Error(LineOf(n), "each entry of 'resources' must be a mapping, not " +
                           DescribeNodeType(n));
    return;
  }
  MapReader r(n, "a resource", d);
  Resource res;
  res.line = LineOf(n);
  if (auto name = ReadName(r.Take("name"), "name", d)) res.name = *name;
  if (res.name.empty()) d.Error(res.line, "resource has no 'name'");
  if (auto type = ReadString(r.Take("type"), "type", d)) res.type = *type;
  if (res.type.empty()) {
    d.Error(res.line, "resource '" + res.name + "' has no 'type'");
  } else if (!p.FindResourceType(res.type)) {
    d.Error(r.KeyLine("type"), "resource '" + res.name +
                                   "' has unknown type '" + res.type +
                                   "' — define it under 'resource_types:'");
  }
  if (YAML::Node src = r.Take("source"); src.IsDefined() && !src.IsNull()) {
    if (!src.IsMap()) {
      d.Error(LineOf(src), "'source' of a resource must be a mapping");
    } else if (auto j = ReadJson(src, "source", d)) {
      res.source = *j;
    }
  }
  r.Finish();
  AddUnlessNamedTwice(p.resources, std::move(res), "resource", d);
}

void ReadJobTimeout(MapReader& r, Job& job, Diagnostics& d) {
  YAML::Node n = r.Take("timeout");
  if (!n.IsDefined()) return;
  job.timeout.line = r.KeyLine("timeout");
  auto v = ReadDuration(n, "timeout", std::nullopt, d);
  if (!v) return;
  if (v->count() < 0) {
    d.Error(job.timeout.line, "a job's 'timeout' must not be negative");
  } else if (v->count() == 0) {
    d.Error(job.timeout.line,
            "a job's 'timeout' must be a positive duration — a job "
            "without 'timeout' has no deadline, so 0 says nothing; "
            "omit it for no deadline");
  } else {
    job.timeout.value = *v;
  }
}

void ReadJobAssert(const YAML::Node& n, Job& job, Diagnostics& d) {
  if (!n.IsDefined()) return;
  if (!n.IsMap()) {
    d.Error(
        LineOf(n),
        "a job's 'assert' must be a mapping with 'execution', 'outcome' and/or "
        "'steps'");
    return;
  }
  MapReader r(n, "a job's assert", d);
  JobAssert a;
  a.line = LineOf(n);
  if (YAML::Node e = r.Take("execution"); e.IsDefined()) {
    if (e.IsScalar()) {
      d.Error(LineOf(e),
              "'assert.execution' must be a list of step names, e.g. [build, "
              "test]");
    } else if (e.IsNull()) {
      a.execution = std::vector<std::string>{};
    } else {
      a.execution = ReadStringList(e, "assert.execution", d);
    }
  }
  if (auto o = ReadString(r.Take("outcome"), "assert.outcome", d)) {
    a.outcome = ParseOutcome(*o);
    if (!a.outcome) {
      d.Error(r.KeyLine("outcome"),
              "'assert.outcome' must be succeeded, failed or aborted, "
              "not '" +
                  *o + "'");
    } else if (*a.outcome == Outcome::kErrored) {
      d.Error(r.KeyLine("outcome"),
              "a job never ends 'errored': a step that errored makes "
              "its job 'failed'; assert 'outcome: failed'");
    }
  }
  a.steps = ReadStepChecks(r.Take("steps"), d);
  r.Finish();
  job.check = std::move(a);
}

// A gate without a timeout waits for a person until its job's deadline;
// without that deadline (or in a hook, which runs past it) nothing bounds
// the wait, and a run in CI would wait forever.
void WarnUnboundedGates(const Job& job, Diagnostics& d) {
  internal::ForEachStepOf(job, [&](const Step& s, bool in_hook) {
    if (s.kind != StepKind::kGate || s.timeout.has_value()) return;
    if (job.timeout.has_value() && !in_hook) return;
    d.Warn(s.line,
           "gate '" + s.name +
               "' has no 'timeout' and nothing else bounds its wait (its "
               "job has no 'timeout', or it is a hook, which runs past "
               "it): a run waits for a person without limit, and one in CI "
               "waits forever; give the gate a 'timeout' (and a 'default: "
               "approve|reject' if it should not fail then)");
  });
}

// A mock decision for a gate no job has is a typo: said, not fatal.
void WarnMockGatesWithoutGates(const Pipeline& p, int line, Diagnostics& d) {
  std::set<std::string> names;
  for (const Job& job : p.jobs) {
    internal::ForEachStepOf(job, [&](const Step& s, bool) {
      if (s.kind == StepKind::kGate) names.insert(s.name);
    });
  }
  for (const auto& [name, decision] : p.mock_gates) {
    if (!names.count(name)) {
      d.Warn(line, "mock: gates: no gate step is named '" + name +
                       "'; this decision is never used");
    }
  }
}

void ReadJob(const YAML::Node& n, Pipeline& p, Diagnostics& d) {
  if (!n.IsMap()) {
    d.Error(
        LineOf(n),
        "each entry of 'jobs' must be a mapping with a name and a plan, not " +
            DescribeNodeType(n));
    return;
  }
  MapReader r(n, "a job", d);
  Job job;
  job.line = LineOf(n);
  std::optional<std::string> name = ReadName(r.Take("name"), "name", d);
  if (name) job.name = *name;
  // A name refused for its bytes was said already.
  if (job.name.empty() && (name || !r.Has("name")))
    d.Error(job.line, "job has no 'name'");
  YAML::Node plan = r.Take("plan");
  if (!plan.IsDefined() || plan.IsNull()) {
    d.Error(job.line, "job '" + job.name + "' has no 'plan' (a list of steps)");
  } else {
    job.plan = internal::ReadStepList(plan, "plan", StepContext{d});
    if (plan.IsSequence() && plan.size() == 0) {
      d.Error(LineOf(plan), "job '" + job.name + "' has an empty plan");
    }
  }
  ReadJobTimeout(r, job, d);
  job.budget = ReadBudget(r.Take("budget"), "budget", d);
  if (YAML::Node mv = r.Take("max_visits"); mv.IsDefined()) {
    job.max_visits.line = r.KeyLine("max_visits");
    if (auto v =
            ReadInt(mv, "max_visits", 1, 1000000, "a positive integer", d)) {
      job.max_visits.value = static_cast<int>(*v);
    }
  }
  internal::ReadRunner(r, job.runner, job.slurm, d);
  internal::ReadHooks(r, job.hooks, StepContext{d});
  if (job.hooks.on_error) {
    d.Warn(r.KeyLine("on_error"),
           "job '" + job.name +
               "': a job-level 'on_error' never fires: a job ends succeeded, "
               "failed or aborted (a step that errored fails its job, which "
               "fires the job's 'on_failure'); move it to 'on_failure', or "
               "onto the step whose error it handles");
  }
  ReadJobAssert(r.Take("assert"), job, d);
  r.Finish();
  internal::RefuseRemoteCellsInHooks(job, d);
  WarnUnboundedGates(job, d);
  AddUnlessNamedTwice(p.jobs, std::move(job), "job", d);
}

void ReadDefaults(const YAML::Node& n, Pipeline& p, Diagnostics& d) {
  if (!n.IsDefined() || n.IsNull()) return;
  if (!n.IsMap()) {
    d.Error(LineOf(n),
            "'defaults' must be a mapping (source, env, sandbox, runner, "
            "slurm, retry_budget, circuit)");
    return;
  }
  MapReader r(n, "'defaults'", d);
  p.defaults.source = ReadSource(r.Take("source"), "defaults.source", d);
  if (auto env = internal::ReadEnv(r.Take("env"), "defaults.env", d))
    p.defaults.env = *env;
  internal::ReadSandbox(r, p.defaults.sandbox, d);
  internal::ReadRunner(r, p.defaults.runner, p.defaults.slurm, d);
  internal::ReadRetryBudget(r, "defaults.", p.defaults.retry_budget, d);
  internal::ReadCircuit(r, "defaults.", p.defaults.circuit, d);
  if (r.Has("timeout")) {
    r.Take("timeout");
    d.Error(r.KeyLine("timeout"),
            "'timeout' is not allowed under 'defaults:' — a pipeline-wide "
            "deadline changes "
            "failure behaviour at a distance; put it on the agent entry or on "
            "the step");
  }
  r.Finish();
}

void ReadPipeline(const YAML::Node& root, Pipeline& p, Diagnostics& d) {
  if (!root.IsDefined() || root.IsNull()) {
    d.Error(1,
            "the file is empty: a pipeline is a mapping with at least 'jobs:'");
    return;
  }
  if (!root.IsMap()) {
    d.Error(LineOf(root),
            "a pipeline must be a mapping with 'jobs:' (and agents, "
            "resources, ...), not " +
                DescribeNodeType(root));
    return;
  }
  MapReader r(root, "the pipeline", d);
  ReadDefaults(r.Take("defaults"), p, d);
  internal::ReadSecrets(r.Take("secrets"), p, d);
  internal::ReadToolDefs(r.Take("tools"), p, d);
  internal::ReadMcpServers(r.Take("mcp_servers"), p, d);
  ReadList(r.Take("agents"), "agents", "a list", d,
           [&](const YAML::Node& n) { ReadAgentEntry(n, p, d); });
  ReadList(r.Take("resource_types"), "resource_types", "a list", d,
           [&](const YAML::Node& n) { ReadResourceType(n, p, d); });
  ReadList(r.Take("resources"), "resources", "a list", d,
           [&](const YAML::Node& n) { ReadResource(n, p, d); });
  YAML::Node jobs = r.Take("jobs");
  if (!jobs.IsDefined() || jobs.IsNull()) {
    d.Error(LineOf(root), "no 'jobs:' — a pipeline needs at least one job");
  }
  ReadList(jobs, "jobs", "a list", d,
           [&](const YAML::Node& n) { ReadJob(n, p, d); });
  if (YAML::Node mock = r.Take("mock"); mock.IsDefined()) {
    internal::ReadMock(mock, r.KeyLine("mock"), p, d);
    WarnMockGatesWithoutGates(p, r.KeyLine("mock"), d);
  }
  r.Finish();
  for (const AgentEntry& a : p.agents) {
    if (!a.source && !p.defaults.source && !a.name.empty()) {
      d.Error(a.line, "agent '" + a.name +
                          "' has no 'source' and 'defaults:' gives none");
    }
  }
  internal::CheckReferences(p, d);
  internal::CheckTemplates(p, d);
}

// The line of a "---" or "..." marker that follows content, or 0.
int SecondDocumentLine(const std::string& text) {
  bool content = false;
  int line = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view l(text.data() + pos, end - pos);
    ++line;
    bool marker =
        (l.substr(0, 3) == "---" || l.substr(0, 3) == "...") &&
        (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
    if (marker) {
      if (content) return line;
    } else if (!l.empty() && l[0] != '#' && l[0] != '%' &&
               l.find_first_not_of(" \t\r") != std::string_view::npos) {
      content = true;
    }
    pos = end + 1;
  }
  return 0;
}

}  // namespace

int CountSteps(const std::vector<StepPtr>& plan) {
  int n = 0;
  for (const StepPtr& s : plan) {
    if (!s) continue;
    n += s->is_container() ? CountSteps(s->steps) : 1;
  }
  return n;
}

LoadResult LoadPipelineText(const std::string& text, const std::string& file) {
  LoadResult result{nullptr, Diagnostics(file)};
  Diagnostics& d = result.diagnostics;
  if (text.size() > kMaxPipelineBytes) {
    d.Error(0, "the file is " + std::to_string(text.size()) +
                   " bytes; pipelines are "
                   "limited to " +
                   std::to_string(kMaxPipelineBytes) + " bytes");
    return result;
  }
  if (text.find('\0') != std::string::npos) {
    d.Error(0, "the file contains a NUL byte: it is not a YAML text file");
    return result;
  }
  // One document only. A second is found by its marker rather than with
  // YAML::LoadAll, which loops forever on some malformed input (a stray
  // leading ','), where YAML::Load answers with an error.
  if (int line = SecondDocumentLine(text)) {
    d.Error(line,
            "the file holds more than one YAML document; a pipeline is one "
            "document");
    return result;
  }
  // Alias bombs and recursive aliases are refused before any node exists:
  // every walk below may then follow aliases without a budget of its own.
  if (auto problem = CheckYamlLimits(text)) {
    d.Error(problem->line, problem->message);
    return result;
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    d.Error(e.mark.line + 1, "YAML nesting is too deep");
    return result;
  } catch (const YAML::Exception& e) {
    std::string hint;
    if (e.msg == "illegal map value") {
      hint =
          " — a plain value that contains ': ' needs quotes, or a block scalar "
          "(|)";
    } else if (e.msg.find("end of map not found") != std::string::npos ||
               e.msg.find("end of sequence not found") != std::string::npos) {
      hint =
          " — check the indentation and the closing brackets above this line";
    }
    d.Error(e.mark.line + 1, "YAML syntax: " + e.msg + hint);
    return result;
  } catch (const std::exception& e) {
    d.Error(0, std::string("YAML could not be read: ") + e.what());
    return result;
  }
  auto p = std::make_shared<Pipeline>();
  p->file = file;
  try {
    ReadPipeline(root, *p, d);
  } catch (const YAML::Exception& e) {
    d.Error(e.mark.line + 1, "YAML: " + e.msg);
  }
  if (!d.has_errors()) result.pipeline = std::move(p);
  return result;
}

LoadResult LoadPipelineFile(const std::string& path) {
  if (path == "-") return LoadPipelineStdin();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    LoadResult r{nullptr, Diagnostics(path)};
    r.diagnostics.Error(
        0, "cannot open the file (does it exist, and may it be read?)");
    return r;
  }
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0) {
    LoadResult r{nullptr, Diagnostics(path)};
    r.diagnostics.Error(0, "cannot read the file (is it a directory?)");
    return r;
  }
  if (static_cast<size_t>(size) > kMaxPipelineBytes) {
    LoadResult r{nullptr, Diagnostics(path)};
    r.diagnostics.Error(0, "the file is " + std::to_string(size) +
                               " bytes; pipelines are "
                               "limited to " +
                               std::to_string(kMaxPipelineBytes) + " bytes");
    return r;
  }
  in.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), size);
  return LoadPipelineText(text, path);
}

LoadResult LoadPipelineStdin() {
  const std::string name = "<stdin>";
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) {
    text.append(buf, n);
    if (text.size() > kMaxPipelineBytes) {
      LoadResult r{nullptr, Diagnostics(name)};
      r.diagnostics.Error(0, "standard input holds more than " +
                                 std::to_string(kMaxPipelineBytes) +
                                 " bytes; pipelines are limited to that");
      return r;
    }
  }
  return LoadPipelineText(text, name);
}

}  // namespace steps::pipeline
