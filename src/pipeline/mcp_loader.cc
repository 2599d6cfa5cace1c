// The top-level `mcp_servers:` list: Model Context Protocol servers whose
// tools an agent entry may grant (docs/mcp.md).
#include <cctype>

#include "agent/conversation.h"
#include "pipeline/loader_internal.h"
#include "tools/registry.h"

namespace steps::pipeline::internal {
namespace {

constexpr size_t kMaxServerNameBytes = 32;

bool IsValidServerName(const std::string& name) {
  if (name.empty() || name.size() > kMaxServerNameBytes) return false;
  if (name.find("__") != std::string::npos) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

void ReadServerName(MapReader& r, McpServerDef& s, const Pipeline& p,
                    Diagnostics& d) {
  auto name = ReadString(r.Take("name"), "name", d);
  int line = r.KeyLine("name") ? r.KeyLine("name") : s.line;
  if (!name) {
    if (!r.Has("name")) d.Error(s.line, "mcp server has no 'name'");
    return;
  }
  if (!IsValidServerName(*name)) {
    d.Error(line, "mcp server name '" + *name +
                      "' is not allowed: use 1 to 32 letters, digits, '_' or "
                      "'-', and no '__' (it separates the server from the "
                      "tool in the names the model sees)");
    return;
  }
  if (ToolRegistry::BuiltIn().Find(*name) || *name == agent::kFinishToolName ||
      p.FindTool(*name)) {
    d.Error(line, "mcp server '" + *name +
                      "' has the name of a tool: an agent's 'tools:' entry "
                      "'" +
                      *name +
                      "' would name both — give the server "
                      "another name");
    return;
  }
  if (const McpServerDef* first = p.FindMcpServer(*name)) {
    d.Error(line, "duplicate mcp server '" + *name + "' (first at line " +
                      std::to_string(first->line) + ")");
    return;
  }
  s.name = *name;
}

void ReadServerCommand(MapReader& r, McpServerDef& s, Diagnostics& d) {
  YAML::Node n = r.Take("command");
  s.command_line = r.KeyLine("command") ? r.KeyLine("command") : s.line;
  const std::string what = "mcp server '" + s.name + "'";
  if (!n.IsDefined() || n.IsNull()) {
    d.Error(s.line, what +
                        " has no 'command' and no 'url' — give a command "
                        "steps starts (a list run directly, e.g. [node, "
                        "server.js], or a string run by bash) or the url of a "
                        "running server (http://... or https://...)");
    return;
  }
  if (n.IsSequence()) {
    auto argv = ReadStringList(n, "command", d);
    if (!argv) return;
    if (argv->empty() || (*argv)[0].empty()) {
      d.Error(s.command_line,
              what + ": 'command' must start with the program to run");
      return;
    }
    s.argv = *argv;
    return;
  }
  auto text = ReadString(n, "command", d);
  if (!text) return;
  if (text->find_first_not_of(" \t\r\n") == std::string::npos) {
    d.Error(s.command_line, what + ": 'command' is empty");
    return;
  }
  s.command = *text;
}

// An http:// or https:// URL with a host, without spaces or control
// characters (the scheme in any case).
bool IsHttpUrl(const std::string& url) {
  std::string lower;
  for (char c : url.substr(0, 8)) lower += static_cast<char>(std::tolower(c));
  size_t rest = lower.rfind("http://", 0) == 0    ? 7
                : lower.rfind("https://", 0) == 0 ? 8
                                                  : 0;
  if (rest == 0 || url.size() == rest || url[rest] == '/') return false;
  for (unsigned char c : url) {
    if (c <= 0x20 || c == 0x7f) return false;
  }
  return true;
}

// True when the url's authority (from "//" to the next '/', '?' or '#')
// carries a user name or password ("user:pass@host").
bool HasUserInfo(const std::string& url) {
  const size_t start = url.find("//") + 2;
  const size_t end = url.find_first_of("/?#", start);
  return url.substr(start, end - start).find('@') != std::string::npos;
}

void ReadServerUrl(MapReader& r, McpServerDef& s, Diagnostics& d) {
  YAML::Node n = r.Take("url");
  s.command_line = r.KeyLine("url") ? r.KeyLine("url") : s.line;
  auto url = ReadString(n, "url", d);
  if (!url) return;
  if (!IsHttpUrl(*url)) {
    d.Error(s.command_line,
            "mcp server '" + s.name +
                "': 'url' must be an http:// or https:// address with a "
                "host and no spaces, e.g. http://127.0.0.1:3001/mcp, not '" +
                *url + "'");
    return;
  }
  // The url is shown by explain and quoted in errors, logs and the run
  // record; a password in it would be too (so this message does not quote
  // it either).
  if (HasUserInfo(*url)) {
    d.Error(s.command_line,
            "mcp server '" + s.name +
                "': 'url' carries a user name or password (before '@'), "
                "which explain, errors and logs would show; send credentials "
                "in 'headers:' instead, e.g. Authorization: \"Basic "
                "${MCP_AUTH}\"");
    return;
  }
  s.url = *url;
}

// `command:` (stdio) or `url:` (Streamable HTTP): exactly one.
void ReadServerEndpoint(MapReader& r, McpServerDef& s, Diagnostics& d) {
  if (!r.Has("url")) return ReadServerCommand(r, s, d);
  if (r.Has("command")) {
    r.Take("command");
    r.Take("url");
    d.Error(r.KeyLine("url"),
            "mcp server '" + s.name + "' has both 'command' (line " +
                std::to_string(r.KeyLine("command")) +
                ") and 'url' — give one: a command steps starts (stdio) or "
                "the url of a running server (Streamable HTTP)");
    return;
  }
  ReadServerUrl(r, s, d);
}

// `env:` goes to a command steps starts; `headers:` to a server at a url.
void ReadServerEnvAndHeaders(MapReader& r, McpServerDef& s, Diagnostics& d) {
  const std::string what = "mcp server '" + s.name + "'";
  const bool by_url = r.Has("url") || !s.url.empty();
  if (r.Has("env") && by_url) {
    r.Take("env");
    d.Error(r.KeyLine("env"),
            what +
                ": 'env' is for a server steps starts ('command:'); a "
                "server at a url runs on its own — to pass it a secret, "
                "use 'headers:' (values may use ${NAME})");
  } else if (auto env = ReadEnv(r.Take("env"), "env", d)) {
    s.env = *env;
  }
  YAML::Node headers = r.Take("headers");
  if (!headers.IsDefined() || headers.IsNull()) return;
  if (!by_url) {
    d.Error(r.KeyLine("headers"),
            what +
                ": 'headers' is for a server at a 'url:'; a command "
                "server gets no HTTP requests (use 'env:')");
    return;
  }
  if (auto h = ReadHeaderMap(
          headers, s.name + ".headers",
          {"accept", "mcp-session-id", "mcp-protocol-version", "last-event-id"},
          d)) {
    s.headers = std::move(*h);
  }
}

void ReadServerDuration(MapReader& r, const std::string& key, bool zero_ok,
                        McpServerDef& s, Written<Millis>& out, Diagnostics& d) {
  YAML::Node n = r.Take(key);
  if (!n.IsDefined()) return;
  out.line = r.KeyLine(key);
  auto v = ReadDuration(n, key, std::nullopt, d);
  if (!v) return;
  if (v->count() < 0 || (!zero_ok && v->count() == 0)) {
    d.Error(out.line,
            "mcp server '" + s.name + "': '" + key + "' must be " +
                (zero_ok ? "0 (no limit of its own) or positive" : "positive") +
                ", e.g. 30s");
    return;
  }
  out.value = *v;
}

void ReadServer(const YAML::Node& n, Pipeline& p, Diagnostics& d) {
  if (!n.IsMap()) {
    d.Error(LineOf(n),
            "each entry of 'mcp_servers' must be a mapping with name and "
            "command or url, not " +
                DescribeNodeType(n));
    return;
  }
  MapReader r(n, "an mcp server", d);
  McpServerDef s;
  s.line = LineOf(n);
  ReadServerName(r, s, p, d);
  ReadServerEndpoint(r, s, d);
  ReadServerEnvAndHeaders(r, s, d);
  ReadServerDuration(r, "startup_timeout", false, s, s.startup_timeout, d);
  ReadServerDuration(r, "tool_timeout", true, s, s.tool_timeout, d);
  // Unknown keys are errors: a misspelt timeout would leave the server
  // without the limit its author meant.
  for (const std::string& key : r.Untaken()) {
    r.Take(key);
    d.Error(r.KeyLine(key),
            "unknown key '" + key + "' in mcp server '" + s.name +
                "' (an mcp server has name, command or url, env (with a "
                "command), headers (with a url), startup_timeout, "
                "tool_timeout)");
  }
  if (!s.name.empty()) p.mcp_servers.push_back(std::move(s));
}

}  // namespace

void ReadMcpServers(const YAML::Node& n, Pipeline& p, Diagnostics& d) {
  ReadList(n, "mcp_servers", "a list of servers", d,
           [&](const YAML::Node& item) { ReadServer(item, p, d); });
}

}  // namespace steps::pipeline::internal
