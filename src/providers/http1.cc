#include "providers/http1.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/trim.h"

namespace steps::http1 {

namespace {

constexpr std::string_view kScheme = "http://";

// RFC 9110 tchar.
bool IsTokenChar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) !=
         std::string_view::npos;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return IsTokenChar(static_cast<unsigned char>(c));
  });
}

// Printable ASCII without space: what a URL may hold unescaped.
bool IsUrlChar(char c) { return c > 0x20 && c < 0x7f; }

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(),
                    [](char x, char y) { return Lower(x) == Lower(y); });
}

// A host name's bytes (RFC 3986 unreserved, which is all a name resolver
// takes): letters, digits, '-', '.', '_' and '~'.
bool IsHostChar(char c) {
  return (c >= '0' && c <= '9') || (Lower(c) >= 'a' && Lower(c) <= 'z') ||
         c == '-' || c == '.' || c == '_' || c == '~';
}

// Decimal digits only, no sign, at most 19 digits (under 2^63).
std::optional<uint64_t> ParseDecimal(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

// At most `max` bytes of what a server sent, for a message: bytes that are
// not printable ASCII (escapes, NUL, UTF-8) become '?', so that a hostile
// answer cannot write control sequences into a terminal or a log.
std::string Printable(std::string_view s, size_t max = 40) {
  std::string out(s.substr(0, max));
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return out;
}

// Whether the comma-separated list `value` holds `word` (any case).
bool ListHas(std::string_view value, std::string_view word) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (EqualsIgnoringCase(TrimBlanks(value.substr(0, comma)), word))
      return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// The path with its "." and ".." segments resolved (RFC 3986 5.2.4), as
// libcurl sends it: "/v1/../x" is "/x". REQUIRES: it begins with '/'.
std::string RemoveDotSegments(std::string_view path) {
  std::vector<std::string_view> kept;
  bool slash_at_end = false;
  size_t at = 1;
  while (true) {
    const size_t slash = path.find('/', at);
    const bool last = slash == std::string_view::npos;
    const std::string_view segment =
        path.substr(at, last ? std::string_view::npos : slash - at);
    if (segment == "." || segment == "..") {
      if (segment == ".." && !kept.empty()) kept.pop_back();
      slash_at_end = last;
    } else {
      kept.push_back(segment);
      slash_at_end = false;
    }
    if (last) break;
    at = slash + 1;
  }
  std::string out;
  for (std::string_view segment : kept) out.append("/").append(segment);
  if (slash_at_end || out.empty()) out.push_back('/');
  return out;
}

}  // namespace

std::optional<PlainUrl> ParsePlainUrl(std::string_view url) {
  if (url.size() < kScheme.size() ||
      !EqualsIgnoringCase(url.substr(0, kScheme.size()), kScheme))
    return std::nullopt;
  url.remove_prefix(kScheme.size());
  if (!std::all_of(url.begin(), url.end(), IsUrlChar)) return std::nullopt;
  if (url.find('#') != std::string_view::npos) return std::nullopt;
  const size_t slash = url.find_first_of("/?");
  std::string_view authority = url.substr(0, slash);
  PlainUrl out;
  out.target = slash == std::string_view::npos ? "/" : url.substr(slash);
  if (out.target.front() == '?') out.target.insert(0, "/");
  if (const size_t query = out.target.find('?');
      out.target.substr(0, query).find("/.") != std::string::npos) {
    out.target = RemoveDotSegments(std::string_view(out.target).substr(0, query)) +
                 (query == std::string::npos ? "" : out.target.substr(query));
  }
  if (authority.find('@') != std::string_view::npos) return std::nullopt;
  std::string_view host = authority;
  std::string_view port;
  bool port_given = false;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = authority.substr(1, close - 1);
    const std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port = rest.substr(1);
      port_given = true;
    }
    if (host.empty() || host.find_first_not_of("0123456789abcdefABCDEF:.") !=
                            std::string_view::npos)
      return std::nullopt;
  } else {
    if (const size_t colon = authority.find(':');
        colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
      port_given = true;
    }
    if (host.empty() || !std::all_of(host.begin(), host.end(), IsHostChar))
      return std::nullopt;
  }
  if (port_given) {
    const std::optional<uint64_t> n = ParseDecimal(port);
    if (!n || *n == 0 || *n > 65535) return std::nullopt;
    out.port = static_cast<uint16_t>(*n);
  }
  out.host = std::string(host);
  out.authority = std::string(authority);
  return out;
}

