#include "cli/terminal_printer.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>

#include "core/utf8.h"

namespace steps::cli {

std::string StepName(const pipeline::StepRef& step) {
  if (step.cell.empty()) return step.name;
  return step.name + " [" + step.cell + "]";
}

std::string StepLabel(const pipeline::StepRef& step) {
  std::string label;
  if (step.hook) label = std::string(pipeline::HookKindName(*step.hook)) + " ";
  if (step.fixer) label += "fix ";
  if (step.judge) label += "judge ";
  label += pipeline::StepKindName(step.kind);
  label += ": " + StepName(step);
  return label;
}

TerminalStyle StyleFor(int fd, bool plain) {
  TerminalStyle style;
  const char* term = std::getenv("TERM");
  style.live = !plain && isatty(fd) && !(term && std::string(term) == "dumb");
  const char* no_color = std::getenv("NO_COLOR");
  style.color = style.live && !(no_color && *no_color);
  return style;
}

namespace {

struct TerminalSize {
  size_t columns = 80;
  size_t rows = 24;
};

// The size of the terminal `out` writes to (80x24 when it will not say).
TerminalSize SizeOf(FILE* out) {
  TerminalSize size;
  struct winsize ws {};
  if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 &&
      ws.ws_row > 0) {
    size.columns = ws.ws_col;
    size.rows = ws.ws_row;
  }
  return size;
}

// Length of the escape sequence at line[i] (line[i] is ESC): a CSI
// (ESC [ parameters intermediates final), an OSC or other string up to its
// BEL or ESC \, or ESC with its intermediates and final byte. An
// unterminated one runs to the end of the line.
size_t EscapeLength(std::string_view line, size_t i) {
  size_t j = i + 1;
  if (j >= line.size()) return 1;
  auto in = [&](size_t k, char lo, char hi) {
    return k < line.size() && line[k] >= lo && line[k] <= hi;
  };
  char kind = line[j];
  if (kind == '[') {
    ++j;
    while (in(j, 0x30, 0x3F)) ++j;
    while (in(j, 0x20, 0x2F)) ++j;
    return (in(j, 0x40, 0x7E) ? j + 1 : j) - i;
  }
  if (kind == ']' || kind == 'P' || kind == '_' || kind == '^' || kind == 'X') {
    for (++j; j < line.size(); ++j) {
      if (line[j] == '\a') return j + 1 - i;
      if (line[j] == '\033' && j + 1 < line.size() && line[j + 1] == '\\')
        return j + 2 - i;
    }
    return j - i;
  }
  while (in(j, 0x20, 0x2F)) ++j;
  return (j < line.size() ? j + 1 : j) - i;
}

// `line` as the live printer writes it: nothing in it may move the cursor
// off its row or clear the screen, or the status block under it would be
// drawn over lines, or redrawn in the wrong place. Colour (SGR) sequences
// stay, followed by a reset so none bleeds into the block; every other
// escape sequence goes, and so does every control character but tab and
// carriage return (which stay on the row).
std::string KeepCursorOnRow(std::string_view line) {
  auto is_control = [](char c) {
    auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t' && c != '\r') || u == 0x7F;
  };
  bool any = false;
  for (char c : line) any = any || is_control(c);
  if (!any) return std::string(line);
  std::string out;
  bool styled = false;
  for (size_t i = 0; i < line.size();) {
    if (line[i] == '\033') {
      size_t len = EscapeLength(line, i);
      std::string_view seq = line.substr(i, len);
      if (len > 2 && seq[1] == '[' && seq.back() == 'm') {
        out += seq;
        styled = true;
      }
      i += len;
      continue;
    }
    if (!is_control(line[i])) out += line[i];
    ++i;
  }
  if (styled) out += "\033[0m";
  return out;
}

}  // namespace

TerminalPrinter::TerminalPrinter(FILE* out, bool live, Clock& clock,
                                 bool color, FILE* err)
    : out_(out), err_(err), live_(live), clock_(clock), color_(color) {
  if (!live_) return;
  {
    // Held while the sink is swapped in, so a log line that arrives at once
    // waits until previous_sink_ is known.
    std::lock_guard<std::mutex> lock(mu_);
    previous_sink_ = SetLogSink([this](LogLevel level, const std::string& line) {
      PrintLog(level, line);
    });
  }
  ticker_ = std::thread([this] { Tick(); });
}

