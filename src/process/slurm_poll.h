// SlurmStatePoll: how a run's Slurm jobs stand, asked of Slurm once per
// period for all of them (one squeue), not once per job.
#ifndef STEPS_PROCESS_SLURM_POLL_H_
#define STEPS_PROCESS_SLURM_POLL_H_

#include <map>
#include <mutex>
#include <set>
#include <string>

#include "core/clock.h"
#include "core/duration.h"
#include "process/process.h"

namespace steps {

// Each watched job asks for its line when it wants to know how it stands;
// whoever asks first once the last answer is `period` old runs one squeue
// for every job added, and the others take that answer (or, while it is
// being asked, the one before). So a fan-out of N jobs costs Slurm's
// controller one question a period instead of N.
//
// Thread-safe.
class SlurmStatePoll {
 public:
  // `commands` runs squeue (the path `squeue`) on this machine; `clock`
  // paces the questions. Both must outlive the poll.
  SlurmStatePoll(ProcessLauncher& commands, Clock& clock, std::string squeue,
                 Millis period);

  // Watches the job `id` (digits) until Remove.
  void Add(const std::string& id);
  void Remove(const std::string& id);

  // How the job `id` stands, as one line in scontrol's form ("JobId=12
  // JobState=PENDING Reason=BeginTime NodeList=", read with ScontrolField):
  // from an answer at most `period` old, asking now if there is none (the
  // question is cut at `limit` or after 5 s). "JobState=GONE" when Slurm
  // said it no longer knows the job; "" when it cannot tell (squeue failed,
  // its answer left the job out, or the job was added after the answer
  // being used). An end read here is the caller's to confirm.
  std::string Line(const std::string& id, const Deadline& limit = Deadline());

  // The questions asked so far (each one squeue per 500 jobs).
  int questions() const;

 private:
  // Runs squeue for `ids`; the lines by id, or nothing when it failed.
  std::optional<std::map<std::string, std::string>> Ask(
      const std::set<std::string>& ids, const Deadline& limit);

  ProcessLauncher& commands_;
  Clock& clock_;
  const std::string squeue_;
  const Millis period_;
  mutable std::mutex mu_;
  std::set<std::string> watched_;
  std::map<std::string, std::string> lines_;
  std::set<std::string> answered_;  // The ids the lines' question asked of.
  std::optional<SteadyTime> answered_at_;
  bool asking_ = false;
  int questions_ = 0;
};

}  // namespace steps

#endif  // STEPS_PROCESS_SLURM_POLL_H_
