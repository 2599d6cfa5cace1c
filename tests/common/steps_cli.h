// Running the real `steps` binary from a test: a shell command in a folder,
// with $STEPS naming the binary and $MOCK_PROVIDER the mock provider, and
// its standard output and error read in the order written.
#ifndef STEPS_TESTS_COMMON_STEPS_CLI_H_
#define STEPS_TESTS_COMMON_STEPS_CLI_H_

#include <stdio.h>
#include <sys/wait.h>

#include <array>
#include <string>

namespace steps::test_support {

inline const std::string kStepsBinary =
    std::string(STEPS_BINARY_DIR) + "/src/cli/steps";
inline const std::string kMockProviderBinary =
    std::string(STEPS_BINARY_DIR) + "/mock_provider/mock_provider";

// `text` inside single quotes for bash.
inline std::string ShellQuote(const std::string& text) {
  std::string q = "'";
  for (char c : text) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct CliResult {
  int exit_code = -1;  // 128 + N when a signal N ended the shell.
  std::string out;     // Standard output and error, merged.
};

// Runs `command` with bash in `dir`.
inline CliResult RunInShell(const std::string& dir,
                            const std::string& command) {
  const std::string cmd = "cd " + ShellQuote(dir) +
                          " && STEPS=" + ShellQuote(kStepsBinary) +
                          " MOCK_PROVIDER=" + ShellQuote(kMockProviderBinary) +
                          " bash -c " + ShellQuote(command) + " 2>&1";
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
  return r;
}

}  // namespace steps::test_support

#endif  // STEPS_TESTS_COMMON_STEPS_CLI_H_
