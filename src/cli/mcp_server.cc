#include "cli/mcp_server.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <exception>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include "core/json_text.h"
#include "core/log.h"
#include "process/live_process.h"
#include "tools/json_rpc.h"
#include "tools/json_schema.h"

namespace steps::cli {

const char* const kMcpProtocolVersions[3] = {"2025-06-18", "2025-03-26",
                                             "2024-11-05"};

namespace {

// JSON-RPC 2.0's error codes.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;
// Implementation-defined (-32000 to -32099): every worker is taken.
constexpr int kServerBusy = -32000;

// Blocks until `fd` is ready for `events` (or has hung up).
void WaitFor(int fd, short events) {
  pollfd p{fd, events, 0};
  while (poll(&p, 1, -1) < 0 && errno == EINTR) {
  }
}

// An id a request may carry: a string or a number (JSON-RPC 2.0).
bool ValidId(const nlohmann::json& id) {
  return id.is_string() || id.is_number();
}

nlohmann::json ToolResultJson(const McpToolResult& r) {
  nlohmann::json out = {
      {"content",
       nlohmann::json::array({{{"type", "text"}, {"text", r.text}}})},
      {"isError", r.is_error}};
  if (r.structured.is_object()) out["structuredContent"] = r.structured;
  return out;
}

std::string ToolNames(const std::vector<McpTool>& tools) {
  std::string names;
  for (const McpTool& t : tools) names += (names.empty() ? "" : ", ") + t.name;
  return names;
}

}  // namespace

struct McpServer::Worker {
  nlohmann::json id;
  CancelToken cancel;
  bool cancelled = false;  // Guarded by McpServer::write_mutex_.
  std::atomic<bool> done{false};
  std::thread thread;
};

McpServer::McpServer(std::vector<McpTool> tools, McpServerOptions options)
    : tools_(std::move(tools)), options_(std::move(options)) {
  // ValidateArguments assumes a schema of its subset: a tool whose schema
  // is not is a mistake in the tool table, said once at start.
  for (const McpTool& t : tools_) {
    if (Status s = CheckArgumentsSchema(t.input_schema); !s.ok()) {
      LogEvent(LogLevel::kError, "mcp.bad_tool_schema",
               {{"tool", t.name}, {"error", s.message()}});
    }
  }
}

McpServer::~McpServer() { ShutDown(); }

void McpServer::Serve(int in_fd, int out_fd) {
  out_fd_ = out_fd;
  std::string partial;
  bool skipping = false;  // Inside a line over the bound: dropped to its end.
  char buf[65536];
  while (true) {
    const ssize_t n = read(in_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // A client may hand us a non-blocking pipe.
      WaitFor(in_fd, POLLIN);
      continue;
    }
    if (n <= 0) break;
    std::string_view data(buf, static_cast<size_t>(n));
    while (!data.empty()) {
      const size_t newline = data.find('\n');
      const std::string_view piece = data.substr(0, newline);
      if (!skipping &&
          partial.size() + piece.size() > options_.max_line_bytes) {
        Send(JsonRpcError(nullptr, kParseError,
                          "a message line of more than " +
                              std::to_string(options_.max_line_bytes) +
                              " bytes; it is skipped"));
        partial.clear();
        skipping = true;
      }
      if (!skipping) partial.append(piece);
      if (newline == std::string_view::npos) break;
      if (!skipping) HandleLine(partial);
      partial.clear();
      skipping = false;
      data.remove_prefix(newline + 1);
    }
  }
  if (!skipping && !partial.empty()) HandleLine(partial);
  ShutDown();
}

void McpServer::HandleLine(const std::string& line) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) return;
  std::optional<nlohmann::json> message = ParseJsonRpcLine(line);
  if (!message) {
    Send(JsonRpcError(nullptr, kParseError,
                      "parse error: the line is not JSON (or nests deeper "
                      "than " +
                          std::to_string(kMaxJsonRpcDepth) + " levels)"));
    return;
  }
  if (message->is_array()) {
    Send(JsonRpcError(nullptr, kInvalidRequest,
                      "batches are not supported: send one message a line"));
    return;
  }
  const JsonRpcKind kind = ClassifyJsonRpc(*message);
  const bool version_ok = message->is_object() &&
                          message->value("jsonrpc", nlohmann::json()) == "2.0";
  if (kind == JsonRpcKind::kResponse) return;  // We send no requests.
  // MCP forbids a null id. A message with one is refused below rather than
  // taken for a notification, whose sender would wait for an answer forever.
  const bool null_id = message->is_object() && message->contains("id") &&
                       (*message)["id"].is_null();
  if (kind == JsonRpcKind::kNotification && version_ok && !null_id) {
    HandleNotification(*message);
    return;
  }
  if (kind == JsonRpcKind::kRequest && version_ok &&
      ValidId((*message)["id"])) {
    HandleRequest(*message);
    return;
  }
  nlohmann::json id = message->is_object() && message->contains("id") &&
                              ValidId((*message)["id"])
                          ? (*message)["id"]
                          : nlohmann::json();
  Send(JsonRpcError(id, kInvalidRequest,
                    "invalid request: a JSON-RPC 2.0 message needs "
                    "\"jsonrpc\": \"2.0\", a string \"method\" and, for a "
                    "request, a string or number \"id\""));
}

