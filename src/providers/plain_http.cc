#include "providers/plain_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace steps {

struct PlainConnection {
  int fd = -1;
  std::string key;
  PlainExchange* exchange = nullptr;  // Null while kept.
  bool connecting = false;
  bool closed = false;
  uint32_t watched = 0;  // The epoll events asked for.
  size_t open_index = 0;
};

namespace {

// Tags a connection's epoll key; the loop's own keys never have it (its
// wake-up key, all ones, is told apart by IsKey).
constexpr uint64_t kTag = uint64_t{1} << 63;

// What one read takes, and how many one event allows (256 KiB in all).
constexpr size_t kReadBytes = 64 * 1024;
constexpr int kReadsPerEvent = 4;

bool ProxySet() {
  for (const char* name : {"http_proxy", "all_proxy", "ALL_PROXY"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return true;
  }
  return false;
}

// Whether a kept connection is still open and silent: no end and no
// stray bytes from the server.
bool StillOpen(const PlainConnection* c) {
  char byte;
  const ssize_t n = recv(c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

std::string HostPort(const PlainExchange& x) {
  return x.target.url.host + " port " + std::to_string(x.target.url.port);
}

}  // namespace

std::optional<PlainTarget> PlainTargetOf(std::string_view url) {
  std::optional<http1::PlainUrl> parsed = http1::ParsePlainUrl(url);
  if (!parsed) return std::nullopt;
  const char* choice = std::getenv("STEPS_HTTP");
  if (choice != nullptr && std::string_view(choice) == "libcurl")
    return std::nullopt;
  if (ProxySet()) return std::nullopt;
  PlainTarget t;
  t.url = std::move(*parsed);
  if (auto* v4 = reinterpret_cast<sockaddr_in*>(&t.address);
      inet_pton(AF_INET, t.url.host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(t.url.port);
    t.address_len = sizeof(sockaddr_in);
  } else if (auto* v6 = reinterpret_cast<sockaddr_in6*>(&t.address);
             inet_pton(AF_INET6, t.url.host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(t.url.port);
    t.address_len = sizeof(sockaddr_in6);
  } else {
    return std::nullopt;  // A name: libcurl resolves it.
  }
  t.key.assign(reinterpret_cast<const char*>(&t.address), t.address_len);
  return t;
}

PlainConnections::PlainConnections(int epoll_fd, size_t max_kept)
    : epoll_fd_(epoll_fd), max_kept_(max_kept) {}

PlainConnections::~PlainConnections() {
  for (PlainConnection* c : open_) {
    close(c->fd);
    delete c;
  }
  for (PlainConnection* c : closed_) delete c;
}

bool PlainConnections::IsKey(uint64_t key) {
  return (key & kTag) != 0 && key != ~uint64_t{0};
}

bool PlainConnections::Start(PlainExchange& x) {
  x.last_data = std::chrono::steady_clock::now();
  auto kept = kept_.find(x.target.key);
  while (kept != kept_.end() && !kept->second.empty()) {
    PlainConnection* c = kept->second.back();
    kept->second.pop_back();
    --kept_count_;
    if (kept->second.empty()) kept_.erase(kept);
    // Closed by the server while kept, and not yet seen by the loop (no
    // round ran since: a lone conversation runs the loop only while it
    // waits for an answer): not to be used.
    if (!StillOpen(c)) {
      Close(c);
      kept = kept_.find(x.target.key);
      continue;
    }
    x.new_connection = false;
    if (StartOn(c, x)) return true;
    // Closed under it before anything went out: nothing was sent, so a
    // fresh connection may carry the request.
    if (x.sent > 0 || !x.error || x.error->kind != TransportErrorKind::kClosed)
      return false;
    x.error.reset();
    kept = kept_.find(x.target.key);
  }
  PlainConnection* c = Open(x);
  if (c == nullptr) return false;
  x.new_connection = true;
  return StartOn(c, x);
}

PlainConnection* PlainConnections::Open(PlainExchange& x) {
  const int fd = socket(x.target.address.ss_family,
                        SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const int err = errno;
    x.error = IsDescriptorShortage(err)
                  ? DescriptorShortage(err)
                  : TransportError{TransportErrorKind::kOther,
                                   std::string("socket: ") + std::strerror(err)};
    return nullptr;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto* c = new PlainConnection;
  c->fd = fd;
  c->key = x.target.key;
  c->open_index = open_.size();
  open_.push_back(c);
  ++opened_;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&x.target.address),
              x.target.address_len) != 0) {
    if (errno != EINPROGRESS) {
      const int err = errno;
      c->exchange = &x;
      x.connection = c;
      Fail(c, x, TransportErrorKind::kConnect,
           "Failed to connect to " + HostPort(x) + ": " + std::strerror(err));
      return nullptr;
    }
    c->connecting = true;
  }
  return c;
}

bool PlainConnections::StartOn(PlainConnection* c, PlainExchange& x) {
  c->exchange = &x;
  x.connection = c;
  x.sent = 0;
  PlainExchange* self = &x;
  x.parser.emplace([self](std::string_view piece) {
    PlainExchange& e = *self;
    if (e.response.body.size() + piece.size() > e.options->max_response_bytes) {
      e.too_large = true;
      return false;
    }
    e.response.body.append(piece);
    const int status = e.parser->status();
    if (e.options->reader && status >= 200 && status < 300 &&
        !e.options->reader(piece)) {
      e.response.stopped_by_reader = true;
      return false;
    }
    return true;
  });
  if (c->connecting) {
    Watch(c, EPOLLOUT | EPOLLIN | EPOLLRDHUP);
    return true;
  }
  x.connected = true;
  if (!Send(c, x)) return false;
  const size_t total = x.head.size() + x.body.size();
  Watch(c, x.sent < total ? EPOLLOUT | EPOLLIN | EPOLLRDHUP
                          : EPOLLIN | EPOLLRDHUP);
  return true;
}

bool PlainConnections::Send(PlainConnection* c, PlainExchange& x) {
  const size_t total = x.head.size() + x.body.size();
  while (x.sent < total) {
    iovec parts[2];
    int count = 0;
    if (x.sent < x.head.size()) {
      parts[count++] = {const_cast<char*>(x.head.data()) + x.sent,
                        x.head.size() - x.sent};
      parts[count++] = {const_cast<char*>(x.body.data()), x.body.size()};
    } else {
      const size_t at = x.sent - x.head.size();
      parts[count++] = {const_cast<char*>(x.body.data()) + at,
                        x.body.size() - at};
    }
    msghdr m{};
    m.msg_iov = parts;
    m.msg_iovlen = static_cast<size_t>(count);
    const ssize_t n = sendmsg(c->fd, &m, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EINTR) continue;
      const int err = errno;
      Fail(c, x, TransportErrorKind::kClosed,
           std::string("Send failure: ") + std::strerror(err));
      return false;
    }
    x.sent += static_cast<size_t>(n);
  }
  return true;
}

bool PlainConnections::Receive(PlainConnection* c, PlainExchange& x) {
  if (buffer_.size() < kReadBytes) buffer_.resize(kReadBytes);
  // At most kReadsPerEvent reads: a server that keeps the socket full
  // must not keep the loop from its limits, cancellations and the other
  // transfers. The socket stays ready; the next round reads on.
  for (int reads = 0; reads < kReadsPerEvent; ++reads) {
    const ssize_t n = recv(c->fd, buffer_.data(), buffer_.size(), 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      if (errno == EINTR) continue;
      const int err = errno;
      Fail(c, x, TransportErrorKind::kClosed,
           std::string("Recv failure: ") + std::strerror(err));
      return true;
    }
    x.last_data = std::chrono::steady_clock::now();
    http1::ResponseParser& p = *x.parser;
    const http1::ResponseParser::State s =
        n == 0 ? p.End() : p.Feed(std::string_view(buffer_.data(), n));
    if (p.head_done() && !x.head_done) {
      x.head_done = true;
      x.response.status = p.status();
      x.response.headers = p.headers();
    }
    switch (s) {
      case http1::ResponseParser::State::kMore:
        if (n == 0) return true;  // End() never leaves kMore.
        continue;
      case http1::ResponseParser::State::kDone:
        Finish(c, x);
        return true;
      case http1::ResponseParser::State::kStopped:
        Close(c);
        x.connection = nullptr;
        return true;
      case http1::ResponseParser::State::kError:
        if (n == 0 && p.error().find("without answering") !=
                          std::string::npos) {
          Fail(c, x, TransportErrorKind::kClosed,
               x.new_connection ? "Empty reply from server"
                                : "the server closed a reused connection "
                                  "without answering (the request is not "
                                  "re-sent)");
        } else if (n == 0) {
          Fail(c, x, TransportErrorKind::kClosed,
               "the connection to " + HostPort(x) + " closed: " + p.error());
        } else {
          Fail(c, x, TransportErrorKind::kOther,
               "the answer of " + HostPort(x) + " is not HTTP as expected: " +
                   p.error());
        }
        return true;
    }
  }
  return false;
}

PlainExchange* PlainConnections::OnEvent(uint64_t key, uint32_t events) {
  auto* c = reinterpret_cast<PlainConnection*>(key & ~kTag);
  if (c->closed) return nullptr;
  PlainExchange* x = c->exchange;
  if (x == nullptr) {
    // A kept connection spoke or closed while idle: it cannot carry a
    // request any more.
    auto kept = kept_.find(c->key);
    if (kept != kept_.end()) {
      auto& list = kept->second;
      list.erase(std::remove(list.begin(), list.end(), c), list.end());
      --kept_count_;
      if (list.empty()) kept_.erase(kept);
    }
    Close(c);
    return nullptr;
  }
  if (c->connecting) {
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err == 0 && !(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
      return nullptr;
    if (err != 0 || (events & (EPOLLERR | EPOLLHUP))) {
      Fail(c, *x, TransportErrorKind::kConnect,
           "Failed to connect to " + HostPort(*x) + ": " +
               std::strerror(err != 0 ? err : ECONNREFUSED));
      return x;
    }
    c->connecting = false;
    x->connected = true;
  }
  const size_t total = x->head.size() + x->body.size();
  if (x->sent < total && (events & EPOLLOUT)) {
    if (!Send(c, *x)) return x;
    if (x->sent == total) Watch(c, EPOLLIN | EPOLLRDHUP);
  }
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
    if (Receive(c, *x)) return x;
  }
  return nullptr;
}

void PlainConnections::Finish(PlainConnection* c, PlainExchange& x) {
  x.complete = true;
  x.connection = nullptr;
  c->exchange = nullptr;
  const size_t total = x.head.size() + x.body.size();
  // Answered before the whole request went out (a 413, say): the rest
  // cannot follow on this connection.
  if (x.parser->keep_alive() && x.sent == total) {
    Keep(c);
  } else {
    Close(c);
  }
}

void PlainConnections::Fail(PlainConnection* c, PlainExchange& x,
                            TransportErrorKind kind, std::string message) {
  x.error = TransportError{kind, std::move(message)};
  x.connection = nullptr;
  Close(c);
}

void PlainConnections::Abort(PlainExchange& x) {
  if (x.connection != nullptr) Close(x.connection);
  x.connection = nullptr;
}

void PlainConnections::Watch(PlainConnection* c, uint32_t events) {
  if (c->watched == events) return;
  epoll_event e{};
  e.events = events;
  e.data.u64 = kTag | reinterpret_cast<uint64_t>(c);
  epoll_ctl(epoll_fd_, c->watched == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c->fd,
            &e);
  c->watched = events;
}

void PlainConnections::Keep(PlainConnection* c) {
  if (kept_count_ >= max_kept_) {
    Close(c);
    return;
  }
  // Watched for input while kept: a close (or stray bytes) from the
  // server drops it before a request could be sent on it.
  Watch(c, EPOLLIN | EPOLLRDHUP);
  kept_[c->key].push_back(c);
  ++kept_count_;
}

void PlainConnections::Close(PlainConnection* c) {
  if (c->closed) return;
  c->closed = true;
  if (c->exchange != nullptr) c->exchange->connection = nullptr;
  c->exchange = nullptr;
  // Out of the epoll set first: closing the descriptor is not enough while
  // another process holds a copy of it (a task's child between its fork
  // and its exec), and its events would name a connection freed by then.
  if (c->watched != 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  close(c->fd);
  PlainConnection* last = open_.back();
  open_[c->open_index] = last;
  last->open_index = c->open_index;
  open_.pop_back();
  closed_.push_back(c);
}

void PlainConnections::Sweep() {
  for (PlainConnection* c : closed_) delete c;
  closed_.clear();
}

}  // namespace steps
