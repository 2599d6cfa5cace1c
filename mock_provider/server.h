// The mock provider over HTTP/1.1: POST .../chat/completions (OpenAI) and
// POST .../messages (Anthropic) answer from the script; GET /_requests
// lists every request received (JSON), GET /_failures the failed
// expectations, GET /_stats counts (requests, held now and at most,
// connections). Serves until Stop(); faults (delay, hang, drop) act on the
// real connection.
//
// One thread runs an epoll loop over every connection: a delayed or held
// answer is a timer or a connection left waiting, not a blocked thread, so
// the server holds as many requests at once as it has descriptors.
#ifndef STEPS_MOCK_PROVIDER_SERVER_H_
#define STEPS_MOCK_PROVIDER_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "mock_provider/engine.h"

namespace steps {

class MockHttpServer {
 public:
  // `engine` is shared with whoever reads the requests back.
  explicit MockHttpServer(std::shared_ptr<MockEngine> engine);
  // Stops if still running.
  ~MockHttpServer();
  MockHttpServer(const MockHttpServer&) = delete;
  MockHttpServer& operator=(const MockHttpServer&) = delete;

  // Binds `host`:`port` (0 = an ephemeral port) and serves on a background
  // thread. REQUIRES: not started.
  Status Start(const std::string& host = "127.0.0.1", int port = 0);
  // Ends hangs and delays at once, closes every connection, and joins.
  void Stop();

  int port() const { return port_; }
  // "http://127.0.0.1:PORT/v1".
  std::string base_url() const;
  MockEngine& engine() { return *engine_; }

  // Requests held at once at most so far (delayed or hanging answers).
  size_t max_held() const { return max_held_.load(); }

 private:
  class Loop;

  std::shared_ptr<MockEngine> engine_;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
  std::string host_;
  int port_ = 0;
  std::atomic<size_t> max_held_{0};
};

}  // namespace steps

#endif  // STEPS_MOCK_PROVIDER_SERVER_H_
