#include "agent/conversation.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include "agent/cli_source.h"
#include "agent/context_files.h"
#include "agent/deadline_notice.h"
#include "agent/guards.h"
#include "agent/spending.h"
#include "agent/turn_record.h"
#include "core/json_text.h"
#include "core/log.h"
#include "core/trace.h"
#include "process/local_launcher.h"
#include "tools/text.h"

namespace steps::agent {
namespace {

// The model a CLI source's request names when a mock script serves it.
constexpr const char kMockedCli[] = "cli";

ToolSchema FinishToolSchema() {
  return {kFinishToolName,
          "End the task: call this once you are done, with your final "
          "answer.",
          DumpJson(StringArgumentsSchema(
              {{"answer", "Your final answer: the result of the task."}}))};
}

// The answer a finish call carries, or nullopt when its arguments are not
// {"answer": "..."}.
std::optional<std::string> FinishAnswer(const std::string& arguments) {
  auto json = nlohmann::json::parse(arguments, nullptr,
                                    /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("answer") ||
      !json["answer"].is_string()) {
    return std::nullopt;
  }
  return json["answer"].get<std::string>();
}

class Conversation {
 public:
  Conversation(const AgentInvocation& invocation, const AgentContext& context,
               const ConversationSetup& setup)
      : inv_(invocation),
        ctx_(context),
        setup_(setup),
        clock_(*context.clock),
        spending_(invocation.budget, context.shared_budgets) {}

  AgentResult Run() {
    span_ = trace::Span::Start("invoke_agent " + inv_.agent_name,
                               ctx_.trace_parent);
    span_.Set("gen_ai.operation.name", "invoke_agent")
        .Set("gen_ai.agent.name", inv_.agent_name);
    if (!Prepare() && !ContinueResumed()) {
      while (!Step()) {
      }
    }
    Flush();  // What the conversation ended on is stored before it returns.
    EndSpan();
    return std::move(result_);
  }

 private:
  // Each of the functions below that returns bool returns true when the
  // conversation is over (result_ then holds how it ended).

  bool Prepare() {
    if (inv_.deadline) {
      deadline_ = Deadline::At(*inv_.deadline);
    } else if (inv_.timeout && inv_.timeout->count() > 0) {
      deadline_ = Deadline::After(clock_, *inv_.timeout);
    }
    if (inv_.sources.empty()) {
      return Fail(Outcome::kErrored, "agent: no source to ask");
    }
    for (const std::string& name : inv_.tools) {
      const Tool* tool = nullptr;
      for (const auto& c : inv_.command_tools) {
        if (c && c->name() == name) tool = c.get();
      }
      if (tool == nullptr) {
        auto granted = setup_.tools->Grant({name});
        if (!granted.ok()) {
          return Fail(Outcome::kErrored,
                      "agent: " + granted.status().message());
        }
        tool = granted->front();
      }
      if (std::find(granted_.begin(), granted_.end(), tool) == granted_.end()) {
        granted_.push_back(tool);
      }
    }

    if (inv_.resume_from) {
      ResumeHistory();
    } else if (BuildHistory()) {
      return true;
    }
    for (const Tool* tool : granted_) {
      request_.tools.push_back(
          {tool->name(), tool->description(), DumpJson(tool->parameters())});
    }
    if (inv_.required_tools) {
      request_.tools.push_back(FinishToolSchema());
      request_.tool_choice = ToolChoice::Required();
    }
    return StopIfInterrupted();
  }

