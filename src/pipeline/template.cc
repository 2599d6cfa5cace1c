#include "pipeline/template.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <vector>

#include "core/json_text.h"
#include "core/trim.h"

namespace steps::pipeline {
namespace {

// JSON text of a value; bytes that are not UTF-8 (a resource version or a
// param may hold any) become U+FFFD instead of an exception.
std::string DumpJson(const nlohmann::json& v) {
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

struct Expression {
  std::vector<std::string> path;  // ".version.ref" -> {"version", "ref"}
  std::vector<std::string> pipes;
  std::optional<std::string> literal;  // {{ "{{" }} renders {{
};

// `{{ "text" }}`: the text as written (no quote or brace escapes inside);
// how a script passes a literal "{{" to another program.
std::optional<std::string> Literal(std::string_view inner) {
  inner = TrimBlanks(inner);
  if (inner.size() < 2 || inner.front() != '"' || inner.back() != '"')
    return std::nullopt;
  inner = inner.substr(1, inner.size() - 2);
  if (inner.find('"') != std::string_view::npos) return std::nullopt;
  return std::string(inner);
}

Result<Expression> Parse(std::string_view inner) {
  Expression e;
  if ((e.literal = Literal(inner))) return e;
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= inner.size(); ++i) {
    if (i == inner.size() || inner[i] == '|') {
      parts.push_back(TrimBlanks(inner.substr(start, i - start)));
      start = i + 1;
    }
  }
  std::string_view path = parts[0];
  if (path.empty() || path[0] != '.') {
    return InvalidArgument("template expression '{{" + std::string(inner) +
                           "}}' must start with a path such as .version.ref");
  }
  path.remove_prefix(1);
  size_t p = 0;
  while (p <= path.size()) {
    size_t dot = path.find('.', p);
    if (dot == std::string_view::npos) dot = path.size();
    std::string_view name = path.substr(p, dot - p);
    if (name.empty() && !(path.empty() && p == 0)) {
      return InvalidArgument("template path '." + std::string(path) +
                             "' has an empty part");
    }
    for (char c : name) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
            c == '-')) {
        return InvalidArgument("template path '." + std::string(path) +
                               "' may hold only letters, digits, '_' and '-'");
      }
    }
    if (!name.empty()) e.path.emplace_back(name);
    p = dot + 1;
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i] != "shellquote" && parts[i] != "json") {
      return InvalidArgument("unknown template pipe '" + std::string(parts[i]) +
                             "' (known: shellquote, json)");
    }
    e.pipes.emplace_back(parts[i]);
  }
  return e;
}

Result<std::string> Evaluate(const Expression& e,
                             const nlohmann::json& context) {
  if (e.literal) return *e.literal;
  const nlohmann::json* v = &context;
  std::string walked;
  for (const std::string& name : e.path) {
    walked += "." + name;
    if (!v->is_object() || !v->contains(name)) {
      return NotFound("template value " + walked + " is not set");
    }
    v = &(*v)[name];
  }
  std::string text = v->is_string() ? v->get<std::string>() : DumpJson(*v);
  for (const std::string& pipe : e.pipes) {
    if (pipe == "shellquote") {
      if (text.find('\0') != std::string::npos) {
        return InvalidArgument(
            "template value " + walked +
            " holds a NUL byte, which no shell argument can carry");
      }
      text = ShellQuote(text);
    } else if (pipe == "json") {
      text = DumpJson(*v);
    }
  }
  return text;
}

Result<std::string> Render(std::string_view text, const nlohmann::json& context,
                           const std::set<std::string>* roots) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{", pos);
    if (open == std::string_view::npos) {
      out.append(text.substr(pos));
      return out;
    }
    size_t close = text.find("}}", open + 2);
    if (close == std::string_view::npos) {
      if (roots) {
        out.append(text.substr(pos));
        return out;
      }
      return InvalidArgument("template has '{{' with no closing '}}'");
    }
    std::string_view inner = text.substr(open + 2, close - open - 2);
    out.append(text.substr(pos, open - pos));
    Result<Expression> e = Parse(inner);
    bool mine = e.ok() && (!roots || e->literal ||
                           (!e->path.empty() && roots->count(e->path[0])));
    if (!mine) {
      if (roots) {
        out.append(text.substr(open, close + 2 - open));
        pos = close + 2;
        continue;
      }
      return e.status();
    }
    Result<std::string> v = Evaluate(*e, context);
    if (!v.ok()) return v.status();
    out += *v;
    pos = close + 2;
  }
}

}  // namespace

std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

Result<std::string> RenderTemplate(std::string_view text,
                                   const nlohmann::json& context) {
  return Render(text, context, nullptr);
}

Result<std::string> RenderTemplateRoots(std::string_view text,
                                        const nlohmann::json& context,
                                        const std::set<std::string>& roots) {
  return Render(text, context, &roots);
}

bool LooksLikeOurs(std::string_view inner) {
  inner = TrimBlanks(inner);
  return !inner.empty() && (inner.front() == '.' || inner.front() == '"');
}

Result<std::vector<TemplateUse>> ScanTemplate(std::string_view text,
                                              bool mixed) {
  std::vector<TemplateUse> uses;
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{", pos);
    if (open == std::string_view::npos) return uses;
    size_t close = text.find("}}", open + 2);
    if (close == std::string_view::npos) {
      if (mixed) return uses;
      return InvalidArgument("template has '{{' with no closing '}}'");
    }
    std::string_view inner = text.substr(open + 2, close - open - 2);
    pos = close + 2;
    if (mixed && !LooksLikeOurs(inner)) continue;
    const std::string written(text.substr(open, close + 2 - open));
    Result<Expression> e = Parse(inner);
    if (!e.ok()) {
      return InvalidArgument(written + ": " + e.status().message());
    }
    TemplateUse use;
    use.written = written;
    use.path = e->path;
    use.pipes = e->pipes;
    use.literal = e->literal.has_value();
    use.line_offset =
        static_cast<int>(std::count(text.begin(), text.begin() + open, '\n'));
    uses.push_back(std::move(use));
  }
}

Status CheckTemplate(std::string_view text) {
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{", pos);
    if (open == std::string_view::npos) return Status::Ok();
    size_t close = text.find("}}", open + 2);
    if (close == std::string_view::npos) {
      return InvalidArgument("template has '{{' with no closing '}}'");
    }
    Result<Expression> e = Parse(text.substr(open + 2, close - open - 2));
    if (!e.ok()) return e.status();
    pos = close + 2;
  }
}

}  // namespace steps::pipeline