TerminalPrinter::~TerminalPrinter() { Close(); }

void TerminalPrinter::Close() {
  if (closed_) return;
  closed_ = true;
  if (live_) {
    // Not under mu_: a log line in PrintLog holds the log's lock and waits
    // for mu_. Once the sink is swapped back none is in flight.
    LogSink previous;
    {
      std::lock_guard<std::mutex> lock(mu_);
      previous = previous_sink_;
    }
    SetLogSink(previous);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    ClearStatusLocked();
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  std::fflush(out_);
}

void TerminalPrinter::ClearStatusLocked() {
  if (!live_ || status_lines_ == 0) return;
  // Up to the first status line, then clear to the end of the screen. No
  // status line wraps, so each is one row.
  std::fprintf(out_, "\r\033[%dA\033[J", status_lines_);
  status_lines_ = 0;
}

std::vector<std::string> TerminalPrinter::StatusLinesLocked(size_t columns,
                                                            size_t rows) {
  std::vector<std::string> lines;
  if (rows == 0) return lines;
  // When the steps do not all fit, the last row counts the rest.
  size_t shown = running_.size() <= rows ? running_.size() : rows - 1;
  SteadyTime now = clock_.Now();
  for (const auto& [id, r] : running_) {
    if (lines.size() == shown) break;
    Millis elapsed = std::chrono::duration_cast<Millis>(now - r.started);
    std::string line = "  ⏵ " + r.label + "  " +
                       FormatDuration(Millis(elapsed.count() / 100 * 100));
    if (r.deadline) {
      auto left = std::chrono::ceil<std::chrono::seconds>(*r.deadline - now);
      if (left.count() < 0) left = std::chrono::seconds(0);
      line += "  (" + FormatDuration(std::chrono::duration_cast<Millis>(left)) +
              " left)";
    }
    lines.push_back(FitTerminalColumns(line, columns));
  }
  if (shown < running_.size()) {
    lines.push_back(FitTerminalColumns(
        "  ⏵ and " + std::to_string(running_.size() - shown) + " more running",
        columns));
  }
  return lines;
}

void TerminalPrinter::DrawStatusLocked() {
  if (!live_ || stop_) return;
  // A column to spare: a line that fills the last one may wrap on its own.
  // Two rows to spare: a block as tall as the screen scrolls out of reach of
  // the redraw, and one that starts on the top row is cleared by clearing
  // the whole screen, which some terminals (tmux) keep in their history.
  TerminalSize size = SizeOf(out_);
  size_t rows = size.rows > 2 ? size.rows - 2 : 0;
  for (const std::string& line : StatusLinesLocked(size.columns - 1, rows)) {
    if (color_) {
      std::fprintf(out_, "\033[2m%s\033[0m\n", line.c_str());
    } else {
      std::fprintf(out_, "%s\n", line.c_str());
    }
    ++status_lines_;
  }
  std::fflush(out_);
}

void TerminalPrinter::PrintLocked(const std::string& line) {
  ClearStatusLocked();
  std::fprintf(out_, "%s\n",
               live_ ? KeepCursorOnRow(line).c_str() : line.c_str());
  DrawStatusLocked();
  if (!live_) std::fflush(out_);
}

void TerminalPrinter::PrintLog(LogLevel level, const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (previous_sink_) {
    previous_sink_(level, line);
    return;
  }
  // stdout and stderr are likely the same terminal: the block goes before
  // the line does, and comes back under it.
  ClearStatusLocked();
  std::fflush(out_);
  std::fprintf(err_, "%s\n", KeepCursorOnRow(line).c_str());
  std::fflush(err_);
  DrawStatusLocked();
}

void TerminalPrinter::Tick() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(250));
    if (stop_) break;
    ClearStatusLocked();
    DrawStatusLocked();
  }
}

