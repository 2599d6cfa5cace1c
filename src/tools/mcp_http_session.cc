#include "tools/mcp_http_session.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/json_text.h"
#include "core/log.h"
#include "core/sse.h"
#include "tools/json_rpc.h"
#include "tools/mcp_http_transfer.h"

namespace steps {
namespace {

// How long a notifications/cancelled may take to be POSTed.
constexpr Millis kCancelNoticeWait{500};
// How long an answer to a request of the server may take to be POSTed.
constexpr Millis kAnswerWait{2000};
// Bytes of an error answer's body kept to be quoted.
constexpr size_t kExcerptBytes = 200;
// Messages that are not JSON-RPC logged (the rest only counted).
constexpr int kGarbageLogged = 5;

using Ending = HttpTransferResult::Ending;

bool IsSuccess(int status) { return status >= 200 && status < 300; }

// An Mcp-Session-Id must be visible ASCII (the spec's rule); anything else
// is not sent back.
bool IsVisibleAscii(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return c >= 0x21 && c <= 0x7e;
  });
}

// A Content-Type of text/event-stream: the media type compared without
// regard to case (RFC 9110), parameters after ';' ignored.
bool IsEventStream(const std::string& content_type) {
  std::string type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t'))
    type.pop_back();
  for (char& c : type) c = static_cast<char>(std::tolower(c));
  return type == "text/event-stream";
}

// What one POST of a request gathers as its answer arrives.
struct Exchange {
  int64_t id = 0;
  std::optional<nlohmann::json> response;
  bool decided = false;    // The first piece of the body was seen.
  bool is_stream = false;  // text/event-stream.
  std::string body;        // A JSON answer, or the start of an error's.
  SseParser events;
  std::string too_large;  // Why the answer was cut; "" while it was not.
  // A notification's or an answer's POST: only the status counts, so a
  // success is not read further (a server may hold a stream open).
  bool status_only = false;
  // The id of a response to another request, as JSON; "" when none came.
  std::string stray_id;
};

class HttpSession : public McpSession {
 public:
  HttpSession(const McpServerSpec& spec, Clock& clock,
              const McpClientOptions& options)
      : server_(spec.name),
        url_(spec.url),
        headers_(spec.headers),
        clock_(clock),
        options_(options) {}

  ~HttpSession() override { EndSession(); }

  Result<nlohmann::json> Request(const std::string& method,
                                 const nlohmann::json& params,
                                 Deadline deadline,
                                 const CancelToken& cancel) override {
    if (!gone_.empty()) {
      return Status(StatusCode::kUnavailable, "the server is gone: " + gone_);
    }
    if (Status s = FlushNotices(deadline, cancel); !s.ok()) return s;
    Exchange ex;
    ex.id = next_id_++;
    HttpTransferResult r = Post(JsonRpcRequest(ex.id, method, params), &ex,
                                deadline, cancel, /*answer_on_the_way=*/true);
    SendAnswers(deadline);
    Result<nlohmann::json> out = Conclude(method, r, ex);
    StatusCode code = out.ok() ? StatusCode::kOk : out.status().code();
    // The spec forbids cancelling initialize; the session is dropped
    // instead (no id was given, or DELETE ends it).
    if (method != "initialize" && (code == StatusCode::kDeadlineExceeded ||
                                   code == StatusCode::kCancelled)) {
      SendCancelled(ex.id, code == StatusCode::kCancelled
                               ? "cancelled by the client"
                               : "the client's time limit was reached");
    }
    return out;
  }

  void Notify(const std::string& method,
              const nlohmann::json& params) override {
    notices_.push_back(JsonRpcNotification(method, params));
  }

  void SetProtocolVersion(const std::string& version) override {
    protocol_version_ = version;
  }

  const std::string& gone() const override { return gone_; }

  std::string Evidence() const override {
    if (garbage_ == 0) return "";
    return "; it sent " + std::to_string(garbage_) +
           (garbage_ == 1 ? " message" : " messages") + " that " +
           (garbage_ == 1 ? "is" : "are") + " not JSON-RPC (the first: '" +
           first_garbage_ + "')";
  }

