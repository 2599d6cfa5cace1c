#include "mock_provider/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

#include "core/json_text.h"

namespace steps {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr size_t kMaxBodyBytes = 256 * 1024 * 1024;

int PortOf(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  }
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  }
  return 0;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

bool ContainsTokenNoCase(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    if (EqualsNoCase(Trim(list.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

struct ParsedRequest {
  std::string method;
  std::string path;  // Without the query.
  HttpHeaders headers;
  std::string body;
  bool keep_alive = true;
};

// The outcome of reading one request from the front of a buffer.
struct ParseResult {
  enum class State { kNeedMore, kDone, kBad };
  State state = State::kNeedMore;
  size_t consumed = 0;          // kDone: bytes of the buffer the request used.
  int status = 400;             // kBad: the status to answer with.
  std::string error;            // kBad.
  bool wants_continue = false;  // kNeedMore: "Expect: 100-continue".
};

ParseResult Bad(int status, std::string error) {
  ParseResult r;
  r.state = ParseResult::State::kBad;
  r.status = status;
  r.error = std::move(error);
  return r;
}

// Decodes a chunked body starting at `in[pos]`. nullopt: incomplete.
std::optional<ParseResult> ReadChunked(std::string_view in, size_t pos,
                                       std::string& body) {
  body.clear();
  while (true) {
    size_t eol = in.find("\r\n", pos);
    if (eol == std::string_view::npos) return std::nullopt;
    std::string_view size_text = in.substr(pos, eol - pos);
    size_text = size_text.substr(0, size_text.find(';'));
    size_t size = 0;
    size_text = Trim(size_text);
    if (size_text.empty() || size_text.size() > 8) {
      return Bad(400, "bad chunk size");
    }
    for (char c : size_text) {
      int digit = std::isxdigit(static_cast<unsigned char>(c))
                      ? (std::isdigit(static_cast<unsigned char>(c))
                             ? c - '0'
                             : (std::tolower(c) - 'a' + 10))
                      : -1;
      if (digit < 0) return Bad(400, "bad chunk size");
      size = size * 16 + static_cast<size_t>(digit);
    }
    if (body.size() + size > kMaxBodyBytes) {
      return Bad(413, "request body too large");
    }
    pos = eol + 2;
    if (size == 0) {
      // Trailers (ignored) end with an empty line.
      size_t end = in.find("\r\n", pos);
      while (end != std::string_view::npos && end != pos) {
        pos = end + 2;
        end = in.find("\r\n", pos);
      }
      if (end == std::string_view::npos) return std::nullopt;
      ParseResult r;
      r.state = ParseResult::State::kDone;
      r.consumed = end + 2;
      return r;
    }
    if (in.size() < pos + size + 2) return std::nullopt;
    body.append(in.substr(pos, size));
    pos += size + 2;
  }
}

ParseResult ParseRequest(std::string_view in, ParsedRequest& req) {
  size_t head_end = in.find("\r\n\r\n");
  if (head_end == std::string_view::npos) {
    if (in.size() > kMaxHeaderBytes) return Bad(431, "headers too large");
    return {};
  }
  std::string_view head = in.substr(0, head_end);
  size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  size_t sp1 = line.find(' ');
  size_t sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1) {
    return Bad(400, "bad request line");
  }
  req = ParsedRequest();
  req.method = std::string(line.substr(0, sp1));
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  req.path = std::string(target.substr(0, target.find('?')));
  std::string_view version = line.substr(sp2 + 1);
  if (version.rfind("HTTP/1.", 0) != 0) return Bad(505, "not HTTP/1.x");
  bool http10 = version == "HTTP/1.0";
  req.keep_alive = !http10;
  std::optional<size_t> length;
  bool chunked = false;
  bool expect_continue = false;
  std::string_view rest =
      eol == std::string_view::npos ? "" : head.substr(eol + 2);
  while (!rest.empty()) {
    size_t next = rest.find("\r\n");
    std::string_view h = rest.substr(0, next);
    rest = next == std::string_view::npos ? "" : rest.substr(next + 2);
    size_t colon = h.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return Bad(400, "bad header line");
    }
    std::string_view name = h.substr(0, colon);
    std::string_view value = Trim(h.substr(colon + 1));
    if (EqualsNoCase(name, "content-length")) {
      size_t n = 0;
      if (value.empty() || value.size() > 12) {
        return Bad(400, "bad Content-Length");
      }
      for (char c : value) {
        if (c < '0' || c > '9') return Bad(400, "bad Content-Length");
        n = n * 10 + static_cast<size_t>(c - '0');
      }
      if (length && *length != n) return Bad(400, "two Content-Lengths");
      length = n;
    } else if (EqualsNoCase(name, "transfer-encoding")) {
      chunked = ContainsTokenNoCase(value, "chunked");
    } else if (EqualsNoCase(name, "connection")) {
      if (ContainsTokenNoCase(value, "close")) req.keep_alive = false;
      if (ContainsTokenNoCase(value, "keep-alive")) req.keep_alive = true;
    } else if (EqualsNoCase(name, "expect")) {
      expect_continue = EqualsNoCase(value, "100-continue");
    }
    req.headers.emplace_back(std::string(name), std::string(value));
  }
  size_t body_start = head_end + 4;
  ParseResult r;
  if (chunked) {
    std::optional<ParseResult> c = ReadChunked(in, body_start, req.body);
    if (!c) {
      r.wants_continue = expect_continue;
      return r;
    }
    return *c;
  }
  size_t n = length.value_or(0);
  if (n > kMaxBodyBytes) return Bad(413, "request body too large");
  if (in.size() - body_start < n) {
    r.wants_continue = expect_continue;
    return r;
  }
  req.body = std::string(in.substr(body_start, n));
  r.state = ParseResult::State::kDone;
  r.consumed = body_start + n;
  return r;
}

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Status";
  }
}

