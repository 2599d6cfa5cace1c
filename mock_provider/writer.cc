// WriteMockScript (declared in script.h): a script as YAML text that reads
// back to the same entries.
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/utf8.h"
#include "mock_provider/script.h"

namespace steps {
namespace {

using nlohmann::json;

// A JSON string literal, which YAML reads as a double-quoted scalar with
// the same escapes. Bytes that are not UTF-8 become U+FFFD.
std::string Quoted(const std::string& text) {
  return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

// True when `text` reads back unchanged as a literal block scalar: it
// spans lines, holds no control character but newlines and tabs, and its
// first line neither is empty nor starts with a space (which would need an
// indentation indicator).
bool FitsLiteralBlock(const std::string& text) {
  if (text.find('\n') == std::string::npos) return false;
  if (text.front() == ' ' || text.front() == '\n' || text.front() == '\t') {
    return false;
  }
  for (unsigned char c : text) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return false;
  }
  // Lines of nothing but spaces would be read as indentation.
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.find_first_not_of(" \t") == std::string::npos) {
      return false;
    }
  }
  // Invalid UTF-8 is written quoted, where it becomes U+FFFD.
  return IsValidUtf8(text);
}

// `text` as the value of a key at `indent` spaces: quoted on the same line,
// or a literal block below it indented two more.
std::string Scalar(const std::string& text, int indent) {
  if (!FitsLiteralBlock(text)) return Quoted(text);
  size_t trailing = 0;
  while (trailing < text.size() && text[text.size() - 1 - trailing] == '\n') {
    ++trailing;
  }
  std::string out = trailing == 0 ? "|-" : trailing == 1 ? "|" : "|+";
  const std::string pad(static_cast<size_t>(indent + 2), ' ');
  std::string body = text.substr(0, text.size() - trailing);
  size_t start = 0;
  while (start <= body.size()) {
    size_t end = body.find('\n', start);
    if (end == std::string::npos) end = body.size();
    std::string line = body.substr(start, end - start);
    out += "\n" + (line.empty() ? "" : pad + line);
    start = end + 1;
  }
  for (size_t i = 1; i < trailing; ++i) out += "\n";
  return out;
}

void WriteExpect(const MockExpect& e, std::ostream& out) {
  const std::string pad = "      ";
  out << "    expect:\n";
  if (e.model) out << pad << "model: " << Quoted(*e.model) << "\n";
  if (e.tools) {
    out << pad << "tools: [";
    for (size_t i = 0; i < e.tools->size(); ++i) {
      out << (i ? ", " : "") << Quoted((*e.tools)[i]);
    }
    out << "]\n";
  }
  if (e.system_contains) {
    out << pad << "system_contains: " << Scalar(*e.system_contains, 6) << "\n";
  }
  if (e.last_is) out << pad << "last_is: " << Scalar(*e.last_is, 6) << "\n";
  if (e.last_contains) {
    out << pad << "last_contains: " << Scalar(*e.last_contains, 6) << "\n";
  }
  if (e.tool_result) {
    out << pad << "tool_result: " << (*e.tool_result ? "true" : "false")
        << "\n";
  }
  if (e.request) out << pad << "request: " << *e.request << "\n";
  if (e.messages) out << pad << "messages: " << *e.messages << "\n";
  if (e.body) out << pad << "body: " << *e.body << "\n";
}

// One entry as a list item at two spaces (its keys at four).
void WriteEntry(const MockEntry& entry, std::ostream& out) {
  if (!entry.note.empty()) {
    std::istringstream lines(entry.note);
    for (std::string line; std::getline(lines, line);) {
      out << "  # " << line << "\n";
    }
  }
  std::ostringstream keys;
  using Action = MockEntry::Action;
  const bool says = entry.action == Action::kSay ||
                    (entry.action == Action::kHang &&
                     (!entry.text.empty() || !entry.calls.empty()));
  if (says && (!entry.text.empty() || entry.calls.empty())) {
    keys << "    say: " << Scalar(entry.text, 4) << "\n";
  }
  if (says && !entry.calls.empty()) {
    keys << "    call:\n";
    for (const MockToolCall& c : entry.calls) {
      keys << "      - {name: " << Quoted(c.name)
           << ", arguments: " << Quoted(c.arguments);
      if (!c.id.empty()) keys << ", id: " << Quoted(c.id);
      keys << "}\n";
    }
  }
  switch (entry.action) {
    case Action::kStatus:
      keys << "    status: " << entry.status << "\n";
      if (entry.body) keys << "    body: " << Quoted(*entry.body) << "\n";
      break;
    case Action::kHang:
      keys << "    hang: true\n";
      break;
    case Action::kDrop:
      keys << "    drop: true\n";
      break;
    case Action::kGarbage:
      keys << "    garbage: " << Quoted(entry.text) << "\n";
      break;
    case Action::kErrorEvent:
      keys << "    error_event: " << Quoted(entry.text) << "\n";
      break;
    case Action::kDefault:
    case Action::kSay:
      break;
  }
  if (!entry.headers.empty()) {
    keys << "    headers:\n";
    for (const auto& [name, value] : entry.headers) {
      keys << "      " << Quoted(name) << ": " << Quoted(value) << "\n";
    }
  }
  if (entry.delay.count() > 0) {
    keys << "    delay: " << entry.delay.count() << "ms\n";
  }
  if (entry.usage) {
    keys << "    usage: {prompt_tokens: " << entry.usage->prompt_tokens
         << ", completion_tokens: " << entry.usage->completion_tokens;
    if (entry.usage->cost) keys << ", cost: " << json(*entry.usage->cost);
    keys << "}\n";
  }
  if (entry.expect) WriteExpect(*entry.expect, keys);
  std::string text = keys.str();
  if (text.empty()) text = "    expect: {}\n";
  // The first key goes on the item's own line.
  out << "  - " << text.substr(4);
}

}  // namespace

std::string WriteMockScript(const MockScript& script,
                            const std::vector<std::string>& order,
                            const std::string& header) {
  std::ostringstream out;
  if (!header.empty()) {
    std::istringstream lines(header);
    for (std::string line; std::getline(lines, line);) {
      out << (line.empty() ? "#" : "# " + line) << "\n";
    }
  }
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const std::string& k : order) {
    if (script.scripts.count(k) && seen.insert(k).second) keys.push_back(k);
  }
  for (const auto& [k, entries] : script.scripts) {
    if (seen.insert(k).second) keys.push_back(k);
  }
  for (const std::string& k : keys) {
    out << Quoted(k) << ":\n";
    for (const MockEntry& e : script.scripts.at(k)) WriteEntry(e, out);
  }
  if (script.default_entry) {
    std::ostringstream entry;
    WriteEntry(*script.default_entry, entry);
    // The default is one entry, not a list: drop the item's dash.
    std::string text = entry.str();
    std::istringstream lines(text);
    out << "default:\n";
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("  - ", 0) == 0) line = "    " + line.substr(4);
      out << line << "\n";
    }
  }
  return out.str();
}

}  // namespace steps
