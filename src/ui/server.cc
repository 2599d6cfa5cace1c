#include "ui/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "core/json_text.h"
#include "core/utf8.h"
#include "pipeline/executor.h"
#include "store/listing.h"
#include "store/reader.h"
#include "store/run_json.h"
#include "store/store.h"
#include "ui/decisions.h"
#include "ui/http_guard.h"
#include "ui/write_guard.h"

namespace steps::ui {
namespace {

// The server's clock, for the page's live clocks: RFC 3339, as every time
// in the run objects.
std::string Now() {
  return store::FormatTimestamp(
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
}

// An API error: {"error": MESSAGE} with `status`.
void SendError(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(DumpJson(nlohmann::json{{"error", message}}),
                  "application/json");
}

// A refused write: {"now", "error": MESSAGE, "refusal": CODE} with
// `status`.
void SendRefusal(httplib::Response& res, int status, const std::string& message,
                 const char* code) {
  res.status = status;
  res.set_content(DumpJson(nlohmann::json{
                      {"now", Now()}, {"error", message}, {"refusal", code}}),
                  "application/json");
}

// No page of another site may frame this one (a click on its Approve
// button must be one the user meant), nor may a browser read an answer as
// another type than it says.
void SetSafetyHeaders(httplib::Response& res) {
  res.set_header("X-Frame-Options", "DENY");
  res.set_header("Content-Security-Policy", "frame-ancestors 'none'");
  res.set_header("X-Content-Type-Options", "nosniff");
}

int HttpStatusFor(const Status& s) {
  return s.code() == StatusCode::kNotFound ? 404 : 500;
}

// "latest" names the newest run; the store says so with an empty id.
std::string StoreRunId(const std::string& id) {
  return id == "latest" ? "" : id;
}

}  // namespace

class UiServer::Impl {
 public:
  explicit Impl(std::string state_dir)
      : state_dir_(std::move(state_dir)), decided_by_(pipeline::TakenBy()) {}

  // The store, opened on first use (a run may create it after the UI
  // started). Null while there is none.
  store::Store* Open() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!store_) {
      auto s = store::Store::OpenExisting(store::StorePath(state_dir_));
      if (s.ok()) store_ = std::move(*s);
    }
    return store_.get();
  }

  // Whether the request's Host header names this server. If not, `res` is
  // a short refusal: 421 for another name (a page whose DNS name was
  // rebound to this address must not read runs), 403 for none.
  bool AdmitHost(const httplib::Request& req, httplib::Response& res) const {
    if (!req.has_header("Host")) {
      res.status = 403;
      res.set_content("steps ui: a request needs a Host header\n",
                      "text/plain; charset=utf-8");
      return false;
    }
    const std::string host = req.get_header_value("Host");
    if (hosts_ && hosts_->Allows(host)) return true;
    res.status = 421;
    res.set_content("steps ui: this server does not answer for Host '" +
                        SanitizeUtf8(host) +
                        "'; start it with --allow-host NAME to serve that "
                        "name\n",
                    "text/plain; charset=utf-8");
    return false;
  }

  // Whether the request comes from no page or from this server's own
  // (Origin). If not, `res` is a 403 saying so.
  bool AdmitOrigin(const httplib::Request& req, httplib::Response& res) const {
    if (!req.has_header("Origin") ||
        OriginAllowed(req.get_header_value("Origin"), *hosts_)) {
      return true;
    }
    SendRefusal(res, 403,
                "steps ui: a request from the page at '" +
                    SanitizeUtf8(req.get_header_value("Origin")) +
                    "' is refused; decide on this server's own page",
                "origin");
    return false;
  }

  // Whether a request that changes something may: it comes from no page
  // or from this server's own (Origin), and carries the token. If not,
  // `res` is a 403 saying why.
  bool AdmitWrite(const httplib::Request& req, httplib::Response& res) const {
    if (!AdmitOrigin(req, res)) return false;
    if (!token_ || !token_->Matches(req.get_header_value(kTokenHeader))) {
      SendRefusal(res, 403,
                  std::string("steps ui: a decision must carry this "
                              "server's token in the ") +
                      kTokenHeader +
                      " header; open the link `steps ui` printed when it "
                      "started (it carries the token, and a restarted "
                      "server draws a new one)",
                  "token");
      return false;
    }
    return true;
  }

  // Whether the request's body may be read: none is sent chunked (the
  // library would read it whole, past any limit), and a POST comes from no
  // page or this server's own, carries the token, and says its length. If
  // not, `res` is the refusal (403, or 411).
  bool AdmitBody(const httplib::Request& req, httplib::Response& res) const {
    if (req.has_header("Transfer-Encoding")) {
      SendRefusal(res, 411,
                  "steps ui: a request body is sent with its Content-Length, "
                  "not with a Transfer-Encoding",
                  "bad_request");
      return false;
    }
    if (req.method != "POST") return true;
    if (!AdmitWrite(req, res)) return false;
    if (!req.has_header("Content-Length")) {
      SendRefusal(res, 411,
                  "steps ui: a POST says its Content-Length (0 for no body: "
                  "curl -d '')",
                  "bad_request");
      return false;
    }
    return true;
  }

