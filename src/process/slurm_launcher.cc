#include "process/slurm_launcher.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>

#include "core/log.h"
#include "core/random.h"
#include "core/trim.h"
#include "process/local_launcher.h"
#include "process/output_capture.h"
#include "process/unique_fd.h"

namespace steps {

namespace fs = std::filesystem;

namespace {

// How long a Slurm command may take before it counts as failed.
constexpr Millis kCommandTimeout{30000};
// How long one question to scontrol may take while a job is watched: the
// watch reads output and meets deadlines between questions.
constexpr Millis kAskTimeout{5000};
// After the job was cancelled, how long Slurm gets to say it has ended.
constexpr Millis kEndWait{30000};
// After Slurm says the job ended without its end marker, how long a shared
// filesystem gets to show the marker (attribute caches lag).
constexpr Millis kMarkerWait{2000};
// After the job was cancelled in the pending state alone (its time to
// start passed), how long Slurm gets to say whether it had started.
constexpr Millis kStartByWait{5000};
// The most of one output file read per poll.
constexpr size_t kReadChunk = 1 << 20;

std::string Trim(std::string_view s) { return std::string(TrimSpace(s)); }

// `path` for an sbatch option that expands %-patterns (--output): each '%'
// doubled, so the path is taken as it is. (A backslash cannot be: Slurm
// takes it as an escape and drops it; SlurmLauncher::Probe refuses one.)
std::string SlurmPattern(const std::string& path) {
  std::string out;
  for (char c : path) {
    out += c;
    if (c == '%') out += '%';
  }
  return out;
}

// True when sbatch's words say Slurm refused the job for what it asks (a
// partition, account, QOS or node configuration it does not have), which
// the same request would meet again; not when Slurm could not be reached
// or was too busy to take it.
bool RefusedForWhatItAsks(const std::string& said) {
  if (said.find("Batch job submission failed") == std::string::npos)
    return false;
  for (const char* passing :
       {"timed out", "Unable to contact", "temporarily", "Zero Bytes",
        "try again", "Connection refused", "connection failure"}) {
    if (said.find(passing) != std::string::npos) return false;
  }
  return true;
}

// A job name Slurm and scontrol's lines take as one word: letters, digits
// and `_.:-`, anything else `_`.
std::string SafeJobName(const std::string& name) {
  std::string out = name.empty() ? "steps" : name.substr(0, 200);
  for (char& c : out) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' &&
        c != ':' && c != '-')
      c = '_';
  }
  return out;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

// The states after which Slurm does nothing more with a job.
bool IsFinalState(const std::string& state) {
  static const std::set<std::string> kFinal = {
      "BOOT_FAIL", "CANCELLED", "COMPLETED",     "DEADLINE", "FAILED",
      "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "TIMEOUT"};
  return kFinal.count(state) > 0;
}

// `name` as found in this process's PATH, or as given.
std::string FindCommand(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = getenv("PATH");
  std::string_view rest = path ? path : "/usr/bin:/bin";
  while (!rest.empty()) {
    size_t colon = rest.find(':');
    std::string dir(rest.substr(0, colon));
    rest = colon == std::string_view::npos ? "" : rest.substr(colon + 1);
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  if (s.size() > 4096) s.resize(4096);
  return s;
}

// Written private from the start (0600, or 0700 for the job script): the
// step's stdin may hold what only its owner may read (a cell's keys).
Status WriteFile(const std::string& path, const std::string& text,
                 bool executable) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                   executable ? 0700 : 0600));
  if (!fd.valid()) return IoError("cannot write " + path);
  std::string_view left = text;
  while (!left.empty()) {
    const ssize_t n = write(fd.get(), left.data(), left.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return IoError("cannot write " + path);
    left.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// One output file of the job, read as it grows.
class FileStream {
 public:
  FileStream(std::string path, OutputStream which, const ProcessRequest& req)
      : path_(std::move(path)),
        which_(which),
        capture_(req.max_captured_bytes, req.keep),
        lines_(ProcessRequest::kMaxLineBytes,
               [this, &req](std::string_view line) {
                 if (req.on_line) req.on_line(which_, line);
               }) {}

  // Reads what was added since the last call.
  void Poll() {
    if (!fd_.valid()) {
      fd_ = UniqueFd(open(path_.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd_.valid()) return;
    }
    std::string buf(64 * 1024, '\0');
    size_t read_now = 0;
    while (read_now < kReadChunk) {
      ssize_t n = pread(fd_.get(), buf.data(), buf.size(), offset_);
      if (n <= 0) break;
      offset_ += static_cast<uint64_t>(n);
      read_now += static_cast<size_t>(n);
      std::string_view data(buf.data(), static_cast<size_t>(n));
      capture_.Append(data);
      lines_.Feed(data);
    }
  }
  // Reads the rest and hands over a last line without a newline.
  void Finish() {
    for (uint64_t before = ~uint64_t{0}; before != offset_;) {
      before = offset_;
      Poll();
    }
    lines_.Flush();
  }
  CapturedOutput Captured() const { return capture_.Finish(); }

 private:
  const std::string path_;
  const OutputStream which_;
  UniqueFd fd_;
  uint64_t offset_ = 0;
  BoundedCapture capture_;
  LineSplitter lines_;
};

}  // namespace

std::string SlurmRunTag(const std::string& run_id) {
  return "steps-run:" + run_id;
}

void CancelTaggedSlurmJobs(const std::string& tag) {
  if (tag.empty()) return;
  ProcessRequest q =
      ProcessRequest::Exec({FindCommand("squeue"), "-h", "-u",
                            std::to_string(getuid()), "-o", "%i %k"});
  q.deadline = Deadline::After(RealClock(), kCommandTimeout);
  LocalProcessLauncher local;
  ProcessResult pr = local.Run(q);
  if (!pr.succeeded()) return;
  std::vector<std::string> ids;
  std::istringstream lines(pr.out.text);
  for (std::string line; std::getline(lines, line);) {
    const size_t space = line.find(' ');
    if (space != std::string::npos && line.substr(space + 1) == tag)
      ids.push_back(line.substr(0, space));
  }
  CancelSlurmJobs(ids);
}

void CancelSlurmJobs(const std::vector<std::string>& ids) {
  if (ids.empty()) return;
  std::vector<std::string> argv = {FindCommand("scancel")};
  argv.insert(argv.end(), ids.begin(), ids.end());
  ProcessRequest c = ProcessRequest::Exec(std::move(argv));
  c.deadline = Deadline::After(RealClock(), kCommandTimeout);
  LocalProcessLauncher local;
  local.Run(c);
}

std::vector<std::string> SbatchPlacementArgs(const ClusterPlacement& p) {
  std::vector<std::string> args;
  if (!p.partition.empty()) args.push_back("--partition=" + p.partition);
  if (!p.account.empty()) args.push_back("--account=" + p.account);
  if (!p.qos.empty()) args.push_back("--qos=" + p.qos);
  if (p.cpus > 0) args.push_back("--cpus-per-task=" + std::to_string(p.cpus));
  if (!p.mem.empty()) args.push_back("--mem=" + p.mem);
  if (!p.gres.empty()) args.push_back("--gres=" + p.gres);
  for (const std::string& e : p.extra) args.push_back(e);
  return args;
}

std::string SlurmTimeLimit(Millis limit) {
  const int64_t ms = std::max<int64_t>(limit.count(), 1);
  const int64_t minutes = (ms + 59999) / 60000;
  return std::to_string(minutes);
}

std::string ScontrolField(const std::string& line, const std::string& key) {
  const std::string needle = key + "=";
  size_t at = 0;
  while ((at = line.find(needle, at)) != std::string::npos) {
    if (at == 0 || line[at - 1] == ' ' || line[at - 1] == '\n') {
      size_t from = at + needle.size();
      size_t end = line.find_first_of(" \n", from);
      return line.substr(
          from, end == std::string::npos ? std::string::npos : end - from);
    }
    at += needle.size();
  }
  return "";
}

// One run: its spool folder, its job, and the watch over it.
class SlurmLauncher::Job {
 public:
  Job(SlurmLauncher& launcher, const ProcessRequest& req, std::string dir)
      : l_(launcher),
        req_(req),
        dir_(std::move(dir)),
        out_(dir_ + "/out", OutputStream::kStdout, req),
        err_(dir_ + "/err", OutputStream::kStderr, req) {}

  ProcessResult Run() {
    r_.cluster.emplace();
    const SteadyTime begin = l_.clock_.Now();
    submitted_ = begin;
    if (StartByPassed()) return Done(begin);
    if (Status s = WriteFiles(); !s.ok()) return FailedToStart(s.message());
    submitted_ = l_.clock_.Now();
    if (!Submit()) return Done(begin);
    try {
      Watch();
    } catch (...) {
      // on_line threw: the job must not outlive the run.
      Scancel({r_.cluster->job_id});
      throw;
    }
    return Done(begin);
  }

 private:
  std::string Path(const char* name) const { return dir_ + "/" + name; }

  Status WriteFiles() {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) return IoError("cannot create " + dir_ + ": " + ec.message());
    // The job's output may hold what a secret masks only when shown.
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::replace, ec);
    std::string command;
    if (req_.argv.empty()) {
      command = "bash -c " + ShellQuote(req_.command);
    } else {
      for (const std::string& a : req_.argv)
        command += (command.empty() ? "" : " ") + ShellQuote(a);
    }
    std::string in = "/dev/null";
    if (req_.stdin_text) {
      in = Path("stdin");
      if (Status s = WriteFile(in, *req_.stdin_text, false); !s.ok()) return s;
    }
    const std::string workdir =
        req_.working_dir.empty() ? fs::current_path(ec).string()
                                 : fs::absolute(req_.working_dir, ec).string();
    const std::string q = ShellQuote(dir_);
    // Private files; the command runs as a child that TERM is passed on to,
    // so that the script outlives it and Slurm's kill after the grace
    // reaches whatever the command left (a script that ended at once would
    // take the command's process out of the job's reach).
    std::string script =
        "#!/bin/bash\n# One run of steps (docs/slurm.md).\numask 077\n";
    script += "printf '%s\\n' \"${SLURMD_NODENAME:-$(hostname)}\" > " + q +
              "/started.tmp && mv " + q + "/started.tmp " + q + "/started\n";
    script += "cd -- " + ShellQuote(workdir) +
              " 2>/dev/null || { printf 'working directory %s: cannot enter "
              "it on node %s\\n' " +
              ShellQuote(workdir) + " \"${SLURMD_NODENAME:-$(hostname)}\" > " +
              q + "/nostart; exit 126; }\n";
    script += command + " < " + ShellQuote(in) + " > " + q + "/out " +
              (req_.merge_stderr ? "2>&1" : "2> " + q + "/err") + " &\n";
    // The trap's action is parsed again when it runs: quoted whole.
    script +=
        "child=$!\ntrap " +
        ShellQuote(": > " + q + "/term; kill -TERM \"$child\" 2>/dev/null") +
        " TERM\n"
        "while :; do wait \"$child\"; code=$?; "
        "kill -0 \"$child\" 2>/dev/null || break; done\n";
    script += "printf '%s\\n' \"$code\" > " + q + "/status.tmp && mv " + q +
              "/status.tmp " + q + "/status\nexit \"$code\"\n";
    return WriteFile(Path("job.sh"), script, true);
  }

  // The time limit Slurm is given, as known now.
  std::optional<Millis> Limit() const {
    std::optional<Millis> limit;
    if (req_.cluster && req_.cluster->run_timeout)
      limit = *req_.cluster->run_timeout;
    if (std::optional<Millis> left = req_.deadline.Remaining(l_.clock_))
      limit = limit ? std::min(*limit, *left) : *left;
    return limit;
  }

  bool Submit() {
    std::vector<std::string> argv = {
        l_.sbatch_,
        "--parsable",
        "--no-requeue",
        "--job-name=" + SafeJobName(req_.cluster ? req_.cluster->job_name : ""),
        "--output=" + SlurmPattern(Path("slurm.out")),
        "--chdir=" + dir_};
    if (std::optional<Millis> limit = Limit())
      argv.push_back("--time=" + SlurmTimeLimit(*limit));
    if (!l_.options_.tag.empty())
      argv.push_back("--comment=" + l_.options_.tag);
    if (req_.cluster) {
      for (std::string& a : SbatchPlacementArgs(*req_.cluster))
        argv.push_back(std::move(a));
    }
    argv.push_back(Path("job.sh"));
    ProcessRequest sub = ProcessRequest::Exec(std::move(argv));
    sub.inherit_env = req_.inherit_env;
    sub.env = req_.env;
    sub.env_unset = req_.env_unset;
    sub.inherit_only = req_.inherit_only;
    // Not cut by the request's cancellation or deadline: an sbatch killed
    // after it queued the job would leave the job behind, unknown. An abort
    // or deadline meanwhile is seen once the id is known, and ends the job.
    sub.deadline = Deadline::After(l_.clock_, kCommandTimeout);
    // sbatch reads options from SBATCH_* variables too: none of those that
    // would change what steps relies on may come from the environment.
    for (const char* name :
         {"SBATCH_ARRAY_INX", "SBATCH_WAIT", "SBATCH_REQUEUE",
          "SBATCH_NO_REQUEUE", "SBATCH_EXPORT", "SBATCH_OPEN_MODE",
          "SBATCH_INPUT", "SBATCH_OUTPUT", "SBATCH_ERROR", "SBATCH_JOB_NAME",
          "SBATCH_TIMELIMIT", "SBATCH_WAIT_ALL_NODES", "SBATCH_HOLD"})
      sub.env_unset.push_back(name);
    if (l_.options_.jobs) l_.options_.jobs->OnSubmitting();
    ProcessResult pr = l_.local_.Run(sub);
    if (!pr.succeeded()) {
      std::string why = Trim(pr.err.text);
      if (why.empty()) why = "sbatch " + pr.Describe();
      FailedToStart(why);
      r_.cluster->cannot_run = RefusedForWhatItAsks(why);
      return false;
    }
    std::string id = Trim(pr.out.text);
    id = id.substr(0, id.find(';'));  // "1234;cluster"
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
      FailedToStart("sbatch printed no job id: " + Trim(pr.out.text));
      return false;
    }
    r_.cluster->job_id = id;
    l_.poll_.Add(id);
    if (l_.options_.jobs) l_.options_.jobs->OnJobQueued(id);
    return true;
  }