Result<std::string> PostHead(const PlainUrl& url, const HttpHeaders& headers,
                             size_t body_bytes) {
  std::string head;
  head.reserve(128 + headers.size() * 48);
  head.append("POST ").append(url.target).append(" HTTP/1.1\r\nHost: ");
  head.append(url.authority).append("\r\nContent-Length: ");
  head.append(std::to_string(body_bytes)).append("\r\n");
  for (const auto& [name, value] : headers) {
    if (!IsToken(name))
      return InvalidArgument("HTTP header name \"" + name +
                             "\" is not a token (RFC 9110)");
    if (EqualsIgnoringCase(name, "Host") ||
        EqualsIgnoringCase(name, "Content-Length") ||
        EqualsIgnoringCase(name, "Transfer-Encoding"))
      return InvalidArgument("HTTP header " + name +
                             " is set by the transport, not by a request");
    if (value.find_first_of(std::string_view("\r\n\0", 3)) !=
        std::string::npos)
      return InvalidArgument("HTTP header " + name +
                             " holds a line break or NUL");
    head.append(name).append(": ").append(value).append("\r\n");
  }
  head.append("\r\n");
  return head;
}

ResponseParser::ResponseParser(Limits limits, BodySink sink)
    : limits_(limits), sink_(std::move(sink)) {}

bool ResponseParser::keep_alive() const {
  return state_ == State::kDone && !close_ && extra_bytes_ == 0;
}

ResponseParser::State ResponseParser::Fail(std::string message) {
  error_ = std::move(message);
  state_ = State::kError;
  return state_;
}

