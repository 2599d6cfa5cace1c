// The pipeline as written: a typed model of the YAML, with the line of every
// key a message may need to point at. Nothing here is resolved; see
// resolve.h for the plan the executor runs.
#ifndef STEPS_PIPELINE_MODEL_H_
#define STEPS_PIPELINE_MODEL_H_

#include <yaml-cpp/yaml.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/duration.h"
#include "core/outcome.h"
#include "providers/limits.h"
#include "providers/model_parameters.h"

namespace steps::pipeline {

// A dial as the author wrote it: absent, or a value and its 1-based line.
template <typename T>
struct Written {
  std::optional<T> value;
  int line = 0;

  bool has_value() const { return value.has_value(); }
  const T& operator*() const { return *value; }
};

// Price per million tokens, in USD.
struct Price {
  double input_per_mtok = 0;
  double output_per_mtok = 0;
};

// Where an agent's answers come from: a hosted model or a local CLI agent.
struct ModelSource {
  std::string model;  // "PROVIDER/MODEL"; empty for a CLI source.
  std::string cli;    // The command of a CLI source; empty otherwise.
  std::optional<std::string> base_url;
  std::optional<std::string> api_key_env;
  std::optional<Price> price;
  bool stream = false;
  // A CLI source's environment besides the minimal base (agent/cli_source.h):
  // NAME -> value as written, `${NAME}` references expanded when it runs.
  std::map<std::string, std::string> env;
  // A hosted source's `headers:`, NAME -> value as written (`${NAME}`
  // references expanded when it runs); sent after the adapter's own.
  std::map<std::string, std::string> headers;
  // Set on the source itself; an agent entry's fill what it leaves unset.
  ModelParameters params;
  // `rate_limit:` (hosted sources): shared by every step sending to the
  // same source; declared at all, it also follows the server's headers.
  std::optional<RateLimitSpec> rate_limit;
  int rate_limit_line = 0;
  int line = 0;

  bool is_cli() const { return !cli.empty(); }
  // "openrouter/qwen/qwen3.7-flash" or "cli: claude -p".
  std::string Describe() const;
};

// `sandbox:` as written: how task scripts, resource scripts and run_shell
// commands are confined. `sandbox: bwrap`, `sandbox: none`, or
// `sandbox: {kind: bwrap|none, network: true|false}`.
struct SandboxSpec {
  enum class Kind { kNone, kBwrap };
  Kind kind = Kind::kNone;
  bool network = false;  // bwrap only: keep the host's network.

