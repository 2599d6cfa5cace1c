// The HTTP seam under every adapter. CurlTransport (providers/curl_transport.h)
// is the real one; the mock provider offers an in-process one, so the same
// adapters and retry policy run against scripts without a socket.
#ifndef STEPS_PROVIDERS_HTTP_H_
#define STEPS_PROVIDERS_HTTP_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/cancel.h"
#include "core/duration.h"

namespace steps {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// The first header named `name` (case-insensitive), if any.
std::optional<std::string> FindHeader(const HttpHeaders& headers,
                                      std::string_view name);

struct HttpRequest {
  // Absolute URL, e.g. "https://api.openai.com/v1/chat/completions".
  std::string url;
  HttpHeaders headers;
  // Sent as a POST body.
  std::string body;
};

// Called with each piece of the response body as it arrives (only for 2xx
// answers). Returning false stops the transfer; the transport then returns
// the response received so far with `stopped_by_reader` set.
using BodyReader = std::function<bool(std::string_view piece)>;

struct TransferOptions {
  // Wall-clock limit on the whole transfer, connecting included. Nullopt =
  // none. (Real time: a transport talks to a real peer.)
  std::optional<Millis> time_limit;
  // Cut the transfer when no body bytes arrive for this long after the
  // headers. Zero = no idle limit. Used for streamed answers.
  Millis idle_limit{0};
  // Bodies larger than this are cut and reported as kTooLarge.
  size_t max_response_bytes = 32 * 1024 * 1024;
  // Cancelling it cuts the transfer within 50 ms.
  CancelToken cancel;
  // Optional; see BodyReader.
  BodyReader reader;
};

struct HttpResponse {
  int status = 0;
  HttpHeaders headers;
  // The whole body (also when a reader saw it piece by piece).
  std::string body;
  bool stopped_by_reader = false;
  // Whether the transfer reused an open connection (keep-alive).
  bool reused_connection = false;
};

enum class TransportErrorKind {
  kConnect,        // Could not resolve or connect.
  kClosed,         // Connection closed or reset: no answer, or a partial one.
  kTimedOut,       // TransferOptions::time_limit passed.
  kIdle,           // TransferOptions::idle_limit passed with no data.
  kCancelled,      // TransferOptions::cancel fired.
  kTooLarge,       // Body exceeded max_response_bytes.
  kNoDescriptors,  // The process (EMFILE) or system (ENFILE) ran out of
                   // file descriptors: no socket could be opened. Not a
                   // connection failure: the server was never tried.
  kUnavailable,    // The transport cannot work in this process (libcurl
                   // could not be loaded). Final: trying again cannot help.
  kOther,          // Anything else (bad URL, TLS setup, out of memory).
};

struct TransportError {
  TransportErrorKind kind = TransportErrorKind::kOther;
  std::string message;
};

// Whether an errno says the process (EMFILE) or the system (ENFILE) is out
// of file descriptors.
bool IsDescriptorShortage(long os_errno);
// The kNoDescriptors error for such an errno, which says which limit.
TransportError DescriptorShortage(long os_errno);

class TransportResult {
 public:
  TransportResult(HttpResponse r) : data_(std::move(r)) {}    // NOLINT
  TransportResult(TransportError e) : data_(std::move(e)) {}  // NOLINT
  bool ok() const { return std::holds_alternative<HttpResponse>(data_); }
  HttpResponse& response() { return std::get<HttpResponse>(data_); }
  const TransportError& error() const {
    return std::get<TransportError>(data_);
  }

 private:
  std::variant<HttpResponse, TransportError> data_;
};

// Sends POST requests. Thread-safe: Post may be called concurrently; each
// call blocks its thread until the response is complete or the transfer
// fails.
class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  virtual TransportResult Post(const HttpRequest& request,
                               const TransferOptions& options) = 0;
};

}  // namespace steps

#endif  // STEPS_PROVIDERS_HTTP_H_