  void Watch() {
    Millis poll{5};
    SteadyTime next_state = submitted_ + l_.options_.state_poll;
    for (;;) {
      out_.Poll();
      err_.Poll();
      if (!started_) CheckStarted();
      if (std::optional<int> code = ExitStatus()) {
        // A command that ended on Slurm's SIGTERM (its time limit, a node
        // going down, a preemption, someone's scancel) ended as Slurm says.
        if (fs::exists(Path("term")) && EndedBySlurm(AskUntilFinal())) return;
        Exited(*code);
        return;
      }
      if (std::optional<std::string> why = ReadSmallFile(Path("nostart"))) {
        FailedToStart(Trim(*why));
        return;
      }
      if (req_.cancel.cancelled()) {
        Stop(ProcessEnd::kCancelled);
        return;
      }
      const Deadline deadline = req_.deadline.Earlier(run_deadline_);
      if (deadline.Expired(l_.clock_)) {
        Stop(ProcessEnd::kTimedOut);
        return;
      }
      if (!started_ && StartBy().Expired(l_.clock_) && !StartedAfterAll()) {
        StartByPassed();
        Stop(ProcessEnd::kFailedToStart);
        return;
      }
      if (l_.clock_.Now() >= next_state) {
        // A question that hangs is cut at the next time this watch must
        // act on: its deadline, or its time to start while queued.
        const Deadline limit =
            started_ ? deadline : deadline.Earlier(StartBy());
        std::string line = l_.poll_.Line(r_.cluster->job_id, limit);
        // An end is confirmed with scontrol, for this job alone: squeue's
        // answer is one for all jobs, and may be wrong about one.
        const std::string polled = ScontrolField(line, "JobState");
        if (IsFinalState(polled) || polled == "GONE") {
          line = Ask(limit);
        } else {
          Take(line);
        }
        if (EndedBySlurm(line)) return;
        if (CannotRun(line)) return;
        next_state = l_.clock_.Now() + l_.options_.state_poll;
      }
      SteadyTime wake = std::min(l_.clock_.Now() + poll, next_state);
      if (deadline.is_set()) wake = std::min(wake, deadline.at());
      if (!started_ && StartBy().is_set())
        wake = std::min(wake, StartBy().at());
      l_.clock_.SleepUntil(wake, req_.cancel);
      poll = std::min(poll * 2, l_.options_.output_poll);
    }
  }