void TerminalPrinter::OnJobStart(const std::string& job,
                                 std::optional<SteadyTime> deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string line = "job " + job;
  if (deadline) {
    // The deadline was set a moment ago from the job's timeout; rounding the
    // time left up shows that timeout (15m, not 14m59.999s).
    line += " (timeout " +
            FormatDuration(std::chrono::ceil<Millis>(*deadline - clock_.Now())) +
            ")";
  }
  PrintLocked(line);
}

void TerminalPrinter::OnRunStart(const pipeline::RunRecord& run) {
  std::lock_guard<std::mutex> lock(mu_);
  run_id_ = run.id;
}

// What a gate asks, and the two commands that answer it.
void TerminalPrinter::OnGateOpen(const pipeline::StepRef& step,
                                 const pipeline::GateOpening& gate) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string name = StepName(step);
  if (!gate.message.empty()) PrintLocked("  " + name + " | " + gate.message);
  std::string who;
  for (const std::string& a : gate.approvers)
    who += (who.empty() ? "" : ", ") + a;
  PrintLocked("  " + name + " waits for a decision" +
              (who.empty() ? "" : " by " + who) + ": steps approve " +
              run_id_ + " " + step.id + " (or steps reject ...)");
}

void TerminalPrinter::OnStepStart(const pipeline::StepRef& step,
                                  std::optional<SteadyTime> deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  running_[step.id] = Running{StepLabel(step), clock_.Now(), deadline};
}

void TerminalPrinter::OnAttemptStart(const pipeline::StepRef& step, int attempt,
                                     int of,
                                     std::optional<SteadyTime> deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string label = StepLabel(step);
  if (attempt > 1)
    label +=
        " (attempt " + std::to_string(attempt) + "/" + std::to_string(of) + ")";
  auto it = running_.find(step.id);
  if (it != running_.end()) {
    it->second.label = label;
    if (deadline) it->second.deadline = deadline;
  }
  PrintLocked(label);
}

void TerminalPrinter::OnOutput(const pipeline::StepRef& step,
                               OutputStream stream, std::string_view line) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string text =
      "  " + StepName(step) + (stream == OutputStream::kStderr ? " ! " : " | ");
  text += line;
  PrintLocked(text);
}

void TerminalPrinter::OnAgentTurn(const pipeline::StepRef& step,
                                  const agent::AgentTurnRecord& turn) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string text =
      "  " + StepName(step) + " ▸ turn " + std::to_string(turn.turn);
  if (turn.provider_requests > 1) {
    text += " (" + std::to_string(turn.provider_requests) + " requests)";
  }
  for (const agent::ToolCallRecord& call : turn.tool_calls) {
    // A long call shows its start; `steps show --json` has the rest.
    const std::string label = call.Label();
    text += "  " + label.substr(0, Utf8PrefixLength(label, 300));
    if (label.size() > 300) text += "...";
  }
  if (turn.tool_calls.empty() && !turn.text.empty()) {
    std::string first = turn.text.substr(0, turn.text.find('\n'));
    // At most 100 bytes of it, in whole characters.
    if (first.size() > 100)
      first = first.substr(0, Utf8PrefixLength(first, 100)) + "…";
    text += "  " + first;
  }
  PrintLocked(text);
}

void TerminalPrinter::OnStepEnd(const pipeline::StepRecord& step) {
  std::lock_guard<std::mutex> lock(mu_);
  running_.erase(step.ref.id);
  std::string line =
      StepLabel(step.ref) + " " + std::string(OutcomeName(step.outcome));
  // A step that never started has no duration, only a reason.
  if (step.outcome != Outcome::kNotStarted)
    line += " in " + FormatDuration(step.duration);
  if (step.cached && !step.cached_from_run.empty()) {
    line += " (cached from run " + step.cached_from_run + ", step " +
            step.cached_from_step + ")";
  } else if (step.cached) {
    line += " (cached)";
  }
  if (step.resumed) line += " (before the interruption)";
  if (!step.error.empty()) line += ": " + step.error;
  PrintLocked(line);
}

void TerminalPrinter::OnJobEnd(const pipeline::JobRecord& job) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string line = "job " + job.name + " " +
                     std::string(OutcomeName(job.outcome)) + " in " +
                     FormatDuration(job.duration);
  if (!job.error.empty()) line += ": " + job.error;
  PrintLocked(line);
}

}  // namespace steps::cli
