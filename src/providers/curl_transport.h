// HttpTransport on libcurl. Each transfer runs on a pooled channel (a curl
// multi handle with one easy handle) so that open connections are kept and
// reused across the requests of a conversation and across conversations.
#ifndef STEPS_PROVIDERS_CURL_TRANSPORT_H_
#define STEPS_PROVIDERS_CURL_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "providers/http.h"

namespace steps {

class CurlTransport : public HttpTransport {
 public:
  struct Options {
    // Limit on establishing a connection (within the transfer's own limit).
    // Default: 10 s.
    Millis connect_timeout{10000};
    // Idle channels kept for reuse; each holds its open connections.
    // Default: 64.
    size_t max_idle_channels = 64;
  };

  CurlTransport();
  explicit CurlTransport(Options options);
  ~CurlTransport() override;
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  // Thread-safe. Cancellation and the idle limit are checked by the
  // transfer loop, which wakes at once on cancellation.
  TransportResult Post(const HttpRequest& request,
                       const TransferOptions& options) override;

  // New connections opened so far (a reused one does not count).
  int64_t connections_opened() const { return connections_opened_.load(); }

 private:
  struct Channel;
  std::unique_ptr<Channel> Acquire();
  void Release(std::unique_ptr<Channel> channel);

  Options options_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Channel>> idle_;
  std::atomic<int64_t> connections_opened_{0};
};

// The process-wide transport every hosted source uses by default, so keep-
// alive spans conversations. Lives until exit.
CurlTransport& SharedCurlTransport();

}  // namespace steps

#endif  // STEPS_PROVIDERS_CURL_TRANSPORT_H_