  Deadline StartBy() const {
    return req_.cluster ? req_.cluster->start_by : Deadline();
  }

  // True when the job has not started on a node and the placement's
  // start_by has passed: the result says so (the caller cancels a queued
  // job).
  bool StartByPassed() {
    if (!StartBy().Expired(l_.clock_)) return false;
    r_.end = ProcessEnd::kFailedToStart;
    r_.cluster->start_by_passed = true;
    r_.error = r_.cluster->job_id.empty()
                   ? "its time to start on a node had passed before it was "
                     "submitted to Slurm"
                   : "Slurm job " + r_.cluster->job_id +
                         " was still in Slurm's queue when its time to start "
                         "on a node passed; it was cancelled";
    return true;
  }

  void CheckStarted() {
    std::optional<std::string> node = ReadSmallFile(Path("started"));
    if (node) MarkStarted(Trim(*node));
  }

  void MarkStarted(const std::string& node) {
    started_ = true;
    if (!node.empty()) r_.cluster->node = node;
    r_.cluster->queued =
        std::chrono::duration_cast<Millis>(l_.clock_.Now() - submitted_);
    if (req_.cluster && req_.cluster->run_timeout)
      run_deadline_ = Deadline::After(l_.clock_, *req_.cluster->run_timeout);
  }