  // A fresh conversation's history: the system message (persona, deadline,
  // required tools), the user messages, a critique, the context files.
  bool BuildHistory() {
    // The history is only appended to from here on: see
    // ChatRequest::history_id.
    request_.history_id = NewHistoryId();
    std::string system = inv_.persona;
    auto add_paragraph = [&system](const std::string& text) {
      if (!system.empty()) system += "\n\n";
      system += text;
    };
    if (deadline_.is_set()) {
      const auto left = deadline_.at() - clock_.Now();
      add_paragraph(DisclosureText(
          *inv_.timeout,
          clock_.WallNow() +
              std::chrono::duration_cast<WallTime::duration>(left)));
      result_.deadline_disclosed = true;
    }
    if (inv_.required_tools) {
      add_paragraph(
          "Work only through tool calls. When you are done, call finish "
          "with your final answer.");
    }
    if (!system.empty()) {
      request_.messages.push_back(Message::System(std::move(system)));
    }
    for (const std::string& text : inv_.messages) {
      request_.messages.push_back(Message::User(text));
    }
    if (inv_.critique) {
      request_.messages.push_back(Message::User(
          "Your earlier answer to this task was sent back with this "
          "critique:\n\n" +
          *inv_.critique));
    }
    auto files = ReadContextFiles(inv_.context_paths, inv_.working_dir,
                                  inv_.max_context_bytes);
    if (!files.ok()) {
      return Fail(Outcome::kErrored, "agent: " + files.status().message());
    }
    for (std::string& text : *files) {
      request_.messages.push_back(Message::User(std::move(text)));
    }
    return false;
  }

  // A resumed conversation's history, all of it durable already; its
  // turns and spending continue, and count against its budgets.
  void ResumeHistory() {
    const ResumedConversation& r = *inv_.resume_from;
    request_.messages = r.messages;
    request_.history_id = NewHistoryId();
    durable_messages_ = request_.messages.size();
    result_.turns = r.turns;
    result_.provider_requests = r.provider_requests;
    result_.prompt_tokens = r.prompt_tokens;
    result_.completion_tokens = r.completion_tokens;
    result_.usd = r.usd;
    result_.turn_records = r.turn_records;
    result_.deadline_disclosed = deadline_.is_set();
    result_.nudge_sent = r.nudged;  // Once per conversation, not per process.
    // Over a cap already: the next Step says so before any request.
    spending_.Charge(r.prompt_tokens + r.completion_tokens, r.usd);
  }

  // What a resumed conversation does before its next request: the last
  // answer's tool calls that have no stored result run (those that had
  // started run again, said on the log); a stored final answer ends it.
  // The last turn's record is written again, whole: the run may have died
  // before it was.
  bool ContinueResumed() {
    if (!inv_.resume_from || result_.turn_records.empty()) return false;
    const ResumedConversation& r = *inv_.resume_from;
    AgentTurnRecord record = std::move(result_.turn_records.back());
    result_.turn_records.pop_back();
    if (!r.unfinished_calls.empty()) {
      for (const std::string& id : r.restarted) {
        Log(LogLevel::kWarn, "agent.tool_rerun",
            {{"agent", inv_.agent_name},
             {"call", id},
             {"why",
              "it started before the run was interrupted and its result was "
              "not stored: it runs again (tool calls are at least once)"}});
      }
      return RunTools(r.unfinished_calls, record);
    }
    EmitTurn(std::move(record));
    const Message& last = request_.messages.back();
    if (last.role == Role::kAssistant && last.tool_calls.empty() &&
        !inv_.required_tools) {
      result_.answer = last.content;
      return Succeed(last.content);
    }
    return false;
  }

