// `steps ui`: a web page of runs, served from the binary (no build step, no
// CDN). The page polls a small JSON API that reads the run store, so a run
// in another process shows live: its running steps' elapsed time beside a
// countdown of their resolved deadline.
#ifndef STEPS_UI_SERVER_H_
#define STEPS_UI_SERVER_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace steps::ui {

// GET /                  the page
// GET /api/runs          {"now_ms", "runs": [...]}, newest first
// GET /api/runs/ID       {"now_ms", "run": {...}}; ID "latest" or a prefix
// Thread-safe; requests are served on the server's own threads.
class UiServer {
 public:
  // Reads the store in STATE_DIR (see store/store.h); it may not exist yet.
  explicit UiServer(std::string state_dir);
  ~UiServer();

  // Binds `host:port` (port 0 picks a free one). Returns once listening.
  Status Start(const std::string& host, int port);
  // The bound port (after Start).
  int port() const;
  // Stops serving; Start may not be called again.
  void Stop();

  // The JSON the API serves, for tests and `steps show --json` parity.
  nlohmann::json RunsJson();
  Result<nlohmann::json> RunJson(const std::string& id);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// The page (HTML, CSS and JS in one document).
const std::string& PageHtml();

}  // namespace steps::ui

#endif  // STEPS_UI_SERVER_H_
