// A small MCP server over stdio for the client's tests, with a mode for
// each way a server can misbehave. Usage: hostile_mcp_server MODE
//   good            answers as it should (tools below)
//   crash           writes to stderr and exits 3 before reading anything
//   hang            reads requests and never answers
//   garbage         answers every request with a line that is not JSON
//   banner          writes a non-JSON line first, then behaves
//   huge-line       answers initialize with a 2 MiB line
//   old-version     agrees only to protocol version 1999-01-01
//   version-2024    agrees to 2024-11-05
//   chatty          writes 8 MiB to stderr before answering initialize
//   pages           lists its tools over three pages
//   odd-names       lists tools whose names need shortening or sanitising
//   ignore-term     ignores SIGTERM (a stop must use SIGKILL)
// Tools (in every answering mode): echo {text}, add {a, b}, slow {ms},
// image, resource, fail, big {bytes}, exit, chat, pid, env {name}.
// With MCP_TEST_LOG set, it appends "pid PID" there when it starts,
// "slow" when a slow call begins, "cancelled ID" when told a request was
// cancelled, and "term" when it gets SIGTERM.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

using nlohmann::json;

namespace {

std::string g_mode;

void Log(const std::string& line) {
  const char* path = std::getenv("MCP_TEST_LOG");
  if (path == nullptr) return;
  std::ofstream(path, std::ios::app) << line << "\n";
}

void Send(const json& message) {
  std::string line = message.dump() + "\n";
  fwrite(line.data(), 1, line.size(), stdout);
  fflush(stdout);
}

void Result(const json& id, const json& result) {
  Send({{"jsonrpc", "2.0"}, {"id", id}, {"result", result}});
}

json Text(const std::string& text) {
  return {{"content", json::array({{{"type", "text"}, {"text", text}}})}};
}

json ToolList() {
  json obj = {{"type", "object"}};
  json tools = json::array();
  for (const char* name : {"echo", "add", "slow", "image", "resource", "fail",
                           "big", "exit", "chat", "pid", "env"}) {
    tools.push_back({{"name", name},
                     {"description", std::string("The ") + name + " tool."},
                     {"inputSchema", obj}});
  }
  if (g_mode == "odd-names") {
    tools.push_back({{"name", "get.weather/now"}, {"inputSchema", obj}});
    tools.push_back({{"name", std::string(70, 'x')}, {"inputSchema", obj}});
  }
  return tools;
}

// Reads one line from stdin, waiting at most `ms` (-1: forever). False at
// end of file or when the time ran out (then `timed_out`).
bool ReadLine(std::string& line, int ms, bool& timed_out) {
  static std::string buffer;
  timed_out = false;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (true) {
    size_t nl = buffer.find('\n');
    if (nl != std::string::npos) {
      line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return true;
    }
    int wait = -1;
    if (ms >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        timed_out = true;
        return false;
      }
      wait = static_cast<int>(left.count());
    }
    struct pollfd p = {0, POLLIN, 0};
    if (poll(&p, 1, wait) <= 0) continue;
    char buf[65536];
    ssize_t n = read(0, buf, sizeof buf);
    if (n <= 0) return false;
    buffer.append(buf, static_cast<size_t>(n));
  }
}

// Waits `ms`, reading notifications meanwhile; true if told to cancel `id`.
bool SleepUnlessCancelled(int ms, const json& id) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    std::string line;
    bool timed_out;
    if (!ReadLine(line, static_cast<int>(left.count()), timed_out)) {
      if (timed_out) return false;
      std::this_thread::sleep_for(left);  // stdin closed: just wait.
      return false;
    }
    json m = json::parse(line, nullptr, false);
    if (m.is_object() && m.value("method", "") == "notifications/cancelled") {
      Log("cancelled " + m["params"]["requestId"].dump());
      if (m["params"]["requestId"] == id) return true;
    }
  }
}

