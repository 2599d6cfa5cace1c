#include "tools/mcp/hostile_mcp_http_server.h"

#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>

namespace steps::test_support {
namespace {

using nlohmann::json;

constexpr size_t kHugeBytes = 2 * 1024 * 1024;

std::string Event(const json& message) {
  return "event: message\ndata: " + message.dump() + "\n\n";
}

json Result(const json& id, const json& result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", result}};
}

json InitializeResult() {
  return {{"protocolVersion", "2025-06-18"},
          {"capabilities", {{"tools", json::object()}}},
          {"serverInfo", {{"name", "hostile-http"}, {"version", "1"}}}};
}

json ToolList() {
  return {{"tools",
           {{{"name", "echo"},
             {"description", "Echoes its text."},
             {"inputSchema",
              {{"type", "object"},
               {"properties", {{"text", {{"type", "string"}}}}}}}}}}};
}

json EchoResult(const json& params) {
  std::string text = params.value("arguments", json::object())
                         .value("text", std::string("(none)"));
  return {{"content", {{{"type", "text"}, {"text", "echo: " + text}}}}};
}

}  // namespace

HostileMcpHttpServer::HostileMcpHttpServer(std::string mode)
    : mode_(std::move(mode)), server_(std::make_unique<httplib::Server>()) {
  signal(SIGPIPE, SIG_IGN);
  server_->set_keep_alive_max_count(1);
  Route();
  port_ = server_->bind_to_any_port("127.0.0.1");
  // bind_to_any_port also listens: connections queue from here on.
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

HostileMcpHttpServer::~HostileMcpHttpServer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  // stop() does nothing before the loop runs.
  while (!server_->is_running()) std::this_thread::yield();
  server_->stop();
  thread_.join();
}

std::string HostileMcpHttpServer::url() const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/mcp";
}

std::vector<HostileMcpHttpServer::Received> HostileMcpHttpServer::received()
    const {
  std::lock_guard<std::mutex> lock(mu_);
  return received_;
}

bool HostileMcpHttpServer::WaitFor(const std::string& rpc_method, int ms,
                                   const std::string& http_method) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] {
    for (const Received& r : received_) {
      if (!rpc_method.empty() && r.rpc_method == rpc_method) return true;
      if (!http_method.empty() && r.http_method == http_method) return true;
    }
    return false;
  });
}

void HostileMcpHttpServer::Record(Received r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    received_.push_back(std::move(r));
  }
  cv_.notify_all();
}

void HostileMcpHttpServer::Hold() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return stopping_; });
}

void HostileMcpHttpServer::Route() {
  auto record = [this](const httplib::Request& req, const json& message) {
    Received r;
    r.http_method = req.method;
    r.rpc_method = message.is_object() ? message.value("method", "") : "";
    r.session_id = req.get_header_value("Mcp-Session-Id");
    r.protocol_version = req.get_header_value("MCP-Protocol-Version");
    r.accept = req.get_header_value("Accept");
    r.authorization = req.get_header_value("Authorization");
    r.body = req.body;
    Record(std::move(r));
  };
  server_->Delete(
      "/mcp", [record](const httplib::Request& req, httplib::Response& res) {
        record(req, json());
        res.status = 200;
      });
  server_->Post("/mcp", [this, record](const httplib::Request& req,
                                       httplib::Response& res) {
    json message = json::parse(req.body, nullptr, false);
    record(req, message);
    if (!message.is_object() || !message.contains("method") ||
        !message.contains("id")) {
      if (mode_ == "notice-stream" && message.is_object() &&
          message.contains("method")) {
        return HoldStream(false, res);  // 200 and a stream, never ending.
      }
      res.status = 202;  // A notification or a response.
      return;
    }
    const std::string method = message["method"].get<std::string>();
    if (method == "initialize") return Initialize(message, res);
    if (method == "tools/list") return ListTools(message, res);
    if (method == "tools/call") return CallTool(message, res);
    res.set_content(json({{"jsonrpc", "2.0"},
                          {"id", message["id"]},
                          {"error", {{"code", -32601}, {"message", "no"}}}})
                        .dump(),
                    "application/json");
  });
}

