#include "pipeline/diagnostics.h"

#include <algorithm>

namespace steps::pipeline {

namespace {
std::string WithStep(std::string message, int line, int step_line) {
  if (step_line > 0 && step_line != line) {
    message += " (step at line " + std::to_string(step_line) + ")";
  }
  return message;
}
}  // namespace

void Diagnostics::Error(int line, std::string message) {
  message = WithStep(std::move(message), line, step_line_);
  items_.push_back({Severity::kError, line, std::move(message)});
  ++errors_;
}

void Diagnostics::Warn(int line, std::string message) {
  message = WithStep(std::move(message), line, step_line_);
  items_.push_back({Severity::kWarning, line, std::move(message)});
  ++warnings_;
}

std::string Diagnostics::Format(const Diagnostic& d) const {
  std::string out = file_;
  if (d.line > 0) out += ":" + std::to_string(d.line);
  out += d.severity == Severity::kError ? ": error: " : ": warning: ";
  out += d.message;
  return out;
}

std::string Diagnostics::FormatAll() const {
  std::vector<Diagnostic> sorted = items_;
  std::stable_sort(
      sorted.begin(), sorted.end(),
      [](const Diagnostic& a, const Diagnostic& b) { return a.line < b.line; });
  std::string out;
  for (const Diagnostic& d : sorted) out += Format(d) + "\n";
  return out;
}

}  // namespace steps::pipeline
