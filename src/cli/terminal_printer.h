// The terminal face of a run. Plain mode prints one line per event, for CI
// logs; live mode (a TTY) adds a status block at the bottom with each
// running step's elapsed time and, where a deadline applies, the time left.
// In live mode every line that reaches the terminal while the block is drawn
// is written above it, the process log's lines (core/log.h) included: the
// block is cleared, the line written, the block drawn again. A line keeps
// its colours but loses what would move the cursor off its row. Status lines
// are cut to the terminal's width so none wraps, and the block to its height.
#ifndef STEPS_CLI_TERMINAL_PRINTER_H_
#define STEPS_CLI_TERMINAL_PRINTER_H_

#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/log.h"
#include "pipeline/observer.h"

namespace steps::cli {

// How to print on `fd`, from the environment: live (a TTY whose TERM is not
// "dumb", unless `plain`), and colored (live, and NO_COLOR unset or empty;
// see no-color.org).
struct TerminalStyle {
  bool live = false;
  bool color = false;
};
TerminalStyle StyleFor(int fd, bool plain);

class TerminalPrinter : public pipeline::RunObserver {
 public:
  // Writes to `out`. `live` redraws a status block (for a TTY that can move
  // its cursor); `color` dims that block with SGR codes (off for NO_COLOR).
  // While live, the process log's lines come through the printer, which
  // writes them to `err` above the block (unless a log sink was already set,
  // which keeps getting them).
  TerminalPrinter(FILE* out, bool live, Clock& clock, bool color = true,
                  FILE* err = stderr);
  ~TerminalPrinter() override;

  // Clears the status block for good, stops redrawing it and hands the
  // process log back: what is written after this (a summary, a report)
  // follows the run's last line. Idempotent; the destructor calls it. Call
  // it from the thread that made the printer.
  void Close();

  void OnRunStart(const pipeline::RunRecord& run) override;
  void OnJobStart(const std::string& job,
                  std::optional<SteadyTime> deadline) override;
  void OnStepStart(const pipeline::StepRef& step,
                   std::optional<SteadyTime> deadline) override;
  void OnAttemptStart(const pipeline::StepRef& step, int attempt, int of,
                      std::optional<SteadyTime> deadline) override;
  void OnOutput(const pipeline::StepRef& step, OutputStream stream,
                std::string_view line) override;
  void OnAgentTurn(const pipeline::StepRef& step,
                   const agent::AgentTurnRecord& turn) override;
  void OnGateOpen(const pipeline::StepRef& step,
                  const pipeline::GateOpening& gate) override;
  void OnStepEnd(const pipeline::StepRecord& step) override;
  void OnJobEnd(const pipeline::JobRecord& job) override;

 private:
  struct Running {
    std::string label;
    SteadyTime started;
    std::optional<SteadyTime> deadline;
  };
  // Prints `line` above the status block. REQUIRES: mu_ held.
  void PrintLocked(const std::string& line);
  // A process log line, written to err_ above the status block.
  void PrintLog(LogLevel level, const std::string& line);
  void ClearStatusLocked();
  void DrawStatusLocked();
  // The status lines for now, at most `rows` of them, none wider than
  // `columns`.
  std::vector<std::string> StatusLinesLocked(size_t columns, size_t rows);
  void Tick();

  FILE* out_;
  FILE* err_;
  bool live_;
  Clock& clock_;
  bool color_;
  std::mutex mu_;
  std::string run_id_;  // For the commands that decide a gate.
  std::condition_variable cv_;
  bool stop_ = false;
  bool closed_ = false;  // Close() has run; only its owner's thread reads it.
  std::map<std::string, Running> running_;  // By step id.
  int status_lines_ = 0;
  std::thread ticker_;
  LogSink previous_sink_;  // Restored by Close().
};

// "build [os=linux arch=arm]": a step's name, with its across cell if any.
std::string StepName(const pipeline::StepRef& step);
// "task: build", "on_failure task: page", "fix agent: fixer".
std::string StepLabel(const pipeline::StepRef& step);

}  // namespace steps::cli

#endif  // STEPS_CLI_TERMINAL_PRINTER_H_