void HostileMcpHttpServer::Initialize(const json& message,
                                      httplib::Response& res) {
  if (mode_ == "hang-initialize") {
    Hold();
    res.status = 503;
    return;
  }
  if (mode_ == "status-500") {
    res.status = 500;
    res.set_content("internal trouble\nsecond line", "text/plain");
    return;
  }
  if (mode_ == "not-json") {
    res.set_content("<html>not json</html>", "application/json");
    return;
  }
  if (mode_ == "wrong-id") {
    res.set_content(Result(message["id"].dump(), InitializeResult()).dump(),
                    "application/json");
    return;
  }
  if (mode_ == "redirect") {
    res.status = 307;
    res.set_header("Location",
                   "http://127.0.0.1:" + std::to_string(port_) + "/elsewhere");
    return;
  }
  res.set_header("Mcp-Session-Id", "session-1");
  res.set_content(Result(message["id"], InitializeResult()).dump(),
                  "application/json");
}

void HostileMcpHttpServer::ListTools(const json& message,
                                     httplib::Response& res) {
  json log = {{"jsonrpc", "2.0"},
              {"method", "notifications/message"},
              {"params", {{"level", "warning"}, {"data", "listing tools"}}}};
  // A media type is case-insensitive and may carry parameters.
  const char* type = mode_ == "odd-content-type"
                         ? "Text/Event-Stream; charset=UTF-8"
                         : "text/event-stream";
  res.set_content(
      ": primed\n\n" + Event(log) + Event(Result(message["id"], ToolList())),
      type);
}

void HostileMcpHttpServer::CallTool(const json& message,
                                    httplib::Response& res) {
  if (mode_ == "session-404") {
    res.status = 404;
    res.set_content("no such session", "text/plain");
    return;
  }
  if (mode_ == "huge") {
    json big = Result(
        message["id"],
        {{"content",
          {{{"type", "text"}, {"text", std::string(kHugeBytes, 'x')}}}}});
    res.set_content(big.dump(), "application/json");
    return;
  }
  if (mode_ == "sse-silent" || mode_ == "huge-event") {
    return HoldStream(mode_ == "huge-event", res);
  }
  if (mode_ == "ping-first") return PingFirst(message, res);
  res.set_content(Result(message["id"], EchoResult(message["params"])).dump(),
                  "application/json");
}

// An event stream that pings the client and answers the call only once
// the pong (a POST of the ping's result) has arrived.
void HostileMcpHttpServer::PingFirst(const json& message,
                                     httplib::Response& res) {
  json id = message["id"];
  json result = EchoResult(message["params"]);
  res.set_chunked_content_provider(
      "text/event-stream", [this, id, result, pinged = false](
                               size_t, httplib::DataSink& sink) mutable {
        if (!pinged) {
          pinged = true;
          std::string ping =
              Event({{"jsonrpc", "2.0"}, {"id", "srv-1"}, {"method", "ping"}});
          return sink.write(ping.data(), ping.size());
        }
        std::unique_lock<std::mutex> lock(mu_);
        bool ponged = cv_.wait_for(lock, std::chrono::seconds(10), [this] {
          if (stopping_) return true;
          for (const Received& r : received_) {
            json m = json::parse(r.body, nullptr, false);
            if (m.is_object() && m.value("id", json()) == "srv-1" &&
                m.contains("result")) {
              return true;
            }
          }
          return false;
        });
        lock.unlock();
        if (!ponged || stopping_) return false;
        std::string answer = Event(Result(id, result));
        sink.write(answer.data(), answer.size());
        sink.done();
        return true;
      });
}

// An event stream that never answers: a progress notification (or, with
// `huge`, one event that never ends), then keep-alive comments until the
// client hangs up or the server stops.
void HostileMcpHttpServer::HoldStream(bool huge, httplib::Response& res) {
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, huge, sent = size_t{0}](size_t, httplib::DataSink& sink) mutable {
        if (sent == 0) {
          std::string first =
              huge ? "data: " + std::string(64 * 1024, 'y')
                   : Event({{"jsonrpc", "2.0"},
                            {"method", "notifications/progress"},
                            {"params",
                             {{"progressToken", 1}, {"progress", 0.5}}}});
          sent += first.size();
          return sink.write(first.data(), first.size());
        }
        if (huge && sent < 2 * kHugeBytes) {
          std::string more(64 * 1024, 'y');
          sent += more.size();
          return sink.write(more.data(), more.size());
        }
        std::unique_lock<std::mutex> lock(mu_);
        if (cv_.wait_for(lock, std::chrono::milliseconds(50),
                         [this] { return stopping_; })) {
          return false;
        }
        lock.unlock();
        const std::string ping = huge ? "y" : ": waiting\n\n";
        return sink.write(ping.data(), ping.size());
      });
}

}  // namespace steps::test_support