  // One request (or one CLI run) and what follows from its answer.
  bool Step() {
    if (StopIfInterrupted()) return true;
    const AgentSource& source = inv_.sources[source_index_];
    if (source.is_cli() && !setup_.connector->mocked()) {
      return RunCli(source);
    }
    if (!retrying_) {
      std::string why;
      if (!Connect(source, &why)) return SourceFailed(why, Outcome::kErrored);
    }
    if (inv_.max_turns && *inv_.max_turns > 0 &&
        result_.turns >= *inv_.max_turns) {
      return Fail(Outcome::kFailed,
                  "agent: max_turns exceeded: no final answer after " +
                      std::to_string(result_.turns) +
                      (result_.turns == 1 ? " turn" : " turns") +
                      " (max_turns: " + std::to_string(*inv_.max_turns) + ")");
    }
    std::string spent = spending_.Spent();
    if (!spent.empty()) {
      return Fail(Outcome::kFailed,
                  "agent: " + spent + "; another request would exceed it");
    }
    const bool nudged = MaybeNudge();

    CallContext call;
    call.clock = &clock_;
    call.deadline = deadline_;
    call.cancel = ctx_.cancel;
    call.llm_timeout = inv_.llm_timeout.value_or(Millis(0));
    call.agent = inv_.agent_name;
    call.step = inv_.step_name;
    call.prior_requests = result_.provider_requests;
    call.log_give_up = false;  // One conversation_failed line, from here.
    call.on_log = ctx_.events.on_log;
    call.trace_parent = span_.context();
    call.provider_name = source.model.substr(0, source.model.find('/'));

    ConversationCheckpoint request = NewCheckpoint(
        ConversationCheckpoint::Kind::kRequest, result_.turns + 1);
    request.nudge = nudged;
    Emit(std::move(request));
    // Storing it may have waited for a busy store until the deadline.
    if (StopIfInterrupted()) return true;
    ChatResult reply = Send(source, call);
    if (!reply.ok()) {
      const ProviderError& error = reply.error();
      result_.provider_requests += error.requests;
      result_.retries += std::max(0, error.requests - 1);
      result_.retries_denied += error.retry_denied ? 1 : 0;
      result_.rate_waited += error.waited;
      turn_requests_ += error.requests;
      if (error.kind == ProviderErrorKind::kDeadline) return FailDeadline();
      if (error.kind == ProviderErrorKind::kCancelled) {
        if (StopIfInterrupted()) return true;
        return Abort();
      }
      return SourceFailed("generate content: " + error.message,
                          Outcome::kErrored);
    }
    result_.provider_requests += reply.answer().requests;
    result_.retries += std::max(0, reply.answer().requests - 1);
    result_.rate_waited += reply.answer().waited;
    turn_requests_ += reply.answer().requests;
    return HandleAnswer(source, reply.answer());
  }

  ChatResult Send(const AgentSource& source, const CallContext& call) {
    if (!source.is_cli()) return retrying_->Send(request_, call);
    // A CLI source under a mock script: one request with the conversation
    // and no tools, whose text is the CLI's stdout.
    ChatRequest plain;
    plain.model = request_.model;
    plain.messages = request_.messages;
    return retrying_->Send(plain, call);
  }

  bool Connect(const AgentSource& source, std::string* why) {
    AgentSource effective = source;
    if (source.is_cli()) effective.model = std::string("mock/") + kMockedCli;
    auto resolved = setup_.connector->Connect(effective);
    if (!resolved.ok()) {
      *why =
          "source " + SourceLabel(source) + ": " + resolved.status().message();
      return false;
    }
    connected_ = std::move(*resolved);
    request_.model = connected_->model;
    request_.params = source.params;
    RetryPolicy policy = setup_.retry;
    policy.attempts = std::max(1, inv_.attempts);
    Provider* provider = connected_->provider.get();
    if (setup_.exchanges != nullptr) {  // Each request, retries included.
      ProviderExchange about;
      about.source = SourceLabel(source);
      about.source_index = static_cast<int>(source_index_);
      about.stream = source.stream;
      observed_ = std::make_unique<ObservedProvider>(
          *provider, *setup_.exchanges, std::move(about));
      provider = observed_.get();
    }
    provider = Guard(source, *provider, policy);
    retrying_ =
        std::make_unique<RetryingProvider>(*provider, std::move(policy));
    return true;
  }

  // `provider` behind the source's rate limit and the host's circuit, and
  // `policy` under the host's retry budget, as far as they are declared.
  Provider* Guard(const AgentSource& source, Provider& provider,
                  RetryPolicy& policy) {
    HostGuards* guards = setup_.guards;
    if (!guards || (!source.rate_limit && !inv_.circuit && !inv_.retry_budget))
      return &provider;
    const std::string endpoint = setup_.connector->EndpointOf(source);
    const std::string host = HostOf(endpoint);
    if (inv_.retry_budget) {
      policy.budget = &guards->Health(endpoint)->budget;
      policy.budget_spec = *inv_.retry_budget;
      policy.host = host;
    }
    if (!source.rate_limit && !inv_.circuit) return &provider;
    GuardedProvider::Guards g;
    g.host = host;
    if (source.rate_limit) {
      // One limiter per source: the same model at the same endpoint with
      // the same key.
      g.limiter = guards->Limiter(endpoint + "\n" + source.model + "\n" +
                                      source.api_key_env.value_or(""),
                                  *source.rate_limit);
    }
    if (inv_.circuit) {
      g.circuit = &guards->Health(endpoint)->circuit;
      g.circuit_spec = *inv_.circuit;
    }
    guarded_ = std::make_unique<GuardedProvider>(provider, std::move(g));
    return guarded_.get();
  }

