// The seam between the pipeline executor and the conversation engine. The
// executor resolves an agent step into an AgentInvocation (no YAML, no
// pipeline types) and hands it to an AgentRunner; the engine behind it runs
// the whole conversation under one deadline and reports how it ended.
#ifndef STEPS_AGENT_AGENT_H_
#define STEPS_AGENT_AGENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/cancel.h"
#include "core/clock.h"
#include "core/duration.h"
#include "core/outcome.h"
#include "core/trace.h"
#include "process/sandbox_bwrap.h"
#include "providers/chat.h"
#include "providers/limits.h"
#include "providers/model_parameters.h"
#include "tools/tool.h"

namespace steps {
class ProcessLauncher;
}

namespace steps::agent {

// The most a price may say per million tokens: $1 a token, far above any
// model's, so that no answer's cost overflows (nor a budget's sum).
inline constexpr double kMaxPricePerMtok = 1e6;

// Price per million tokens, in USD.
struct SourcePrice {
  double input_per_mtok = 0;
  double output_per_mtok = 0;
};

// One place answers can come from: a hosted model or a local CLI agent.
struct AgentSource {
  std::string model;  // "PROVIDER/MODEL"; empty for a CLI source.
  std::string cli;    // The command of a CLI source; empty otherwise.
  std::optional<std::string> base_url;
  std::optional<std::string> api_key_env;
  std::optional<SourcePrice> price;
  bool stream = false;
  // A CLI source's environment over the minimal base (kCliSourceBaseEnv in
  // agent/cli_source.h): NAME -> value, final. Nothing else of steps' own
  // environment reaches the command.
  std::map<std::string, std::string> env;
  // HTTP headers a hosted source sends with every request (final values).
  std::map<std::string, std::string> headers;
  // The source's own parameters over its agent entry's (hosted sources).
  ModelParameters params;
  // `rate_limit:`; shared with every conversation of the run sending to
  // the same source.
  std::optional<RateLimitSpec> rate_limit;

  bool is_cli() const { return !cli.empty(); }
};

// A spending cap: tokens (prompt + completion) and/or USD.
struct BudgetLimit {
  std::optional<int64_t> tokens;  // nullopt or 0: no token cap.
  std::optional<double> usd;      // nullopt or 0: no USD cap.
};

// Spending shared by several conversations (a job's or an across block's
// budget). Thread-safe. A conversation adds what each answer cost and
// stops when the meter says the budget is spent.
class BudgetMeter {
 public:
  // `name` says whose budget it is in messages ("step", "job", ...); it may
  // be empty.
  explicit BudgetMeter(BudgetLimit limit, std::string name = "")
      : limit_(limit), name_(std::move(name)) {}

  // Adds spending; returns false when the budget is now exceeded.
  bool Add(int64_t tokens, double usd);
  // Spending is past a cap.
  bool Exceeded() const;
  // Spending has reached a cap (exactly spent counts): another request
  // would exceed it.
  bool Spent() const;
  int64_t tokens() const;
  double usd() const;
  const BudgetLimit& limit() const { return limit_; }
  const std::string& name() const { return name_; }
  // "token budget of 1000 exceeded (1203 used)" or similar; "" if not.
  std::string Describe() const;
  // "token budget of 1000 spent (1000 used)" or similar; "" if not Spent().
  std::string DescribeSpent() const;

  // Where others charge the same budget out of this meter's sight (the job's
  // steps on other nodes): `check` says why the budget is spent there, or
  // nullopt. Spent() asks it (outside the meter's lock) while this meter's
  // own spending is under the caps; once it said spent, the meter stays
  // spent and DescribeSpent() gives its words. Exceeded() and the counts
  // stay this meter's own.
  void SetSpentElsewhere(std::function<std::optional<std::string>()> check);

 private:
  bool OwnSpent() const;  // REQUIRES: mu_ held.

  BudgetLimit limit_;
  std::string name_;
  mutable std::mutex mu_;
  int64_t tokens_ = 0;
  double usd_ = 0;
  std::function<std::optional<std::string>()> elsewhere_;
  mutable std::string spent_elsewhere_;
};

// One tool call of a turn, as recorded: its arguments and result cut to
// kRecordToolBytes each (on a UTF-8 boundary), the cut said by a flag.
struct ToolCallRecord {
  static constexpr size_t kRecordToolBytes = 4000;

