// `steps ui [--listen HOST:PORT] [--allow-host NAME]... [--state-dir DIR]`
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/signals.h"
#include "ui/server.h"

namespace steps::cli {
namespace {

struct UiOptions {
  std::string listen = "127.0.0.1:8080";
  std::string state_dir = ".steps";
  std::vector<std::string> allow_hosts;
};

int RunUi(const UiOptions& opts) {
  Result<ui::ListenAddress> listen = ui::ParseListenAddress(opts.listen);
  if (!listen.ok()) {
    std::cerr << "steps ui: --listen: " << listen.status().message() << "\n";
    return kExitUsage;
  }
  const std::string& host = listen->host;
  const int port = listen->port;
  ui::UiServer server(opts.state_dir);
  for (const std::string& h : opts.allow_hosts) server.AllowHost(h);
  if (Status s = server.Start(host, port); !s.ok()) {
    std::cerr << "steps ui: " << s.message() << "\n";
    return kExitJobFailed;
  }
  std::cout << "steps ui: serving " << ui::BaseUrl(host, server.port())
            << " (runs of " << opts.state_dir << "); Ctrl-C stops" << std::endl;
  CancelToken stop, unused;
  SignalWatcher signals(stop, unused);
  // WaitUntil is true when the hour passed with no signal: wait again.
  while (stop.WaitUntil(std::chrono::steady_clock::now() +
                        std::chrono::hours(1))) {
  }
  server.Stop();
  return kExitOk;
}

}  // namespace

Command UiCommand() {
  return {"ui",
          "Serve the web UI: runs, their steps and attempts, live countdowns",
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
                "its DNS name.");
            return [opts] { return RunUi(*opts); };
          }};
}

}  // namespace steps::cli