  // At its time to start, the job leaves the queue only if it is still
  // pending there: the cancel asks Slurm to cancel it in that state alone,
  // so that a job Slurm started in the same moment is not taken for one
  // that never started. True when it had started (it then runs on, and
  // the run's deadline or cancellation ends it as any running job).
  bool StartedAfterAll() {
    if (r_.cluster->job_id.empty()) return false;
    Scancel({"--state=PENDING", r_.cluster->job_id});
    const SteadyTime until = l_.clock_.Now() + kStartByWait;
    for (;;) {
      CheckStarted();
      if (started_) return true;
      const std::string line = Ask();
      const std::string& state = r_.cluster->state;
      if (state == "CANCELLED" || state == "GONE") return false;
      if (!state.empty() && state != "PENDING") {
        std::string nodes = ScontrolField(line, "NodeList");
        MarkStarted(nodes == "(null)" ? "" : nodes);
        return true;
      }
      if (l_.clock_.Now() >= until) return false;
      l_.clock_.SleepFor(Millis(50), CancelToken());
    }
  }

  std::optional<int> ExitStatus() {
    std::optional<std::string> text = ReadSmallFile(Path("status"));
    if (!text) return std::nullopt;
    try {
      return std::stoi(*text);
    } catch (...) {
      return std::nullopt;
    }
  }