void CallTool(const json& id, const json& params) {
  std::string name = params.value("name", "");
  json args = params.value("arguments", json::object());
  if (name == "echo") return Result(id, Text(args.value("text", "")));
  if (name == "add") {
    return Result(
        id, Text(std::to_string(args.value("a", 0) + args.value("b", 0))));
  }
  if (name == "slow") {
    Log("slow");
    if (SleepUnlessCancelled(args.value("ms", 1000), id)) return;
    return Result(id, Text("slept"));
  }
  if (name == "image") {
    return Result(id, {{"content",
                        json::array({{{"type", "text"}, {"text", "a picture:"}},
                                     {{"type", "image"},
                                      {"mimeType", "image/png"},
                                      {"data", "AAAAAAAA"}},
                                     {{"type", "audio"},
                                      {"mimeType", "audio/wav"},
                                      {"data", "AAAA"}}})}});
  }
  if (name == "resource") {
    return Result(
        id,
        {{"content", json::array({{{"type", "resource"},
                                   {"resource",
                                    {{"uri", "file:///a.txt"},
                                     {"mimeType", "text/plain"},
                                     {"text", "inside"}}}},
                                  {{"type", "resource"},
                                   {"resource",
                                    {{"uri", "file:///b.bin"},
                                     {"mimeType", "application/octet-stream"},
                                     {"blob", "AAAAAAAAAAAA"}}}},
                                  {{"type", "resource_link"},
                                   {"uri", "file:///c.txt"},
                                   {"name", "c"}},
                                  {{"type", "hologram"}}})}});
  }
  if (name == "fail") {
    json r = Text("it went wrong");
    r["isError"] = true;
    return Result(id, r);
  }
  if (name == "big")
    return Result(id, Text(std::string(args.value("bytes", 1000), 'b')));
  if (name == "exit") std::exit(4);
  if (name == "chat") {
    Send({{"jsonrpc", "2.0"},
          {"method", "notifications/message"},
          {"params",
           {{"level", "warning"}, {"logger", "test"}, {"data", "careful"}}}});
    Send({{"jsonrpc", "2.0"},
          {"method", "notifications/progress"},
          {"params", {{"progressToken", 1}, {"progress", 1}}}});
    Send({{"jsonrpc", "2.0"}, {"id", "s1"}, {"method", "ping"}});
    Send({{"jsonrpc", "2.0"}, {"id", "s2"}, {"method", "roots/list"}});
    Send({{"jsonrpc", "2.0"}, {"id", 999}, {"result", {}}});  // stray
    // Answers to its own requests come first: they say what the client did.
    std::string answers;
    for (int i = 0; i < 2; ++i) {
      std::string line;
      bool timed_out;
      if (!ReadLine(line, 5000, timed_out)) break;
      answers += line + "\n";
    }
    return Result(id, Text(answers));
  }
  if (name == "pid") return Result(id, Text(std::to_string(getpid())));
  if (name == "env") {
    const char* value = std::getenv(args.value("name", "").c_str());
    return Result(id, Text(value ? std::string("set: ") + value : "(unset)"));
  }
  Send({{"jsonrpc", "2.0"},
        {"id", id},
        {"error", {{"code", -32602}, {"message", "no tool " + name}}}});
}

void Handle(const json& m) {
  std::string method = m.value("method", "");
  if (!m.contains("id")) return;  // Notifications.
  const json& id = m["id"];
  if (g_mode == "hang") return;
  if (g_mode == "garbage") {
    std::cout << "this is not json {" << std::endl;
    return;
  }
  if (method == "initialize") {
    std::string version = m["params"].value("protocolVersion", "");
    if (g_mode == "old-version") version = "1999-01-01";
    if (g_mode == "version-2024") version = "2024-11-05";
    if (g_mode == "huge-line") version = std::string(2 * 1024 * 1024, 'v');
    if (g_mode == "chatty") {
      std::string chunk(4096, 'e');
      chunk.back() = '\n';
      for (int i = 0; i < 2048; ++i)
        fwrite(chunk.data(), 1, chunk.size(), stderr);
    }
    return Result(id,
                  {{"protocolVersion", version},
                   {"capabilities", {{"tools", json::object()}}},
                   {"serverInfo", {{"name", "hostile"}, {"version", "1"}}}});
  }
  if (method == "tools/list") {
    json tools = ToolList();
    if (g_mode != "pages") return Result(id, {{"tools", tools}});
    std::string cursor =
        m.contains("params") ? m["params"].value("cursor", "") : "";
    int page = cursor.empty() ? 0 : std::stoi(cursor);
    json part = json::array();
    for (size_t i = static_cast<size_t>(page) * 4;
         i < tools.size() && i < static_cast<size_t>(page + 1) * 4; ++i)
      part.push_back(tools[i]);
    json r = {{"tools", part}};
    if ((page + 1) * 4 < static_cast<int>(tools.size()))
      r["nextCursor"] = std::to_string(page + 1);
    return Result(id, r);
  }
  if (method == "tools/call")
    return CallTool(id, m.value("params", json::object()));
  Send({{"jsonrpc", "2.0"},
        {"id", id},
        {"error", {{"code", -32601}, {"message", "unknown method"}}}});
}

}  // namespace

int main(int argc, char** argv) {
  g_mode = argc > 1 ? argv[1] : "good";
  signal(SIGPIPE, SIG_IGN);
  if (g_mode == "ignore-term") {
    signal(SIGTERM, [](int) { Log("term"); });
  } else {
    signal(SIGTERM, [](int) {
      Log("term");
      _exit(143);
    });
  }
  Log("pid " + std::to_string(getpid()));
  if (g_mode == "crash") {
    fprintf(stderr, "fatal: no configuration found\n");
    return 3;
  }
  if (g_mode == "banner") std::cout << "hostile server starting" << std::endl;
  std::string line;
  bool timed_out;
  while (ReadLine(line, -1, timed_out)) {
    json m = json::parse(line, nullptr, false);
    if (m.is_discarded()) continue;
    Handle(m);
  }
  return 0;
}
