// Helpers shared by the pipeline tests.
#ifndef STEPS_TESTS_PIPELINE_TEST_UTIL_H_
#define STEPS_TESTS_PIPELINE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <string>

#include "pipeline/loader.h"

namespace steps::pipeline {

// Loads `text`; fails the test if it does not load.
inline std::shared_ptr<const Pipeline> MustLoad(const std::string& text) {
  LoadResult r = LoadPipelineText(text, "t.yaml");
  EXPECT_TRUE(r.pipeline) << r.diagnostics.FormatAll();
  return r.pipeline;
}

// The diagnostic whose message contains `needle`, or null.
inline const Diagnostic* Find(const Diagnostics& d, const std::string& needle) {
  for (const Diagnostic& x : d.all()) {
    if (x.message.find(needle) != std::string::npos) return &x;
  }
  return nullptr;
}

// Expects exactly one diagnostic containing `needle`, of `severity`, on `line`.
inline void ExpectDiag(const std::string& text, Severity severity, int line,
                       const std::string& needle) {
  LoadResult r = LoadPipelineText(text, "t.yaml");
  const Diagnostic* d = Find(r.diagnostics, needle);
  ASSERT_NE(d, nullptr) << "no diagnostic containing \"" << needle
                        << "\"; got:\n"
                        << r.diagnostics.FormatAll();
  EXPECT_EQ(d->severity, severity) << d->message;
  EXPECT_EQ(d->line, line) << d->message;
  if (severity == Severity::kError) {
    EXPECT_FALSE(r.pipeline) << "a file with an error must be refused";
  }
}

}  // namespace steps::pipeline

#endif  // STEPS_TESTS_PIPELINE_TEST_UTIL_H_
