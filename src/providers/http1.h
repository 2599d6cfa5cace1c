// HTTP/1.1 over a plain connection, the part a client of a model server
// needs: where a plain `http://` URL points, the head of a POST request,
// and an incremental parser of the response (RFC 9112). The parser is the
// boundary a hostile or broken server meets: every size it reads is
// bounded, every malformed byte is an error with a message, and nothing it
// is fed can make it crash, loop or grow without bound (fuzz/http1_fuzzer).
#ifndef STEPS_PROVIDERS_HTTP1_H_
#define STEPS_PROVIDERS_HTTP1_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "providers/http.h"

namespace steps::http1 {

// A plain `http://` URL, taken apart.
struct PlainUrl {
  // The host as the URL names it, without brackets: "127.0.0.1", "::1",
  // "localhost", "models.internal".
  std::string host;
  uint16_t port = 80;
  // What the Host header says: the host (bracketed when IPv6) and the port
  // when the URL names one.
  std::string authority;
  // The request target: the path and query ("/v1/chat/completions"); "/"
  // when the URL has no path.
  std::string target;
};

// Takes apart "http://HOST[:PORT][/PATH][?QUERY]". Nullopt for any other
// scheme, user information ("http://user@host"), a fragment, a port out of
// range, an empty host, or bytes that may not appear in a URL (controls,
// spaces, non-ASCII).
std::optional<PlainUrl> ParsePlainUrl(std::string_view url);

// The head of a POST of `body_bytes` to `url`, ending with the empty line:
// the request line, Host and Content-Length (which `headers` may not hold:
// they are the transport's), then `headers` in order. An error when a
// header would break the head: a name that is not a token, or a value
// holding CR, LF or NUL (a header an attacker could smuggle a second
// request in).
Result<std::string> PostHead(const PlainUrl& url, const HttpHeaders& headers,
                             size_t body_bytes);

// Parses one response as its bytes arrive. Not thread-safe; one per
// response. Interim (1xx) responses before it are skipped.
class ResponseParser {
 public:
  struct Limits {
    // The most bytes of head (status line and headers, of the final and of
    // any interim response together, and a chunked body's trailers).
    // Default: 300 KiB, as libcurl allows.
    size_t max_head_bytes = 300 * 1024;
    // The most bytes of one line of it. Default: 100 KiB, as libcurl.
    size_t max_line_bytes = 100 * 1024;
  };

  // Called with each piece of the body, decoded from its framing (chunks),
  // in order. Returning false stops the parser: Feed returns kStopped.
  using BodySink = std::function<bool(std::string_view piece)>;

  enum class State {
    kMore,     // Needs more bytes.
    kDone,     // The response is complete.
    kStopped,  // The body sink returned false.
    kError,    // Malformed; error() says how.
  };

  explicit ResponseParser(BodySink sink) : ResponseParser(Limits(), sink) {}
  ResponseParser(Limits limits, BodySink sink);

  // Consumes bytes of the connection. Once the state is not kMore, further
  // calls change nothing and return it; bytes after the end of the
  // response are not consumed (extra_bytes() counts them).
  State Feed(std::string_view bytes);
  // The peer closed the connection: a body that ends with the connection
  // is complete (kDone); anything else unfinished is an error.
  State End();

  State state() const { return state_; }
  const std::string& error() const { return error_; }
  // Whether the head of the final response has been read.
  bool head_done() const { return phase_ > Phase::kHead; }
  // The final response's status and headers (once head_done()).
  int status() const { return status_; }
  const HttpHeaders& headers() const { return headers_; }
  // Once kDone: whether the connection may carry another request (HTTP/1.1
  // without `Connection: close`, or HTTP/1.0 with `keep-alive`; never
  // after a body the close ended, or when the server sent bytes past the
  // response).
  bool keep_alive() const;
  // Bytes fed after the end of the response (a server that sends what was
  // not asked for).
  size_t extra_bytes() const { return extra_bytes_; }

 private:
  enum class Phase {
    kHead,          // Status line and headers.
    kLength,        // A body of content_length_ bytes.
    kClose,         // A body the connection's close ends.
    kChunkSize,     // A chunk's size line.
    kChunkData,     // A chunk's data.
    kChunkDataEnd,  // The CRLF after a chunk's data.
    kTrailers,      // Trailer lines after the last chunk.
    kEnd,
  };

  // Takes one line (without its CRLF or LF) from the input into `line`;
  // false when the input holds no whole line yet (what it holds is kept).
  bool TakeLine(std::string_view& in, std::string_view& line, size_t limit);
  State Fail(std::string message);
  State HeadLine(std::string_view line);
  State StatusLine(std::string_view line);
  State HeaderLine(std::string_view line);
  State HeadEnd();
  State ChunkSizeLine(std::string_view line);
  State Body(std::string_view piece);

  Limits limits_;
  BodySink sink_;
  State state_ = State::kMore;
  Phase phase_ = Phase::kHead;
  std::string error_;
  std::string partial_;  // An unfinished line.
  size_t head_bytes_ = 0;
  bool first_line_ = true;
  int status_ = 0;
  int minor_version_ = 1;
  HttpHeaders headers_;
  uint64_t left_ = 0;  // Of the body (kLength) or the chunk (kChunkData).
  bool close_ = false;  // `Connection: close` (or 1.0 without keep-alive).
  size_t extra_bytes_ = 0;
};

}  // namespace steps::http1

#endif  // STEPS_PROVIDERS_HTTP1_H_