  std::string name;
  std::string arguments;  // As the model sent them (JSON text, usually).
  bool arguments_truncated = false;
  // Unset when the tool never ran (the run stopped first).
  std::optional<std::string> result;
  bool result_truncated = false;
  int64_t result_bytes = 0;  // The whole result's size.
  bool is_error = false;

  // "read_file {\"path\":\"a\"}": a one-line label for logs.
  std::string Label() const { return name + " " + arguments; }
};

// What a conversation did, for the step record, `steps show` and the UI.
struct AgentTurnRecord {
  int turn = 0;               // 1-based.
  int provider_requests = 0;  // HTTP requests this turn took (retries).
  std::string source;         // Model or CLI that answered.
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double usd = 0;
  std::vector<ToolCallRecord> tool_calls;
  std::string text;  // Answer text (cut).
};

// A conversation picked up where its run was interrupted (`steps resume`),
// rebuilt from its checkpoints (RebuildConversation, agent/resume.h). The
// messages are the stored ones: a secret's value reads `***` in them.
struct ResumedConversation {
  std::vector<Message> messages;  // The whole history, in order.
  // The last answer's tool calls that have no stored result, in order: they
  // run before the next request. The ids of those that had started are in
  // `restarted`: they run again (at least once, never exactly once).
  std::vector<ToolCall> unfinished_calls;
  std::vector<std::string> restarted;
  // The deadline nudge was in a request already: it is not sent again.
  bool nudged = false;
  // A record of each turn that had an answer, as an uninterrupted run
  // keeps them (its tool calls with stored results): the last one goes on
  // with `unfinished_calls`.
  std::vector<AgentTurnRecord> turn_records;
  // What the conversation had done and spent: turns and spending continue
  // from here, and budgets count it.
  int turns = 0;
  int provider_requests = 0;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double usd = 0;
};

// Everything one agent step (or one fixer run) needs, fully resolved by
// precedence (step, then agent entry, then package default).
struct AgentInvocation {
  std::string agent_name;  // The agents: entry; sent as X-Steps-Agent.
  std::string step_name;   // Sent as X-Steps-Step.
  std::vector<AgentSource> sources;  // Primary first, then fallbacks in order.
  std::string persona;
  std::vector<std::string> tools;  // Tool names granted.
  // The pipeline's command tools (docs/tools.md) that `tools` may name
  // beside the built-in ones; only those named are offered to the model.
  std::vector<std::shared_ptr<const Tool>> command_tools;
  bool required_tools = false;     // `required: tools`.

  std::optional<Millis> timeout;     // The one deadline; nullopt: none ("0").
  // Where `timeout` ends, computed once by the caller (the step's deadline,
  // which its records and the conversation share). Unset: `timeout` from
  // the conversation's start.
  std::optional<SteadyTime> deadline;
  // A resumed step's whole timeout, of which `timeout` is what is left: the
  // nudge is due when a fifth of the whole remains. Unset: `timeout`.
  std::optional<Millis> whole_timeout;
  int attempts = 3;                  // Provider requests per failing turn.
  std::optional<int64_t> max_turns;  // nullopt: no cap.
  std::optional<int64_t> max_context_bytes;  // nullopt: whole files.
  std::optional<Millis> llm_timeout;         // Per request; nullopt: none.
  std::optional<Millis> tool_timeout;        // Per tool call; nullopt: none.
  std::optional<BudgetLimit> budget;         // This conversation's own cap.
  // Protecting each source's host; nullopt: off.
  std::optional<RetryBudgetSpec> retry_budget;
  std::optional<CircuitSpec> circuit;

