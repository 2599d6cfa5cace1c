#include "ui/decisions.h"

#include <algorithm>
#include <cctype>
#include <chrono>

#include "core/json_text.h"
#include "core/utf8.h"
#include "store/gates.h"

namespace steps::ui {
namespace {

constexpr const char kWhatToSend[] =
    "send {\"reason\": TEXT} as application/json, a form field reason, or "
    "no body";

// The media type of a Content-Type header, lower case, without parameters.
std::string MediaType(const std::string& header) {
  std::string type = header.substr(0, header.find(';'));
  type.erase(std::remove_if(type.begin(), type.end(),
                            [](unsigned char c) { return std::isspace(c); }),
             type.end());
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) {
    return static_cast<char>(std::tolower(c));
  });
  return type;
}

Result<std::string> ReasonFromJson(const std::string& body) {
  // The parser keeps the last of a repeated key: count them as it reads.
  int reasons = 0;
  const nlohmann::json::parser_callback_t count =
      [&reasons](int depth, nlohmann::json::parse_event_t event,
                 nlohmann::json& parsed) {
        if (depth == 1 && event == nlohmann::json::parse_event_t::key &&
            parsed == "reason") {
          ++reasons;
        }
        return true;
      };
  // The parser recurses: deep nesting is refused before it reads any.
  const nlohmann::json j =
      JsonDepthWithin(body, 4)
          ? nlohmann::json::parse(body, count, /*allow_exceptions=*/false)
          : nlohmann::json(nlohmann::json::value_t::discarded);
  if (j.is_discarded()) {
    return InvalidArgument("the body is not valid JSON (UTF-8); " +
                           std::string(kWhatToSend));
  }
  if (!j.is_object()) {
    return InvalidArgument("the body is JSON but not an object; " +
                           std::string(kWhatToSend));
  }
  if (reasons > 1) {
    return InvalidArgument("a decision takes one reason; " +
                           std::string(kWhatToSend));
  }
  std::string reason;
  for (const auto& [key, value] : j.items()) {
    if (key != "reason") {
      return InvalidArgument("a decision takes no '" + SanitizeUtf8(key) +
                             "'; " + kWhatToSend);
    }
    if (!value.is_string()) {
      return InvalidArgument("\"reason\" must be a string; " +
                             std::string(kWhatToSend));
    }
    reason = value.get<std::string>();
  }
  return reason;
}

const char* RefusalName(store::GateRefusal r) {
  switch (r) {
    case store::GateRefusal::kUnknown:
      return "unknown";
    case store::GateRefusal::kAmbiguous:
      return "ambiguous";
    case store::GateRefusal::kNotApprover:
      return "approvers";
    case store::GateRefusal::kNotWaiting:
      return "not_waiting";
    case store::GateRefusal::kBadReason:
      return "bad_request";
    case store::GateRefusal::kNone:
      break;
  }
  return "store";
}

int HttpStatusOf(store::GateRefusal r) {
  switch (r) {
    case store::GateRefusal::kUnknown:
      return 404;
    case store::GateRefusal::kAmbiguous:
      return 400;
    case store::GateRefusal::kNotApprover:
      return 403;
    case store::GateRefusal::kNotWaiting:
      return 409;
    case store::GateRefusal::kBadReason:
      return 400;
    case store::GateRefusal::kNone:
      break;
  }
  return 500;
}

}  // namespace

Result<std::string> DecisionReason(const httplib::Request& req) {
  const std::string type = MediaType(req.get_header_value("Content-Type"));
  std::string reason;
  if (req.target.find('?') != std::string::npos) {
    // Read as a form, the address's parameters would mix with the body's;
    // read as JSON, they would be lost without a word.
    return InvalidArgument(
        "a decision takes its reason in the body, not in the address; " +
        std::string(kWhatToSend));
  }
  // The library reads a multipart body into parts, leaving `body` empty:
  // it is not "no body", and is refused below with the other types.
  if (req.body.empty() && type.rfind("multipart/", 0) != 0) {
    // No body: no reason, whatever the type says.
  } else if (type == "application/json") {
    Result<std::string> r = ReasonFromJson(req.body);
    if (!r.ok()) return r.status();
    reason = std::move(*r);
  } else if (type == "application/x-www-form-urlencoded") {
    // The library has parsed the form into the parameters.
    for (const auto& [key, value] : req.params) {
      if (key != "reason") {
        return InvalidArgument("a decision takes no '" + SanitizeUtf8(key) +
                               "'; " + kWhatToSend);
      }
    }
    if (req.get_param_value_count("reason") > 1) {
      return InvalidArgument("a decision takes one reason; " +
                             std::string(kWhatToSend));
    }
    reason = req.get_param_value("reason");
  } else {
    return InvalidArgument("a decision's body of type '" +
                           SanitizeUtf8(type.empty() ? "none given" : type) +
                           "' is not understood; " + kWhatToSend);
  }
  if (Status s = store::CheckGateReason(reason); !s.ok()) return s;
  return reason;
}

DecisionAnswer DecideFromUi(store::Store* store, const std::string& run,
                            const std::string& step,
                            pipeline::GateDecision decision,
                            const std::string& reason, const std::string& by) {
  if (!store) {
    return {404, {{"error", "no runs recorded yet"}, {"refusal", "unknown"}}};
  }
  store::GateDecisionRequest request;
  request.run = run;
  request.step = step;
  request.decision = decision;
  request.by = by;
  request.user = "";  // The page cannot tell who clicked.
  request.via = "ui";
  request.reason = reason;
  store::GateRefusal refusal = store::GateRefusal::kNone;
  Result<store::GateRow> gate = store::DecideGate(
      *store, request, std::chrono::system_clock::now(), &refusal);
  if (!gate.ok()) {
    return {HttpStatusOf(refusal),
            {{"error", gate.status().message()},
             {"refusal", RefusalName(refusal)}}};
  }
  return {200,
          {{"gate",
            {{"run", gate->run_id},
             {"step", gate->step_id},
             {"name", gate->name},
             {"state", gate->state},
             {"taken_by", store::DecidedBy(*gate)},
             {"reason", gate->reason}}}}};
}

}  // namespace steps::ui
