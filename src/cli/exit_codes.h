// The exit codes of `steps` and its programs (DESIGN.md, "Commands and exit
// codes"), in a header of their own that includes nothing.
#ifndef STEPS_CLI_EXIT_CODES_H_
#define STEPS_CLI_EXIT_CODES_H_

namespace steps::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitJobFailed = 1;
inline constexpr int kExitStepErrored = 2;
inline constexpr int kExitUsage = 64;
inline constexpr int kExitRefused = 65;

}  // namespace steps::cli

#endif  // STEPS_CLI_EXIT_CODES_H_
