// Leaf steps: the attempt loop of task, get and put (attempts, per-attempt
// timeout, the retry block's waits and total cap, fix), and what one attempt
// runs.
#include <algorithm>
#include <filesystem>
#include <set>

#include "core/hash.h"
#include "core/json_text.h"
#include "core/log.h"
#include "pipeline/executor_internal.h"
#include "pipeline/spans.h"
#include "pipeline/template.h"
#include "pipeline/workspace.h"
#include "process/limits.h"

namespace steps::pipeline::internal {

namespace fs = std::filesystem;

namespace {

std::string Ms(Millis d) { return std::to_string(d.count()) + "ms"; }

// Bytes of stdout kept for asserts, records and critique.
constexpr size_t kMaxStepOutput = 1 << 20;

// The step cache key (step_cache.h): the identity with what the step sees
// at run time. `answers` is what answers an agent step besides its sources
// (AgentRunner::CacheIdentity); empty for real sources and for tasks.
std::string CacheKey(const std::string& identity,
                     const std::map<std::string, std::string>& env,
                     const Scope& scope, const std::string& workspace,
                     const std::string& answers) {
  FieldHasher h;
  h.Add("identity", identity);
  if (!answers.empty()) h.Add("answers", answers);
  for (const auto& [k, v] : env) h.Add("env." + k, v);
  h.Add("vars", DumpJson(scope.vars));
  if (scope.critique) {
    h.Add("critique", *scope.critique);
  } else {
    h.AddAbsent("critique");
  }
  h.Add("workspace", workspace);
  return h.HexDigest();
}

// Why a remembered result would not succeed as `step` is written now (its
// current assert, or a task's exit code that no `assert: {code}` allows),
// or nullopt when it would.
std::optional<std::string> CachedResultMiss(const Step& step,
                                            const CachedStep& hit) {
  if (step.kind == StepKind::kTask) {
    if (!hit.exit_code) return "no exit code recorded";
    if (*hit.exit_code != 0 &&
        !(step.check && step.check->code == hit.exit_code)) {
      return "exited with code " + std::to_string(*hit.exit_code);
    }
  }
  return CachedAssertMiss(step, hit.exit_code, hit.output);
}

// The lines a cached step replays: what it printed, or an agent's answer.
std::vector<PrintedLine> ReplayLines(const Step& step, const CachedStep& hit) {
  if (step.kind != StepKind::kAgent || !hit.lines.empty()) return hit.lines;
  std::vector<PrintedLine> lines;
  std::string_view rest = hit.output;
  while (!rest.empty() && lines.size() < kMaxCachedLines) {
    const size_t end = rest.find('\n');
    lines.push_back({OutputStream::kStdout, std::string(rest.substr(0, end))});
    rest = end == std::string_view::npos ? "" : rest.substr(end + 1);
  }
  return lines;
}

// The earlier of two deadlines (an unset one is no deadline).
Deadline Earliest(const Deadline& a, const Deadline& b) {
  if (!a.is_set()) return b;
  if (!b.is_set()) return a;
  return a.at() < b.at() ? a : b;
}

// When the step's retry block's `total_timeout` is up, counted from the
// step's start `start`; none without one.
Deadline TotalDeadline(const ResolvedStep& rs, SteadyTime start) {
  return rs.total_timeout ? Deadline::At(start + *rs.total_timeout)
                          : Deadline();
}

// The end of a step whose workspace work was cut by `cut` (abort or the
// deadline) while `doing` something.
StepResult CutShort(const Status& cut, const std::string& step, Millis limit,
                    const std::string& doing) {
  if (cut.code() == StatusCode::kCancelled)
    return {Outcome::kAborted, "aborted while " + doing};
  if (cut.code() == StatusCode::kDeadlineExceeded) {
    return {Outcome::kFailed, "STEP_TIMEOUT: Step '" + step +
                                  "' timed out after " + Ms(limit) + " while " +
                                  doing};
  }
  return {Outcome::kErrored, cut.message()};
}

bool IsCut(const Status& s) {
  return s.code() == StatusCode::kCancelled ||
         s.code() == StatusCode::kDeadlineExceeded;
}

// Files of the workspace larger than this that a step does not declare as
// inputs are keyed by their identity (size, inode, times), not read: an
// unrelated large file costs a later step nothing, at worst a cache miss.
constexpr uint64_t kUnreadAbove = 8 << 20;

// The key covers the bytes of the step's declared inputs and of every
// other file up to kUnreadAbove, each unchanged file read once per job
// (ContentDigests).
Result<WorkspaceBefore> ReadWorkspace(const std::string& workspace,
                                      const Step& step, ContentDigests& digests,
                                      const WorkLimit& limit) {
  Result<std::vector<TreeEntry>> entries = ListTree(workspace, limit, true);
  if (!entries.ok()) return entries.status();
  std::set<std::string> inputs;
  for (const std::string& in : step.inputs) inputs.insert(SafeName(in));
  auto read_contents = [&](const TreeEntry& e) {
    return e.size <= kUnreadAbove ||
           inputs.count(e.rel.substr(0, e.rel.find('/'))) > 0;
  };
  Result<std::string> contents =
      TreeDigest(workspace, *entries, read_contents, digests, limit);
  if (!contents.ok()) return contents.status();
  return WorkspaceBefore{SnapshotDigest(*entries), *contents};
}

// Whether the workspace is as `before` found it (never when unknown).
bool WorkspaceKept(const std::string& workspace,
                   const std::optional<WorkspaceBefore>& before,
                   const WorkLimit& limit) {
  if (!before) return false;
  Result<std::vector<TreeEntry>> now = ListTree(workspace, limit, false);
  return now.ok() && SnapshotDigest(*now) == before->snapshot;
}

// The step's result from its attempts: the last one's outcome, with the
// spec's STEP_TIMEOUT / STEP_RETRY_EXHAUSTED messages.
// REQUIRES: `attempts` is not empty.
StepResult JudgeAttempts(const std::string& step,
                         const std::vector<AttemptRecord>& attempts,
                         bool stopped_by_timeout, bool exhausted_by_total,
                         Millis last_limit) {
  const AttemptRecord& last = attempts.back();
  StepResult r;
  r.outcome = last.outcome;
  r.output = last.output;
  const int tried = static_cast<int>(attempts.size());
  if (r.outcome == Outcome::kSucceeded) return r;
  if (r.outcome == Outcome::kAborted) {
    r.error = last.error.empty() ? "aborted" : last.error;
  } else if (stopped_by_timeout) {
    r.outcome =
        Outcome::kFailed;  // An expired timeout is a failure, never errored.
    r.error =
        "STEP_TIMEOUT: Step '" + step + "' timed out after " + Ms(last_limit);
  } else if (last.exhausted_by == "job_timeout") {
    // The job's deadline ended the attempts, not their number.
    r.error = last.error;
  } else if (tried > 1 || exhausted_by_total) {
    r.error = "STEP_RETRY_EXHAUSTED: Step '" + step + "' failed after " +
              std::to_string(tried) + (tried == 1 ? " attempt" : " attempts") +
              (last.error.empty() ? "" : " (last: " + last.error + ")");
    if (last.timed_out) r.outcome = Outcome::kFailed;
  } else {
    r.error = last.error;
  }
  return r;
}

// Workspace work before the first attempt (hashing, copying inputs) is part
// of it: it runs under the step's timeout counted from the step's start,
// the retry block's total and the job's deadline, and stops on abort.
// `limit` is set to the step's own limit (for messages; 0 when none).
WorkLimit PrepLimit(const Clock& clock, const CancelToken& token,
                    const ResolvedStep& rs, SteadyTime start,
                    const Deadline& job_deadline, Millis* limit) {
  WorkLimit prep{&clock, token, Deadline()};
  if (rs.dials.timeout.value)
    prep.deadline = Deadline::At(start + *rs.dials.timeout.value);
  prep.deadline = Earliest(prep.deadline, TotalDeadline(rs, start));
  *limit = prep.deadline.is_set()
               ? std::chrono::duration_cast<Millis>(prep.deadline.at() - start)
               : Millis(0);
  prep.deadline = Earliest(prep.deadline, job_deadline);
  return prep;
}

// Makes `req` (a script run in req.working_dir) run under bwrap with that
// directory as the one it may write. The job's workspace is out of view
// unless it is that directory (a put), so STEPS_ARTIFACTS is then not set:
// a sandboxed task exchanges files through its inputs and outputs.
void SandboxRequest(SandboxOptions options, const std::string& script,
                    ProcessRequest& req) {
  options.writable_dir = fs::absolute(req.working_dir).lexically_normal();
  auto artifacts = req.env.find("STEPS_ARTIFACTS");
  if (artifacts != req.env.end() &&
      fs::path(artifacts->second).lexically_normal() != options.writable_dir) {
    req.env.erase(artifacts);
  }
  req.argv = WrapInSandbox({"bash", "-c", script}, options);
  req.command.clear();
}

// Ends an attempt before its scripts ran to the end: false, as a script
// that did not succeed.
bool Errored(AttemptRecord& a, std::string error) {
  a.outcome = Outcome::kErrored;
  a.error = std::move(error);
  return false;
}

bool Failed(AttemptRecord& a, std::string error) {
  a.outcome = Outcome::kFailed;
  a.error = std::move(error);
  return false;
}

// The retry wait before attempt `k` (k > 1) of the step.
Millis WaitBefore(const ResolvedStep& rs, int k) {
  const size_t i = static_cast<size_t>(k - 2);
  return i < rs.retry_waits.size() ? rs.retry_waits[i] : Millis(0);
}

}  // namespace

std::optional<std::string> CachedAssertMiss(const Step& step,
                                            std::optional<int> exit_code,
                                            const std::string& output) {
  if (!step.check) return std::nullopt;
  if (step.check->NeedsLiveRun()) {
    return "its assert judges the live run (tool calls, turns, spending, "
           "duration or a judge), which a cached result lacks";
  }
  AssertSubject subject;
  subject.kind = step.kind;
  subject.exit_code = exit_code;
  subject.output = output;
  return DescribeMisses(CheckAssert(*step.check, subject));
}

std::vector<AssertionResult> JobRunner::JudgeAssert(
    const Step& step, const Scope& scope, const StepRef& ref,
    const AssertSubject& subject) {
  if (!step.check) return {};
  std::vector<AssertionResult> results = CheckAssert(*step.check, subject);
  if (step.check->judge)
    results.push_back(RunJudge(step, scope, ref, subject.output));
  return results;
}

SteadyTime JobRunner::ResumedStart(const StepRef& ref, StepRecord& rec) const {
  SteadyTime start = clock_.Now();
  const ResumeState* resume = ex_.opts.resume;
  if (!resume) return start;
  if (auto it = resume->step_started.find(ref.id);
      it != resume->step_started.end())
    rec.started = it->second;
  if (auto it = resume->step_spent.find(ref.id); it != resume->step_spent.end())
    start -= it->second;
  return start;
}

int JobRunner::ResumedAttempts(const StepRef& ref, StepRecord& rec) const {
  const ResumeState* resume = ex_.opts.resume;
  if (!resume) return 0;
  auto it = resume->attempts.find(ref.id);
  if (it == resume->attempts.end()) return 0;
  rec.attempts = it->second;
  return static_cast<int>(rec.attempts.size());
}

std::optional<StepResult> JobRunner::ReplayFinished(const Step& step,
                                                    const StepRef& ref,
                                                    const Scope& scope) {
  const ResumeState* resume = ex_.opts.resume;
  if (!resume) return std::nullopt;
  auto it = resume->finished.find(ref.id);
  if (it == resume->finished.end()) return std::nullopt;
  if (auto fixers = resume->fixers.find(ref.id);
      step.fix && fixers != resume->fixers.end()) {
    for (const ResumedFixer& f : fixers->second) {
      if (f.finished) ReplayStored(FixerRef(step, ref), scope, *f.finished);
    }
  }
  return ReplayStored(ref, scope, it->second);
}

StepResult JobRunner::RunWork(const Step& step, const Scope& scope,
                              const StepRef& ref) {
  if (std::optional<StepResult> replayed = ReplayFinished(step, ref, scope))
    return *replayed;
  const ResolvedStep& rs = ex_.plan.For(step);
  StepRecord rec;
  rec.ref = ref;
  rec.identity = rs.identity;
  rec.started = clock_.WallNow();
  const SteadyTime start = ResumedStart(ref, rec);
  Millis prep_limit{0};
  // A hook's workspace work is not cut by the job's deadline (HookScope).
  const WorkLimit prep =
      PrepLimit(clock_, scope.token, rs, start,
                scope.in_hook ? Deadline() : job_deadline_, &prep_limit);
  const std::string workspace = (fs::path(job_dir_) / "artifacts").string();
  std::optional<WorkspaceBefore> before;
  if (std::optional<StepResult> done =
          LookUpCache(step, scope, ref, rec, start, {prep, prep_limit},
                      workspace, before))
    return *done;
  const WorkLimit after{nullptr, scope.token, Deadline()};

  if (step.kind == StepKind::kAgent) {
    StepResult r = RunAgent(step, scope, ref, rec, start);
    if (r.ok() && WorkspaceKept(workspace, before, after))
      Remember(step, ref, rec, r);
    rec.outcome = r.outcome;
    rec.error = r.error;
    rec.output = r.output;
    rec.duration = std::chrono::duration_cast<Millis>(clock_.Now() - start);
    Finish(std::move(rec), true);
    return r;
  }

  ex_.observer().OnStepStart(ref, std::nullopt);
  if (rs.dials.sandbox.value.bwrap()) {
    if (Status s = ex_.SandboxReady(); !s.ok())
      return FinishWork(rec, start, {Outcome::kErrored, s.message()});
  }
  const std::string workdir = WorkDir(ref);
  if (Status s = PrepareWorkDir(step, workdir, prep); !s.ok()) {
    return FinishWork(rec, start,
                      IsCut(s) ? CutShort(s, step.name, prep_limit, s.message())
                               : StepResult{Outcome::kErrored, s.message()});
  }

  Deadline last_deadline;
  StepResult r =
      RunAttempts(step, scope, ref, workdir, start, rec, last_deadline);
  if (r.outcome == Outcome::kSucceeded) {
    // Judged before the outputs land in the workspace: those are restored.
    const bool kept = WorkspaceKept(workspace, before, after);
    PublishOutputs(step, scope, workdir, start, last_deadline, r);
    if (kept) Remember(step, ref, rec, r);
  }
  return FinishWork(rec, start, std::move(r));
}

StepResult JobRunner::FinishWork(StepRecord& rec, SteadyTime start,
                                 StepResult r) {
  // What the attempts printed was kept for the cache only: let it go.
  for (AttemptRecord& a : rec.attempts) a.printed.clear();
  rec.outcome = r.outcome;
  rec.error = r.error;
  rec.output = r.output;
  rec.duration = std::chrono::duration_cast<Millis>(clock_.Now() - start);
  if (r.outcome == Outcome::kErrored) r.caused_by_error = true;
  Finish(std::move(rec), true);
  return r;
}

std::optional<StepResult> JobRunner::LookUpCache(
    const Step& step, const Scope& scope, const StepRef& ref, StepRecord& rec,
    SteadyTime start, const PrepWork& prep, const std::string& workspace,
    std::optional<WorkspaceBefore>& before) {
  // The step cache: a task or agent step whose key matches an earlier
  // succeeded one is not run; its output and output folders are restored.
  // Only what a step leaves in its output folders and stdout can be
  // restored, so a step that changed the job's workspace any other way
  // (an agent writing files, a task writing to $STEPS_ARTIFACTS) is not
  // remembered. Gets, puts and hooks are never cached: a get must see new
  // versions, and puts and hooks (notify, clean up) exist for their effects.
  if (!ex_.opts.cache || ref.hook ||
      (step.kind != StepKind::kTask && step.kind != StepKind::kAgent))
    return std::nullopt;
  Result<WorkspaceBefore> read =
      ReadWorkspace(workspace, step, digests_, prep.limit);
  if (!read.ok() && IsCut(read.status())) {
    ex_.observer().OnStepStart(ref, std::nullopt);
    return FinishWork(rec, start,
                      CutShort(read.status(), step.name, prep.time,
                               "hashing the workspace"));
  }
  if (!read.ok()) {
    LogEvent(LogLevel::kWarn, "workspace.unreadable",
             {{"step", ref.id}, {"error", read.status().message()}});
    return std::nullopt;
  }
  before = *read;
  std::map<std::string, std::string> env = ex_.plan.pipeline().defaults.env;
  for (const auto& [k, v] : ex_.opts.env) env[k] = v;
  for (const auto& [k, v] : step.env) env[k] = v;
  const std::string answers =
      step.kind == StepKind::kAgent && ex_.opts.agents
          ? ex_.opts.agents->CacheIdentity(step.agent)
          : "";
  rec.identity = CacheKey(ex_.plan.For(step).identity, env, scope,
                          before->contents, answers);
  return RestoreCached(step, ref, rec, start, prep.limit);
}

void JobRunner::Remember(const Step& step, const StepRef& ref,
                         StepRecord& rec, const StepResult& r) {
  if (rec.attempts.empty()) return;
  AttemptRecord& last = rec.attempts.back();
  if (!r.ok() || last.fixed) return;
  CachedStep entry;
  entry.output = r.output;
  if (step.kind == StepKind::kTask) entry.exit_code = last.exit_code;
  entry.lines = std::move(last.printed);
  for (const std::string& out : step.outputs)
    entry.outputs[out] = ArtifactDir(out);
  ex_.opts.cache->Remember(rec.identity, ref, entry);
}

void JobRunner::PublishOutputs(const Step& step, const Scope& scope,
                               const std::string& workdir, SteadyTime start,
                               const Deadline& last_deadline, StepResult& r) {
  const WorkLimit publish{&clock_, scope.token, last_deadline};
  for (const std::string& out : step.outputs) {
    Status s = CopyTree((fs::path(workdir) / out).string(), ArtifactDir(out),
                        publish);
    if (IsCut(s)) {
      r = CutShort(
          s, step.name,
          std::chrono::duration_cast<Millis>(last_deadline.at() - start),
          "publishing its outputs");
      return;
    }
    if (!s.ok()) r = {Outcome::kErrored, s.message()};
  }
}

std::optional<StepResult> JobRunner::RestoreCached(const Step& step,
                                                   const StepRef& ref,
                                                   StepRecord& rec,
                                                   SteadyTime start,
                                                   const WorkLimit& limit) {
  std::optional<CachedStep> hit = ex_.opts.cache->Find(rec.identity);
  if (!hit) return std::nullopt;
  // The result is judged as the step is written now: one the assert
  // rejects is set aside and the step runs, as it would without the cache.
  if (std::optional<std::string> miss = CachedResultMiss(step, *hit)) {
    LogEvent(LogLevel::kInfo, "cache.set_aside",
             {{"step", ref.id},
              {"from_run", hit->from_run},
              {"from_step", hit->from_step},
              {"reason", *miss}});
    return std::nullopt;
  }
  for (const std::string& out : step.outputs) {
    auto saved = hit->outputs.find(out);
    if (saved == hit->outputs.end() ||
        !CopyTree(saved->second, ArtifactDir(out), limit).ok())
      return std::nullopt;
  }
  // Replayed as a live step reports itself: its lines, then its end, which
  // names the run and step the result came from. Nothing runs: its start
  // is no durable point, and waits for no busy store.
  StepRef replay = ref;
  replay.replayed = true;
  ex_.observer().OnStepStart(replay, std::nullopt);
  ex_.observer().OnAttemptStart(replay, 1, 1, std::nullopt);
  for (const PrintedLine& line : ReplayLines(step, *hit))
    ex_.observer().OnOutput(replay, line.stream, line.text);
  AttemptRecord a;
  a.started = rec.started;
  a.output = hit->output;
  a.exit_code = hit->exit_code;
  a.duration = std::chrono::duration_cast<Millis>(clock_.Now() - start);
  a.identity = rec.identity;
  ex_.observer().OnAttemptEnd(replay, a);
  rec.attempts.push_back(a);
  rec.cached = true;
  rec.cached_from_run = hit->from_run;
  rec.cached_from_step = hit->from_step;
  rec.output = hit->output;
  rec.duration = a.duration;
  Finish(std::move(rec), true);
  return StepResult{Outcome::kSucceeded, "", hit->output};
}

// The working directory, shared by every attempt (and a fixer): inputs
// copied in, output folders made. A copy cut by `limit` answers its
// kCancelled or kDeadlineExceeded with what it was doing as the message.
Status JobRunner::PrepareWorkDir(const Step& step, const std::string& workdir,
                                 const WorkLimit& limit) {
  if (Status made = folders_.Make(workdir); !made.ok()) return made;
  std::error_code ec;
  for (const std::string& in : step.inputs) {
    const std::string artifact = ArtifactDir(in);
    if (!fs::exists(fs::symlink_status(artifact, ec))) {
      return IoError("input '" + in + "' is missing: no earlier step of job '" +
                     job_.name + "' produced it");
    }
    Status s = CopyTree(artifact, (fs::path(workdir) / in).string(), limit);
    if (IsCut(s)) return Status(s.code(), "copying input '" + in + "'");
    if (!s.ok()) return s;
  }
  for (const std::string& out : step.outputs)
    fs::create_directories(fs::path(workdir) / out, ec);
  return Status::Ok();
}

StepResult JobRunner::RunAttempts(const Step& step, const Scope& scope,
                                  const StepRef& ref,
                                  const std::string& workdir, SteadyTime start,
                                  StepRecord& rec, Deadline& last_deadline) {
  const ResolvedStep& rs = ex_.plan.For(step);
  const int attempts = rs.dials.attempts.value;
  const std::optional<Millis> timeout = rs.dials.timeout.value;
  const bool retry_on_timeout = step.retry && step.retry->on_timeout;
  const Deadline total = TotalDeadline(rs, start);
  bool exhausted_by_total = false;
  bool stopped_by_timeout = false;
  std::string past_job_deadline;  // Why no further attempt could start.
  Millis last_limit{0};
  const int first = ResumedAttempts(ref, rec) + 1;
  // A resumed step whose attempts had ended it (a success, or a timeout
  // that is not retried) only had its end left to store.
  const bool ended = first > 1 && ResumedStepEnded(step, scope, ref, rec,
                                                   stopped_by_timeout);
  if (ended) last_limit = timeout.value_or(Millis(0));

  for (int k = first; !ended && k <= attempts; ++k) {
    if (k > first) {
      const RetryWait waited = WaitToRetry(rs, k, total, scope);
      if (waited == RetryWait::kPastTotal) {
        exhausted_by_total = true;
        break;
      }
      if (waited == RetryWait::kPastJobDeadline) {
        past_job_deadline = PastJobDeadline(rs, k, attempts);
        break;
      }
      if (waited == RetryWait::kAborted) {
        rec.attempts.push_back(AbortedWaitingToRetry(k, attempts));
        break;
      }
    }
    // The first attempt's time counts from the step's start: it includes
    // the workspace work done for it.
    const SteadyTime from = k == 1 ? start : clock_.Now();
    std::optional<Millis> clipped;
    const Deadline deadline = AttemptDeadline(from, timeout, total, clipped);
    last_limit = deadline.is_set()
                     ? std::chrono::duration_cast<Millis>(deadline.at() - from)
                     : Millis(0);
    last_deadline = deadline;
    ex_.observer().OnAttemptStart(ref, k, attempts, deadline.when());
    const Millis prepared =
        std::chrono::duration_cast<Millis>(clock_.Now() - from);
    AttemptRecord a =
        RunAttemptWithFix(step, scope, ref, workdir, deadline, k,
                          k == first ? ResumedFix(ref, rec) : nullptr);
    if (k == 1) {
      a.started = rec.started;
      a.duration += prepared;
    }
    a.number = k;
    a.of = attempts;
    a.clipped_to = clipped;
    a.identity = rec.identity;
    ex_.observer().OnAttemptEnd(ref, a);
    rec.attempts.push_back(a);
    if (a.outcome == Outcome::kSucceeded || a.outcome == Outcome::kAborted)
      break;
    // The job's deadline passed while its Slurm job was queued, or Slurm
    // cannot run the job as asked.
    if (a.exhausted_by == "job_timeout" || a.final) break;
    // A lost attempt (its node failed) ends the step unless declared.
    if (a.lost && !rs.dials.retry_lost.value) break;
    if (a.timed_out) {
      if (clipped) {
        exhausted_by_total = true;
        break;
      }
      if (!retry_on_timeout) {
        // An expired timeout ends the step: the remaining attempts are
        // skipped (spec text 002).
        stopped_by_timeout = true;
        break;
      }
    }
  }

  if (exhausted_by_total) rec.attempts.back().exhausted_by = "total_timeout";
  if (!past_job_deadline.empty()) {
    rec.attempts.back().exhausted_by = "job_timeout";
    StepResult r(Outcome::kFailed, past_job_deadline);
    r.output = rec.attempts.back().output;
    return r;
  }
  return JudgeAttempts(step.name, rec.attempts, stopped_by_timeout,
                       exhausted_by_total, last_limit);
}

std::string JobRunner::PastJobDeadline(const ResolvedStep& rs, int k,
                                       int attempts) const {
  const Millis wait = WaitBefore(rs, k);
  const std::string bound = job_.timeout.has_value()
                                ? "job '" + job_.name + "''s timeout of " +
                                      FormatDuration(*job_.timeout)
                                : "job '" + job_.name + "''s deadline";
  return "attempt " + std::to_string(k) + " of " + std::to_string(attempts) +
         " was not started: its retry wait of " + FormatDuration(wait) +
         " would end at or after " + bound +
         ", when its Slurm job could no longer leave the queue";
}

bool JobRunner::ResumedStepEnded(const Step& step, const Scope& scope,
                                 const StepRef& ref, StepRecord& rec,
                                 bool& stopped_by_timeout) {
  ReplayEndedFixers(step, scope, ref, rec);
  const AttemptRecord& last = rec.attempts.back();
  stopped_by_timeout =
      last.timed_out && !(step.retry && step.retry->on_timeout);
  return last.outcome == Outcome::kSucceeded || stopped_by_timeout;
}

AttemptRecord JobRunner::AbortedWaitingToRetry(int k, int attempts) {
  AttemptRecord aborted;
  aborted.number = k;
  aborted.of = attempts;
  aborted.outcome = Outcome::kAborted;
  aborted.error = "aborted while waiting to retry";
  return aborted;
}

JobRunner::RetryWait JobRunner::WaitToRetry(const ResolvedStep& rs, int k,
                                             const Deadline& total,
                                             const Scope& scope) {
  const Millis wait = WaitBefore(rs, k);
  // When the next wait would reach the cap, stop without waiting: a
  // further attempt could not start within it.
  if (total.is_set() && clock_.Now() + wait >= total.at())
    return RetryWait::kPastTotal;
  // Nor could a Slurm job start after the job's deadline (it counts the
  // queue): the wait is not waited out for an attempt that cannot run.
  if (rs.dials.runner.value == RunnerKind::kSlurm && !scope.in_hook &&
      job_deadline_.is_set() && clock_.Now() + wait >= job_deadline_.at())
    return RetryWait::kPastJobDeadline;
  if (wait.count() > 0 && !clock_.SleepFor(wait, scope.token))
    return RetryWait::kAborted;
  return RetryWait::kWaited;
}

Deadline JobRunner::AttemptDeadline(SteadyTime from,
                                    std::optional<Millis> timeout,
                                    const Deadline& total,
                                    std::optional<Millis>& clipped) {
  Deadline deadline;
  if (timeout) deadline = Deadline::At(from + *timeout);
  if (total.is_set() && (!deadline.is_set() || total.at() < deadline.at())) {
    deadline = total;
    clipped = std::chrono::duration_cast<Millis>(total.at() - from);
  }
  return deadline;
}

AttemptRecord JobRunner::RunAttemptWithFix(const Step& step, const Scope& scope,
                                           const StepRef& ref,
                                           const std::string& workdir,
                                           const Deadline& deadline,
                                           int attempt,
                                           const ResumedFixer* resumed) {
  AttemptRecord a;
  if (resumed) {
    // The run before the fixer failed before the interruption: the fixer
    // already has what it printed.
    a.started = clock_.WallNow();
    a.outcome = Outcome::kFailed;
    a.error = "failed before the run was interrupted; its fix went on";
  } else {
    a = RunAttempt(step, scope, ref, workdir, deadline, attempt);
    if (a.outcome != Outcome::kFailed || a.timed_out || !step.fix ||
        scope.token.cancelled())
      return a;
  }
  // attempt fails -> fix agent -> re-run, inside this attempt.
  RunFixer(step, scope, ref, workdir, a, resumed);
  if (scope.token.cancelled()) return a;
  AttemptRecord rerun =
      RunAttempt(step, scope, ref, workdir, deadline, attempt);
  rerun.started = a.started;
  rerun.duration += a.duration;
  rerun.fixed = true;
  return rerun;
}

void JobRunner::ReplayEndedFixers(const Step& step, const Scope& scope,
                                  const StepRef& ref, const StepRecord& rec) {
  const ResumeState* resume = ex_.opts.resume;
  if (!resume || !step.fix) return;
  auto it = resume->fixers.find(ref.id);
  if (it == resume->fixers.end()) return;
  size_t fixed = 0;
  for (const AttemptRecord& a : rec.attempts) fixed += a.fixed;
  for (size_t i = 0; i < fixed && i < it->second.size(); ++i) {
    if (it->second[i].finished)
      ReplayStored(FixerRef(step, ref), scope, *it->second[i].finished);
  }
}

const ResumedFixer* JobRunner::ResumedFix(const StepRef& ref,
                                          const StepRecord& rec) const {
  const ResumeState* resume = ex_.opts.resume;
  if (!resume) return nullptr;
  auto it = resume->fixers.find(ref.id);
  if (it == resume->fixers.end()) return nullptr;
  // Each attempt that ended after a fix ran one fixer; the next belongs to
  // the attempt in flight.
  size_t fixed = 0;
  for (const AttemptRecord& a : rec.attempts) fixed += a.fixed;
  if (it->second.size() <= fixed) return nullptr;
  const ResumedFixer& f = it->second[fixed];
  return f.finished || f.conversation ? &f : nullptr;
}

std::map<std::string, std::string> JobRunner::PipelineEnv(const Step& step,
                                                          const StepRef& ref) {
  const EnvLookup& lookup = ex_.opts.lookup_env;
  std::vector<std::string> unset;
  std::map<std::string, std::string> env =
      ExpandEnv(ex_.plan.pipeline().defaults.env, lookup, &unset);
  for (const auto& [k, v] : ex_.opts.env) env[k] = v;
  for (const auto& [k, v] : ExpandEnv(step.env, lookup, &unset)) env[k] = v;
  for (const std::string& name : unset) {
    std::vector<LogField> fields = {{"step", ref.id}, {"var", name}};
    LogEvent(LogLevel::kWarn, "env.unset", fields);
    ex_.observer().OnLog(ref,
                         FormatLogEvent(LogLevel::kWarn, "env.unset", fields));
  }
  return env;
}

// The scripts of one attempt (a task's run; a get's check and in; a put's
// out): each runs with the attempt's environment, sandbox, deadline and
// cancellation, its lines go to the observers (and, for a task the cache
// may remember, into the attempt's `printed`), and how it ended goes into
// the attempt's record.
class JobRunner::AttemptScripts {
 public:
  // `bounded_by`: the job whose deadline a Slurm job still queued never
  // starts after, the attempt then failing as the job timed out; null in
  // hooks (they run to the end) and in a job without a deadline.
  AttemptScripts(Executor::Impl& ex, const Step& step, const Scope& scope,
                 const StepRef& ref, const Deadline& deadline,
                 const JobRunner* bounded_by,
                 std::map<std::string, std::string> env, AttemptRecord& a)
      : ex_(ex),
        scope_(scope),
        ref_(ref),
        deadline_(deadline),
        bounded_by_(bounded_by),
        env_(std::move(env)),
        dials_(ex.plan.For(step).dials),
        sandbox_(ToSandboxOptions(dials_.sandbox.value)),
        keep_printed_(ex.opts.cache && !ref.hook &&
                      step.kind == StepKind::kTask),
        a_(a) {}

