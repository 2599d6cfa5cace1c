// Decisions on gates from the web UI: reading what a request asks and
// answering it in HTTP terms. The server (ui/server.h) admits the request
// first (Host, Origin, token; ui/write_guard.h).
#ifndef STEPS_UI_DECISIONS_H_
#define STEPS_UI_DECISIONS_H_

#include <httplib.h>

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "pipeline/model.h"
#include "store/gates.h"
#include "store/store.h"

namespace steps::ui {

// The longest reason a decision from the UI takes, in bytes of UTF-8.
inline constexpr size_t kMaxReasonBytes = store::kMaxGateReasonBytes;

// The reason a decision's request gives: a JSON body {"reason": TEXT}, a
// form field `reason` (application/x-www-form-urlencoded), or none when the
// body is empty. InvalidArgument saying what to send for anything else:
// malformed JSON, another key or type, another form field or a repeated
// one, another content type (multipart too), a reason CheckGateReason
// refuses (store/gates.h).
Result<std::string> DecisionReason(const httplib::Request& req);

// What a decision's request is answered: an HTTP status and a JSON body.
struct DecisionAnswer {
  int status = 200;
  nlohmann::json body;
};

// Records `decision` on gate `step` (a step id or a unique name) of run
// `run` (an id, a unique prefix, or "" for the newest) via "ui", taken by
// `by` (user@host). The UI cannot tell who clicked, so a gate with
// approvers refuses it (403, naming the CLI command to use). 200
// {"gate": {...}} when recorded; 404 for an unknown run or gate, 400 for a
// name that fits several gates, 409 when the gate no longer waits (saying
// how it ended), 500 when the store failed. Refusals are {"error": TEXT,
// "refusal": "unknown" | "ambiguous" | "approvers" | "not_waiting" |
// "store"}. `store` may be null (no runs recorded yet).
DecisionAnswer DecideFromUi(store::Store* store, const std::string& run,
                            const std::string& step,
                            pipeline::GateDecision decision,
                            const std::string& reason, const std::string& by);

}  // namespace steps::ui

#endif  // STEPS_UI_DECISIONS_H_
