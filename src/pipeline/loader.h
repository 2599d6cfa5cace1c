// Loading a pipeline file: YAML in, a checked Pipeline (or the reasons it is
// refused) out. Loading never throws and never crashes on hostile input:
// oversized files, deep nesting and alias bombs are refused with a message.
#ifndef STEPS_PIPELINE_LOADER_H_
#define STEPS_PIPELINE_LOADER_H_

#include <cstddef>
#include <memory>
#include <string>

#include "pipeline/diagnostics.h"
#include "pipeline/model.h"

namespace steps::pipeline {

// Files larger than this are refused before parsing.
constexpr size_t kMaxPipelineBytes = 8 << 20;

struct LoadResult {
  // Set when the file loaded without errors (warnings allowed).
  std::shared_ptr<const Pipeline> pipeline;
  Diagnostics diagnostics;
};

// Reads and checks `path`. Diagnostics name the file as `path` is written.
// "-" reads standard input (to its end), and diagnostics name it <stdin>.
LoadResult LoadPipelineFile(const std::string& path);

// Reads and checks the pipeline on standard input.
LoadResult LoadPipelineStdin();

// Same, from text; `file` is the name diagnostics carry.
LoadResult LoadPipelineText(const std::string& text, const std::string& file);

// Number of steps in a job's plan, counting the steps inside blocks but not
// hooks or the blocks themselves.
int CountSteps(const std::vector<StepPtr>& plan);

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_LOADER_H_