  // Adds the nudge when it is due and was never sent; says whether it did.
  bool MaybeNudge() {
    if (!deadline_.is_set() || result_.nudge_sent) return false;
    SteadyTime now = clock_.Now();
    const Millis whole = inv_.whole_timeout.value_or(*inv_.timeout);
    if (!NudgeDue(now, deadline_.at(), whole)) return false;
    Millis remaining = std::chrono::duration_cast<Millis>(deadline_.at() - now);
    request_.messages.push_back(Message::User(NudgeText(remaining, whole)));
    result_.nudge_sent = true;
    Log(LogLevel::kInfo, "agent.nudge",
        {{"agent", inv_.agent_name},
         {"remaining", FormatDuration(remaining)},
         {"timeout", FormatDuration(whole)}});
    return true;
  }

  // The prices table's price for `source`, when the answer needs one (no
  // `price:`, no reported cost); a model the table lacks is said once.
  std::optional<SourcePrice> ListedPrice(const AgentSource& source,
                                         const ChatAnswer& answer) {
    if (setup_.prices == nullptr || source.price || answer.usage.cost_usd ||
        source.is_cli()) {
      return std::nullopt;
    }
    std::optional<SourcePrice> listed = setup_.prices->Find(source.model);
    if (!listed && setup_.prices->FirstMiss(source.model)) {
      Log(LogLevel::kWarn, "agent.unpriced",
          {{"agent", inv_.agent_name},
           {"model", source.model},
           {"why",
            "the --prices table has no entry for it, and neither the "
            "source's price: nor the provider gave a cost; its answers count "
            "$0"}});
    }
    return listed;
  }

  bool HandleAnswer(const AgentSource& source, ChatAnswer& answer) {
    AgentTurnRecord record;
    record.turn = ++result_.turns;
    record.provider_requests = turn_requests_;
    turn_requests_ = 0;
    record.source = SourceLabel(source);
    record.prompt_tokens = answer.usage.prompt_tokens;
    record.completion_tokens = answer.usage.completion_tokens;
    record.usd =
        AnswerUsd(answer.usage, source.price, ListedPrice(source, answer));
    record.text = CutText(answer.text, kRecordTextBytes);
    result_.prompt_tokens += record.prompt_tokens;
    result_.completion_tokens += record.completion_tokens;
    result_.usd += record.usd;
    if (!answer.text.empty() || answer.tool_calls.empty()) {
      result_.answer = answer.text;
    }
    std::string exceeded =
        spending_.Charge(answer.usage.total_tokens(), record.usd);

    if (source.is_cli()) {  // Mocked CLI: the text is the answer.
      EmitTurn(std::move(record));
      if (!exceeded.empty()) return FailBudget(exceeded);
      return Succeed(answer.text);
    }
    request_.messages.push_back(
        Message::Assistant(answer.text, answer.tool_calls));
    {
      ConversationCheckpoint cp =
          NewCheckpoint(ConversationCheckpoint::Kind::kAnswer, record.turn);
      cp.source = record.source;
      cp.provider_requests = record.provider_requests;
      cp.prompt_tokens = record.prompt_tokens;
      cp.completion_tokens = record.completion_tokens;
      cp.usd = record.usd;
      // With tool calls, it is stored with the first start of a call with
      // effects, before that runs, or else with the next request.
      if (answer.tool_calls.empty()) {
        Emit(std::move(cp));
      } else {
        Defer(std::move(cp));
      }
    }
    if (answer.tool_calls.empty()) {
      EmitTurn(std::move(record));
      if (!exceeded.empty()) return FailBudget(exceeded);
      if (!inv_.required_tools) return Succeed(answer.text);
      if (text_guard_.RecordText()) {
        return Fail(Outcome::kFailed,
                    "agent: required tools: the model answered with text " +
                        std::to_string(text_guard_.streak()) +
                        " times in a row instead of calling a tool");
      }
      request_.messages.push_back(Message::User(kRequiredToolReminder));
      return false;
    }
    text_guard_.RecordToolCall();
    if (!exceeded.empty()) {
      EmitTurn(std::move(record));
      return FailBudget(exceeded);
    }
    return RunTools(answer.tool_calls, record);
  }