  // POST /api/runs/ID/gates/STEP/VERB, as its route matched it.
  void Decide(const httplib::Request& req, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    // AdmitBody has admitted the write before its body was read.
    Result<std::string> reason = DecisionReason(req);
    if (!reason.ok()) {
      SendRefusal(res, 400, reason.status().message(), "bad_request");
      return;
    }
    DecisionAnswer answer = DecideFromUi(
        Open(), StoreRunId(req.matches[1]), req.matches[2],
        req.matches[3] == "approve" ? pipeline::GateDecision::kApprove
                                    : pipeline::GateDecision::kReject,
        *reason, decided_by_);
    answer.body["now"] = Now();
    res.status = answer.status;
    res.set_content(DumpJson(answer.body), "application/json");
  }

  // When a request for a run last arrived (steady clock), for
  // WaitForWatchers.
  void NoteRunRequest() {
    std::lock_guard<std::mutex> lock(watch_mu_);
    last_run_request_ = std::chrono::steady_clock::now();
    watch_cv_.notify_all();
  }

  std::string state_dir_;
  // Who a decision from the page is taken by: the user running the
  // server, at its host (the page cannot tell who clicked).
  const std::string decided_by_;
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  std::optional<std::chrono::steady_clock::time_point> last_run_request_;
  std::mutex mu_;
  std::unique_ptr<store::Store> store_;
  // Set by Start before the first request; read-only afterwards.
  std::vector<std::string> extra_hosts_;
  std::optional<HostAllowList> hosts_;
  std::optional<WriteToken> token_;
  GuardedServer server_;
  std::thread thread_;
  std::atomic<bool> listen_done_{false};  // listen_after_bind returned.
  int port_ = 0;
};

UiServer::UiServer(std::string state_dir)
    : impl_(std::make_unique<Impl>(std::move(state_dir))) {
  httplib::Server& s = impl_->server_;
  // Only SO_REUSEADDR: the library's default SO_REUSEPORT would let a
  // second server share a port another one listens on, each getting some of
  // the connections, instead of failing to bind.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  s.set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) {
        SetSafetyHeaders(res);
        // Before any body is read: who may not write is refused having
        // sent nothing more than its headers.
        if (!impl_->AdmitHost(req, res) || !impl_->AdmitBody(req, res)) {
          return httplib::Server::HandlerResponse::Handled;
        }
        if (req.path.rfind("/api/runs/", 0) == 0) impl_->NoteRunRequest();
        return httplib::Server::HandlerResponse::Unhandled;
      });
  // An answer the library makes on its own (a request it could not read,
  // a body over the limit, an unknown path) says what was wrong.
  s.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request&, httplib::Response& res) {
        // Also on a request the library could not read, which no other
        // handler saw.
        SetSafetyHeaders(res);
        if (!res.body.empty())
          return httplib::Server::HandlerResponse::Unhandled;
        std::string what;
        switch (res.status) {
          case 400:
            what =
                "the request could not be read (a malformed request line or "
                "header, or a body shorter than its Content-Length)";
            break;
          case 404:
            what = "no such page or API path";
            break;
          case 413:
            what = "a request body holds at most 64 KiB";
            break;
          default:
            what = "HTTP " + std::to_string(res.status);
        }
        res.set_content("steps ui: " + what + "\n",
                        "text/plain; charset=utf-8");
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(PageHtml(), "text/html; charset=utf-8");
  });
  // A decision on a waiting gate. STEP may hold '/' (a hook's gate): the
  // verb is the last segment.
  s.Post(R"(/api/runs/([A-Za-z0-9_.-]+)/gates/(.+)/(approve|reject))",
         [this](const httplib::Request& req, httplib::Response& res) {
           impl_->Decide(req, res);
         });
  s.Get("/api/runs", [this](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(DumpJson(RunsJson()), "application/json");
  });
  // A step's lines: ?step=ID[&after=SEQ]. As JSON, at most kLogPage lines
  // after `after`; log.txt: all of them as text.
  s.Get(R"(/api/runs/([A-Za-z0-9_.-]+)/log(\.txt)?)",
        [this](const httplib::Request& req, httplib::Response& res) {
          res.set_header("Cache-Control", "no-store");
          const bool text = req.matches[2].length() > 0;
          int64_t after = 0;
          if (req.has_param("after")) {
            try {
              after = std::stoll(req.get_param_value("after"));
            } catch (...) {
              after = -1;
            }
          }
          if (!req.has_param("step") || after < 0) {
            SendError(res, 400,
                      "log takes ?step=STEP_ID and an optional &after=N (a "
                      "line number, 0 or more)");
            return;
          }
          Result<store::StoredLog> log =
              LoadLog(req.matches[1], req.get_param_value("step"), after,
                      text ? 0 : kLogPage);
          if (!log.ok()) {
            SendError(res, HttpStatusFor(log.status()), log.status().message());
            return;
          }
          if (!text) {
            res.set_content(DumpJson(LogJson(*log)), "application/json");
            return;
          }
          // Served as UTF-8, like the JSON: the stored bytes are not.
          std::string body;
          for (const store::StoredLine& line : log->lines) {
            body += SanitizeUtf8(line.text);
            body += '\n';
          }
          res.set_content(body, "text/plain; charset=utf-8");
        });
  s.Get(R"(/api/runs/([A-Za-z0-9_.-]+))",
        [this](const httplib::Request& req, httplib::Response& res) {
          res.set_header("Cache-Control", "no-store");
          Result<nlohmann::json> j = RunJson(req.matches[1]);
          if (!j.ok()) {
            SendError(res, HttpStatusFor(j.status()), j.status().message());
            return;
          }
          res.set_content(DumpJson(*j), "application/json");
        });
}

