#include "tools/json_schema.h"

#include <cmath>
#include <set>
#include <string_view>

namespace steps {
namespace {

using nlohmann::json;

constexpr const char* kTypeNames[] = {"object",  "array",   "string", "number",
                                      "integer", "boolean", "null"};
constexpr const char* kAnnotations[] = {"description", "title", "default",
                                        "examples", "$comment"};
constexpr const char* kSupported =
    "type, properties, required, additionalProperties, enum, items, "
    "minItems, maxItems, minimum, maximum, minLength, maxLength, pattern; "
    "annotations: description, title, default, examples, $comment";

bool IsTypeName(const json& v) {
  if (!v.is_string()) return false;
  for (const char* t : kTypeNames) {
    if (v.get_ref<const std::string&>() == t) return true;
  }
  return false;
}

bool IsAnnotation(std::string_view key) {
  for (const char* a : kAnnotations) {
    if (key == a) return true;
  }
  return false;
}

bool IsCount(const json& v) {
  return v.is_number_unsigned() ||
         (v.is_number_integer() && v.get<int64_t>() >= 0);
}

Status CheckSchemaNode(const json& node, const std::string& path, int depth);

Status CheckType(const json& v, const std::string& where) {
  if (IsTypeName(v)) return Status::Ok();
  if (v.is_array() && !v.empty()) {
    std::set<std::string> seen;
    for (const json& t : v) {
      if (!IsTypeName(t) || !seen.insert(t.get<std::string>()).second) {
        return InvalidArgument(where +
                               ": each entry must be a distinct type "
                               "name (object, array, string, number, "
                               "integer, boolean, null)");
      }
    }
    return Status::Ok();
  }
  return InvalidArgument(where +
                         ": must be a type name (object, array, string, "
                         "number, integer, boolean, null) or a list of them");
}

Status CheckPattern(const json& v, const std::string& where) {
  if (!v.is_string()) return InvalidArgument(where + ": must be a string");
  const std::string& p = v.get_ref<const std::string&>();
  if (Result<Pattern> re = Pattern::Compile(p); !re.ok()) {
    return InvalidArgument(where + ": not a valid regular expression (" +
                           re.status().message() + ")");
  }
  return Status::Ok();
}

Status CheckProperties(const json& v, const std::string& where, int depth) {
  if (!v.is_object()) {
    return InvalidArgument(where +
                           ": must be a mapping of argument names "
                           "to schemas");
  }
  for (const auto& [name, sub] : v.items()) {
    if (Status s = CheckSchemaNode(sub, where + "." + name, depth + 1);
        !s.ok()) {
      return s;
    }
  }
  return Status::Ok();
}

Status CheckKeyword(const std::string& key, const json& v,
                    const std::string& path, int depth) {
  const std::string where = path + "." + key;
  if (IsAnnotation(key)) return Status::Ok();
  if (key == "type") return CheckType(v, where);
  if (key == "properties") return CheckProperties(v, where, depth);
  if (key == "items") return CheckSchemaNode(v, where, depth + 1);
  if (key == "pattern") return CheckPattern(v, where);
  if (key == "required") {
    if (!v.is_array())
      return InvalidArgument(where + ": must be a list of names");
    for (const json& r : v) {
      if (!r.is_string()) {
        return InvalidArgument(where + ": must be a list of names");
      }
    }
    return Status::Ok();
  }
  if (key == "additionalProperties") {
    if (v.is_boolean()) return Status::Ok();
    return InvalidArgument(where +
                           ": must be true or false (schemas for "
                           "additional properties are not supported)");
  }
  if (key == "enum") {
    if (v.is_array() && !v.empty()) return Status::Ok();
    return InvalidArgument(where + ": must be a non-empty list of values");
  }
  if (key == "minimum" || key == "maximum") {
    if (v.is_number()) return Status::Ok();
    return InvalidArgument(where + ": must be a number");
  }
  if (key == "minLength" || key == "maxLength" || key == "minItems" ||
      key == "maxItems") {
    if (IsCount(v)) return Status::Ok();
    return InvalidArgument(where + ": must be a non-negative integer");
  }
  return InvalidArgument(path + ": unknown keyword '" + key +
                         "' (supported: " + kSupported + ")");
}

Status CheckSchemaNode(const json& node, const std::string& path, int depth) {
  if (depth > kMaxSchemaDepth) {
    return InvalidArgument(path + ": nested deeper than " +
                           std::to_string(kMaxSchemaDepth) + " levels");
  }
  if (!node.is_object()) {
    return InvalidArgument(path + ": a schema must be a mapping, not " +
                           std::string(node.type_name()));
  }
  for (const auto& [key, v] : node.items()) {
    if (Status s = CheckKeyword(key, v, path, depth); !s.ok()) return s;
  }
  return Status::Ok();
}

// --- validation -------------------------------------------------------------

struct Validation {
  size_t max_errors;
  std::vector<std::string> errors;