  bool RunTools(const std::vector<ToolCall>& calls, AgentTurnRecord& record) {
    std::optional<std::string> finished;
    for (const ToolCall& call : calls) {
      if (StopIfInterrupted()) {
        EmitTurn(std::move(record));
        return true;
      }
      const std::string shown = call.name + " " + call.arguments;
      ToolCallRecord& recorded = record.tool_calls.emplace_back();
      recorded.name = call.name;
      recorded.arguments =
          CutToolText(call.arguments, recorded.arguments_truncated);
      ToolResult result;
      const bool is_finish =
          inv_.required_tools && call.name == kFinishToolName;
      const Tool* tool = is_finish ? nullptr : Granted(call.name);
      const bool effects = tool != nullptr && tool->has_effects();
      ToolCheckpoint(ConversationCheckpoint::Kind::kToolStarted, record.turn,
                     call, false, effects);
      if (effects && StopIfInterrupted()) {
        // Storing its start waited for a busy store until the deadline: the
        // call does not run.
        record.tool_calls.pop_back();
        EmitTurn(std::move(record));
        return true;
      }
      if (is_finish) {
        finished = FinishAnswer(call.arguments);
        result = finished ? ToolResult::Ok("finished")
                          : ToolResult::Error(
                                "finish: pass your final answer as "
                                "{\"answer\": \"...\"}");
      } else {
        result = TracedTool(tool, call);
      }
      recorded.result = CutToolText(result.content, recorded.result_truncated);
      recorded.result_bytes = static_cast<int64_t>(result.content.size());
      recorded.is_error = result.is_error;
      request_.messages.push_back(
          Message::ToolResult(call.id, result.content, call.name));
      ToolCheckpoint(ConversationCheckpoint::Kind::kToolFinished, record.turn,
                     call, result.is_error, false);
      if (!is_finish &&
          loop_guard_.Record(call.name, call.arguments, result.content)) {
        EmitTurn(std::move(record));
        return Fail(Outcome::kFailed,
                    "agent: loop detected: " + CutText(shown, 200) +
                        " returned the same result " +
                        std::to_string(loop_guard_.repeats()) +
                        " times in a row");
      }
    }
    EmitTurn(std::move(record));
    if (finished) return Succeed(*finished);
    return StopIfInterrupted();
  }

  const Tool* Granted(const std::string& name) const {
    auto it = std::find_if(granted_.begin(), granted_.end(),
                           [&](const Tool* t) { return t->name() == name; });
    return it == granted_.end() ? nullptr : *it;
  }

  // RunTool inside its span (gen_ai "execute_tool"), under the
  // conversation's.
  ToolResult TracedTool(const Tool* tool, const ToolCall& call) {
    trace::Span span =
        trace::Span::Start("execute_tool " + call.name, span_.context());
    span.Set("gen_ai.operation.name", "execute_tool")
        .Set("gen_ai.tool.name", call.name)
        .Set("gen_ai.tool.call.id", call.id)
        .Set("gen_ai.tool.type", "function");
    const bool content = span.recording() && trace::CaptureContent();
    if (content) span.Set("gen_ai.tool.call.arguments", call.arguments);
    ToolResult result = RunTool(tool, call);
    if (content)
      span.Set("gen_ai.tool.call.result", CutText(result.content, 65536));
    if (result.is_error) {
      span.Set("error.type", "tool_error");
      span.SetError(CutText(result.content, 1000));
    }
    return result;
  }

