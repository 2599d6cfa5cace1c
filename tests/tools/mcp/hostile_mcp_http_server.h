// A small MCP server over Streamable HTTP for the client's tests, served on
// a free loopback port inside the test process (cpp-httplib), with a mode
// for each way a server can misbehave:
//   good           answers as it should: initialize with the session id
//                  "session-1" (JSON), tools/list as an event stream that
//                  logs a message first, tools/call echo {text} as JSON,
//                  notifications with 202, DELETE with 200
//   hang-initialize  never answers initialize (until the server stops)
//   status-500     answers initialize with 500 and a text body
//   not-json       answers initialize with 200, application/json, and HTML
//   redirect       answers initialize with 307 to /elsewhere
//   wrong-id       answers initialize (JSON) with its id as a string
//   sse-silent     answers tools/call with an event stream that sends a
//                  progress notification and then nothing, held open
//   session-404    answers tools/call with 404 (the session expired)
//   huge           answers tools/call with a 2 MiB JSON message
//   huge-event     answers tools/call with an event stream whose one event
//                  grows past 2 MiB and never ends
//   odd-content-type  as good, but tools/list's event stream comes as
//                  "Text/Event-Stream; charset=UTF-8"
//   notice-stream  as good, but answers a notification with 200 and an
//                  event stream held open instead of 202
//   ping-first     answers tools/call with an event stream that first sends
//                  a ping request and answers the call only once the
//                  client's result for the ping has been POSTed
// Every request is recorded (see Received).
#ifndef STEPS_TESTS_TOOLS_MCP_HOSTILE_MCP_HTTP_SERVER_H_
#define STEPS_TESTS_TOOLS_MCP_HOSTILE_MCP_HTTP_SERVER_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
struct Response;
}  // namespace httplib

namespace steps::test_support {

class HostileMcpHttpServer {
 public:
  // One request as the server saw it.
  struct Received {
    std::string http_method;       // POST, DELETE, GET.
    std::string rpc_method;        // The JSON-RPC method; "" for a response.
    std::string session_id;        // Mcp-Session-Id, "" when absent.
    std::string protocol_version;  // MCP-Protocol-Version, "" when absent.
    std::string accept;
    std::string authorization;
    std::string body;
  };

  // Starts serving on 127.0.0.1 and a free port.
  explicit HostileMcpHttpServer(std::string mode);
  // Releases every held answer, then stops.
  ~HostileMcpHttpServer();
  HostileMcpHttpServer(const HostileMcpHttpServer&) = delete;
  HostileMcpHttpServer& operator=(const HostileMcpHttpServer&) = delete;

  int port() const { return port_; }
  std::string url() const;  // http://127.0.0.1:PORT/mcp

  // Everything received so far, in order. Thread-safe.
  std::vector<Received> received() const;
  // The first request whose JSON-RPC method is `rpc_method` or whose HTTP
  // method is `http_method` arrives, or `ms` pass. True when it did.
  bool WaitFor(const std::string& rpc_method, int ms,
               const std::string& http_method = "") const;

 private:
  void Route();
  void Record(Received r);
  // Blocks until the server stops.
  void Hold();
  void Initialize(const nlohmann::json& message, httplib::Response& res);
  void ListTools(const nlohmann::json& message, httplib::Response& res);
  void CallTool(const nlohmann::json& message, httplib::Response& res);
  void HoldStream(bool huge, httplib::Response& res);
  void PingFirst(const nlohmann::json& message, httplib::Response& res);

  std::string mode_;
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<Received> received_;
};

}  // namespace steps::test_support

#endif  // STEPS_TESTS_TOOLS_MCP_HOSTILE_MCP_HTTP_SERVER_H_
