// The mock provider over HTTP (cpp-httplib): POST .../chat/completions
// (OpenAI) and POST .../messages (Anthropic) answer from the script;
// GET /_requests lists every request received (JSON), GET /_failures the
// failed expectations. Serves until Stop(); faults (delay, hang, drop) act
// on the real connection.
#ifndef STEPS_MOCK_PROVIDER_SERVER_H_
#define STEPS_MOCK_PROVIDER_SERVER_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/status.h"
#include "mock_provider/engine.h"

namespace httplib {
class Server;
}

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
  // Blocks until Stop() is called from elsewhere (e.g. a signal).
  void Wait();

  int port() const { return port_; }
  // "http://127.0.0.1:PORT/v1".
  std::string base_url() const;
  MockEngine& engine() { return *engine_; }

 private:
  // Waits `d` (or forever when d is negative) or until Stop(), or until the
  // peer on `fd` (when >= 0) closes. Returns false when stopping.
  bool Wait(Millis d, int fd);

  std::shared_ptr<MockEngine> engine_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string host_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stopping_{false};
};

}  // namespace steps

#endif  // STEPS_MOCK_PROVIDER_SERVER_H_
