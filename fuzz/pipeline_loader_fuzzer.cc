// Fuzz target: a pipeline file, loaded, resolved and explained as
// `steps validate` and `steps explain` would. Any input must give a
// pipeline or diagnostics: never a crash, a hang or unbounded memory.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pipeline/explain.h"
#include "pipeline/loader.h"
#include "pipeline/resolve.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  steps::pipeline::LoadResult r =
      steps::pipeline::LoadPipelineText(text, "fuzz.yaml");
  r.diagnostics.FormatAll();
  if (r.pipeline) {
    steps::pipeline::ResolvedPlan plan(r.pipeline);
    steps::pipeline::Explain(plan, {});
  }
  return 0;
}