  void Exited(int code) {
    r_.end = ProcessEnd::kExited;
    r_.exit_code = code;
  }

  // What Slurm's line for the job says of its state and node ("" says
  // nothing).
  void Take(const std::string& line) {
    if (line.empty()) return;
    r_.cluster->state = ScontrolField(line, "JobState");
    if (r_.cluster->node.empty()) {
      std::string nodes = ScontrolField(line, "NodeList");
      if (nodes != "(null)") r_.cluster->node = nodes;
    }
  }

  // Slurm's line for the job, asked of scontrol now; "" when it cannot
  // tell.
  std::string Ask(const Deadline& limit = Deadline()) {
    ProcessRequest q = ProcessRequest::Exec(
        {l_.scontrol_, "show", "job", "-o", r_.cluster->job_id});
    q.deadline = Deadline::After(l_.clock_, kAskTimeout).Earlier(limit);
    ProcessResult pr = l_.local_.Run(q);
    if (pr.succeeded()) {
      Take(pr.out.text);
      return pr.out.text;
    }
    // A job Slurm forgot (it keeps ended jobs MinJobAge seconds) or a
    // controller that does not answer: the end markers still tell.
    if (pr.err.text.find("Invalid job id") != std::string::npos)
      r_.cluster->state = "GONE";
    return "";
  }