void McpServer::HandleRequest(const nlohmann::json& message) {
  const nlohmann::json& id = message["id"];
  const std::string method = message["method"].get<std::string>();
  nlohmann::json params = message.value("params", nlohmann::json::object());
  if (!params.is_object()) {
    Send(JsonRpcError(id, kInvalidParams, "params must be an object"));
    return;
  }
  if (method == "initialize") {
    Send(JsonRpcResult(id, Initialize(params)));
  } else if (method == "ping") {
    Send(JsonRpcResult(id, nlohmann::json::object()));
  } else if (method == "tools/list") {
    Send(JsonRpcResult(id, ListTools()));
  } else if (method == "tools/call") {
    StartCall(id, params);
  } else {
    Send(JsonRpcError(id, kMethodNotFound, "method not found: " + method));
  }
}

void McpServer::HandleNotification(const nlohmann::json& message) {
  const std::string method = message["method"].get<std::string>();
  if (method == "notifications/cancelled") {
    const nlohmann::json params =
        message.value("params", nlohmann::json::object());
    if (params.is_object() && params.contains("requestId")) {
      Cancel(params["requestId"]);
    }
    return;
  }
  // notifications/initialized and anything else need no action.
  LogEvent(LogLevel::kDebug, "mcp.notification", {{"method", method}});
}

nlohmann::json McpServer::Initialize(const nlohmann::json& params) const {
  std::string version = kMcpProtocolVersions[0];
  auto asked = params.find("protocolVersion");
  if (asked != params.end() && asked->is_string()) {
    for (const char* v : kMcpProtocolVersions) {
      if (*asked == v) version = v;
    }
  }
  nlohmann::json result = {
      {"protocolVersion", version},
      {"capabilities", {{"tools", {{"listChanged", false}}}}},
      {"serverInfo", {{"name", options_.name}, {"version", options_.version}}}};
  if (!options_.instructions.empty())
    result["instructions"] = options_.instructions;
  return result;
}

nlohmann::json McpServer::ListTools() const {
  nlohmann::json tools = nlohmann::json::array();
  for (const McpTool& t : tools_) {
    tools.push_back({{"name", t.name},
                     {"description", t.description},
                     {"inputSchema", t.input_schema}});
  }
  return {{"tools", tools}};
}

