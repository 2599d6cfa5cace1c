#include "tools/mcp_client.h"

#include <utility>

#include "core/fiber.h"
#include "core/utf8.h"
#include "tools/mcp_http_session.h"
#include "tools/mcp_session.h"
#include "tools/mcp_stdio_session.h"

#ifndef STEPS_VERSION
#define STEPS_VERSION "0"
#endif

namespace steps {

McpClient::McpClient(McpServerSpec spec, McpClientOptions options)
    : spec_(std::move(spec)), options_(std::move(options)) {
  if (options_.client_version.empty()) options_.client_version = STEPS_VERSION;
}

McpClient::~McpClient() { Stop(); }

namespace {

// The headers' values as sent, their ${NAME} references expanded: a line
// break would end the header and start another one (or the body), a NUL
// byte would cut it.
Status CheckHeaderValues(const McpServerSpec& spec) {
  for (const auto& [name, value] : spec.headers) {
    if (value.find_first_of(std::string("\r\n\0", 3)) != std::string::npos) {
      return InvalidArgument(
          "header '" + name +
          "' holds a line break or NUL byte once its ${NAME} references are "
          "expanded, so it is not sent (is there a trailing newline in the "
          "variable's value?)");
    }
  }
  return Status::Ok();
}

}  // namespace

void McpClient::Stop() {
  std::unique_ptr<McpSession> session;
  {
    std::lock_guard<std::mutex> lock(mu_);
    session = std::move(session_);
  }
  // The session ends outside the lock: a call in flight holds it only
  // until its own wait ends.
}

Result<std::shared_ptr<McpClient>> McpClient::Start(
    const McpServerSpec& spec, ProcessLauncher& launcher,
    const std::string& working_dir, Clock& clock, Deadline deadline,
    const CancelToken& cancel, const McpClientOptions& options) {
  if (OnFiber()) {
    // Its exchanges block on the server's pipes, and hold the client's lock
    // while they wait: a thread of their own, not the fiber's carrier.
    return OffFiber([&] {
      return Start(spec, launcher, working_dir, clock, deadline, cancel,
                   options);
    });
  }
  const std::string prefix = "mcp server '" + spec.name + "': ";
  std::shared_ptr<McpClient> client(new McpClient(spec, options));
  if (spec.url.empty()) {
    Result<std::unique_ptr<McpSession>> session = StartMcpStdioSession(
        spec, launcher, working_dir, clock, client->options_);
    if (!session.ok()) {
      return Status(session.status().code(),
                    prefix + session.status().message());
    }
    client->session_ = std::move(*session);
  } else {
    if (Status s = CheckHeaderValues(spec); !s.ok())
      return Status(s.code(), prefix + s.message());
    client->session_ = MakeMcpHttpSession(spec, clock, client->options_);
  }
  const bool by_startup =
      !deadline.is_set() || clock.Now() + spec.startup_timeout < deadline.at();
  Deadline until =
      deadline.Earlier(Deadline::After(clock, spec.startup_timeout));
  std::lock_guard<std::mutex> lock(client->mu_);
  Status s = client->Handshake(until, cancel);
  if (s.ok()) s = client->ListTools(until, cancel);
  if (s.ok()) return client;
  std::string message = s.message();
  if (s.code() == StatusCode::kDeadlineExceeded) {
    message = by_startup ? "did not finish starting within " +
                               FormatDuration(spec.startup_timeout) +
                               " (startup_timeout)"
                         : "did not finish starting before the step's "
                           "deadline";
  } else if (s.code() == StatusCode::kCancelled) {
    message = "start-up cancelled";
  }
  message += client->session_->Evidence();
  return Status(s.code(), prefix + message);
}

Status McpClient::Handshake(Deadline deadline, const CancelToken& cancel) {
  nlohmann::json params = {
      {"protocolVersion", kMcpProtocolVersion},
      {"capabilities", nlohmann::json::object()},
      {"clientInfo",
       {{"name", "steps"}, {"version", options_.client_version}}}};
  Result<nlohmann::json> result =
      session_->Request("initialize", params, deadline, cancel);
  if (!result.ok()) return result.status();
  const nlohmann::json& r = *result;
  if (!r.is_object() || !r.contains("protocolVersion") ||
      !r["protocolVersion"].is_string()) {
    return Status(StatusCode::kUnavailable,
                  "its answer to 'initialize' has no protocolVersion");
  }
  protocol_version_ = r["protocolVersion"].get<std::string>();
  bool accepted = false;
  std::string known;
  for (const char* v : kMcpAcceptedVersions) {
    accepted = accepted || protocol_version_ == v;
    known += (known.empty() ? "" : ", ") + std::string(v);
  }
  if (!accepted) {
    return Status(StatusCode::kUnavailable,
                  "it speaks MCP protocol version '" +
                      SanitizeUtf8(protocol_version_) +
                      "', which steps does not (steps speaks " + known + ")");
  }
  session_->SetProtocolVersion(protocol_version_);
  session_->Notify("notifications/initialized", nlohmann::json());
  return Status::Ok();
}

Status McpClient::ListTools(Deadline deadline, const CancelToken& cancel) {
  std::optional<std::string> cursor;
  for (int page = 0;; ++page) {
    if (page >= options_.max_pages) {
      return Status(StatusCode::kUnavailable,
                    "its tools/list went on for more than " +
                        std::to_string(options_.max_pages) + " pages");
    }
    nlohmann::json params = nlohmann::json::object();
    if (cursor) params["cursor"] = *cursor;
    Result<nlohmann::json> result =
        session_->Request("tools/list", params, deadline, cancel);
    if (!result.ok()) return result.status();
    const nlohmann::json& r = *result;
    if (!r.is_object() || !r.contains("tools") || !r["tools"].is_array()) {
      return Status(StatusCode::kUnavailable,
                    "its answer to 'tools/list' has no list of tools");
    }
    for (const nlohmann::json& t : r["tools"]) {
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) {
        return Status(StatusCode::kUnavailable,
                      "its tools/list holds a tool without a name");
      }
      McpToolInfo info;
      info.name = t["name"].get<std::string>();
      if (t.contains("description") && t["description"].is_string()) {
        info.description = t["description"].get<std::string>();
      }
      info.input_schema =
          t.contains("inputSchema") && t["inputSchema"].is_object()
              ? t["inputSchema"]
              : nlohmann::json{{"type", "object"}};
      tools_.push_back(std::move(info));
      if (tools_.size() > options_.max_tools) {
        return Status(StatusCode::kUnavailable,
                      "it lists more than " +
                          std::to_string(options_.max_tools) + " tools");
      }
    }
    if (!r.contains("nextCursor") || !r["nextCursor"].is_string()) break;
    cursor = r["nextCursor"].get<std::string>();
  }
  return Status::Ok();
}

Result<nlohmann::json> McpClient::CallTool(const std::string& tool,
                                           const nlohmann::json& arguments,
                                           Deadline deadline,
                                           const CancelToken& cancel) {
  if (OnFiber()) {
    return OffFiber(
        [&] { return CallTool(tool, arguments, deadline, cancel); });
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!session_) {
    return Status(StatusCode::kUnavailable,
                  "the server is gone: it was stopped");
  }
  Result<nlohmann::json> result = session_->Request(
      "tools/call", {{"name", tool}, {"arguments", arguments}}, deadline,
      cancel);
  if (!result.ok()) {
    std::string message = result.status().message();
    if (result.status().code() == StatusCode::kUnavailable &&
        !session_->gone().empty()) {
      message += session_->Evidence();
    }
    return Status(result.status().code(), message);
  }
  if (!result->is_object()) {
    return Status(StatusCode::kUnavailable,
                  "its answer to 'tools/call' is not an object");
  }
  return result;
}

}  // namespace steps