  // True when Slurm holds the job pending for a reason that does not pass
  // by itself (it asks more than its partition allows, an account or QOS
  // it may not use): the job is cancelled and the run fails to start,
  // instead of waiting in the queue for a deadline that may never come.
  bool CannotRun(const std::string& line) {
    if (r_.cluster->state != "PENDING") return false;
    static const char kLimits[] = "it asks more than the partition allows";
    static const char kRights[] = "the account or QOS may not be used";
    static const std::map<std::string, std::string> kNever = {
        {"PartitionConfig", kLimits},
        {"PartitionNodeLimit", kLimits},
        {"PartitionTimeLimit", kLimits},
        {"BadConstraints", "no node has the constraints it asks"},
        {"InvalidAccount", kRights},
        {"InvalidQOS", kRights},
        {"AccountNotAllowed", kRights},
        {"QOSNotAllowed", kRights},
        {"DependencyNeverSatisfied",
         "a job it depends on ended in a way that can never satisfy its "
         "dependency"}};
    const std::string reason = ScontrolField(line, "Reason");
    SayIfHeld(reason);
    auto never = kNever.find(reason);
    if (never == kNever.end()) return false;
    Stop(ProcessEnd::kFailedToStart);
    r_.cluster->cannot_run = true;
    r_.error = "Slurm cannot run job " + r_.cluster->job_id +
               " as asked: it is held pending with reason " + reason + " (" +
               never->second + "); it was cancelled";
    return true;
  }

  // A job someone holds (scontrol hold, or an administrator) waits until
  // released or its deadline: said once, so a run that waits says why.
  void SayIfHeld(const std::string& reason) {
    if (said_held_ || (reason != "JobHeldUser" && reason != "JobHeldAdmin"))
      return;
    said_held_ = true;
    LogEvent(LogLevel::kWarn, "slurm.job_held",
             {{"job", r_.cluster->job_id},
              {"reason", reason},
              {"message",
               "it waits in Slurm's queue until released (scontrol release " +
                   r_.cluster->job_id + ") or its deadline passes"}});
  }

  // Slurm's line for the job once it says the job is over (asked every
  // 100 ms, for at most kEndWait); the last line it gave otherwise.
  std::string AskUntilFinal() {
    const SteadyTime until = l_.clock_.Now() + kEndWait;
    std::string line = Ask();
    while (!IsFinalState(r_.cluster->state) && r_.cluster->state != "GONE" &&
           l_.clock_.Now() < until) {
      l_.clock_.SleepFor(Millis(100), CancelToken());
      line = Ask();
    }
    return line;
  }

  // True when Slurm says the job is over: the result is then set.
  bool EndedBySlurm(const std::string& line) {
    const std::string& state = r_.cluster->state;
    if (state != "GONE" && !IsFinalState(state)) return false;
    // Slurm ended it: its time limit, a lost node, a preemption, a cancel.
    const bool slurms = state == "TIMEOUT" || state == "NODE_FAIL" ||
                        state == "BOOT_FAIL" || state == "PREEMPTED" ||
                        state == "CANCELLED";
    // Otherwise the job script's own end marker wins: the command ended.
    const SteadyTime until = l_.clock_.Now() + kMarkerWait;
    while (!slurms) {
      if (std::optional<int> code = ExitStatus()) {
        Exited(*code);
        return true;
      }
      if (state != "COMPLETED" && state != "FAILED") break;
      if (l_.clock_.Now() >= until) break;
      l_.clock_.SleepFor(Millis(50), CancelToken());
    }
    if (slurms) r_.exit_code = ExitStatus();
    const std::string job = "Slurm job " + r_.cluster->job_id;
    const std::string reason = ScontrolField(line, "Reason");
    if (state == "TIMEOUT") {
      r_.end = ProcessEnd::kTimedOut;
      r_.cluster->limit_ended_it = true;
      r_.error = job + " reached its time limit";
    } else if (state == "NODE_FAIL" || state == "BOOT_FAIL") {
      r_.end = ProcessEnd::kLost;
      r_.error = job + ": its node " +
                 (r_.cluster->node.empty() ? "" : r_.cluster->node + " ") +
                 "failed (" + state + ")";
    } else if (state == "PREEMPTED") {
      r_.end = ProcessEnd::kLost;
      r_.error = job + " was preempted";
    } else if (state == "CANCELLED") {
      r_.end = ProcessEnd::kCancelled;
      r_.error = job + " was cancelled outside steps";
    } else if (std::optional<std::string> why =
                   ReadSmallFile(Path("nostart"))) {
      FailedToStart(Trim(*why));
    } else {
      std::string said = Trim(ReadSmallFile(Path("slurm.out")).value_or(""));
      r_.end = ProcessEnd::kLost;
      r_.error =
          job + " ended " + (state == "GONE" ? "out of sight" : state) +
          " without its command's exit status" +
          (said.empty() ? "" : ": " + said) +
          (reason.empty() || reason == "None" ? "" : " (" + reason + ")");
    }
    return true;
  }