  std::vector<std::string> messages;       // User messages, in order.
  std::vector<std::string> context_paths;  // Files handed over, relative.
  std::string working_dir;  // Tools are confined here; absolute path.
  // When set, run_shell runs every command under bwrap with these options;
  // writable_dir is filled in from working_dir. nullopt: commands run with
  // the user's own access.
  std::optional<SandboxOptions> sandbox;
  // For `to:` routing: the routing step's output, given as critique in a
  // fresh conversation.
  std::optional<std::string> critique;
  // Set when the conversation continues one interrupted earlier: its
  // history replaces the one persona, messages and context files would
  // build, and no completed request is sent again.
  std::optional<ResumedConversation> resume_from;
};

struct AgentResult {
  Outcome outcome = Outcome::kErrored;
  std::string answer;  // The final answer: the step's stdout.
  std::string error;   // Why it did not succeed; "" on success.
  int turns = 0;
  int provider_requests = 0;
  int retries = 0;         // Of those, requests that were retries.
  int retries_denied = 0;  // Retries the retry budget refused.
  Millis rate_waited{0};   // Waiting for rate limits and open circuits.
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double usd = 0;
  bool deadline_disclosed = false;
  bool nudge_sent = false;
  std::vector<std::string> fallbacks_taken;  // Sources cascaded to, in order.
  std::vector<AgentTurnRecord> turn_records;
};

// A durable point of a conversation: every message the conversation holds
// is in exactly one checkpoint, in order, so the checkpoints of a step
// rebuild its history byte for byte.
struct ConversationCheckpoint {
  enum class Kind {
    kRequest,       // A request is about to be sent: the messages added
                    // since the last checkpoint (the task, tool results'
                    // followers, a nudge, a reminder).
    kAnswer,        // An answer arrived: the assistant message, its cost.
    kToolStarted,   // A tool call is about to run: call_id, tool, arguments.
    kToolFinished,  // It ran: the tool result message (is_error set).
  };
  Kind kind = Kind::kRequest;
  int turn = 0;  // The turn this belongs to (1-based).
  std::vector<Message> messages;
  // kRequest: its messages carry the deadline nudge (sent once per
  // conversation, also across a resume).
  bool nudge = false;
  // kAnswer: what answered and what it cost.
  std::string source;
  int provider_requests = 0;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double usd = 0;
  // kToolStarted, kToolFinished.
  std::string call_id;
  std::string tool;
  std::string arguments;
  bool is_error = false;
};

// Things the engine may tell the caller while it runs (for live progress,
// logs and the run store). Called on the engine's thread; must not block.
struct AgentEvents {
  std::function<void(const AgentTurnRecord&)> on_turn;
  std::function<void(const std::string& line)> on_log;
  // At each durable point, before what follows it happens (the request is
  // sent, a tool runs, the conversation returns): the checkpoints since the
  // last call, in order. The conversation waits for it to return, so a
  // caller that stores them (together: they are one durable point) has
  // them stored first.
  std::function<void(const std::vector<ConversationCheckpoint>&)>
      on_checkpoints;
};

// Where time, cancellation, processes and shared budgets come from.
struct AgentContext {
  Clock* clock = &RealClock();
  CancelToken cancel;                   // Abort or an enclosing scope ending.
  ProcessLauncher* launcher = nullptr;  // For run_shell and CLI sources.
  // Shared caps (job budget, across budget) charged besides the step's own.
  std::vector<std::shared_ptr<BudgetMeter>> shared_budgets;
  AgentEvents events;
  // The span the conversation's spans go under (its step's attempt) when
  // the run's trace is exported; invalid otherwise.
  trace::SpanContext trace_parent;
};

// Runs conversations. Thread-safe: many steps may run at once.
class AgentRunner {
 public:
  virtual ~AgentRunner() = default;
  // Blocks until the conversation ends: an answer with no tool call
  // (succeeded), the deadline (failed, "agent: generate content: context
  // deadline exceeded"), a cap, budget or guard (failed), sources exhausted
  // by transport faults (errored), or cancellation (aborted). Never throws.
  virtual AgentResult Run(const AgentInvocation& invocation,
                          const AgentContext& context) = 0;
  // What, besides the invocation, decides the answers this runner gives the
  // agent named `agent`: empty when its sources answer (real providers and
  // CLIs, as the invocation names them); otherwise a text that differs for
  // every different set of answers (a mock script: "mock" and the entries
  // that may answer the agent). The step cache keys agent steps by it, so a
  // scripted answer never stands in for a real one. Thread-safe.
  virtual std::string CacheIdentity(const std::string& agent) const {
    (void)agent;
    return "";
  }
};

}  // namespace steps::agent

#endif  // STEPS_AGENT_AGENT_H_