  // The conversation's span ends with what it did and spent.
  void EndSpan() {
    if (!span_.recording()) return;
    span_.Set("gen_ai.usage.input_tokens", result_.prompt_tokens)
        .Set("gen_ai.usage.output_tokens", result_.completion_tokens)
        .Set("steps.turns", result_.turns)
        .Set("steps.provider_requests", result_.provider_requests)
        .Set("steps.retries", result_.retries)
        .Set("steps.outcome", std::string(OutcomeName(result_.outcome)));
    if (result_.usd > 0) span_.Set("steps.cost_usd", result_.usd);
    if (result_.retries_denied > 0)
      span_.Set("steps.retries_denied", result_.retries_denied);
    if (result_.outcome != Outcome::kSucceeded) {
      span_.Set("error.type", std::string(OutcomeName(result_.outcome)));
      span_.SetError(result_.error);
    }
    span_.End();
  }

  ToolResult RunTool(const Tool* tool, const ToolCall& call) {
    if (tool == nullptr) {
      std::string names;
      for (const Tool* t : granted_) {
        names += (names.empty() ? "" : ", ") + t->name();
      }
      if (inv_.required_tools) {
        names += (names.empty() ? "" : ", ") + std::string(kFinishToolName);
      }
      return ToolResult::Error("no tool named '" + call.name +
                               "' is available (available: " +
                               (names.empty() ? "none" : names) + ")");
    }
    // The one guard at the tool boundary: a tool that throws is an error
    // result the model sees, never the end of the process.
    try {
      return tool->ExecuteJson(call.arguments, ToolContextForRun());
    } catch (const std::exception& e) {
      return ToolResult::Error(call.name + ": internal error: " + e.what());
    } catch (...) {
      return ToolResult::Error(call.name + ": internal error");
    }
  }

  const ToolContext& ToolContextForRun() {
    if (!tool_context_) {
      tool_context_ =
          std::make_unique<ToolContext>(inv_.working_dir, clock_, Launcher());
      tool_context_->deadline = deadline_;
      tool_context_->cancel = ctx_.cancel;
      tool_context_->tool_timeout = inv_.tool_timeout.value_or(Millis(0));
      tool_context_->limits = setup_.tool_limits;
      tool_context_->sandbox = inv_.sandbox;
    }
    return *tool_context_;
  }

  ProcessLauncher& Launcher() {
    if (ctx_.launcher != nullptr) return *ctx_.launcher;
    if (!own_launcher_) {
      own_launcher_ = std::make_unique<LocalProcessLauncher>(clock_);
    }
    return *own_launcher_;
  }

  bool RunCli(const AgentSource& source) {
    ProcessResult run = RunCliAgent(
        Launcher(), source.cli, source.env, inv_.working_dir,
        RenderTranscript(request_.messages), deadline_, ctx_.cancel);
    const std::string label = "cli `" + source.cli + "`";
    if (setup_.exchanges != nullptr) ReportCliRun(source, run, label);
    if (run.end == ProcessEnd::kFailedToStart) {
      return SourceFailed(label + ": failed to start: " + run.error,
                          Outcome::kErrored);
    }
    AgentTurnRecord record;
    record.turn = ++result_.turns;
    record.source = SourceLabel(source);
    record.text = CutText(run.out.text, kRecordTextBytes);
    EmitTurn(std::move(record));
    result_.answer = run.out.text;
    switch (run.end) {
      case ProcessEnd::kTimedOut:
        return FailDeadline();
      case ProcessEnd::kCancelled:
        if (StopIfInterrupted()) return true;
        return Abort();
      default:
        break;
    }
    if (run.succeeded()) return Succeed(run.out.text);
    std::string stderr_tail = TailForMessage(run.err.text);
    return SourceFailed(label + ": " + run.Describe() +
                            (stderr_tail.empty() ? "" : ": " + stderr_tail),
                        Outcome::kFailed);
  }

