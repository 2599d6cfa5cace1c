// Errors and warnings found while loading a pipeline, each with its line.
#ifndef STEPS_PIPELINE_DIAGNOSTICS_H_
#define STEPS_PIPELINE_DIAGNOSTICS_H_

#include <string>
#include <vector>

namespace steps::pipeline {

enum class Severity { kError, kWarning };

struct Diagnostic {
  Severity severity = Severity::kError;
  int line = 0;  // 1-based; 0 when no line applies (e.g. an unreadable file).
  std::string message;
};

// Collects diagnostics for one file, in the order found.
class Diagnostics {
 public:
  explicit Diagnostics(std::string file) : file_(std::move(file)) {}

  void Error(int line, std::string message);
  void Warn(int line, std::string message);

  // While set, every message gets " (step at line N)" appended unless it is
  // reported on that very line. Returns the previous value; see StepScope.
  int set_step_line(int line) {
    std::swap(step_line_, line);
    return line;
  }

  const std::string& file() const { return file_; }
  const std::vector<Diagnostic>& all() const { return items_; }
  int error_count() const { return errors_; }
  int warning_count() const { return warnings_; }
  bool has_errors() const { return errors_ > 0; }

  // "FILE:LINE: error: message" (or "FILE: error: ..." without a line).
  std::string Format(const Diagnostic& d) const;
  // All diagnostics sorted by line (stable), one per line.
  std::string FormatAll() const;

 private:
  std::string file_;
  std::vector<Diagnostic> items_;
  int errors_ = 0;
  int warnings_ = 0;
  int step_line_ = 0;
};

// Attributes diagnostics to a step for the lifetime of the scope.
class StepScope {
 public:
  StepScope(Diagnostics& d, int step_line)
      : d_(d), previous_(d.set_step_line(step_line)) {}
  ~StepScope() { d_.set_step_line(previous_); }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  Diagnostics& d_;
  int previous_;
};

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_DIAGNOSTICS_H_