  // Runs `script` in `cwd`; false (with the attempt's outcome and error
  // set) when it did not succeed. What it printed goes to `captured`.
  bool Run(const std::string& script, const std::string& cwd,
           std::string* captured) {
    const bool slurm = dials_.runner.value == RunnerKind::kSlurm;
    if (slurm && !ex_.opts.slurm) {
      return Ended(Outcome::kErrored,
                   "runner slurm: this run has no Slurm runner");
    }
    ProcessLauncher& launcher = slurm ? *ex_.opts.slurm : *ex_.opts.launcher;
    ProcessResult pr = launcher.Run(Request(script, cwd));
    if (captured) *captured = pr.out.text;
    a_.exit_code = pr.exit_code;
    // Only an attempt whose job Slurm queued has Slurm's record.
    if (pr.cluster && !pr.cluster->job_id.empty()) {
      a_.slurm = SlurmAttempt{pr.cluster->job_id, pr.cluster->node,
                              pr.cluster->queued};
    }
    switch (pr.end) {
      case ProcessEnd::kExited:
        if (pr.exit_code == 0) return true;
        return Ended(Outcome::kFailed,
                     "exited with code " + std::to_string(*pr.exit_code));
      case ProcessEnd::kSignaled:
        return Ended(Outcome::kFailed, pr.Describe());
      case ProcessEnd::kTimedOut:
        a_.timed_out = true;
        return Ended(Outcome::kFailed, pr.cluster && pr.cluster->limit_ended_it
                                           ? "timed out (Slurm's time limit)"
                                           : "timed out");
      case ProcessEnd::kCancelled:
        // Nobody here cancelled it: someone did, outside steps.
        if (!scope_.token.cancelled() && !pr.error.empty())
          return Ended(Outcome::kErrored, pr.error);
        return Ended(Outcome::kAborted, "aborted");
      case ProcessEnd::kFailedToStart:
        if (pr.cluster && pr.cluster->start_by_passed && bounded_by_) {
          // The job's deadline counts the queue: a failure, as a timeout.
          a_.exhausted_by = "job_timeout";
          return Ended(Outcome::kFailed,
                       bounded_by_->JobTimedOut() +
                           " while this attempt's Slurm job was queued (" +
                           pr.error + ")");
        }
        a_.final = pr.cluster && pr.cluster->cannot_run;
        return Ended(Outcome::kErrored, pr.Describe());
      case ProcessEnd::kLost:
        a_.lost = true;
        return Ended(Outcome::kErrored, pr.error);
    }
    return false;
  }