  // A CLI run as the exchange a mock script replays it with: the request a
  // mocked CLI source sends (the conversation, no tools), answered by its
  // output, or a final HTTP 400 when it failed (so the replay falls back
  // where the run did), or no answer when the deadline cut it.
  void ReportCliRun(const AgentSource& source, const ProcessResult& run,
                    const std::string& label) {
    ChatRequest plain;
    plain.model = kMockedCli;
    plain.messages = request_.messages;
    std::optional<ChatResult> result;
    if (run.succeeded()) {
      ChatAnswer answer;
      answer.text = run.out.text;
      answer.finish_reason = "stop";
      result.emplace(std::move(answer));
    } else if (run.end == ProcessEnd::kTimedOut) {
      result.emplace(ProviderError{ProviderErrorKind::kDeadline, 0,
                                   std::nullopt, label + ": timed out"});
    } else if (run.end == ProcessEnd::kCancelled) {
      return;  // Aborted: nothing to replay.
    } else {
      result.emplace(ProviderError{ProviderErrorKind::kHttpStatus, 400,
                                   std::nullopt,
                                   label + ": " + run.Describe()});
    }
    ProviderExchange exchange;
    exchange.agent = inv_.agent_name;
    exchange.step = inv_.step_name;
    exchange.source = SourceLabel(source);
    exchange.source_index = static_cast<int>(source_index_);
    exchange.request = &plain;
    exchange.result = &*result;
    setup_.exchanges->OnExchange(exchange);
  }

  // The current source failed for good: carry on with the next one from
  // where the conversation is, or end with `outcome` when none is left.
  bool SourceFailed(const std::string& message, Outcome outcome) {
    const std::string label = SourceLabel(inv_.sources[source_index_]);
    failures_.push_back(label + ": " + message);
    retrying_.reset();
    guarded_.reset();
    observed_.reset();
    connected_.reset();
    if (source_index_ + 1 < inv_.sources.size()) {
      if (StopIfInterrupted()) return true;
      ++source_index_;
      const std::string next = SourceLabel(inv_.sources[source_index_]);
      result_.fallbacks_taken.push_back(next);
      Log(LogLevel::kWarn, "agent.fallback",
          {{"agent", inv_.agent_name},
           {"from", label},
           {"to", next},
           {"error", message}});
      return false;
    }
    if (failures_.size() == 1) return Fail(outcome, "agent: " + message);
    std::string all;
    for (const std::string& f : failures_) {
      all += (all.empty() ? "" : "; ") + f;
    }
    return Fail(outcome, "agent: all " + std::to_string(failures_.size()) +
                             " sources failed: " + all);
  }

  // Cancellation (aborted, or failed when the cancel was a deadline) and
  // the deadline's expiry end the conversation wherever they are noticed.
  bool StopIfInterrupted() {
    if (ctx_.cancel.cancelled()) {
      if (ctx_.cancel.reason() == CancelReason::kDeadline) {
        return FailDeadline();
      }
      return Abort();
    }
    if (deadline_.Expired(clock_)) return FailDeadline();
    return false;
  }

  // A checkpoint of `kind` holding the messages added since the last one
  // emitted.
  ConversationCheckpoint NewCheckpoint(ConversationCheckpoint::Kind kind,
                                       int turn) const {
    ConversationCheckpoint cp;
    cp.kind = kind;
    cp.turn = turn;
    cp.messages.assign(request_.messages.begin() + durable_messages_,
                       request_.messages.end());
    return cp;
  }

  // Hands `cp` and the checkpoints deferred before it to the caller, which
  // stores them together (one transaction) before this returns.
  void Emit(ConversationCheckpoint cp) {
    Defer(std::move(cp));
    Flush();
  }

  // Keeps `cp` to be handed over with the next Emit (or when the
  // conversation ends): only for a checkpoint after which nothing with an
  // effect outside the conversation happens before that next one (an
  // answer's tool calls start with a checkpoint of their own; a tool's
  // result is followed by the next call's start or the next request). Its
  // messages count as checkpointed from here on.
  void Defer(ConversationCheckpoint cp) {
    durable_messages_ += cp.messages.size();
    pending_.push_back(std::move(cp));
  }