  bool bwrap() const { return kind == Kind::kBwrap; }
  // "none", "bwrap (no network)", "bwrap (network)".
  std::string Describe() const;
};

// `runner:`: where a task's, get's or put's scripts run.
enum class RunnerKind {
  kLocal,  // On this machine (the default).
  kSlurm,  // As Slurm batch jobs (docs/slurm.md).
};
// "local", "slurm".
const char* RunnerName(RunnerKind kind);

// `slurm:` as written (defaults, job or step): each key may be left out, and
// a step's keys win over its job's, which win over defaults:'s.
struct SlurmSpec {
  Written<std::string> partition;
  Written<std::string> account;
  Written<std::string> qos;
  Written<int> cpus;
  Written<std::string> mem;
  Written<std::string> gres;
  Written<std::vector<std::string>> extra;
  // The time in the queue counts against the attempt's timeout.
  Written<bool> timeout_includes_queue;
  // An attempt lost with its node (node failure, preemption) is retried,
  // as a timed-out one is under retry.on_timeout.
  Written<bool> retry_lost;
  int line = 0;  // Of the `slurm:` key; 0 when absent.
};

struct Budget {
  std::optional<int64_t> tokens;  // Total tokens, prompt and completion.
  std::optional<double> usd;
  int line = 0;
};

struct AgentEntry {
  std::string name;
  int line = 0;
  std::optional<ModelSource> source;  // Falls back to defaults.source.
  std::vector<ModelSource> fallback;
  std::string persona;
  std::vector<std::string> tools;
  int tools_line = 0;
  Written<Millis> timeout;  // 0 means no deadline.
  Written<int> attempts;
  Written<int64_t> max_turns;          // 0 means no cap.
  Written<int64_t> max_context_bytes;  // 0 means no cap.
  std::optional<Budget> budget;
  Written<Millis> llm_timeout;
  Written<Millis> tool_timeout;
  bool required_tools = false;   // `required: tools`.
  Written<SandboxSpec> sandbox;  // For run_shell.
  // For every hosted source of the entry that does not set its own.
  ModelParameters params;
  int params_line = 0;  // The first parameter key's line; 0 when none.
  // Protecting the provider's host; over defaults:'s. Off when neither.
  Written<RetryBudgetSpec> retry_budget;
  Written<CircuitSpec> circuit;
};

enum class Backoff { kFixed, kLinear, kExponential };
const char* BackoffName(Backoff b);

// The `retry:` block (spec text 000): exactly six keys.
struct RetrySpec {
  int line = 0;
  Written<int> max_attempts;  // Default 1.
  Backoff backoff = Backoff::kFixed;
  Millis base_delay{0};
  std::optional<Millis> max_delay;
  bool on_timeout = false;
  int on_timeout_line = 0;
  Written<Millis> total_timeout;
};

enum class StepKind {
  kTask,
  kGet,
  kPut,
  kAgent,
  kInParallel,
  kDo,
  kTry,
  kAcross,
  kGate
};
const char* StepKindName(StepKind k);

struct Step;
using StepPtr = std::shared_ptr<Step>;

enum class HookKind { kOnSuccess, kOnFailure, kOnError, kOnAbort, kEnsure };
const char* HookKindName(HookKind h);
constexpr HookKind kAllHooks[] = {HookKind::kOnSuccess, HookKind::kOnFailure,
                                  HookKind::kOnError, HookKind::kOnAbort,
                                  HookKind::kEnsure};

// Hook steps, by kind; absent hooks are null.
struct Hooks {
  StepPtr on_success, on_failure, on_error, on_abort, ensure;
  StepPtr& Get(HookKind k);
  const StepPtr& Get(HookKind k) const;
  bool empty() const;
};

// One `tool_called:` entry of a step's assert: the agent called tool `name`
// (with arguments holding `arguments` as a subset) a number of times that
// `count` (exactly), or `min` and `max` allow. None of the three: at least
// once.
struct ToolCalledCheck {
  std::string name;
  std::optional<nlohmann::json> arguments;  // A mapping: the subset.
  std::optional<int64_t> count;
  std::optional<int64_t> min;
  std::optional<int64_t> max;
  int line = 0;
};

// `judge:`: a model-graded rubric. The agent entry `agent` is sent the
// rubric and the step's output and answers PASS or FAIL with a reason.
struct JudgeSpec {
  std::string agent;
  std::string rubric;
  int line = 0;
};

// A step's `assert:` (docs/pipeline.md "### assert"). Every key set is
// judged on each attempt's result, and every miss is reported.
struct StepAssert {
  std::optional<std::string> stdout_contains;  // `stdout:`
  std::optional<int> code;
  std::optional<std::string> equals;  // The trimmed output equals.
  std::optional<std::vector<std::string>> contains_all;
  std::optional<std::vector<std::string>> contains_any;
  std::optional<std::vector<std::string>> not_contains;
  std::optional<std::string> regex;  // core/pattern.h, line by line.
  bool json = false;                 // The output parses as JSON.
  std::optional<nlohmann::json> json_schema;  // ... and matches this.
  // Agent steps only: what the conversation did and spent.
  std::vector<ToolCalledCheck> tool_called;
  std::optional<int64_t> max_turns_used;
  std::optional<int64_t> max_tokens;  // Prompt + completion.
  std::optional<double> max_cost;     // USD.
  // Any step: an attempt's (or the conversation's) wall time.
  std::optional<Millis> max_duration;
  std::optional<JudgeSpec> judge;
  int line = 0;

  // Whether judging needs the live run (the conversation's record, the
  // attempt's time or a fresh verdict), which a cached result lacks.
  bool NeedsLiveRun() const {
    return !tool_called.empty() || max_turns_used || max_tokens || max_cost ||
           max_duration || judge;
  }
};

struct FixSpec {
  std::string agent;
  Written<int> attempts;  // Default 1.
  int line = 0;
};

// What a gate decides, or its `default:` on expiry.
enum class GateDecision { kApprove, kReject };
const char* GateDecisionName(GateDecision d);  // "approve", "reject"

// A `gate:` step: the run waits for a person to approve or reject it
// (`steps approve` / `steps reject`, the web UI, the MCP server), for at most
// the step's `timeout` and always within the job's deadline.
struct GateSpec {
  std::string message;                 // For the approver; templated.
  std::vector<std::string> approvers;  // OS user names; empty: anyone.
  int approvers_line = 0;
  std::optional<GateDecision> on_expiry;  // `default:`; unset: fail.
  int default_line = 0;
};

struct AcrossVar {
  std::string var;
  std::vector<std::string> values;
  Written<int> max_in_flight;  // Default: all at once.
  int line = 0;
};

struct Step {
  StepKind kind = StepKind::kTask;
  // The name the step is known by in logs and `execution:` lists: `name:`
  // if given, else the task name, resource name or agent name.
  std::string name;
  int line = 0;