 private:
  // The launcher admits it by descriptors (DescriptorGate::Processes).
  ProcessRequest Request(const std::string& script, const std::string& cwd) {
    ProcessRequest req = ProcessRequest::Shell(script);
    req.working_dir = cwd;
    req.env = env_;
    if (sandbox_) SandboxRequest(*sandbox_, script, req);
    req.deadline = deadline_;
    if (dials_.runner.value == RunnerKind::kSlurm) {
      req.cluster = dials_.slurm;
      req.cluster->job_name = "steps:" + ref_.id;
      if (bounded_by_) req.cluster->start_by = bounded_by_->job_deadline_;
      // Queue time is not the attempt's unless the step says so: what is
      // left of its time starts when the job starts on a node.
      if (!dials_.timeout_includes_queue.value && deadline_.is_set()) {
        req.cluster->run_timeout = deadline_.Remaining(*ex_.opts.clock);
        req.deadline = Deadline();
      }
    }
    req.cancel = scope_.token;
    req.kill_grace = ex_.opts.kill_grace;
    req.max_captured_bytes = kMaxStepOutput;
    req.on_line = [this](OutputStream stream, std::string_view line) {
      ex_.observer().OnOutput(ref_, stream, line);
      if (keep_printed_ && a_.printed.size() < kMaxCachedLines &&
          printed_bytes_ + line.size() <= kMaxStepOutput) {
        a_.printed.push_back({stream, std::string(line)});
        printed_bytes_ += line.size();
      }
    };
    return req;
  }
  bool Ended(Outcome outcome, std::string error) {
    a_.outcome = outcome;
    a_.error = std::move(error);
    return false;
  }