// The status line and headers of an answer. `length` nullopt: chunked.
std::string Head(int status, const HttpHeaders& headers,
                 std::optional<size_t> length, bool keep_alive) {
  std::string out =
      "HTTP/1.1 " + std::to_string(status) + " " + Reason(status) + "\r\n";
  bool has_type = false;
  for (const auto& [k, v] : headers) {
    if (EqualsNoCase(k, "content-length") ||
        EqualsNoCase(k, "transfer-encoding") || EqualsNoCase(k, "connection")) {
      continue;
    }
    if (EqualsNoCase(k, "content-type")) has_type = true;
    out += k + ": " + v + "\r\n";
  }
  if (!has_type) out += "Content-Type: application/json\r\n";
  if (length) {
    out += "Content-Length: " + std::to_string(*length) + "\r\n";
  } else {
    out += "Transfer-Encoding: chunked\r\n";
  }
  out += keep_alive ? "Connection: keep-alive\r\n\r\n"
                    : "Connection: close\r\n\r\n";
  return out;
}

void AppendChunk(std::string& out, std::string_view data) {
  if (data.empty()) return;  // An empty chunk would end the body.
  char size[20];
  int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  out.append(size, static_cast<size_t>(n));
  out.append(data);
  out += "\r\n";
}

}  // namespace

// Everything the loop thread owns. Only Stop() reaches in from outside,
// through the eventfd.
class MockHttpServer::Loop {
 public:
  Loop(MockHttpServer& server, int listen_fd)
      : server_(server), listen_fd_(listen_fd) {}
  ~Loop() {
    for (auto& [fd, c] : conns_) close(fd);
    if (epoll_fd_ >= 0) close(epoll_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
    if (listen_fd_ >= 0) close(listen_fd_);
  }

  Status Init() {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_fd_ < 0 || wake_fd_ < 0) {
      return IoError(std::string("mock_provider: epoll: ") +
                     std::strerror(errno));
    }
    Watch(wake_fd_, EPOLLIN, EPOLL_CTL_ADD);
    Watch(listen_fd_, EPOLLIN, EPOLL_CTL_ADD);
    return Status::Ok();
  }

