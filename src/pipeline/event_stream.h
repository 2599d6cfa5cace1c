// A run's events as JSON lines, one event per line: how `steps` running an
// across cell somewhere else (a Slurm node, `steps cell`) tells the run
// that sent it what happened there, so that the sending run alone keeps
// the records. EventWriter is the RunObserver on the far side; an
// EventReader on this side turns each line back into the same call on
// this side's observer.
//
// Times of day travel as milliseconds since the epoch. A deadline travels
// as the time left when it was written and is read against the reader's
// own clock: the two machines' steady clocks share no origin.
//
// What travels: a step's start and end, an attempt's start and end, output
// and log lines, agent turns, and the cell's own end. Conversation
// checkpoints do not (docs/slurm.md: a cell is resumed whole), nor do
// gates (refused in a cell).
#ifndef STEPS_PIPELINE_EVENT_STREAM_H_
#define STEPS_PIPELINE_EVENT_STREAM_H_

#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/outcome.h"
#include "core/status.h"
#include "pipeline/executor.h"
#include "pipeline/observer.h"
#include "pipeline/run_record.h"

namespace steps::pipeline {

// The records as JSON values (also for tests and tools that read them).
nlohmann::json StepRefToJson(const StepRef& ref);
nlohmann::json AttemptToJson(const AttemptRecord& attempt);
nlohmann::json TurnToJson(const agent::AgentTurnRecord& turn);
nlohmann::json StepRecordToJson(const StepRecord& step);
// The reverse: kInvalidArgument naming the first field that does not read.
Result<StepRef> StepRefFromJson(const nlohmann::json& j);
Result<AttemptRecord> AttemptFromJson(const nlohmann::json& j);
Result<agent::AgentTurnRecord> TurnFromJson(const nlohmann::json& j);
Result<StepRecord> StepRecordFromJson(const nlohmann::json& j);

// A cell's task as JSON (what `steps run --cell` reads), and back;
// kInvalidArgument naming the first field that does not read.
nlohmann::json CellTaskToJson(const CellTask& task);
Result<CellTask> CellTaskFromJson(const nlohmann::json& j);

// Writes each event as one line to `sink` (which must be thread-safe or
// called under the writer's lock: it is). `clock` measures deadlines.
class EventWriter : public RunObserver {
 public:
  using Sink = std::function<void(std::string_view line)>;
  EventWriter(Sink sink, const Clock& clock)
      : sink_(std::move(sink)), clock_(clock) {}

  void OnStepStart(const StepRef& step,
                   std::optional<SteadyTime> deadline) override;
  void OnAttemptStart(const StepRef& step, int attempt, int of,
                      std::optional<SteadyTime> deadline) override;
  void OnOutput(const StepRef& step, OutputStream stream,
                std::string_view line) override;
  void OnLog(const StepRef& step, std::string_view line) override;
  void OnAgentTurn(const StepRef& step,
                   const agent::AgentTurnRecord& turn) override;
  void OnAttemptEnd(const StepRef& step, const AttemptRecord& attempt) override;
  void OnStepEnd(const StepRecord& step) override;
  // The cell's last line.
  void WriteCellEnd(const CellEnd& end);

 private:
  void Write(const nlohmann::json& event);
  std::optional<int64_t> Left(std::optional<SteadyTime> deadline) const;

  std::mutex mu_;
  Sink sink_;
  const Clock& clock_;
};

// Reads the lines an EventWriter wrote, in order, calling `observer` for
// each event. A line that does not read is refused (kInvalidArgument,
// saying why) and changes nothing: the caller decides what that means.
class EventReader {
 public:
  EventReader(RunObserver& observer, const Clock& clock)
      : observer_(observer), clock_(clock) {}

  Status Feed(std::string_view line);
  // The same for a line delivered in pieces of at most
  // ProcessRequest::kMaxLineBytes (a LineCallback's): a piece of exactly
  // that size is held until the rest of its line comes. EventWriter never
  // writes a line whose length is a multiple of it, so this is exact.
  Status FeedPiece(std::string_view piece);
  // Set once the cell's end has been read.
  const std::optional<CellEnd>& end() const { return end_; }

 private:
  // The started step an event names (throws inside the reader).
  StepRef Known(const nlohmann::json& event) const;
  std::optional<SteadyTime> Deadline(const nlohmann::json& event) const;
  Status Dispatch(const nlohmann::json& event);

  RunObserver& observer_;
  const Clock& clock_;
  std::map<std::string, StepRef> started_;  // By step id.
  std::optional<CellEnd> end_;
  std::string pending_;  // FeedPiece: the start of a long line.
};

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_EVENT_STREAM_H_
