#include "mock_provider/server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/json_text.h"

namespace steps {
namespace {

int PortOf(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  }
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  }
  return -1;
}

// Calls fn(fd, local port, peer port) for every connected socket of this
// process.
template <typename Fn>
void ForEachConnection(Fn fn) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (dirent* e = readdir(dir)) {
    int fd = std::atoi(e->d_name);
    if (fd <= 2) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
      continue;
    }
    if (!fn(fd, PortOf(local), PortOf(peer))) break;
  }
  closedir(dir);
}

// The socket of the connection a request came in on. httplib does not hand
// it to handlers, so it is found by its two ports among this process's
// descriptors; -1 when not found.
int FindConnectionFd(int local_port, int remote_port) {
  int found = -1;
  ForEachConnection([&](int fd, int local, int peer) {
    if (local != local_port || peer != remote_port) return true;
    found = fd;
    return false;
  });
  return found;
}

bool PeerClosed(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

}  // namespace

MockHttpServer::MockHttpServer(std::shared_ptr<MockEngine> engine)
    : engine_(std::move(engine)),
      server_(std::make_unique<httplib::Server>()) {}

MockHttpServer::~MockHttpServer() { Stop(); }

std::string MockHttpServer::base_url() const {
  return "http://" + host_ + ":" + std::to_string(port_) + "/v1";
}

bool MockHttpServer::Wait(Millis d, int fd) {
  auto until = std::chrono::steady_clock::now() + d;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    auto now = std::chrono::steady_clock::now();
    if (d.count() >= 0 && now >= until) return true;
    if (fd >= 0 && PeerClosed(fd)) return true;
    // Peer closes are polled; Stop() wakes at once.
    auto slice = now + Millis(20);
    cv_.wait_until(lock, d.count() >= 0 ? std::min(slice, until) : slice);
  }
  return false;
}

void MockHttpServer::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return stopping_.load(); });
}

Status MockHttpServer::Start(const std::string& host, int port) {
  httplib::Server& svr = *server_;
  svr.new_task_queue = [] { return new httplib::ThreadPool(64); };
  svr.set_keep_alive_max_count(100000);
  svr.set_keep_alive_timeout(30);
  svr.set_tcp_nodelay(true);

  // Only SO_REUSEADDR: the library's default SO_REUSEPORT would let a
  // second server share a port another one listens on, each getting some of
  // the connections, instead of failing to bind.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  svr.Get("/_requests",
          [this](const httplib::Request&, httplib::Response& res) {
            res.set_content(engine_->RequestsJson(), "application/json");
          });
  svr.Get("/_failures", [this](const httplib::Request&,
                               httplib::Response& res) {
    res.set_content(DumpJson(nlohmann::json(engine_->ExpectationFailures()), 2),
                    "application/json");
  });
  svr.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
    if (req.path.find("/chat/completions") == std::string::npos &&
        req.path.find("/messages") == std::string::npos) {
      res.status = 404;
      res.set_content(R"({"error":{"message":"mock: unknown path"}})",
                      "application/json");
      return;
    }
    HttpHeaders headers;
    for (const auto& [k, v] : req.headers) headers.emplace_back(k, v);
    MockReply reply =
        engine_->Handle(req.path, headers, req.body, req.remote_port);
    int fd = -1;
    if (reply.kind != MockReply::Kind::kRespond || reply.hang_after_events ||
        reply.delay.count() > 0) {
      fd = FindConnectionFd(req.local_port, req.remote_port);
    }
    if (reply.delay.count() > 0 && !Wait(reply.delay, fd)) {
      res.status = 503;
      return;
    }
    if (reply.kind == MockReply::Kind::kHang) Wait(Millis(-1), fd);
    if (reply.kind != MockReply::Kind::kRespond) {
      // No answer: close the connection under httplib, whose write of its
      // default response then fails quietly.
      if (fd >= 0) shutdown(fd, SHUT_RDWR);
      return;
    }
    res.status = reply.status;
    std::string type = "application/json";
    for (const auto& [k, v] : reply.headers) {
      if (strcasecmp(k.c_str(), "content-type") == 0) {
        type = v;
      } else {
        res.set_header(k.c_str(), v);
      }
    }
    if (!reply.stream) {
      res.set_content(reply.body, type.c_str());
      return;
    }
    auto events = std::make_shared<std::vector<std::string>>(reply.events);
    bool hang = reply.hang_after_events;
    res.set_chunked_content_provider(
        type.c_str(),
        [this, events, hang, fd](size_t, httplib::DataSink& sink) {
          for (const std::string& e : *events) {
            if (!sink.write(e.data(), e.size())) return false;
          }
          if (hang) {
            Wait(Millis(-1), fd);
            if (fd >= 0) shutdown(fd, SHUT_RDWR);
            return false;
          }
          sink.done();
          return true;
        });
  });

  host_ = host;
  if (port == 0) {
    port_ = svr.bind_to_any_port(host);
    if (port_ <= 0) return IoError("mock_provider: cannot bind " + host);
  } else {
    if (!svr.bind_to_port(host, port)) {
      return IoError("mock_provider: cannot bind " + host + ":" +
                     std::to_string(port));
    }
    port_ = port;
  }
  auto listen_ended = std::make_shared<std::atomic<bool>>(false);
  thread_ = std::thread([this, listen_ended] {
    server_->listen_after_bind();
    *listen_ended = true;
  });
  // httplib's stop() is a no-op until the listener runs: wait for it, so a
  // Stop() right after Start() cannot miss it.
  while (!server_->is_running() && !*listen_ended) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (*listen_ended) return IoError("mock_provider: the listener failed");
  return Status::Ok();
}

void MockHttpServer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  server_->stop();
  // Idle keep-alive connections would hold their worker threads until the
  // keep-alive timeout; close them so Stop returns at once.
  if (port_ > 0) {
    ForEachConnection([&](int fd, int local, int) {
      if (local == port_) shutdown(fd, SHUT_RDWR);
      return true;
    });
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace steps
