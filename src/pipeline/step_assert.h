// Judging one result of a step by its `assert:` block: every check the block
// holds, each with its own verdict (docs/pipeline.md "### assert"). The
// model-graded `judge:` is asked by the executor (it needs an agent run);
// its verdict is read here (ParseJudgeVerdict).
#ifndef STEPS_PIPELINE_STEP_ASSERT_H_
#define STEPS_PIPELINE_STEP_ASSERT_H_

#include <optional>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "core/duration.h"
#include "pipeline/model.h"
#include "pipeline/run_record.h"

namespace steps::pipeline {

// What a step's assert judges: one attempt's result.
struct AssertSubject {
  StepKind kind = StepKind::kTask;
  std::optional<int> exit_code;  // A task's; nullopt for an agent.
  std::string output;            // Stdout, or an agent's answer.
  // The conversation (agent steps); null for other kinds.
  const agent::AgentResult* conversation = nullptr;
  // The attempt's (or conversation's) wall time; nullopt when unknown (a
  // cached result).
  std::optional<Millis> duration;
};

// The verdict of every check of `check` but `judge`, in the order of
// docs/pipeline.md's table. `code` is judged for non-agent steps only.
std::vector<AssertionResult> CheckAssert(const StepAssert& check,
                                         const AssertSubject& subject);

// "assert: A; B" from the misses of `results`, or nullopt when none missed.
// A single miss reads as the step's error did before there were several
// kinds, e.g. `assert: stdout does not contain "ok"`.
std::optional<std::string> DescribeMisses(
    const std::vector<AssertionResult>& results);

// What a judge agent is asked: the rubric and the output, and how to answer.
std::string JudgePrompt(const std::string& rubric, const std::string& output);

// Reads a judge's answer: a first non-empty line PASS or FAIL (any case,
// optionally followed by ':' or '-' and the reason), the reason on that
// line or the next ones; or a JSON object {"pass": bool, "reason": str},
// also inside a ```json fence. A miss (or an answer that is neither) says
// why in `detail`: "the judge says FAIL: ..." / "the judge answered no
// verdict (expected a first line PASS or FAIL): ...".
AssertionResult ParseJudgeVerdict(const std::string& answer);

// How much of a judged output the judge is sent (the rest is cut, said so).
inline constexpr size_t kMaxJudgedOutputBytes = 64 * 1024;

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_STEP_ASSERT_H_
