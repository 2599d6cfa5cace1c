// One HTTP request of the MCP client's Streamable HTTP transport, on
// libcurl: the body streams to a callback as it arrives, and the transfer
// is cut within 50 ms of its deadline or its cancel token. Redirects are
// never followed (a 3xx comes back as it is). A small client of its own so
// that tools need not depend on providers (whose transport is POST-only and
// built for model requests).
#ifndef STEPS_TOOLS_MCP_HTTP_TRANSFER_H_
#define STEPS_TOOLS_MCP_HTTP_TRANSFER_H_

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/cancel.h"
#include "core/clock.h"

namespace steps {

// What has come back so far.
struct HttpReply {
  int status = 0;  // 0 until the status line arrived.
  // Header names in lower case, in the order received (the final
  // response's only, not those of a 100 Continue).
  std::vector<std::pair<std::string, std::string>> headers;

  // The first value of header `lower_name`, or "".
  std::string Header(std::string_view lower_name) const;
};

struct HttpTransferRequest {
  std::string method = "POST";  // POST or DELETE.
  std::string url;
  // "Name: value" lines sent as given.
  std::vector<std::string> headers;
  std::string body;  // Sent with POST.
  // Receives each piece of the response body, the status and headers
  // already in `reply`. Returning false stops the transfer (kStopped).
  std::function<bool(const HttpReply& reply, std::string_view piece)> on_body;
  // Optional: called by the transfer's loop between waits for the socket,
  // outside every libcurl callback, so it may run other transfers (the MCP
  // session answers a server's requests there while a stream is open).
  // It should return quickly: the deadline is looked at after it.
  std::function<void()> on_idle;
};

struct HttpTransferResult {
  enum class Ending {
    kComplete,   // The whole response was received.
    kStopped,    // on_body returned false.
    kDeadline,   // The deadline came first.
    kCancelled,  // The cancel token fired first.
    kFailed,     // No usable response: `error` says why.
  };
  Ending ending = Ending::kFailed;
  HttpReply reply;
  std::string error;  // For kFailed: libcurl's description.
};

// Runs one request. Never throws; returns at the latest ~50 ms after
// `deadline` or `cancel`. Thread-safe (each call has its own handles).
HttpTransferResult RunHttpTransfer(const HttpTransferRequest& request,
                                   Clock& clock, Deadline deadline,
                                   const CancelToken& cancel);

}  // namespace steps

#endif  // STEPS_TOOLS_MCP_HTTP_TRANSFER_H_
