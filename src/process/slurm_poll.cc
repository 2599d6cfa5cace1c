#include "process/slurm_poll.h"

#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "process/slurm_launcher.h"

namespace steps {

namespace {

// How long one squeue may take: the watches read output and meet
// deadlines between questions.
constexpr Millis kQuestionTimeout{5000};
// Job ids per squeue (each up to ten digits and a comma).
constexpr size_t kIdsPerQuestion = 500;
// squeue's answer in scontrol's form; a pending job's NodeList is empty.
constexpr const char* kFormat = "JobId=%i JobState=%T Reason=%r NodeList=%N";

}  // namespace

SlurmStatePoll::SlurmStatePoll(ProcessLauncher& commands, Clock& clock,
                               std::string squeue, Millis period)
    : commands_(commands),
      clock_(clock),
      squeue_(std::move(squeue)),
      period_(period) {}

void SlurmStatePoll::Add(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  watched_.insert(id);
}

void SlurmStatePoll::Remove(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  watched_.erase(id);
}

int SlurmStatePoll::questions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return questions_;
}

std::string SlurmStatePoll::Line(const std::string& id, const Deadline& limit) {
  std::unique_lock<std::mutex> lock(mu_);
  // A job missing from an answer is not taken as gone: an squeue that
  // printed nothing (or garbage) would end every job. Only Slurm's own
  // "Invalid job id" for all of a question says that.
  auto known = [&]() -> std::string {
    if (!answered_.count(id)) return "";
    auto it = lines_.find(id);
    return it != lines_.end() ? it->second : "";
  };
  const bool fresh = answered_at_ && clock_.Now() - *answered_at_ < period_;
  // A job added since the last answer waits for the next one.
  if (fresh || asking_) return known();
  asking_ = true;
  std::set<std::string> ids = watched_;
  ids.insert(id);
  ++questions_;
  lock.unlock();
  std::optional<std::map<std::string, std::string>> got = Ask(ids, limit);
  lock.lock();
  asking_ = false;
  answered_at_ = clock_.Now();
  if (got) {
    lines_ = std::move(*got);
    answered_ = std::move(ids);
  } else {
    // Nobody asks again until a period has passed.
    lines_.clear();
    answered_.clear();
  }
  return known();
}

std::optional<std::map<std::string, std::string>> SlurmStatePoll::Ask(
    const std::set<std::string>& ids, const Deadline& limit) {
  std::map<std::string, std::string> lines;
  std::vector<std::string> chunk;
  auto ask = [&]() -> bool {
    std::string list;
    for (const std::string& id : chunk) list += (list.empty() ? "" : ",") + id;
    const std::vector<std::string> asked = std::move(chunk);
    chunk.clear();
    ProcessRequest q = ProcessRequest::Exec(
        {squeue_, "--noheader", "--states=all", "--jobs=" + list,
         "--format=" + std::string(kFormat)});
    // What the caller's environment says of squeue must not narrow the
    // answer: the jobs asked for are this user's own.
    for (const char* name :
         {"SQUEUE_ACCOUNT", "SQUEUE_CLUSTERS", "SQUEUE_NAMES",
          "SQUEUE_PARTITION", "SQUEUE_QOS", "SQUEUE_STATES", "SQUEUE_USERS",
          "SQUEUE_LICENSES", "SQUEUE_FORMAT", "SQUEUE_FORMAT2"})
      q.env_unset.push_back(name);
    q.deadline = Deadline::After(clock_, kQuestionTimeout).Earlier(limit);
    ProcessResult pr = commands_.Run(q);
    if (!pr.succeeded()) {
      // Every job asked of is one Slurm forgot (it keeps ended jobs
      // MinJobAge seconds).
      if (pr.end != ProcessEnd::kExited ||
          pr.err.text.find("Invalid job id") == std::string::npos)
        return false;
      for (const std::string& id : asked)
        lines.emplace(id, "JobId=" + id + " JobState=GONE");
      return true;
    }
    std::istringstream in(pr.out.text);
    for (std::string line; std::getline(in, line);) {
      const std::string id = ScontrolField(line, "JobId");
      if (!id.empty() && ids.count(id)) lines.emplace(id, line);
    }
    return true;
  };
  for (const std::string& id : ids) {
    chunk.push_back(id);
    if (chunk.size() == kIdsPerQuestion && !ask()) return std::nullopt;
  }
  if (!chunk.empty() && !ask()) return std::nullopt;
  return lines;
}

}  // namespace steps
