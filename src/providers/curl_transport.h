// HttpTransport on libcurl, and on its own HTTP/1.1 for a plain http://
// request to an IP address, a local model server or mock (plain_http.h),
// which then needs no libcurl at all. Every transfer of a transport runs in one
// loop, which waits on epoll for the sockets of a few curl multi handles
// (shards; a transfer goes to the least busy). A lone transfer's Post runs
// the loop on its own thread; with several, the loop's own thread runs it
// while the Posts sleep. A request in flight costs one socket (none while
// it waits to be admitted) and no thread of its own, and open connections
// are kept and reused across the requests of a conversation and across
// conversations to the same host. Post blocks its caller until its
// transfer ends. libcurl is loaded at the first transfer (core/libcurl.h).
#ifndef STEPS_PROVIDERS_CURL_TRANSPORT_H_
#define STEPS_PROVIDERS_CURL_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "providers/http.h"
#include "providers/plain_http.h"

namespace steps {

class CurlTransport : public HttpTransport {
 public:
  struct Options {
    // Limit on establishing a connection (within the transfer's own limit).
    // Default: 10 s.
    Millis connect_timeout{10000};
    // Transfers in flight at once; more wait their turn (their time limits
    // running). 0: the soft RLIMIT_NOFILE at first use, less 256 kept for
    // everything else the process opens, at least 16.
    size_t max_in_flight = 0;
  };

  CurlTransport();
  explicit CurlTransport(Options options);
  ~CurlTransport() override;
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  // Thread-safe. Cancellation and the idle limit are checked by the
  // transfer loop, which wakes at once on cancellation. The body reader
  // runs on the thread leading the loop, which may be another Post's.
  TransportResult Post(const HttpRequest& request,
                       const TransferOptions& options) override;

  // New connections opened so far (a reused one does not count).
  int64_t connections_opened() const;
  // The most transfers that were in flight at once so far.
  size_t max_in_flight_seen() const;
  // Transfers handed over and not yet admitted (waiting for a slot).
  size_t waiting() const;

  class Loop;  // Shared with cancel callbacks, which may outlive a Post.

 private:
  // The loop, made by the first transfer; null and `error` set when it
  // could not be made.
  std::shared_ptr<Loop> LoopOrError(TransportError& error);
  std::shared_ptr<Loop> CurrentLoop() const;  // Null before the first.
  // A request to an IP address over plain http (plain_http.h).
  TransportResult PostPlain(const std::shared_ptr<Loop>& loop,
                            PlainTarget target,
                            const HttpRequest& request,
                            const TransferOptions& options);

  Options options_;
  mutable std::mutex loop_mu_;
  std::shared_ptr<Loop> loop_;  // Guarded by loop_mu_.
};

// The process-wide transport every hosted source uses by default, so keep-
// alive spans conversations. Lives until exit.
CurlTransport& SharedCurlTransport();

}  // namespace steps

#endif  // STEPS_PROVIDERS_CURL_TRANSPORT_H_
