// `steps-ui --listen HOST:PORT --state-dir DIR [--allow-host NAME]...
//           [--with-run]`: the web UI's own program (ui/server.h). `steps ui`
// becomes it once its options are read, and `steps run --ui` starts it
// beside the run. So `steps` links no HTTP server: the server library and
// the TLS library it links (OpenSSL, initialised as it loads) would cost
// every command of `steps` about 8 ms of CPU at start, used or not.
//
// With --with-run (`steps run --ui`), it writes "port N token HEX\n" to
// stdout once it listens and then reads stdin: a line "done" (the run ended by
// itself) lets an open page catch up, for at most 3 s, before it stops; the end
// of stdin alone (an interrupted run, or a `steps` that died) stops it at once.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/signals.h"
#include "core/log.h"
#include "ui/server.h"

namespace {

using steps::cli::kExitJobFailed;
using steps::cli::kExitOk;
using steps::cli::kExitUsage;

struct Options {
  std::string listen = "127.0.0.1:8080";
  std::string state_dir = ".steps";
  std::vector<std::string> allow_hosts;
  bool with_run = false;
};

bool ParseOptions(int argc, char** argv, Options& opts) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--listen" && has_value) {
      opts.listen = argv[++i];
    } else if (arg == "--state-dir" && has_value) {
      opts.state_dir = argv[++i];
    } else if (arg == "--allow-host" && has_value) {
      opts.allow_hosts.push_back(argv[++i]);
    } else if (arg == "--with-run") {
      opts.with_run = true;
    } else {
      std::cerr << "steps-ui: unexpected argument '" << arg
                << "'; it is started by `steps ui` and `steps run --ui`\n";
      return false;
    }
  }
  return true;
}

// Serves until SIGINT, SIGTERM or SIGHUP (`steps ui`).
int ServeUntilSignal(steps::ui::UiServer& server, const Options& opts,
                     const std::string& host) {
  // The link carries the token decisions need: the server never hands it
  // out, so only who sees this output (or is given the link) decides.
  std::cout << "steps ui: serving "
            << steps::ui::PageUrl(host, server.port(), server.token())
            << " (runs of " << opts.state_dir << "); Ctrl-C stops\n"
            << "steps ui: whoever opens that link may approve and reject "
               "gates; share it only with who may"
            << std::endl;
  steps::CancelToken stop, unused;
  steps::cli::SignalWatcher signals(stop, unused);
  // WaitUntil is true when the hour passed with no signal: wait again.
  while (stop.WaitUntil(std::chrono::steady_clock::now() +
                        std::chrono::hours(1))) {
  }
  server.Stop();
  return kExitOk;
}

// Serves until stdin ends (`steps run --ui`); see the top of the file.
int ServeWithRun(steps::ui::UiServer& server) {
  const std::string line = "port " + std::to_string(server.port()) + " token " +
                           server.token() + "\n";
  if (write(STDOUT_FILENO, line.data(), line.size()) !=
      static_cast<ssize_t>(line.size())) {
    server.Stop();
    return kExitJobFailed;
  }
  // Nothing more to say: descriptor 1 stays open, on /dev/null, so no
  // connection is given it.
  const int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null_fd >= 0) {
    dup2(null_fd, STDOUT_FILENO);
    close(null_fd);
  }
  std::string said;
  char buffer[64];
  while (true) {
    ssize_t n = read(STDIN_FILENO, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    said.append(buffer, static_cast<size_t>(n));
  }
  if (said == "done\n") server.WaitForWatchers(std::chrono::seconds(3));
  server.Stop();
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // As `steps` does: descriptors 0-2 open, so nothing lands there.
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd) return 70;
  }
  Options opts;
  if (!ParseOptions(argc, argv, opts)) return kExitUsage;
  // Beside a run, it logs as the run does (`steps run --log-format`).
  if (const char* name = std::getenv("STEPS_LOG_FORMAT")) {
    if (auto format = steps::ParseLogFormat(name)) steps::SetLogFormat(*format);
  }
  // Beside a run, the UI is in a process group of its own, in the
  // background of the run's terminal: under `stty tostop` its first word on
  // stderr (a port it cannot take) would stop it there.
  if (opts.with_run) signal(SIGTTOU, SIG_IGN);
  const char* who = opts.with_run ? "steps run: --ui" : "steps ui";
  steps::Result<steps::ui::ListenAddress> listen =
      steps::ui::ParseListenAddress(opts.listen);
  if (!listen.ok()) {
    std::cerr << who << (opts.with_run ? "-listen: " : ": --listen: ")
              << listen.status().message() << "\n";
    return kExitUsage;
  }
  steps::ui::UiServer server(opts.state_dir);
  for (const std::string& h : opts.allow_hosts) server.AllowHost(h);
  if (steps::Status s = server.Start(listen->host, listen->port); !s.ok()) {
    std::cerr << who << ": " << s.message()
              << (opts.with_run ? "; choose another with --ui-listen HOST:PORT"
                                : "")
              << "\n";
    return kExitJobFailed;
  }
  return opts.with_run ? ServeWithRun(server)
                       : ServeUntilSignal(server, opts, listen->host);
}
