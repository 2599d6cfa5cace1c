// Plain HTTP/1.1 to an IP address (http://127.0.0.1:8080/v1/...,
// http://[::1]:11434/...), sent by the transport's own epoll loop without
// libcurl: a local model server or mock costs a request no more than its
// system calls (a connection's socket and connect, then one send and the
// reads of the answer per request on a kept connection) and the parsing of
// http1.h. Everything else (https, host names, proxies) goes by libcurl.
//
// A request goes out once: a kept connection the server closed before the
// request was sent is never used (its close wakes the loop and the
// connection is dropped), and a request that meets a closed connection
// after sending fails as kClosed for the retry policy to judge, as with
// libcurl (CurlTransport refuses its silent re-send).
#ifndef STEPS_PROVIDERS_PLAIN_HTTP_H_
#define STEPS_PROVIDERS_PLAIN_HTTP_H_

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "providers/http.h"
#include "providers/http1.h"

namespace steps {

// Where a plain request goes.
struct PlainTarget {
  http1::PlainUrl url;
  sockaddr_storage address{};
  socklen_t address_len = 0;
  // The address's bytes and port: connections to equal keys are shared.
  std::string key;
};

// The target of `url` when it can go by plain HTTP: an http:// URL naming
// an IP address (v4, or v6 in brackets), while no proxy is set in the
// environment (http_proxy, all_proxy, ALL_PROXY: libcurl honours them) and
// STEPS_HTTP is not "libcurl". Nullopt otherwise.
std::optional<PlainTarget> PlainTargetOf(std::string_view url);

struct PlainConnection;

// One request and its response on a plain connection: what the transport
// gives (target, head, body, options) and what it gets back.
struct PlainExchange {
  PlainTarget target;
  std::string head;  // http1::PostHead
  std::string_view body;
  const TransferOptions* options = nullptr;
  void* owner = nullptr;  // The transport's transfer.

  HttpResponse response;
  std::optional<TransportError> error;
  bool connected = false;
  bool new_connection = false;
  bool head_done = false;  // The response's head was read.
  bool too_large = false;  // Cut at options->max_response_bytes.
  bool complete = false;   // The response was read to its end.
  std::chrono::steady_clock::time_point last_data;

  // The connection's side.
  PlainConnection* connection = nullptr;
  size_t sent = 0;  // Of head and body together.
  std::optional<http1::ResponseParser> parser;
};

// The plain connections of one loop: open ones carrying exchanges and kept
// ones waiting for the next request to the same address. Its sockets are
// watched by the loop's epoll, under keys IsKey() tells apart. Not
// thread-safe: only the loop's leader calls it.
class PlainConnections {
 public:
  // `max_kept`: idle connections kept at most (more are closed).
  PlainConnections(int epoll_fd, size_t max_kept);
  ~PlainConnections();
  PlainConnections(const PlainConnections&) = delete;
  PlainConnections& operator=(const PlainConnections&) = delete;

  // Sends `x` on a kept connection to its target or on a new one. Returns
  // false when the exchange ended at once (x.error says why: no
  // descriptor, connection refused, ...).
  bool Start(PlainExchange& x);

  // Whether an epoll key is one of these connections'.
  static bool IsKey(uint64_t key);
  // Handles an epoll event of one of these connections. Returns the
  // exchange it ended (complete, or with x.error set), if any.
  PlainExchange* OnEvent(uint64_t key, uint32_t events);
  // Ends `x` before its response is complete (cancelled, out of time, cut
  // by its reader): its connection is closed.
  void Abort(PlainExchange& x);
  // Frees the connections closed since the last call: call after each
  // round of events (a round's later events may name one closed earlier).
  void Sweep();

  int64_t opened() const { return opened_; }

 private:
  bool StartOn(PlainConnection* c, PlainExchange& x);
  PlainConnection* Open(PlainExchange& x);
  // Sends what is left of x's request; false when the connection failed.
  bool Send(PlainConnection* c, PlainExchange& x);
  // Reads what arrived; true when x ended.
  bool Receive(PlainConnection* c, PlainExchange& x);
  void Finish(PlainConnection* c, PlainExchange& x);
  void Fail(PlainConnection* c, PlainExchange& x, TransportErrorKind kind,
            std::string message);
  void Watch(PlainConnection* c, uint32_t events);
  void Close(PlainConnection* c);
  void Keep(PlainConnection* c);

  const int epoll_fd_;
  const size_t max_kept_;
  size_t kept_count_ = 0;
  std::unordered_map<std::string, std::vector<PlainConnection*>> kept_;
  std::vector<PlainConnection*> open_;  // All not closed, kept or busy.
  std::vector<PlainConnection*> closed_;
  std::string buffer_;
  int64_t opened_ = 0;
};

}  // namespace steps

#endif  // STEPS_PROVIDERS_PLAIN_HTTP_H_