  bool full() const { return errors.size() >= max_errors; }
  void Add(const std::string& path, const std::string& what) {
    if (full()) return;
    std::string where =
        path.empty()
            ? "the arguments"
            : "argument " + json(path).dump(-1, ' ', false,
                                            json::error_handler_t::replace);
    errors.push_back(where + ": " + what);
  }
};

// The schema type a value has: integers (and whole floats) are "integer".
std::string TypeOf(const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number_float()) return "number";
  return v.type_name();
}

bool HasType(const json& v, const std::string& type) {
  if (type == "integer") {
    if (v.is_number_integer() || v.is_number_unsigned()) return true;
    if (!v.is_number_float()) return false;
    double d = v.get<double>();
    return std::isfinite(d) && d == std::floor(d);
  }
  if (type == "number") return v.is_number();
  return v.type_name() == type;
}

bool TypeMatches(const json& v, const json& type, std::string& expected) {
  if (type.is_string()) {
    expected = type.get<std::string>();
    return HasType(v, expected);
  }
  for (const json& t : type) {
    expected += (expected.empty() ? "" : " or ") + t.get<std::string>();
    if (HasType(v, t.get<std::string>())) return true;
  }
  return false;
}

// Characters (code points) of a UTF-8 string.
size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string Dump(const json& v) {
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

void Validate(const json& schema, const json& v, const std::string& path,
              Validation& out);

void ValidateString(const json& schema, const std::string& s,
                    const std::string& path, Validation& out) {
  size_t chars = CodePoints(s);
  if (auto it = schema.find("minLength");
      it != schema.end() && chars < it->get<uint64_t>()) {
    out.Add(path, "must be at least " + std::to_string(it->get<uint64_t>()) +
                      " characters long, not " + std::to_string(chars));
  }
  if (auto it = schema.find("maxLength");
      it != schema.end() && chars > it->get<uint64_t>()) {
    out.Add(path, "must be at most " + std::to_string(it->get<uint64_t>()) +
                      " characters long, not " + std::to_string(chars));
  }
  auto it = schema.find("pattern");
  if (it == schema.end()) return;
  const std::string& pattern = it->get_ref<const std::string&>();
  // CheckSchema refused a pattern that does not compile.
  Result<Pattern> re = Pattern::Compile(pattern);
  if (!re.ok() || !re->Search(s)) {
    out.Add(path, "does not match pattern " + Dump(*it));
  }
}

void ValidateNumber(const json& schema, const json& v, const std::string& path,
                    Validation& out) {
  double d = v.get<double>();
  if (auto it = schema.find("minimum");
      it != schema.end() && d < it->get<double>()) {
    out.Add(path, "must be at least " + Dump(*it) + ", not " + Dump(v));
  }
  if (auto it = schema.find("maximum");
      it != schema.end() && d > it->get<double>()) {
    out.Add(path, "must be at most " + Dump(*it) + ", not " + Dump(v));
  }
}

void ValidateArray(const json& schema, const json& v, const std::string& path,
                   Validation& out) {
  if (auto it = schema.find("minItems");
      it != schema.end() && v.size() < it->get<uint64_t>()) {
    out.Add(path, "must hold at least " + Dump(*it) + " items, not " +
                      std::to_string(v.size()));
  }
  if (auto it = schema.find("maxItems");
      it != schema.end() && v.size() > it->get<uint64_t>()) {
    out.Add(path, "must hold at most " + Dump(*it) + " items, not " +
                      std::to_string(v.size()));
  }
  auto items = schema.find("items");
  if (items == schema.end()) return;
  for (size_t i = 0; i < v.size() && !out.full(); ++i) {
    Validate(*items, v[i], path + "[" + std::to_string(i) + "]", out);
  }
}

void ValidateObject(const json& schema, const json& v, const std::string& path,
                    Validation& out) {
  const std::string prefix = path.empty() ? "" : path + ".";
  if (auto it = schema.find("required"); it != schema.end()) {
    for (const json& name : *it) {
      if (!v.contains(name.get<std::string>())) {
        out.Add(path, "missing required argument " +
                          Dump(json(prefix + name.get<std::string>())));
      }
    }
  }
  auto props = schema.find("properties");
  auto extra = schema.find("additionalProperties");
  bool closed = extra != schema.end() && !extra->get<bool>();
  for (const auto& [name, value] : v.items()) {
    if (out.full()) return;
    bool known = props != schema.end() && props->contains(name);
    if (known) {
      Validate(props->at(name), value, prefix + name, out);
    } else if (closed) {
      std::string allowed;
      if (props != schema.end()) {
        for (const auto& [p, unused] : props->items()) {
          allowed += (allowed.empty() ? "" : ", ") + p;
        }
      }
      out.Add(prefix + name, "unexpected argument (allowed: " +
                                 (allowed.empty() ? "none" : allowed) + ")");
    }
  }
}

void Validate(const json& schema, const json& v, const std::string& path,
              Validation& out) {
  if (out.full()) return;
  if (auto type = schema.find("type"); type != schema.end()) {
    std::string expected;
    if (!TypeMatches(v, *type, expected)) {
      out.Add(path, "expected " + expected + ", got " + TypeOf(v));
      return;
    }
  }
  if (auto e = schema.find("enum"); e != schema.end()) {
    bool found = false;
    for (const json& option : *e) found = found || option == v;
    if (!found) {
      std::string options;
      for (const json& option : *e) {
        options += (options.empty() ? "" : ", ") + Dump(option);
      }
      out.Add(path, "must be one of " + options + ", not " + Dump(v));
    }
  }
  if (v.is_string()) {
    ValidateString(schema, v.get_ref<const std::string&>(), path, out);
  } else if (v.is_number()) {
    ValidateNumber(schema, v, path, out);
  } else if (v.is_array()) {
    ValidateArray(schema, v, path, out);
  } else if (v.is_object()) {
    ValidateObject(schema, v, path, out);
  }
}

}  // namespace

Status CheckArgumentsSchema(const json& schema) {
  if (!schema.is_object()) {
    return InvalidArgument(
        "parameters: must be a mapping (a JSON Schema with "
        "type: object), not " +
        std::string(schema.type_name()));
  }
  auto type = schema.find("type");
  if (type == schema.end() || *type != "object") {
    return InvalidArgument(
        "parameters: must have 'type: object' at the top "
        "(a tool's arguments are an object)");
  }
  return CheckSchemaNode(schema, "parameters", 0);
}

Status CheckSchema(const json& schema, const std::string& where) {
  return CheckSchemaNode(schema, where, 0);
}

std::vector<std::string> ValidateArguments(const json& schema,
                                           const json& value,
                                           size_t max_errors) {
  Validation out{max_errors == 0 ? 1 : max_errors, {}};
  Validate(schema, value, "", out);
  return std::move(out.errors);
}

}  // namespace steps