void McpServer::StartCall(const nlohmann::json& id,
                          const nlohmann::json& params) {
  auto name = params.find("name");
  if (name == params.end() || !name->is_string()) {
    Send(
        JsonRpcError(id, kInvalidParams, "tools/call needs a string \"name\""));
    return;
  }
  auto tool = std::find_if(tools_.begin(), tools_.end(),
                           [&](const McpTool& t) { return *name == t.name; });
  if (tool == tools_.end()) {
    Send(JsonRpcError(id, kInvalidParams,
                      "unknown tool '" + name->get<std::string>() +
                          "'; the tools are " + ToolNames(tools_)));
    return;
  }
  nlohmann::json arguments =
      params.value("arguments", nlohmann::json::object());
  std::vector<std::string> problems =
      ValidateArguments(tool->input_schema, arguments);
  if (!problems.empty()) {
    std::string text = "invalid arguments for tool '" + tool->name + "': ";
    for (size_t i = 0; i < problems.size(); ++i)
      text += (i ? "; " : "") + problems[i];
    Send(JsonRpcError(id, kInvalidParams, text));
    return;
  }
  std::lock_guard<std::mutex> lock(workers_mutex_);
  if (ReapWorkers() >= options_.max_calls) {
    Send(JsonRpcError(id, kServerBusy,
                      "busy: " + std::to_string(options_.max_calls) +
                          " calls are running; try again when one has "
                          "answered"));
    return;
  }
  auto worker = std::make_shared<Worker>();
  worker->id = id;
  workers_.push_back(worker);
  worker->thread = std::thread(&McpServer::RunCall, this, worker,
                               std::cref(*tool), std::move(arguments));
}

void McpServer::RunCall(const std::shared_ptr<Worker>& worker,
                        const McpTool& tool, nlohmann::json arguments) {
  std::string line;
  try {
    McpToolResult r = tool.call(arguments, worker->cancel);
    line = JsonRpcResult(worker->id, ToolResultJson(r));
  } catch (const std::exception& e) {
    line = JsonRpcError(worker->id, kInternalError,
                        std::string("internal error: ") + e.what());
  }
  {
    std::lock_guard<std::mutex> lock(write_mutex_);
    // Done as it answers: a client that has read the answer and sends its
    // next call at once finds this worker no longer counted.
    worker->done = true;
    if (!worker->cancelled) WriteLine(line);
  }
}

void McpServer::Cancel(const nlohmann::json& request_id) {
  std::vector<std::shared_ptr<Worker>> hit;
  {
    std::lock_guard<std::mutex> lock(workers_mutex_);
    for (const auto& w : workers_)
      if (!w->done && w->id == request_id) hit.push_back(w);
  }
  for (const auto& w : hit) {
    {
      std::lock_guard<std::mutex> lock(write_mutex_);
      w->cancelled = true;
    }
    w->cancel.Cancel(CancelReason::kAbort);
  }
  LogEvent(LogLevel::kDebug, "mcp.cancelled",
           {{"request", DumpJson(request_id)}, {"running", hit.size()}});
}

size_t McpServer::ReapWorkers() {
  size_t running = 0;
  for (auto it = workers_.begin(); it != workers_.end();) {
    if ((*it)->done) {
      if ((*it)->thread.joinable()) (*it)->thread.join();
      it = workers_.erase(it);
    } else {
      ++running;
      ++it;
    }
  }
  return running;
}

void McpServer::ShutDown() {
  std::list<std::shared_ptr<Worker>> workers;
  {
    std::lock_guard<std::mutex> lock(workers_mutex_);
    workers.swap(workers_);
  }
  for (const auto& w : workers) w->cancel.Cancel(CancelReason::kAbort);
  for (const auto& w : workers)
    if (w->thread.joinable()) w->thread.join();
}

bool McpServer::Send(const std::string& line) {
  std::lock_guard<std::mutex> lock(write_mutex_);
  return WriteLine(line);
}

bool McpServer::WriteLine(const std::string& line) {
  if (output_broken_) return false;
  const std::string framed = line + "\n";
  size_t off = 0;
  while (off < framed.size()) {
    ssize_t n =
        WriteWithoutSigpipe(out_fd_, framed.data() + off, framed.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      WaitFor(out_fd_, POLLOUT);
      continue;
    }
    if (n <= 0) {
      output_broken_ = true;
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace steps::cli