  void Run() {
    std::vector<epoll_event> events(256);
    while (!stopping_) {
      int timeout = NextTimeoutMs();
      int n = epoll_wait(epoll_fd_, events.data(),
                         static_cast<int>(events.size()), timeout);
      if (n < 0 && errno != EINTR) break;
      for (int i = 0; i < n; ++i) {
        int fd = events[i].data.fd;
        uint32_t ev = events[i].events;
        if (fd == wake_fd_) {
          stopping_ = true;
        } else if (fd == listen_fd_) {
          Accept();
        } else {
          OnConnection(fd, ev);
        }
      }
      FireTimers();
      closed_.clear();
    }
  }

  void Wake() {
    uint64_t one = 1;
    ssize_t w = write(wake_fd_, &one, sizeof one);
    (void)w;
  }

 private:
  enum class State {
    kReading,   // Waiting for (the rest of) a request.
    kDelaying,  // A scripted delay before the answer.
    kHolding,   // No answer, ever (hang), or a stream gone silent.
    kWriting,   // The answer is being sent.
    kClosed,    // Gone; freed at the end of the loop's round.
  };

  struct Conn {
    int fd = -1;
    uint64_t serial = 0;
    int peer_port = 0;
    State state = State::kReading;
    std::string in;
    std::string out;
    size_t out_sent = 0;
    bool keep_alive = true;
    bool close_after_write = false;
    bool hold_after_write = false;
    bool sent_continue = false;
    bool writable_watched = false;
    MockReply pending;  // kDelaying: what to do when the delay ends.
  };

  struct Timer {
    Clock::time_point when;
    int fd;
    uint64_t serial;
    bool operator>(const Timer& o) const { return when > o.when; }
  };

  void Watch(int fd, uint32_t events, int op) {
    epoll_event e{};
    e.events = events;
    e.data.fd = fd;
    epoll_ctl(epoll_fd_, op, fd, &e);
  }

  int NextTimeoutMs() {
    if (timers_.empty()) return -1;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(
        timers_.top().when - Clock::now());
    return static_cast<int>(std::max<int64_t>(0, left.count()));
  }