  void Flush() {
    if (pending_.empty()) return;
    if (ctx_.events.on_checkpoints) ctx_.events.on_checkpoints(pending_);
    pending_.clear();
  }

  // A call's start is stored before the call runs when the call can have
  // effects (a resume then warns that it runs again); the start of a call
  // without effects (read_file, a tool the model made up, finish) rides
  // with the next checkpoint, as a result does.
  void ToolCheckpoint(ConversationCheckpoint::Kind kind, int turn,
                      const ToolCall& call, bool is_error, bool effects) {
    ConversationCheckpoint cp = NewCheckpoint(kind, turn);
    cp.call_id = call.id;
    cp.tool = call.name;
    cp.arguments = call.arguments;
    cp.is_error = is_error;
    if (kind == ConversationCheckpoint::Kind::kToolStarted && effects) {
      Emit(std::move(cp));
    } else {
      Defer(std::move(cp));
    }
  }

  void EmitTurn(AgentTurnRecord record) {
    result_.turn_records.push_back(std::move(record));
    if (ctx_.events.on_turn) ctx_.events.on_turn(result_.turn_records.back());
  }

  bool Succeed(std::string answer) {
    result_.outcome = Outcome::kSucceeded;
    result_.answer = std::move(answer);
    result_.error.clear();
    return true;
  }

  bool FailDeadline() { return Fail(Outcome::kFailed, kDeadlineExceededError); }
  bool FailBudget(const std::string& exceeded) {
    return Fail(Outcome::kFailed, "agent: " + exceeded);
  }
  bool Abort() {
    result_.outcome = Outcome::kAborted;
    result_.error = "agent: cancelled";
    return true;
  }

  bool Fail(Outcome outcome, std::string error) {
    result_.outcome = outcome;
    result_.error = std::move(error);
    Log(LogLevel::kWarn, "agent.conversation_failed",
        {{"agent", inv_.agent_name},
         {"provider_requests", result_.provider_requests},
         {"error", result_.error}});
    return true;
  }

  void Log(LogLevel level, std::string_view event,
           std::vector<LogField> fields) {
    if (ctx_.events.on_log) {
      ctx_.events.on_log(FormatLogEvent(level, event, fields));
    }
    LogEvent(level, event, fields);
    // Each of the conversation's log events (a nudge, a fallback, its
    // failure) is an event of its span, its fields typed.
    if (span_.recording())
      span_.AddEvent(std::string(event), trace::LogAttributes(fields));
  }

  const AgentInvocation& inv_;
  const AgentContext& ctx_;
  const ConversationSetup& setup_;
  Clock& clock_;
  Deadline deadline_;
  ChatRequest request_;  // The conversation so far, and what is offered.
  std::vector<const Tool*> granted_;
  Spending spending_;
  LoopGuard loop_guard_;
  TextAnswerGuard text_guard_;
  size_t source_index_ = 0;
  std::optional<ResolvedSource> connected_;
  std::unique_ptr<ObservedProvider> observed_;  // With setup_.exchanges.
  std::unique_ptr<GuardedProvider> guarded_;
  std::unique_ptr<RetryingProvider> retrying_;
  int turn_requests_ = 0;  // Requests of the turn under way, all sources.
  // Messages of request_ already in a checkpoint; the one being built.
  size_t durable_messages_ = 0;  // Of request_.messages, in a checkpoint.
  std::vector<ConversationCheckpoint> pending_;  // Deferred; see Defer.
  std::vector<std::string> failures_;            // One per source that failed.
  std::unique_ptr<LocalProcessLauncher> own_launcher_;
  std::unique_ptr<ToolContext> tool_context_;
  AgentResult result_;
  trace::Span span_;  // invoke_agent, when the run's trace is exported.
};

}  // namespace

AgentResult RunConversation(const AgentInvocation& invocation,
                            const AgentContext& context,
                            const ConversationSetup& setup) {
  Conversation conversation(invocation, context, setup);
  return conversation.Run();
}

}  // namespace steps::agent