  // Ends the job on our side: a pending job leaves the queue; a running
  // one gets SIGTERM, then Slurm's kill after the grace.
  void Stop(ProcessEnd why) {
    r_.end = why;
    if (why == ProcessEnd::kTimedOut) r_.error = "timed out";
    const std::string& id = r_.cluster->job_id;
    if (started_) {
      Scancel({"--full", "--signal=TERM", id});
      const SteadyTime until = l_.clock_.Now() + req_.kill_grace;
      while (l_.clock_.Now() < until && !ExitStatus()) {
        Ask();
        if (IsFinalState(r_.cluster->state)) break;
        l_.clock_.SleepFor(Millis(50), CancelToken());
      }
    }
    if (!ExitStatus() && !IsFinalState(r_.cluster->state)) {
      Scancel({id});
      r_.escalated_to_kill = started_;
    }
    // Wait for Slurm to let go of it, so that nothing of the run outlives
    // Run (bounded: a controller that stopped answering is not waited for).
    const SteadyTime until = l_.clock_.Now() + kEndWait;
    while (l_.clock_.Now() < until) {
      Ask();
      const std::string& s = r_.cluster->state;
      if (IsFinalState(s) || s == "GONE") break;
      l_.clock_.SleepFor(Millis(50), CancelToken());
    }
    if (std::optional<int> code = ExitStatus()) r_.exit_code = code;
  }

  void Scancel(std::vector<std::string> args) {
    std::vector<std::string> argv = {l_.scancel_};
    for (std::string& a : args) argv.push_back(std::move(a));
    ProcessRequest c = ProcessRequest::Exec(std::move(argv));
    c.deadline = Deadline::After(l_.clock_, kCommandTimeout);
    l_.local_.Run(c);
  }

  ProcessResult FailedToStart(const std::string& why) {
    r_.end = ProcessEnd::kFailedToStart;
    r_.error = why;
    return r_;
  }

