#include "ui/http_guard.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <functional>

namespace steps::ui {
namespace {

using Steady = std::chrono::steady_clock;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) {
    return static_cast<char>(std::tolower(c));
  });
  return out;
}

// "name", "name:80", "[::1]:8080" -> name and port (-1 when absent);
// false when malformed (a bare IPv6 address, a bad port).
bool SplitHostPort(std::string_view text, std::string* name, int* port) {
  std::string_view rest;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return false;
    *name = Lower(text.substr(1, close - 1));
    rest = text.substr(close + 1);
  } else {
    const size_t colon = text.find(':');
    if (colon != std::string_view::npos &&
        text.find(':', colon + 1) != std::string_view::npos) {
      return false;  // IPv6 needs brackets in a Host header.
    }
    *name = Lower(text.substr(0, colon));
    rest = colon == std::string_view::npos ? "" : text.substr(colon);
  }
  *port = -1;
  if (!rest.empty()) {
    std::string_view digits = rest.substr(1);
    if (rest.front() != ':' || digits.empty() || digits.size() > 5 ||
        digits.find_first_not_of("0123456789") != std::string_view::npos) {
      return false;
    }
    *port = std::stoi(std::string(digits));
  }
  return !name->empty();
}

// A socket read under one deadline for the whole request and written with
// a bound on how long one write may stall and one for the whole answer (a
// client that reads a large answer a little at a time must not hold a
// worker for minutes). Reads are buffered: the library reads the request
// line and headers a byte at a time.
class DeadlineStream : public httplib::Stream {
 public:
  // `stopping` is polled while waiting to read: once it is true, reads give
  // up, so stopping the server does not wait for idle clients.
  DeadlineStream(int sock, Steady::time_point read_deadline,
                 Steady::time_point answer_deadline,
                 std::chrono::milliseconds write_stall,
                 std::function<bool()> stopping)
      : sock_(sock),
        read_deadline_(read_deadline),
        answer_deadline_(answer_deadline),
        write_stall_(write_stall),
        stopping_(std::move(stopping)) {}

  bool is_readable() const override {
    return begin_ < end_ || Wait(POLLIN, read_deadline_);
  }
  bool is_writable() const override { return Wait(POLLOUT, WriteBy()); }

  ssize_t read(char* ptr, size_t size) override {
    if (begin_ == end_) {
      if (!Wait(POLLIN, read_deadline_)) return -1;
      ssize_t n;
      do {
        n = recv(sock_, buffer_, sizeof buffer_, 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t k = std::min(size, end_ - begin_);
    std::memcpy(ptr, buffer_ + begin_, k);
    begin_ += k;
    return static_cast<ssize_t>(k);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!Wait(POLLOUT, WriteBy())) return -1;
    // Never blocking: a blocking send of a large answer would wait for the
    // client to read all of it, past every deadline here. What fits goes;
    // the library calls again with the rest.
    ssize_t n;
    do {
      n = send(sock_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(getsockname, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  // Until when the next write may wait for the client.
  Steady::time_point WriteBy() const {
    return std::min(Steady::now() + write_stall_, answer_deadline_);
  }

  // Whether `events` became ready on the socket before `deadline`.
  bool Wait(short events, Steady::time_point deadline) const {
    constexpr std::chrono::milliseconds kStopCheck(100);
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(
          deadline - Steady::now());
      // Only a request not yet read is given up on a stop: a response
      // being written is finished, as the library does.
      if (left.count() <= 0 || (events == POLLIN && stopping_())) return false;
      pollfd p{sock_, events, 0};
      const int r =
          poll(&p, 1, static_cast<int>(std::min(left, kStopCheck).count()));
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) return false;
    }
  }

  template <typename Getter>
  void Address(Getter getter, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (getter(sock_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host,
                    serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      ip = host;
      port = std::atoi(serv);
    }
  }

  int sock_;
  Steady::time_point read_deadline_;
  Steady::time_point answer_deadline_;
  std::chrono::milliseconds write_stall_;
  std::function<bool()> stopping_;
  char buffer_[4096];
  size_t begin_ = 0, end_ = 0;
};

}  // namespace

HostAllowList::HostAllowList(std::string listen_host, int port,
                             std::vector<std::string> extra) {
  for (const char* local : {"localhost", "127.0.0.1", "::1"}) {
    entries_.push_back({local, port});
  }
  std::string name = listen_host;
  if (name.size() >= 2 && name.front() == '[') {
    name = name.substr(1, name.size() - 2);
  }
  entries_.push_back({Lower(name), port});
  for (const std::string& e : extra) {
    Entry entry;
    if (SplitHostPort(e, &entry.name, &entry.port)) entries_.push_back(entry);
  }
}

bool HostAllowList::Allows(std::string_view header) const {
  std::string name;
  int port;
  if (!SplitHostPort(header, &name, &port)) return false;
  for (const Entry& e : entries_) {
    if (e.name != name) continue;
    if (e.port == -1 || e.port == (port == -1 ? 80 : port)) return true;
  }
  return false;
}

GuardedServer::GuardedServer() : GuardedServer(Options{}) {}

GuardedServer::GuardedServer(Options options) : options_(options) {
  const size_t threads = options_.threads;
  new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // The UI takes no uploads: a request body is a query at most.
  set_payload_max_length(64 * 1024);
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  bool ok;
  {
    // stop() closes the listening socket first.
    const Steady::time_point accepted = Steady::now();
    DeadlineStream stream(sock, accepted + options_.read_deadline,
                          accepted + options_.answer_deadline,
                          options_.write_stall,
                          [this] { return svr_sock_ == INVALID_SOCKET; });
    bool closed = false;
    ok = process_request(stream, /*close_connection=*/true, closed,
                         [](httplib::Request&) {});
  }
  shutdown(sock, SHUT_RDWR);
  close(sock);
  return ok;
}

}  // namespace steps::ui
