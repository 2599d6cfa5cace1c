// `steps ui`: a web page of runs, served from the binary (no build step, no
// CDN). The page polls a small JSON API that reads the run store, so a run
// in another process shows live: its running steps' elapsed time beside a
// countdown of their resolved deadline, and its waiting gates with
// Approve / Reject buttons. Deciding a gate is the one thing the API
// changes.
#ifndef STEPS_UI_SERVER_H_
#define STEPS_UI_SERVER_H_

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "store/reader.h"
#include "ui/address.h"

namespace steps::ui {

// GET /                  the page
// GET /api/runs          {"now", "runs": [...]}: run summaries, newest
//                        first, as `steps runs --json` prints them
// GET /api/runs/ID       {"now", "run": {...}}: the run as `steps show
//                        --json` prints it; ID "latest" or a prefix
// GET /api/runs/ID/log?step=STEP&after=N
//                        {"now", "run", "step", "last_seq", "lines":
//                        [{"seq", "stream", "text"}]}: the step's lines
//                        after line N, at most kLogPage of them
// GET /api/runs/ID/log.txt?step=STEP   all of them, as UTF-8 text
// POST /api/runs/ID/gates/STEP/approve   (and .../reject)
//                        decides gate STEP (its step id, URL-encoded, or
//                        its name when one gate has it) of run ID, via
//                        "ui", taken by the user running the server
//                        (ui/decisions.h). Body: {"reason": TEXT} as JSON,
//                        a form field reason, or none. 200 {"now", "gate"};
//                        400 bad body or an ambiguous name, 403 a gate
//                        with approvers (the page cannot tell who clicked),
//                        404 unknown run or gate, 409 no longer waiting:
//                        {"error", "refusal"}.
// A POST must carry the token in X-Steps-Token (compared in constant time)
// and, when it has an Origin header, come from this server's own page;
// otherwise 403 (ui/write_guard.h). The server never hands the token out:
// whoever started it passes it on (the link `steps ui` prints, token()),
// and the page takes it from its address (?token=HEX). Bodies over 64 KiB:
// 413. Every answer forbids framing (X-Frame-Options, CSP
// frame-ancestors).
// Every answer is valid UTF-8: stored bytes that are not show as U+FFFD.
// Any other path: 404. A request whose Host header does not name this
// server: 421 (403 without one), as text.
// Thread-safe; requests are served on the server's own threads.
class UiServer {
 public:
  // Reads the store in STATE_DIR (see store/store.h); it may not exist yet.
  explicit UiServer(std::string state_dir);
  ~UiServer();

  // Also answers requests whose Host header is `host` ("NAME": any port,
  // "NAME:PORT": that port). Without it only the listen host, localhost,
  // 127.0.0.1 and [::1] with the bound port are answered; other Host
  // values get 421, which defeats DNS rebinding.
  // REQUIRES: before Start.
  void AllowHost(std::string host);

  // Draws the token, then binds `host:port` (port 0 picks a free one).
  // Returns once listening.
  // Each connection serves one request, which must arrive within 5 s of
  // the connection and be answered within 20 s of it (slow clients are cut
  // off either way); 32 are served at once.
  Status Start(const std::string& host, int port);
  // The bound port (after Start).
  int port() const;
  // The token decisions carry, 64 hex digits (after Start).
  const std::string& token() const;
  // Stops serving; Start may not be called again.
  void Stop();

  // For `steps run --ui`, once the run is over: if a page read the API in
  // the last few seconds (someone is watching), waits until a request for
  // a run arrives after this call, so the page shows how the run ended, or
  // until `max_wait` passes. Returns at once when nobody is watching.
  // Returns whether a page caught up.
  bool WaitForWatchers(std::chrono::milliseconds max_wait);

  // The JSON the API serves: store/run_json.h's objects (docs/json.md)
  // under "now", the server's clock (RFC 3339), for the page's live clocks.
  nlohmann::json RunsJson();
  Result<nlohmann::json> RunJson(const std::string& id);
  // The lines of a step after `after_seq`; `limit` 0: every line.
  Result<store::StoredLog> LoadLog(const std::string& run_id,
                                   const std::string& step_id,
                                   int64_t after_seq, int limit);
  static nlohmann::json LogJson(const store::StoredLog& log);

  // Lines per log request of the page.
  static constexpr int kLogPage = 2000;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// The page (HTML, CSS and JS in one document).
const std::string& PageHtml();

}  // namespace steps::ui

#endif  // STEPS_UI_SERVER_H_