  Written<int> attempts;
  Written<Millis> timeout;  // Agent: 0 means no deadline.
  std::optional<RetrySpec> retry;
  bool idempotent = false;
  Hooks hooks;
  std::optional<StepAssert> check;      // The step's `assert:`.
  std::optional<std::string> route_to;  // `to:`.
  int route_to_line = 0;

  // task
  std::string run;
  int run_line = 0;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::map<std::string, std::string> env;
  std::optional<FixSpec> fix;

  // get / put
  std::string resource;
  nlohmann::json params = nlohmann::json::object();

  // agent
  std::string agent;
  std::vector<std::string> messages;
  std::vector<std::string> context_paths;
  Written<int64_t> max_turns;
  Written<int64_t> max_context_bytes;
  std::optional<Budget> budget;  // Also on across.
  Written<Millis> llm_timeout;
  Written<Millis> tool_timeout;

  // task, get, put, agent (run_shell).
  Written<SandboxSpec> sandbox;
  // task, get, put: where the scripts run, and how Slurm places them.
  Written<RunnerKind> runner;
  SlurmSpec slurm;

  // gate
  std::optional<GateSpec> gate;

  // in_parallel, do, try, across: the steps inside.
  std::vector<StepPtr> steps;
  Written<int> limit;      // in_parallel
  bool fail_fast = false;  // in_parallel, across
  std::vector<AcrossVar> across;

  bool is_container() const {
    return kind == StepKind::kInParallel || kind == StepKind::kDo ||
           kind == StepKind::kTry || kind == StepKind::kAcross;
  }
};

// One entry of a job assert's `steps:` list: what one step's record must
// show. The i-th entry naming X is checked against the i-th step named X in
// the order steps finished. Unset fields are not checked.
struct StepCheck {
  std::string name;
  int line = 0;
  std::optional<Outcome> outcome;
  std::optional<int> attempts;                  // Attempts recorded.
  std::optional<std::vector<Outcome>> attempt_outcomes;  // Each, in order.
  std::optional<std::string> error;             // The step's error contains.
  std::optional<std::string> exhausted_by;      // On the last attempt ("" none).
  // The last attempt's clipped_to_ms; -1 asserts it was not clipped.
  std::optional<int64_t> clipped_to_ms;
  std::optional<std::vector<int64_t>> waits_ms;  // Between attempts, in order.
  int64_t tolerance_ms = 100;  // For clipped_to_ms and waits_ms, either way.
  std::optional<int> provider_requests;  // Agent steps.
  std::optional<bool> deadline_disclosed;  // Agent steps.
};

struct JobAssert {
  std::optional<std::vector<std::string>> execution;
  std::optional<Outcome> outcome;
  std::vector<StepCheck> steps;
  int line = 0;
};

struct Job {
  std::string name;
  int line = 0;
  std::vector<StepPtr> plan;
  Written<Millis> timeout;
  std::optional<Budget> budget;
  Written<int> max_visits;
  // For the job's task, get and put steps that set none.
  Written<RunnerKind> runner;
  SlurmSpec slurm;
  Hooks hooks;
  std::optional<JobAssert> check;  // The job's `assert:`.
};

struct ResourceType {
  std::string name;
  int line = 0;
  std::string check;  // Shell script printing a JSON list of versions.
  std::string in;     // Shell script fetching a version into the cwd.
  std::string out;    // Shell script publishing; prints the new version.
  int check_line = 0, in_line = 0, out_line = 0;  // Of each key.
};

struct Resource {
  std::string name;
  int line = 0;
  std::string type;
  nlohmann::json source = nlohmann::json::object();
};

// A command tool of the top-level `tools:` (docs/tools.md): a bash script
// an agent may call like a built-in tool once its entry grants it.
struct ToolDef {
  std::string name;
  int line = 0;
  std::string description;
  // JSON Schema of the arguments (the documented subset, type: object).
  nlohmann::json parameters = nlohmann::json::object();
  int parameters_line = 0;
  std::string run;  // The bash script.
  int run_line = 0;
  // Absent: the step's tool_timeout applies. 0: no limit of its own.
  Written<Millis> timeout;
  // NAME -> value as written, `${NAME}` references expanded when it runs.
  std::map<std::string, std::string> env;
};

// An MCP server of the top-level `mcp_servers:` (docs/mcp.md): a command
// speaking the Model Context Protocol over stdio, or a URL speaking it over
// Streamable HTTP, whose tools an agent may grant: the whole server by its
// name, or one tool as SERVER.TOOL (the tool's own name) or SERVER__TOOL
// (the name the model sees).
struct McpServerDef {
  std::string name;  // ^[a-zA-Z0-9_-]{1,32}$ without "__".
  int line = 0;
  // `command:` as a list (argv, run directly) or a string (bash -c).
  std::vector<std::string> argv;
  std::string command;
  int command_line = 0;
  // `url:` instead of `command:`: an http:// or https:// endpoint.
  std::string url;
  // `headers:` (with a url only): NAME -> value as written, `${NAME}`
  // references expanded when it starts. Values may hold secrets: shown
  // nowhere, only their names.
  std::map<std::string, std::string> headers;
  // NAME -> value as written, `${NAME}` references expanded when it starts.
  std::map<std::string, std::string> env;
  // Absent: 30s. Always bounded by the step's deadline too.
  Written<Millis> startup_timeout;
  // Per call. Absent: the step's tool_timeout. 0: none of its own.
  Written<Millis> tool_timeout;