  Executor::Impl& ex_;
  const Scope& scope_;
  const StepRef& ref_;
  const Deadline& deadline_;
  const JobRunner* const bounded_by_;
  const std::map<std::string, std::string> env_;
  const ResolvedDials& dials_;
  const std::optional<SandboxOptions> sandbox_;
  const bool keep_printed_;
  size_t printed_bytes_ = 0;
  AttemptRecord& a_;
};

std::map<std::string, std::string> JobRunner::AttemptEnv(const Step& step,
                                                         const Scope& scope,
                                                         const StepRef& ref,
                                                         int attempt) {
  std::map<std::string, std::string> env = PipelineEnv(step, ref);
  env["STEPS_RUN_ID"] = ex_.opts.run_id;
  env["STEPS_JOB"] = job_.name;
  env["STEPS_STEP"] = step.name;
  env["STEPS_ATTEMPT"] = std::to_string(attempt);
  // A task's own spans go under its attempt's.
  if (ex_.opts.trace.valid()) {
    env["TRACEPARENT"] =
        AttemptSpan(ex_.opts.trace, ex_.opts.run_id, ref.id, attempt)
            .Traceparent();
  }
  // The job's shared workspace: artifacts, and what agent steps wrote.
  env["STEPS_ARTIFACTS"] =
      fs::absolute(fs::path(job_dir_) / "artifacts").string();
  for (const auto& [var, value] : scope.vars.items()) {
    if (value.is_string()) env[var] = value.get<std::string>();
  }
  return env;
}

AttemptRecord JobRunner::RunAttempt(const Step& step, const Scope& scope,
                                    const StepRef& ref,
                                    const std::string& workdir,
                                    const Deadline& deadline, int attempt) {
  AttemptRecord a;
  a.started = clock_.WallNow();
  const SteadyTime start = clock_.Now();
  const bool bounded = !scope.in_hook && job_deadline_.is_set();
  AttemptScripts scripts(ex_, step, scope, ref, deadline,
                         bounded ? this : nullptr,
                         AttemptEnv(step, scope, ref, attempt), a);
  const bool ran = step.kind == StepKind::kTask
                       ? RunTaskScript(step, scope, workdir, scripts, a)
                       : RunResourceScripts(step, scope, workdir, scripts, a);
  if (ran) {
    // The assert judges this attempt's output: a miss is a failure.
    AssertSubject subject;
    subject.kind = step.kind;
    subject.exit_code = a.exit_code;
    subject.output = a.output;
    subject.duration =
        std::chrono::duration_cast<Millis>(clock_.Now() - start);
    a.assertions = JudgeAssert(step, scope, ref, subject);
    std::optional<std::string> miss = DescribeMisses(a.assertions);
    a.outcome = miss ? Outcome::kFailed : Outcome::kSucceeded;
    a.error = miss.value_or("");
  }
  a.duration = std::chrono::duration_cast<Millis>(clock_.Now() - start);
  return a;
}

bool JobRunner::RunTaskScript(const Step& step, const Scope& scope,
                              const std::string& workdir,
                              AttemptScripts& scripts, AttemptRecord& a) {
  Result<std::string> script =
      RenderTemplateRoots(step.run, scope.vars, scope.var_names);
  if (!script.ok()) return Errored(a, script.status().message());
  std::string out;
  const bool ok = scripts.Run(*script, workdir, &out);
  a.output = out;
  if (ok) return true;
  // A failure the step's `check: {code: N}` expects goes on to the assert.
  return a.outcome == Outcome::kFailed && !a.timed_out && step.check &&
         step.check->code && a.exit_code == step.check->code;
}

bool JobRunner::RunResourceScripts(const Step& step, const Scope& scope,
                                   const std::string& workdir,
                                   AttemptScripts& scripts, AttemptRecord& a) {
  const Resource* res = ex_.plan.pipeline().FindResource(step.resource);
  const ResourceType* type =
      res ? ex_.plan.pipeline().FindResourceType(res->type) : nullptr;
  if (!res || !type)
    return Errored(a, "resource '" + step.resource + "' is gone");
  nlohmann::json ctx = {{"source", res->source}, {"params", step.params}};
  for (const auto& [k, v] : scope.vars.items()) ctx[k] = v;
  if (step.kind == StepKind::kGet)
    return RunGetScripts(step, *type, workdir, ctx, scripts, a);
  Result<std::string> put = RenderTemplate(type->out, ctx);
  if (!put.ok()) return Errored(a, "out: " + put.status().message());
  std::string out;
  if (!scripts.Run(*put, (fs::path(job_dir_) / "artifacts").string(),
                   &out)) {
    a.error = "out " + a.error;
    return false;
  }
  a.output = out;
  return true;
}

bool JobRunner::RunGetScripts(const Step& step, const ResourceType& type,
                              const std::string& workdir, nlohmann::json& ctx,
                              AttemptScripts& scripts, AttemptRecord& a) {
  nlohmann::json version = nlohmann::json::object();
  if (!type.check.empty()) {
    Result<std::string> check = RenderTemplate(type.check, ctx);
    if (!check.ok()) return Errored(a, "check: " + check.status().message());
    std::string out;
    if (!scripts.Run(*check, workdir, &out)) {
      a.error = "check " + a.error;
      return false;
    }
    nlohmann::json versions = nlohmann::json::parse(out, nullptr, false);
    if (versions.is_discarded() || !versions.is_array()) {
      return Failed(a, "check printed no JSON list of versions: " +
                           TrimOutput(out.substr(0, 200)));
    }
    if (versions.empty()) return Failed(a, "check found no versions");
    version = versions.back();  // The last is the newest.
  }
  ctx["version"] = version;
  const std::string dir = ArtifactDir(step.name);
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) return Errored(a, "cannot create " + dir + ": " + ec.message());
  Result<std::string> in = RenderTemplate(type.in, ctx);
  if (!in.ok()) return Errored(a, "in: " + in.status().message());
  std::string out;
  if (!type.in.empty() && !scripts.Run(*in, dir, &out)) {
    a.error = "in " + a.error;
    return false;
  }
  a.output = DumpJson(version);
  return true;
}

}  // namespace steps::pipeline::internal
