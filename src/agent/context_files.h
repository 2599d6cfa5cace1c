// The files of an agent step's context_paths, as the messages that hand them
// to the model, bounded by max_context_bytes.
#ifndef STEPS_AGENT_CONTEXT_FILES_H_
#define STEPS_AGENT_CONTEXT_FILES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace steps::agent {

// One user message per path, in order:
//   "Context file: PATH (N bytes)\n\nCONTENT"
// `paths` are relative to `working_dir` (absolute paths are taken as they
// are). `max_bytes` bounds the file content of all messages together: each
// file gets what the files before it left, and a file that does not fit
// whole is cut on a character boundary and says so in its header line
// ("cut: the first 100 of 5000 bytes are shown; max_context_bytes is 100");
// once nothing is left, later files are named but not shown. nullopt (or
// 0) hands every file over whole. Text is made valid UTF-8; a file holding
// NUL bytes is named as binary and not shown.
//
// Errors: kNotFound / kIoError naming the path when a file cannot be read.
Result<std::vector<std::string>> ReadContextFiles(
    const std::vector<std::string>& paths, const std::string& working_dir,
    std::optional<int64_t> max_bytes);

}  // namespace steps::agent

#endif  // STEPS_AGENT_CONTEXT_FILES_H_
