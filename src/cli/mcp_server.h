// The server side of the Model Context Protocol over stdio, as `steps mcp`
// speaks it: JSON-RPC 2.0, one message per line. It answers `initialize`
// (protocol version negotiation), `ping`, `tools/list` and `tools/call`,
// and honours `notifications/cancelled`. What the tools do is the caller's
// (cli/mcp_tools.h holds steps' own).
//
// The protocol is never blocked by a call: each `tools/call` runs on a
// worker thread of its own (at most McpServerOptions::max_calls at once;
// beyond that the call is answered with an error saying the server is
// busy) while the reader keeps reading. Answers are written whole, one
// line each, under a lock. A call cancelled before it answered gets no
// answer at all, as the protocol asks; its tool sees its CancelToken
// cancelled.
#ifndef STEPS_CLI_MCP_SERVER_H_
#define STEPS_CLI_MCP_SERVER_H_

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/cancel.h"

namespace steps::cli {

// What a tool call answers: text for the client's model, and whether the
// tool refused or failed (MCP's `isError`: the model reads the text and may
// try again; it is not a protocol error).
struct McpToolResult {
  std::string text;
  bool is_error = false;
  // Sent as `structuredContent` when an object; null: none.
  nlohmann::json structured;
};

struct McpTool {
  std::string name;
  std::string description;
  // A JSON Schema of the arguments (an object schema, in the subset of
  // tools/json_schema.h). Arguments that break it are refused with -32602
  // before `call` runs.
  nlohmann::json input_schema;
  // Runs one call on a worker thread. `cancel` is cancelled when the client
  // cancels the call or the server shuts down; a long call should watch it.
  // Must not throw (what it throws is answered as an internal error).
  std::function<McpToolResult(const nlohmann::json& arguments,
                              const CancelToken& cancel)>
      call;
};

struct McpServerOptions {
  // serverInfo of the `initialize` answer.
  std::string name = "steps";
  std::string version;
  // `instructions` of the `initialize` answer: how to use the tools.
  // Default: none.
  std::string instructions;
  // Calls running at once; one more is answered "busy". Default: 8.
  size_t max_calls = 8;
  // A message line longer than this (bytes) is answered with a parse error
  // and skipped. Default: 4 MiB.
  size_t max_line_bytes = 4 << 20;
};

// The protocol versions spoken, newest first. A client asking for one of
// these gets it; any other gets the newest.
extern const char* const kMcpProtocolVersions[3];

class McpServer {
 public:
  McpServer(std::vector<McpTool> tools, McpServerOptions options);
  ~McpServer();
  McpServer(const McpServer&) = delete;
  McpServer& operator=(const McpServer&) = delete;

  // Reads messages from `in_fd` and writes answers to `out_fd` until
  // `in_fd` reaches end of file (or fails); then cancels the calls still
  // running and returns once every worker has ended. Call once.
  void Serve(int in_fd, int out_fd);

 private:
  struct Worker;

  void HandleLine(const std::string& line);
  void HandleRequest(const nlohmann::json& message);
  void HandleNotification(const nlohmann::json& message);
  nlohmann::json Initialize(const nlohmann::json& params) const;
  nlohmann::json ListTools() const;
  void StartCall(const nlohmann::json& id, const nlohmann::json& params);
  void RunCall(const std::shared_ptr<Worker>& worker, const McpTool& tool,
               nlohmann::json arguments);
  void Cancel(const nlohmann::json& request_id);
  // Joins the workers that have finished; returns how many still run.
  size_t ReapWorkers();
  void ShutDown();
  // Writes one message line; false once the output is gone.
  bool Send(const std::string& line);
  // The same. REQUIRES: write_mutex_ held.
  bool WriteLine(const std::string& line);

  std::vector<McpTool> tools_;
  McpServerOptions options_;
  int out_fd_ = -1;

  std::mutex write_mutex_;      // Serialises Send and a call's last word.
  bool output_broken_ = false;  // Guarded by write_mutex_.

  std::mutex workers_mutex_;
  std::list<std::shared_ptr<Worker>> workers_;  // Guarded by workers_mutex_.
};

}  // namespace steps::cli

#endif  // STEPS_CLI_MCP_SERVER_H_