 private:
  std::vector<std::string> Headers() const {
    std::vector<std::string> h = {
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream"};
    for (const auto& [name, value] : headers_) h.push_back(name + ": " + value);
    if (!session_id_.empty()) h.push_back("Mcp-Session-Id: " + session_id_);
    if (!protocol_version_.empty()) {
      h.push_back("MCP-Protocol-Version: " + protocol_version_);
    }
    return h;
  }

  // POSTs one message; the answer's body goes to `ex`. For a request
  // (`answer_on_the_way`), requests the server sends in its event stream
  // are answered while the stream stays open.
  HttpTransferResult Post(const std::string& body, Exchange* ex,
                          Deadline deadline, const CancelToken& cancel,
                          bool answer_on_the_way = false) {
    HttpTransferRequest request;
    request.url = url_;
    request.headers = Headers();
    request.body = body;
    request.on_body = [this, ex](const HttpReply& reply,
                                 std::string_view piece) {
      return OnBody(reply, piece, *ex);
    };
    if (answer_on_the_way) {
      request.on_idle = [this, deadline] { SendAnswers(deadline); };
    }
    HttpTransferResult r = RunHttpTransfer(request, clock_, deadline, cancel);
    LogEvent(LogLevel::kDebug, "mcp.http",
             {{"server", server_},
              {"status", r.reply.status},
              {"content_type", QuoteMcpText(r.reply.Header("content-type"))}});
    return r;
  }

  bool OnBody(const HttpReply& reply, std::string_view piece, Exchange& ex) {
    if (!ex.decided) {
      ex.decided = true;
      ex.is_stream = IsSuccess(reply.status) &&
                     IsEventStream(reply.Header("content-type"));
    }
    if (!IsSuccess(reply.status)) {
      ex.body.append(piece.substr(0, kExcerptBytes - ex.body.size()));
      return ex.body.size() < kExcerptBytes;
    }
    if (ex.status_only) return false;
    if (ex.is_stream) return OnEvents(piece, ex);
    if (ex.body.size() + piece.size() > options_.max_line_bytes) {
      ex.too_large = "its answer is larger than " +
                     std::to_string(options_.max_line_bytes) +
                     " bytes (the limit of a message)";
      return false;
    }
    ex.body.append(piece);
    return true;
  }

  bool OnEvents(std::string_view piece, Exchange& ex) {
    for (const SseEvent& event : ex.events.Feed(piece)) {
      HandleData(event.data, ex);
      if (ex.response) return false;
    }
    if (ex.events.buffered_bytes() > options_.max_line_bytes) {
      ex.too_large = "it sent an event larger than " +
                     std::to_string(options_.max_line_bytes) +
                     " bytes (the limit of a message)";
      return false;
    }
    return true;
  }

  // One JSON answer or one event's data: a message or a batch of them.
  void HandleData(const std::string& data, Exchange& ex) {
    if (data.find_first_not_of(" \t\r\n") == std::string::npos) return;
    std::optional<nlohmann::json> message = ParseJsonRpcLine(data);
    if (!message) return Garbage(data);
    if (!message->is_array()) return HandleMessage(*message, data, ex);
    for (const nlohmann::json& m : *message) HandleMessage(m, data, ex);
  }

  void HandleMessage(const nlohmann::json& m, const std::string& data,
                     Exchange& ex) {
    switch (ClassifyJsonRpc(m)) {
      case JsonRpcKind::kResponse:
        if (JsonRpcIntId(m) == ex.id) {
          ex.response = m;
        } else {
          ex.stray_id = QuoteMcpText(DumpJson(m["id"]));
          LogEvent(LogLevel::kDebug, "mcp.stray_response",
                   {{"server", server_}, {"line", QuoteMcpText(data)}});
        }
        return;
      case JsonRpcKind::kRequest:
        answers_.push_back(AnswerMcpRequest(server_, m));
        return;
      case JsonRpcKind::kNotification:
        return LogMcpNotification(server_, m);
      case JsonRpcKind::kInvalid:
        return Garbage(data);
    }
  }

  void Garbage(const std::string& data) {
    if (garbage_++ == 0) first_garbage_ = QuoteMcpText(data);
    if (garbage_ <= kGarbageLogged) {
      LogEvent(LogLevel::kWarn, "mcp.not_json_rpc",
               {{"server", server_}, {"line", QuoteMcpText(data)}});
    }
  }

  Result<nlohmann::json> Conclude(const std::string& method,
                                  const HttpTransferResult& r, Exchange& ex);
  Status CheckStatus(const std::string& method, const HttpReply& reply,
                     const Exchange& ex);
  Status TakeSessionId(const HttpReply& reply);
  Status FlushNotices(Deadline deadline, const CancelToken& cancel);
  Status PostNotice(const std::string& line, Deadline deadline,
                    const CancelToken& cancel);
  void SendAnswers(Deadline deadline);
  void SendCancelled(int64_t id, const std::string& reason);
  void EndSession();

  std::string server_;
  std::string url_;
  std::vector<std::pair<std::string, std::string>> headers_;
  Clock& clock_;
  McpClientOptions options_;
  std::string session_id_;
  std::string protocol_version_;
  int64_t next_id_ = 1;
  std::deque<std::string> notices_;  // Notifications not yet POSTed.
  std::deque<std::string> answers_;  // Answers to the server's requests.
  std::string gone_;
  int garbage_ = 0;
  std::string first_garbage_;
};

Result<nlohmann::json> HttpSession::Conclude(const std::string& method,
                                             const HttpTransferResult& r,
                                             Exchange& ex) {
  switch (r.ending) {
    case Ending::kCancelled:
      return Status(StatusCode::kCancelled, "cancelled");
    case Ending::kDeadline:
      return Status(StatusCode::kDeadlineExceeded, "time ran out");
    case Ending::kFailed:
      if (ex.response) break;  // The connection broke after the answer.
      return Status(
          StatusCode::kUnavailable,
          r.reply.status == 0
              ? "cannot reach " + url_ + ": " + r.error
              : "its answer to '" + method + "' broke off: " + r.error);
    case Ending::kComplete:
    case Ending::kStopped:
      break;
  }
  if (Status s = CheckStatus(method, r.reply, ex); !s.ok()) return s;
  if (session_id_.empty()) {
    if (Status s = TakeSessionId(r.reply); !s.ok()) return s;
  }
  if (!ex.too_large.empty()) {
    return Status(StatusCode::kUnavailable, ex.too_large);
  }
  if (!ex.is_stream && !ex.response) HandleData(ex.body, ex);
  if (ex.response) return McpResponseResult(method, std::move(*ex.response));
  if (ex.is_stream) {
    return Status(
        StatusCode::kUnavailable,
        "its event stream ended without an answer to '" + method + "'");
  }
  if (!ex.stray_id.empty()) {
    return Status(StatusCode::kUnavailable,
                  "its answer to '" + method +
                      "' is the response to another request (id " +
                      ex.stray_id + "; the request's is " +
                      std::to_string(ex.id) + ")");
  }
  if (ex.body.find_first_not_of(" \t\r\n") == std::string::npos) {
    return Status(StatusCode::kUnavailable,
                  "it answered '" + method + "' with HTTP " +
                      std::to_string(r.reply.status) + " and no message");
  }
  return Status(StatusCode::kUnavailable,
                "its answer to '" + method +
                    "' is not JSON-RPC (Content-Type '" +
                    QuoteMcpText(r.reply.Header("content-type")) + "'): '" +
                    QuoteMcpText(ex.body) + "'");
}

Status HttpSession::CheckStatus(const std::string& method,
                                const HttpReply& reply, const Exchange& ex) {
  const int status = reply.status;
  const std::string answered =
      "it answered '" + method + "' with HTTP " + std::to_string(status);
  if (status >= 300 && status < 400) {
    std::string to = reply.Header("location");
    return Status(StatusCode::kUnavailable,
                  answered + ", a redirect" +
                      (to.empty() ? "" : " to '" + QuoteMcpText(to) + "'") +
                      "; steps does not follow redirects: give the final "
                      "address as the server's 'url:'");
  }
  if (status == 404 && !session_id_.empty()) {
    gone_ = "its session expired (" + answered + ")";
    LogEvent(LogLevel::kDebug, "mcp.server_gone",
             {{"server", server_}, {"why", gone_}});
    return Status(StatusCode::kUnavailable, "the server is gone: " + gone_);
  }
  if (IsSuccess(status)) return Status::Ok();
  std::string excerpt = ex.body;
  std::replace(excerpt.begin(), excerpt.end(), '\n', ' ');
  return Status(
      StatusCode::kUnavailable,
      answered + (excerpt.empty() ? " and an empty body"
                                  : ": '" + QuoteMcpText(excerpt) + "'"));
}

Status HttpSession::TakeSessionId(const HttpReply& reply) {
  std::string id = reply.Header("mcp-session-id");
  if (id.empty()) return Status::Ok();
  if (!IsVisibleAscii(id)) {
    return Status(StatusCode::kUnavailable,
                  "its Mcp-Session-Id holds characters other than visible "
                  "ASCII");
  }
  session_id_ = std::move(id);
  return Status::Ok();
}

Status HttpSession::FlushNotices(Deadline deadline, const CancelToken& cancel) {
  while (!notices_.empty()) {
    std::string line = std::move(notices_.front());
    notices_.pop_front();
    if (Status s = PostNotice(line, deadline, cancel); !s.ok()) return s;
  }
  return Status::Ok();
}

// A notification or an answer: the server owes only a status (202).
Status HttpSession::PostNotice(const std::string& line, Deadline deadline,
                               const CancelToken& cancel) {
  Exchange ex;  // The body, if any, is only quoted in an error.
  ex.status_only = true;
  HttpTransferResult r = Post(line, &ex, deadline, cancel);
  switch (r.ending) {
    case Ending::kCancelled:
      return Status(StatusCode::kCancelled, "cancelled");
    case Ending::kDeadline:
      return Status(StatusCode::kDeadlineExceeded, "time ran out");
    case Ending::kFailed:
      return Status(StatusCode::kUnavailable,
                    "cannot reach " + url_ + ": " + r.error);
    default:
      break;
  }
  ex.body.resize(std::min(ex.body.size(), kExcerptBytes));
  ex.is_stream = false;
  return CheckStatus("a notification", r.reply, ex);
}

void HttpSession::SendAnswers(Deadline deadline) {
  Deadline until = deadline.Earlier(Deadline::After(clock_, kAnswerWait));
  while (!answers_.empty() && gone_.empty()) {
    std::string line = std::move(answers_.front());
    answers_.pop_front();
    Status s = PostNotice(line, until, CancelToken());
    if (!s.ok()) {
      LogEvent(LogLevel::kDebug, "mcp.answer_lost",
               {{"server", server_}, {"why", s.message()}});
    }
  }
}

void HttpSession::SendCancelled(int64_t id, const std::string& reason) {
  if (!gone_.empty()) return;
  Status s =
      PostNotice(JsonRpcNotification("notifications/cancelled",
                                     {{"requestId", id}, {"reason", reason}}),
                 Deadline::After(clock_, kCancelNoticeWait), CancelToken());
  if (!s.ok()) {
    LogEvent(LogLevel::kDebug, "mcp.cancel_lost",
             {{"server", server_}, {"why", s.message()}});
  }
}

void HttpSession::EndSession() {
  if (session_id_.empty() || !gone_.empty()) return;
  HttpTransferRequest request;
  request.method = "DELETE";
  request.url = url_;
  request.headers = Headers();
  HttpTransferResult r = RunHttpTransfer(
      request, clock_, Deadline::After(clock_, options_.kill_grace),
      CancelToken());
  LogEvent(LogLevel::kDebug, "mcp.session_ended",
           {{"server", server_}, {"status", r.reply.status}});
}

}  // namespace

std::unique_ptr<McpSession> MakeMcpHttpSession(
    const McpServerSpec& spec, Clock& clock, const McpClientOptions& options) {
  return std::make_unique<HttpSession>(spec, clock, options);
}

}  // namespace steps