  void Accept() {
    while (true) {
      sockaddr_storage peer{};
      socklen_t len = sizeof peer;
      int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
            errno == ENOMEM) {
          // Out of descriptors: stop accepting for a while instead of
          // spinning on a listener that stays readable.
          Watch(listen_fd_, 0, EPOLL_CTL_MOD);
          timers_.push({Clock::now() + std::chrono::milliseconds(50), -1, 0});
        }
        return;
      }
      int yes = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
      auto c = std::make_unique<Conn>();
      c->fd = fd;
      c->serial = ++serial_;
      c->peer_port = PortOf(peer);
      Watch(fd, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_ADD);
      conns_[fd] = std::move(c);
    }
  }

  // Closes the connection; `c` stays valid (in state kClosed) until the
  // end of the loop's round, so callers up the stack can see it ended.
  void Close(Conn& c) {
    if (c.state == State::kClosed) return;
    if (c.state == State::kDelaying || c.state == State::kHolding) --held_;
    c.state = State::kClosed;
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
    auto it = conns_.find(c.fd);
    closed_.push_back(std::move(it->second));
    conns_.erase(it);
  }

  void OnConnection(int fd, uint32_t ev) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) return;
    Conn& c = *it->second;
    if (ev & EPOLLIN) {
      char buf[65536];
      while (true) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) {
          c.in.append(buf, static_cast<size_t>(n));
          if (n < static_cast<ssize_t>(sizeof buf)) break;
          continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
        // The peer closed (or reset): whatever it waited for is moot.
        Close(c);
        return;
      }
    } else if (ev & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
      Close(c);
      return;
    }
    if ((ev & EPOLLOUT) && c.state == State::kWriting) {
      if (!Flush(c)) return;
    }
    if (c.state == State::kReading) Serve(c);
  }

  // Serves every complete request in c.in, one at a time. Returns with the
  // connection waiting (for bytes, a timer, or the socket) or closed.
  void Serve(Conn& c) {
    while (c.state == State::kReading) {
      ParsedRequest req;
      ParseResult r = ParseRequest(c.in, req);
      if (r.state == ParseResult::State::kNeedMore) {
        if (r.wants_continue && !c.sent_continue) {
          c.sent_continue = true;
          c.out += "HTTP/1.1 100 Continue\r\n\r\n";
          c.state = State::kWriting;
          c.hold_after_write = false;
          if (!Flush(c)) return;
        }
        return;
      }
      if (r.state == ParseResult::State::kBad) {
        std::string body = DumpJson(
            nlohmann::json{{"error", {{"message", "mock: " + r.error}}}});
        c.in.clear();
        Send(c, Head(r.status, {}, body.size(), false) + body, true);
        return;
      }
      c.in.erase(0, r.consumed);
      c.sent_continue = false;
      c.keep_alive = req.keep_alive;
      Dispatch(c, req);
    }
  }

  void Dispatch(Conn& c, const ParsedRequest& req) {
    MockEngine& engine = *server_.engine_;
    if (req.method == "GET" && req.path == "/_requests") {
      Respond(c, 200, {}, engine.RequestsJson());
      return;
    }
    if (req.method == "GET" && req.path == "/_stats") {
      nlohmann::json stats = {{"requests", engine.RequestCount()},
                              {"max_held", server_.max_held_.load()},
                              {"held", held_},
                              {"connections", conns_.size()}};
      Respond(c, 200, {}, DumpJson(stats));
      return;
    }
    if (req.method == "GET" && req.path == "/_failures") {
      Respond(c, 200, {},
              DumpJson(nlohmann::json(engine.ExpectationFailures()), 2));
      return;
    }
    if (req.method != "POST" ||
        (req.path.find("/chat/completions") == std::string::npos &&
         req.path.find("/messages") == std::string::npos)) {
      Respond(c, 404, {}, R"({"error":{"message":"mock: unknown path"}})");
      return;
    }
    MockReply reply =
        engine.Handle(req.path, req.headers, req.body, c.peer_port);
    if (reply.delay.count() > 0) {
      c.state = State::kDelaying;
      NoteHeld();
      timers_.push({Clock::now() + reply.delay, c.fd, c.serial});
      c.pending = std::move(reply);
      return;
    }
    Act(c, reply);
  }

  // Does what the reply says, its delay over.
  void Act(Conn& c, const MockReply& reply) {
    switch (reply.kind) {
      case MockReply::Kind::kHang:
        c.state = State::kHolding;
        NoteHeld();
        return;
      case MockReply::Kind::kDrop:
        shutdown(c.fd, SHUT_RDWR);
        Close(c);
        return;
      case MockReply::Kind::kRespond:
        break;
    }
    if (!reply.stream) {
      Respond(c, reply.status, reply.headers, reply.body);
      return;
    }
    std::string out = Head(reply.status, reply.headers, std::nullopt,
                           c.keep_alive && !reply.hang_after_events);
    for (const std::string& e : reply.events) AppendChunk(out, e);
    if (!reply.hang_after_events) out += "0\r\n\r\n";
    c.hold_after_write = reply.hang_after_events;
    Send(c, std::move(out), !c.keep_alive);
  }

  void Respond(Conn& c, int status, const HttpHeaders& headers,
               const std::string& body) {
    c.hold_after_write = false;
    Send(c, Head(status, headers, body.size(), c.keep_alive) + body,
         !c.keep_alive);
  }

  void Send(Conn& c, std::string bytes, bool close_after) {
    c.out = std::move(bytes);
    c.out_sent = 0;
    c.close_after_write = close_after;
    c.state = State::kWriting;
    Flush(c);
  }

  // Writes what it can. Returns false when the connection was closed.
  bool Flush(Conn& c) {
    while (c.out_sent < c.out.size()) {
      ssize_t n = send(c.fd, c.out.data() + c.out_sent,
                       c.out.size() - c.out_sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.out_sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (!c.writable_watched) {
          c.writable_watched = true;
          Watch(c.fd, EPOLLIN | EPOLLRDHUP | EPOLLOUT, EPOLL_CTL_MOD);
        }
        return true;
      }
      Close(c);
      return false;
    }
    if (c.writable_watched) {
      c.writable_watched = false;
      Watch(c.fd, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_MOD);
    }
    c.out.clear();
    c.out_sent = 0;
    if (c.hold_after_write) {
      c.state = State::kHolding;
      NoteHeld();
      return true;
    }
    if (c.close_after_write) {
      shutdown(c.fd, SHUT_WR);
      Close(c);
      return false;
    }
    c.state = State::kReading;
    return true;
  }

  void NoteHeld() {
    ++held_;
    size_t seen = server_.max_held_.load();
    while (held_ > seen &&
           !server_.max_held_.compare_exchange_weak(seen, held_)) {
    }
  }

  void FireTimers() {
    auto now = Clock::now();
    while (!timers_.empty() && timers_.top().when <= now) {
      Timer t = timers_.top();
      timers_.pop();
      if (t.fd < 0) {
        Watch(listen_fd_, EPOLLIN, EPOLL_CTL_MOD);
        Accept();
        continue;
      }
      auto it = conns_.find(t.fd);
      if (it == conns_.end() || it->second->serial != t.serial) continue;
      Conn& c = *it->second;
      if (c.state != State::kDelaying) continue;
      --held_;
      c.state = State::kReading;  // Act() moves it on.
      MockReply reply = std::move(c.pending);
      Act(c, reply);
      // A request the client sent behind this one is served next.
      if (c.state == State::kReading) Serve(c);
    }
  }

  MockHttpServer& server_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  bool stopping_ = false;
  uint64_t serial_ = 0;
  size_t held_ = 0;
  std::map<int, std::unique_ptr<Conn>> conns_;
  std::vector<std::unique_ptr<Conn>> closed_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
};

