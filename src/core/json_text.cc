#include "core/json_text.h"

#include "core/utf8.h"

namespace steps {

std::string DumpJson(const nlohmann::json& value, int indent) {
  // With error_handler replace, dump() substitutes U+FFFD for invalid UTF-8
  // instead of throwing; it has no other failure for a json value.
  return value.dump(indent, ' ', /*ensure_ascii=*/false,
                    nlohmann::json::error_handler_t::replace);
}

void AppendJsonString(std::string& out, std::string_view text) {
  if (!IsValidUtf8(text)) {
    // Where bytes are replaced is the serialiser's own rule: follow it.
    out += DumpJson(nlohmann::json(std::string(text)));
    return;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  size_t plain = 0;  // Start of the run of bytes written as they are.
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(text, plain, i - plain);
    plain = i + 1;
    out += '\\';
    switch (c) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '\b':
        out += 'b';
        break;
      case '\t':
        out += 't';
        break;
      case '\n':
        out += 'n';
        break;
      case '\f':
        out += 'f';
        break;
      case '\r':
        out += 'r';
        break;
      default:
        out += "u00";
        out += kHex[c >> 4];
        out += kHex[c & 0xF];
    }
  }
  out.append(text, plain, text.size() - plain);
  out += '"';
}

bool JsonDepthWithin(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > max_depth) return false;
        break;
      case ']':
      case '}':
        // Unbalanced closers are the parser's to refuse.
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return true;
}

}  // namespace steps