  // The command as one line for people: argv joined by spaces, or the
  // bash string.
  std::string CommandText() const;
};

// How an agent entry's `tools:` entry grants MCP tools.
struct McpGrant {
  const McpServerDef* server = nullptr;
  // Empty: every tool of the server. Otherwise one tool, named as the
  // server lists it (`SERVER.TOOL`) or as the model sees it
  // (`SERVER__TOOL`, by_exposed_name).
  std::string tool;
  bool by_exposed_name = false;
};

struct Defaults {
  std::optional<ModelSource> source;
  std::map<std::string, std::string> env;
  Written<SandboxSpec> sandbox;
  Written<RunnerKind> runner;
  SlurmSpec slurm;
  Written<RetryBudgetSpec> retry_budget;
  Written<CircuitSpec> circuit;
};

struct Pipeline {
  std::string file;  // As given on the command line.
  std::vector<AgentEntry> agents;
  Defaults defaults;
  std::vector<ResourceType> resource_types;
  std::vector<Resource> resources;
  std::vector<Job> jobs;
  std::vector<ToolDef> tools;  // `tools:`, in file order.
  std::vector<McpServerDef> mcp_servers;  // `mcp_servers:`, in file order.
  // `secrets:`: environment variables whose values are masked as "***"
  // (besides the provider key variables, which always are).
  std::vector<std::string> secrets;
  // The `mock:` block, kept as YAML for the mock provider to read: the
  // script written inline, or the one read from `mock: {file: PATH}`.
  std::optional<YAML::Node> mock;
  int mock_line = 0;
  // The mock block's `gates:`: what `steps test` and `--mock` decide each
  // named gate at once (docs/mock.md); other gates wait for a person.
  std::map<std::string, GateDecision> mock_gates;
  // `mock: {file: PATH}`: PATH as resolved (relative to the pipeline's
  // folder); empty when the script is inline.
  std::string mock_file;

  // The line of the first `sandbox:` (defaults, agent entry or step, in
  // that order) that asks for bwrap; 0 when none does.
  int FirstBwrapLine() const;
  const AgentEntry* FindAgent(const std::string& name) const;
  const Resource* FindResource(const std::string& name) const;
  const ResourceType* FindResourceType(const std::string& name) const;
  const Job* FindJob(const std::string& name) const;
  const ToolDef* FindTool(const std::string& name) const;
  const McpServerDef* FindMcpServer(const std::string& name) const;
  // What a `tools:` entry grants of the MCP servers: nullopt for a built-in
  // or command tool, or a name that names no server; otherwise the server
  // (null when `SERVER.TOOL` or `SERVER__TOOL` names no declared server:
  // `unknown_server` then holds the name it gave).
  std::optional<McpGrant> ParseMcpGrant(
      const std::string& entry, std::string* unknown_server = nullptr) const;
};

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_MODEL_H_