UiServer::~UiServer() { Stop(); }

nlohmann::json UiServer::RunsJson() {
  nlohmann::json runs = nlohmann::json::array();
  if (store::Store* st = impl_->Open()) {
    auto list = store::ListRuns(*st, 100);
    if (list.ok()) runs = store::RunListToJson(*list);
  }
  return {{"now", Now()}, {"runs", runs}};
}

Result<nlohmann::json> UiServer::RunJson(const std::string& id) {
  store::Store* st = impl_->Open();
  if (!st) return NotFound("no runs recorded yet");
  auto run = store::LoadRun(*st, StoreRunId(id));
  if (!run.ok()) return run.status();
  return nlohmann::json{{"now", Now()}, {"run", store::RunToJson(*run)}};
}

Result<store::StoredLog> UiServer::LoadLog(const std::string& run_id,
                                           const std::string& step_id,
                                           int64_t after_seq, int limit) {
  store::Store* st = impl_->Open();
  if (!st) return NotFound("no runs recorded yet");
  return store::LoadStepLog(*st, StoreRunId(run_id), step_id, after_seq, limit);
}

nlohmann::json UiServer::LogJson(const store::StoredLog& log) {
  nlohmann::json lines = nlohmann::json::array();
  for (const auto& l : log.lines) {
    lines.push_back({{"seq", l.seq}, {"stream", l.stream}, {"text", l.text}});
  }
  return {{"now", Now()},
          {"run", log.run_id},
          {"step", log.step_id},
          {"last_seq", log.last_seq},
          {"lines", lines}};
}

Status UiServer::Start(const std::string& host, int port) {
  Result<WriteToken> token = WriteToken::Generate();
  if (!token.ok()) return token.status();
  impl_->token_.emplace(std::move(*token));
  httplib::Server& s = impl_->server_;
  int bound = port == 0 ? s.bind_to_any_port(host)
                        : (s.bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    return IoError("cannot listen on " + host + ":" + std::to_string(port) +
                   " (is the port taken?)");
  }
  impl_->port_ = bound;
  impl_->hosts_.emplace(host, bound, impl_->extra_hosts_);
  std::atomic<bool>& done = impl_->listen_done_;
  impl_->thread_ = std::thread([&s, &done] {
    s.listen_after_bind();
    done = true;
  });
  return Status::Ok();
}

void UiServer::AllowHost(std::string host) {
  impl_->extra_hosts_.push_back(std::move(host));
}

int UiServer::port() const { return impl_->port_; }

const std::string& UiServer::token() const { return impl_->token_->text(); }

bool UiServer::WaitForWatchers(std::chrono::milliseconds max_wait) {
  using Steady = std::chrono::steady_clock;
  // A page polls a running run every second: one that read within this
  // window is still open.
  constexpr std::chrono::seconds kWatching(5);
  const Steady::time_point since = Steady::now();
  std::unique_lock<std::mutex> lock(impl_->watch_mu_);
  if (!impl_->last_run_request_ ||
      *impl_->last_run_request_ < since - kWatching) {
    return false;
  }
  return impl_->watch_cv_.wait_until(lock, since + max_wait, [&] {
    return *impl_->last_run_request_ > since;
  });
}

void UiServer::Stop() {
  if (!impl_->thread_.joinable()) return;
  // httplib's stop() does nothing before its loop starts (is_running):
  // a Stop right after Start waits for the loop first, or it would wait
  // for the loop's end for ever.
  while (!impl_->server_.is_running() && !impl_->listen_done_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  impl_->server_.stop();
  impl_->thread_.join();
}

}  // namespace steps::ui
