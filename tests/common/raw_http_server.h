// An HTTP/1.1 server on 127.0.0.1 that answers each request with exactly
// the bytes a test hands it: hostile bodies, odd headers, a connection
// kept open or dropped without an answer. For what the mock provider's
// server will not send. One thread per connection; Stop() (or the
// destructor) closes everything and joins.
#ifndef STEPS_TESTS_COMMON_RAW_HTTP_SERVER_H_
#define STEPS_TESTS_COMMON_RAW_HTTP_SERVER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/loopback.h"

namespace steps::test_support {

class RawHttpServer {
 public:
  struct Reply {
    // Written as is; empty = no answer at all.
    std::string bytes;
    // Close the connection after writing (else keep it for the next
    // request, keep-alive). A response head without a Connection header
    // gets "Connection: close" then, as a real server's would: else the
    // client may pick the connection for its next request before it sees
    // the close, and a test meant for another case meets that one.
    bool close = true;
  };
  // Called with the 0-based index of the request (over all connections)
  // and its full text (headers and body).
  using Handler = std::function<Reply(int index, const std::string& request)>;

  // A complete HTTP response with a Content-Length.
  static std::string Response(
      const std::string& body,
      const std::string& content_type = "application/json", int status = 200,
      const std::string& extra_headers = "") {
    return "HTTP/1.1 " + std::to_string(status) +
           " X\r\nContent-Type: " + content_type +
           "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
           extra_headers + "\r\n" + body;
  }
  // A server-sent-events response: no length, ends with the connection.
  static std::string Stream(const std::string& body) {
    return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
           "Connection: close\r\n\r\n" +
           body;
  }

  explicit RawHttpServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = ListenOnLoopback(512, &port_);
    if (listen_fd_ < 0) std::abort();
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~RawHttpServer() { Stop(); }
  RawHttpServer(const RawHttpServer&) = delete;
  RawHttpServer& operator=(const RawHttpServer&) = delete;

  std::string base_url() const {
    return "http://127.0.0.1:" + std::to_string(port_);
  }
  // Requests received so far (complete ones).
  int requests() const { return requests_.load(); }
  // Connections accepted so far.
  int connections() const { return connections_.load(); }
  // Waits until the server has closed `n` connections in all, at most
  // `limit`; whether it has.
  bool WaitForClosed(int n, std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return closed_cv_.wait_for(lock, limit, [&] { return closed_ >= n; });
  }

  void Stop() {
    if (stopping_.exchange(true)) return;
    shutdown(listen_fd_, SHUT_RDWR);
    if (accept_thread_.joinable()) accept_thread_.join();
    close(listen_fd_);
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : open_fds_) shutdown(fd, SHUT_RDWR);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }

 private:
  void AcceptLoop() {
    while (!stopping_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      ++connections_;
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        close(fd);
        continue;
      }
      open_fds_.push_back(fd);
      threads_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  // Reads one request (headers, then Content-Length bytes of body).
  static bool ReadRequest(int fd, std::string& buffer, std::string& request) {
    size_t header_end;
    while ((header_end = buffer.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadMore(fd, buffer)) return false;
    }
    size_t length = 0;
    size_t at = buffer.find("Content-Length:");
    if (at == std::string::npos) at = buffer.find("content-length:");
    if (at != std::string::npos && at < header_end) {
      length = std::strtoul(buffer.c_str() + at + 15, nullptr, 10);
    }
    while (buffer.size() < header_end + 4 + length) {
      if (!ReadMore(fd, buffer)) return false;
    }
    request = buffer.substr(0, header_end + 4 + length);
    buffer.erase(0, request.size());
    return true;
  }
  static bool ReadMore(int fd, std::string& buffer) {
    char chunk[65536];
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n <= 0) return false;
    buffer.append(chunk, static_cast<size_t>(n));
    return true;
  }

  // Adds "Connection: close" to a response head that has no Connection
  // header.
  static void SayClose(std::string& bytes) {
    if (bytes.rfind("HTTP/1.", 0) != 0) return;
    const size_t end = bytes.find("\r\n\r\n");
    if (end == std::string::npos) return;
    std::string head = bytes.substr(0, end);
    for (char& c : head) {
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (head.find("\r\nconnection:") != std::string::npos) return;
    bytes.insert(end + 2, "Connection: close\r\n");
  }

  void Serve(int fd) {
    std::string buffer, request;
    while (ReadRequest(fd, buffer, request)) {
      Reply reply = handler_(requests_++, request);
      if (reply.close) SayClose(reply.bytes);
      size_t off = 0;
      while (off < reply.bytes.size()) {
        ssize_t n = send(fd, reply.bytes.data() + off, reply.bytes.size() - off,
                         MSG_NOSIGNAL);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      if (reply.close) break;
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& open : open_fds_) {
      if (open == fd) open = -1;
    }
    close(fd);
    ++closed_;
    closed_cv_.notify_all();
  }

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> requests_{0};
  std::atomic<int> connections_{0};
  int closed_ = 0;  // Guarded by mu_.
  std::condition_variable closed_cv_;
  std::thread accept_thread_;
  std::mutex mu_;
  std::vector<int> open_fds_;
  std::vector<std::thread> threads_;
};

}  // namespace steps::test_support

#endif  // STEPS_TESTS_COMMON_RAW_HTTP_SERVER_H_
