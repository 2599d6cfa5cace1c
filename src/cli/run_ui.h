// `steps run --ui`: the `steps-ui` program (cli/ui_main.cc) serving the
// run's state folder beside the run, in a process group of its own (a
// terminal's Ctrl-C goes to the run, which then stops it). It ends with the
// run: Finish lets an open page catch up first; a `steps` that dies closes
// the pipe the UI reads, and it stops.
#ifndef STEPS_CLI_RUN_UI_H_
#define STEPS_CLI_RUN_UI_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "process/unique_fd.h"

namespace steps::cli {

// The web UI's program, installed beside `steps` or in ../libexec/steps.
inline constexpr char kUiProgram[] = "steps-ui";

// Where the web UI's program is (process/spawn.h CompanionProgram); a
// NotFound error that says where it was looked for when it is nowhere.
Result<std::string> FindUiProgram();

class RunUi {
 public:
  // Starts `steps-ui` on `listen` ("HOST:PORT") for `state_dir`, also
  // answering `allow_hosts`, and waits (at most 10 s) until it listens. An
  // error says why; the UI has then said its own reason on stderr.
  static Result<std::unique_ptr<RunUi>> Start(
      const std::string& listen, const std::string& state_dir,
      const std::vector<std::string>& allow_hosts);
  // Stops the UI if Finish did not.
  ~RunUi();
  RunUi(const RunUi&) = delete;
  RunUi& operator=(const RunUi&) = delete;

  // The port it listens on.
  int port() const { return port_; }
  // The token its decisions carry (ui/server.h).
  const std::string& token() const { return token_; }
  // Stops the UI: with `let_watchers_catch_up`, an open page first gets up
  // to 3 s to read how the run ended; else at once.
  void Finish(bool let_watchers_catch_up);

 private:
  RunUi(pid_t pid, UniqueFd to_ui, int port, std::string token)
      : pid_(pid),
        to_ui_(std::move(to_ui)),
        port_(port),
        token_(std::move(token)) {}

  pid_t pid_;
  UniqueFd to_ui_;  // The UI's stdin.
  int port_;
  std::string token_;
  bool finished_ = false;
};

}  // namespace steps::cli

#endif  // STEPS_CLI_RUN_UI_H_