  ProcessResult Done(SteadyTime begin) {
    out_.Finish();
    err_.Finish();
    r_.out = out_.Captured();
    r_.err = err_.Captured();
    if (!started_)
      r_.cluster->queued =
          std::chrono::duration_cast<Millis>(l_.clock_.Now() - submitted_);
    r_.duration = std::chrono::duration_cast<Millis>(l_.clock_.Now() - begin);
    if (!r_.cluster->job_id.empty()) {
      l_.poll_.Remove(r_.cluster->job_id);
      if (l_.options_.jobs) l_.options_.jobs->OnJobEnded(r_.cluster->job_id);
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
    return r_;
  }

  SlurmLauncher& l_;
  const ProcessRequest& req_;
  const std::string dir_;
  FileStream out_;
  FileStream err_;
  ProcessResult r_;
  SteadyTime submitted_{};
  bool started_ = false;
  bool said_held_ = false;
  Deadline run_deadline_;
};

SlurmLauncher::SlurmLauncher(ProcessLauncher& local, Clock& clock,
                             SlurmLauncherOptions options)
    : local_(local),
      clock_(clock),
      options_(std::move(options)),
      sbatch_(FindCommand(options_.sbatch)),
      scancel_(FindCommand(options_.scancel)),
      scontrol_(FindCommand(options_.scontrol)),
      poll_(local_, clock_, FindCommand(options_.squeue), options_.state_poll) {
}

ProcessResult SlurmLauncher::RunJob(const ProcessRequest& request) {
  const std::string dir = options_.spool_dir + "/" + std::to_string(getpid()) +
                          "-" + std::to_string(next_.fetch_add(1));
  return Job(*this, request, dir).Run();
}

Status SlurmLauncher::SharedSpool(const ProcessRequest& request) {
  std::unique_lock<std::mutex> lock(probe_mu_);
  probe_done_.Wait(lock, [&] { return !probing_; });
  if (shared_) return *shared_;
  // One probe at a time; the lock is not held while it runs.
  probing_ = true;
  lock.unlock();
  Status s = Probe(request);
  lock.lock();
  probing_ = false;
  probe_done_.NotifyAll();
  return s;
}

Status SlurmLauncher::Probe(const ProcessRequest& request) {
  const std::string where = "the Slurm nodes cannot see " + options_.spool_dir;
  const std::string advice =
      ": steps keeps its job files there, so it must be on a filesystem the "
      "nodes share (set --state-dir; docs/slurm.md)";
  if (options_.spool_dir.find('\\') != std::string::npos) {
    return IoError(
        "Slurm cannot take " + options_.spool_dir +
        " for its jobs' files: it reads a backslash in a job's output path "
        "as an escape; choose a --state-dir whose path has none "
        "(docs/slurm.md)");
  }
  std::error_code ec;
  fs::create_directories(options_.spool_dir, ec);
  if (!ec) {
    fs::permissions(options_.spool_dir, fs::perms::owner_all,
                    fs::perm_options::replace, ec);
  }
  if (ec) {
    return IoError("cannot create " + options_.spool_dir + ": " + ec.message());
  }
  // The token goes in a file of the spool folder; the job prints it back
  // through its output file, which lies there too.
  char token[17];
  snprintf(token, sizeof token, "%016llx",
           static_cast<unsigned long long>(RandomU64()));
  const std::string token_file = options_.spool_dir + "/probe-" + token;
  if (Status s = WriteFile(token_file, token, false); !s.ok()) return s;
  ProcessRequest probe = ProcessRequest::Exec({"cat", token_file});
  probe.working_dir = options_.spool_dir;
  probe.deadline = request.deadline;
  probe.cancel = request.cancel;
  // Where the request goes (its partition's nodes must see the folder),
  // without what it asks of the node or the queue.
  probe.cluster.emplace();
  probe.cluster->job_name = "steps-probe";
  if (request.cluster) {
    probe.cluster->partition = request.cluster->partition;
    probe.cluster->account = request.cluster->account;
    probe.cluster->qos = request.cluster->qos;
    probe.cluster->start_by = request.cluster->start_by;
  }
  ProcessResult pr = RunJob(probe);
  fs::remove(token_file, ec);
  if (pr.end == ProcessEnd::kCancelled || pr.end == ProcessEnd::kTimedOut)
    return Status(StatusCode::kCancelled, "the shared-folder probe was cut");
  if (pr.end == ProcessEnd::kFailedToStart) {
    // Slurm refused the job: that is the step's to say, not the folder's.
    return Status(StatusCode::kUnavailable, pr.error);
  }
  Status answer = Status::Ok();
  if (!pr.succeeded() || Trim(pr.out.text) != token) {
    const std::string node = pr.cluster && !pr.cluster->node.empty()
                                 ? " (node " + pr.cluster->node + ")"
                                 : "";
    answer = Status(StatusCode::kIoError,
                    where + node + advice + "; the probe job " + pr.Describe());
  }
  std::lock_guard<std::mutex> lock(probe_mu_);
  shared_ = answer;
  return answer;
}

ProcessResult SlurmLauncher::Run(const ProcessRequest& request) {
  Status shared = SharedSpool(request);
  if (!shared.ok() && shared.code() == StatusCode::kIoError) {
    ProcessResult r;
    r.end = ProcessEnd::kFailedToStart;
    r.error = shared.message();
    return r;
  }
  if (request.cancel.cancelled()) {
    ProcessResult r;
    r.end = ProcessEnd::kCancelled;
    return r;
  }
  // A probe cut short or refused is tried again by the next run; this one
  // goes on and meets the same end by itself.
  return RunJob(request);
}

}  // namespace steps