MockHttpServer::MockHttpServer(std::shared_ptr<MockEngine> engine)
    : engine_(std::move(engine)) {}

MockHttpServer::~MockHttpServer() { Stop(); }

std::string MockHttpServer::base_url() const {
  return "http://" + host_ + ":" + std::to_string(port_) + "/v1";
}

Status MockHttpServer::Start(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string port_text = std::to_string(port);
  std::string where = host + ":" + port_text;
  if (getaddrinfo(host.c_str(), port_text.c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return IoError("mock_provider: cannot bind " + where + ": unknown host");
  }
  int fd = -1;
  int last_errno = 0;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                a->ai_protocol);
    if (fd < 0) {
      last_errno = errno;
      continue;
    }
    // Only SO_REUSEADDR: SO_REUSEPORT would let a second server share a
    // port another one listens on, each getting some of the connections,
    // instead of failing to bind.
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 65535) == 0) {
      break;
    }
    last_errno = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return IoError("mock_provider: cannot bind " + where + ": " +
                   std::strerror(last_errno));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  host_ = host;
  port_ = PortOf(bound);
  loop_ = std::make_unique<Loop>(*this, fd);
  Status s = loop_->Init();
  if (!s.ok()) {
    loop_.reset();
    return s;
  }
  thread_ = std::thread([this] { loop_->Run(); });
  return Status::Ok();
}

void MockHttpServer::Stop() {
  if (!loop_) return;
  loop_->Wake();
  if (thread_.joinable()) thread_.join();
  loop_.reset();  // Closes every connection and the listener.
}

}  // namespace steps