bool ResponseParser::TakeLine(std::string_view& in, std::string_view& line,
                              size_t limit) {
  // partial_ never grows past limit + 2 bytes (a line at the limit and its
  // CR, and one byte more): a line that long fails.
  const size_t room = limit + 2 - std::min(limit + 2, partial_.size());
  const size_t lf = in.find('\n');
  if (lf == std::string_view::npos) {
    partial_.append(in.substr(0, room));
    in = {};
    return false;
  }
  if (partial_.empty()) {
    line = in.substr(0, lf);
  } else {
    partial_.append(in.substr(0, std::min(lf, room)));
    line = partial_;
  }
  in.remove_prefix(lf + 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return true;
}

ResponseParser::State ResponseParser::Feed(std::string_view in) {
  while (state_ == State::kMore && !in.empty()) {
    switch (phase_) {
      case Phase::kHead:
      case Phase::kTrailers:
      case Phase::kChunkSize:
      case Phase::kChunkDataEnd: {
        // A chunk's data ends with an empty line.
        const size_t limit = phase_ == Phase::kChunkSize      ? 1024
                             : phase_ == Phase::kChunkDataEnd ? 0
                                                             : limits_.max_line_bytes;
        const size_t before = in.size();
        std::string_view line;
        const bool whole = TakeLine(in, line, limit);
        const bool too_long =
            whole ? line.size() > limit : partial_.size() > limit + 1;
        if (phase_ == Phase::kHead || phase_ == Phase::kTrailers) {
          head_bytes_ += before - in.size();
          if (head_bytes_ > limits_.max_head_bytes)
            return Fail("the response's head is longer than " +
                        std::to_string(limits_.max_head_bytes) + " bytes");
          if (too_long)
            return Fail("a line of the response's head is longer than " +
                        std::to_string(limits_.max_line_bytes) + " bytes");
        } else if (too_long) {
          return Fail(phase_ == Phase::kChunkSize
                          ? "a chunk's size line is longer than 1024 bytes"
                          : "a chunk's data is not followed by a line end");
        }
        if (!whole) break;
        State s = State::kMore;
        if (phase_ == Phase::kHead) {
          s = HeadLine(line);
        } else if (phase_ == Phase::kTrailers) {
          if (line.empty()) phase_ = Phase::kEnd;
        } else if (phase_ == Phase::kChunkSize) {
          s = ChunkSizeLine(line);
        } else {
          phase_ = Phase::kChunkSize;  // The line is empty (limit 0).
        }
        partial_.clear();
        if (s != State::kMore) return s;
        break;
      }
      case Phase::kLength:
      case Phase::kChunkData: {
        const size_t n =
            static_cast<size_t>(std::min<uint64_t>(left_, in.size()));
        left_ -= n;
        if (Body(in.substr(0, n)) != State::kMore) return state_;
        in.remove_prefix(n);
        if (left_ == 0) {
          phase_ = phase_ == Phase::kLength ? Phase::kEnd
                                            : Phase::kChunkDataEnd;
        }
        break;
      }
      case Phase::kClose:
        if (Body(in) != State::kMore) return state_;
        in = {};
        break;
      case Phase::kEnd:
        break;
    }
    if (phase_ == Phase::kEnd) state_ = State::kDone;
  }
  if (phase_ == Phase::kEnd) state_ = State::kDone;
  if (state_ == State::kDone) extra_bytes_ += in.size();
  return state_;
}

ResponseParser::State ResponseParser::End() {
  if (state_ != State::kMore) return state_;
  if (phase_ == Phase::kClose) {
    phase_ = Phase::kEnd;
    state_ = State::kDone;
    return state_;
  }
  if (phase_ == Phase::kHead)
    return Fail(first_line_ && partial_.empty() && head_bytes_ == 0
                    ? "the server closed the connection without answering"
                    : "the server closed the connection inside the "
                      "response's head");
  return Fail("the server closed the connection before the response's end");
}

ResponseParser::State ResponseParser::HeadLine(std::string_view line) {
  if (first_line_) {
    first_line_ = false;
    return StatusLine(line);
  }
  if (line.empty()) return HeadEnd();
  return HeaderLine(line);
}

ResponseParser::State ResponseParser::StatusLine(std::string_view line) {
  // "HTTP/1.1 200 OK". As libcurl reads it: the name in any case, the
  // version 1.0, 1.1, 2 or 2.0 (an HTTP/2 server's status line over this
  // connection reads as HTTP/1.1), whatever follows the status's three
  // digits ignored.
  const std::string_view bad = "the server's answer is not HTTP/1.x (it began \"";
  if (line.size() < 5 || !EqualsIgnoringCase(line.substr(0, 5), "HTTP/"))
    return Fail(std::string(bad) + Printable(line) + "\")");
  std::string_view rest = line.substr(5);
  const size_t space = rest.find(' ');
  const std::string_view version = rest.substr(0, space);
  if (version == "1.0") {
    minor_version_ = 0;
  } else if (version == "1.1" || version == "2" || version == "2.0") {
    minor_version_ = 1;
  } else {
    return Fail(std::string(bad) + Printable(line) + "\")");
  }
  rest = space == std::string_view::npos ? std::string_view()
                                         : rest.substr(space + 1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  const std::optional<uint64_t> status = ParseDecimal(rest.substr(0, 3));
  if (rest.size() < 3 || !status || *status < 100)
    return Fail("the server's status \"" + Printable(rest.substr(0, 3)) +
                "\" is not a number from 100 to 999");
  status_ = static_cast<int>(*status);
  headers_.clear();
  return State::kMore;
}

ResponseParser::State ResponseParser::HeaderLine(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t') {
    // An obsolete line folding: the value goes on, after one space (RFC
    // 9112 5.2).
    if (headers_.empty())
      return Fail("the response's head begins with a folded line");
    const std::string_view more = TrimBlanks(line);
    if (more.find('\0') != std::string_view::npos)
      return Fail("the response's header " + Printable(headers_.back().first) +
                  " holds a NUL");
    std::string& value = headers_.back().second;
    if (!more.empty()) value.append(value.empty() ? "" : " ").append(more);
    return State::kMore;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !IsToken(line.substr(0, colon)))
    return Fail("the response's head holds a line that is no header");
  const std::string_view value = TrimBlanks(line.substr(colon + 1));
  if (value.find_first_of(std::string_view("\r\0", 2)) !=
      std::string_view::npos)
    return Fail("the response's header " + Printable(line.substr(0, colon)) +
                " holds a CR or NUL");
  headers_.emplace_back(std::string(line.substr(0, colon)), std::string(value));
  return State::kMore;
}

ResponseParser::State ResponseParser::HeadEnd() {
  if (status_ >= 100 && status_ < 200) {
    if (status_ == 101)
      return Fail("the server switched protocols, which was not asked");
    // An interim answer (100 Continue, 103 Early Hints): the final one
    // follows.
    first_line_ = true;
    headers_.clear();
    return State::kMore;
  }
  std::optional<uint64_t> length;
  bool chunked = false;
  bool has_encoding = false;
  bool keep_alive_asked = false;
  close_ = false;
  for (const auto& [name, value] : headers_) {
    if (EqualsIgnoringCase(name, "Content-Length")) {
      // A list of one number repeated is that number (RFC 9110 8.6).
      std::string_view list = value;
      while (true) {
        const size_t comma = list.find(',');
        std::optional<uint64_t> n =
            ParseDecimal(TrimBlanks(list.substr(0, comma)));
        if (!n || (length && *length != *n))
          return Fail("the response's Content-Length \"" + Printable(value) +
                      "\" is not one number");
        length = n;
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
      }
    } else if (EqualsIgnoringCase(name, "Transfer-Encoding")) {
      if (EqualsIgnoringCase(TrimBlanks(value), "identity")) continue;
      if (has_encoding || !EqualsIgnoringCase(value, "chunked"))
        return Fail("the response's Transfer-Encoding \"" + Printable(value) +
                    "\" is not chunked, the one this client reads");
      has_encoding = chunked = true;
    } else if (EqualsIgnoringCase(name, "Connection")) {
      if (ListHas(value, "close")) close_ = true;
      if (ListHas(value, "keep-alive")) keep_alive_asked = true;
    }
  }
  if (minor_version_ == 0 && !keep_alive_asked) close_ = true;
  if (status_ == 204 || status_ == 304) {
    phase_ = Phase::kEnd;
  } else if (chunked) {
    // Transfer-Encoding wins over Content-Length (RFC 9112 6.3), and such a
    // connection is not kept: the two may be a smuggling attempt.
    if (length) close_ = true;
    phase_ = Phase::kChunkSize;
  } else if (length) {
    left_ = *length;
    phase_ = left_ == 0 ? Phase::kEnd : Phase::kLength;
  } else {
    close_ = true;
    phase_ = Phase::kClose;
  }
  return State::kMore;
}

ResponseParser::State ResponseParser::ChunkSizeLine(std::string_view line) {
  const std::string_view size = TrimBlanks(line.substr(0, line.find(';')));
  if (size.empty() || size.size() > 15 ||
      size.find_first_not_of("0123456789abcdefABCDEF") !=
          std::string_view::npos)
    return Fail("a chunk's size \"" + Printable(size, 20) +
                "\" is not a hexadecimal number under 2^60");
  uint64_t n = 0;
  for (char c : size) {
    const int digit = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
    n = n * 16 + static_cast<uint64_t>(digit);
  }
  left_ = n;
  phase_ = n == 0 ? Phase::kTrailers : Phase::kChunkData;
  return State::kMore;
}

ResponseParser::State ResponseParser::Body(std::string_view piece) {
  if (!piece.empty() && sink_ && !sink_(piece)) state_ = State::kStopped;
  return state_;
}

}  // namespace steps::http1
