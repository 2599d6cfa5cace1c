// `steps ui [--listen HOST:PORT] [--allow-host NAME]... [--state-dir DIR]`:
// reads its options and becomes the `steps-ui` program (cli/ui_main.cc),
// which serves.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/run_ui.h"
#include "process/spawn.h"
#include "ui/address.h"

namespace steps::cli {
namespace {

struct UiOptions {
  std::string listen = "127.0.0.1:8080";
  std::string state_dir = ".steps";
  std::vector<std::string> allow_hosts;
};

int ServeUi(const UiOptions& opts) {
  if (Result<ui::ListenAddress> listen = ui::ParseListenAddress(opts.listen);
      !listen.ok()) {
    std::cerr << "steps ui: --listen: " << listen.status().message() << "\n";
    return kExitUsage;
  }
  Result<std::string> found = FindUiProgram();
  if (!found.ok()) {
    std::cerr << "steps ui: " << found.status().message() << "\n";
    return kExitJobFailed;
  }
  const std::string& program = *found;
  std::vector<std::string> args = {kUiProgram, "--listen", opts.listen,
                                   "--state-dir", opts.state_dir};
  for (const std::string& h : opts.allow_hosts) {
    args.push_back("--allow-host");
    args.push_back(h);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout.flush();
  execv(program.c_str(), argv.data());
  std::cerr << "steps ui: cannot start " << program << ": "
            << std::strerror(errno) << "\n";
  return kExitJobFailed;
}

}  // namespace

Command UiCommand() {
  return {"ui",
          "Serve the web UI: runs, their steps and attempts, live "
          "countdowns, gates to decide",
          [](CLI::App& app) -> std::function<int()> {
            auto opts = std::make_shared<UiOptions>();
            app.add_option("--listen", opts->listen,
                           "HOST:PORT to serve on (port 0: any free)")
                ->capture_default_str();
            app.add_option("--allow-host", opts->allow_hosts,
                           "Also answer for this Host name (NAME or "
                           "NAME:PORT; repeatable), e.g. behind a proxy");
            app.add_option("--state-dir", opts->state_dir,
                           "Where runs are recorded")
                ->envname("STEPS_STATE_DIR")
                ->capture_default_str();
            app.footer(
                "Serves one page from the binary. Runs recorded by `steps run` "
                "in the same\n"
                "state folder appear as they happen, including a run in "
                "another terminal.\n"
                "Only requests whose Host header names this server are "
                "answered (the listen\n"
                "host, localhost, 127.0.0.1 or [::1] with the port, or an "
                "--allow-host name);\n"
                "others get 421, so a web page cannot read runs by rebinding "
                "its DNS name.\n"
                "A waiting gate can be approved or rejected on the page, "
                "recorded as taken by\n"
                "the user running this server (via ui); a gate with "
                "approvers: is decided only\n"
                "with `steps approve`. Decisions carry a token only this "
                "server's page can read.");
            return [opts] { return ServeUi(*opts); };
          }};
}

}  // namespace steps::cli
