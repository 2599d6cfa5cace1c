// CurlTransport's own HTTP/1.1 for plain requests to an IP address
// (providers/plain_http.h), against a raw loopback server; where libcurl's
// behaviour is the reference, the same test runs by libcurl
// (STEPS_HTTP=libcurl) too.
#include "providers/plain_http.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "common/loopback.h"
#include "common/raw_http_server.h"
#include "providers/curl_transport.h"

namespace steps {
namespace {

using test_support::RawHttpServer;

// Sets STEPS_HTTP for the test's life.
class HttpChoice {
 public:
  explicit HttpChoice(bool libcurl) {
    if (libcurl) {
      setenv("STEPS_HTTP", "libcurl", 1);
    } else {
      unsetenv("STEPS_HTTP");
    }
  }
  ~HttpChoice() { unsetenv("STEPS_HTTP"); }
};

class PlainHttpTest : public ::testing::TestWithParam<bool> {};

TransportResult PostTo(CurlTransport& transport, const std::string& url,
                       const std::string& body = "{}") {
  TransferOptions options;
  options.time_limit = Millis(20000);
  return transport.Post(HttpRequest{url, {{"Content-Type", "application/json"}},
                                    body},
                        options);
}

// A server that closes a kept connection while it is idle (its keep-alive
// timeout; Node's is 5 s) without saying so: the next request goes on a
// new connection and succeeds, sent once, though no loop round ran in
// between to see the close.
TEST_P(PlainHttpTest, AKeptConnectionTheServerClosedIsNotUsed) {
  HttpChoice choice(GetParam());
  RawHttpServer server([](int, const std::string&) {
    return RawHttpServer::Reply{
        RawHttpServer::Response("{\"n\":1}", "application/json", 200,
                                "Connection: keep-alive\r\n"),
        /*close=*/true};
  });
  CurlTransport transport;
  TransportResult first = PostTo(transport, server.base_url() + "/v1/x");
  ASSERT_TRUE(first.ok()) << first.error().message;
  ASSERT_TRUE(server.WaitForClosed(1, std::chrono::seconds(10)));
  TransportResult second = PostTo(transport, server.base_url() + "/v1/x");
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(second.response().body, "{\"n\":1}");
  EXPECT_FALSE(second.response().reused_connection);
  EXPECT_EQ(server.requests(), 2);
  EXPECT_EQ(server.connections(), 2);
  EXPECT_EQ(transport.connections_opened(), 2);
}

// Requests on one kept connection: one connection, every answer whole.
TEST_P(PlainHttpTest, AKeptConnectionCarriesTheNextRequests) {
  HttpChoice choice(GetParam());
  RawHttpServer server([](int i, const std::string&) {
    return RawHttpServer::Reply{
        RawHttpServer::Response("{\"n\":" + std::to_string(i) + "}"), false};
  });
  CurlTransport transport;
  for (int i = 0; i < 5; ++i) {
    TransportResult r = PostTo(transport, server.base_url() + "/v1/x");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r.response().body, "{\"n\":" + std::to_string(i) + "}");
    EXPECT_EQ(r.response().reused_connection, i > 0);
  }
  EXPECT_EQ(server.connections(), 1);
}

// A listener that never accepts, with its queue filled: a connection to it
// is never made (the kernel drops its SYN).
class FullListener {
 public:
  FullListener() {
    fd_ = test_support::ListenOnLoopback(0, &port_);
    if (fd_ < 0) std::abort();
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    // Connects until one is not made within 200 ms: the queue is full.
    for (int i = 0; i < 16; ++i) {
      const int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      fillers_.push_back(c);
      connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
      pollfd p{c, POLLOUT, 0};
      if (poll(&p, 1, 200) == 0) return;
    }
    std::abort();
  }
  ~FullListener() {
    for (int c : fillers_) close(c);
    close(fd_);
  }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/v1";
  }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::vector<int> fillers_;
};

// A connection that is never made ends at the transport's limit on
// connecting, well before the request's own time limit, as a time-out.
TEST_P(PlainHttpTest, AConnectionNeverMadeEndsAtTheConnectionLimit) {
  HttpChoice choice(GetParam());
  FullListener listener;
  CurlTransport::Options options;
  options.connect_timeout = Millis(300);
  CurlTransport transport(options);
  TransferOptions transfer;
  transfer.time_limit = Millis(20000);
  const auto start = std::chrono::steady_clock::now();
  TransportResult r =
      transport.Post(HttpRequest{listener.url(), {}, "{}"}, transfer);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, TransportErrorKind::kTimedOut) << r.error().message;
  // Tolerance: at least the limit; at most 5 s on a loaded machine, far
  // under the 20 s time limit.
  EXPECT_GE(took, std::chrono::milliseconds(290));
  EXPECT_LT(took, std::chrono::seconds(5));
}

// The request's time limit ends a request whose connection is never made
// when it is the nearer.
TEST_P(PlainHttpTest, TheTimeLimitEndsAConnectionNeverMade) {
  HttpChoice choice(GetParam());
  FullListener listener;
  CurlTransport transport;  // Connection limit 10 s.
  TransferOptions transfer;
  transfer.time_limit = Millis(300);
  const auto start = std::chrono::steady_clock::now();
  TransportResult r =
      transport.Post(HttpRequest{listener.url(), {}, "{}"}, transfer);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, TransportErrorKind::kTimedOut) << r.error().message;
  EXPECT_GE(took, std::chrono::milliseconds(290));
  EXPECT_LT(took, std::chrono::seconds(5));
}

INSTANTIATE_TEST_SUITE_P(ByEither, PlainHttpTest, ::testing::Bool(),
                         [](const auto& info) {
                           return info.param ? "libcurl" : "plain";
                         });

// What the server reads: the request line, Host and Content-Length, the
// request's own headers, then the body, byte for byte.
TEST(PlainHttpWireTest, TheServerReadsTheRequestAsSent) {
  std::mutex mu;
  std::string seen;
  RawHttpServer server([&](int, const std::string& request) {
    std::lock_guard<std::mutex> lock(mu);
    seen = request;
    return RawHttpServer::Reply{RawHttpServer::Response("{}"), false};
  });
  CurlTransport transport;
  const std::string body(200000, 'b');  // Larger than one send.
  TransportResult r =
      PostTo(transport, server.base_url() + "/v1/chat/completions?x=1", body);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string port = server.base_url().substr(17);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(seen,
            "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: 127.0.0.1:" +
                port + "\r\nContent-Length: 200000\r\n"
                       "Content-Type: application/json\r\nAccept: */*\r\n\r\n" +
                body);
}

// A header that would break the head (a smuggled second request) is
// refused before anything is sent.
TEST(PlainHttpWireTest, AHeaderWithALineBreakIsNotSent) {
  RawHttpServer server([](int, const std::string&) {
    return RawHttpServer::Reply{RawHttpServer::Response("{}"), false};
  });
  CurlTransport transport;
  TransferOptions options;
  options.time_limit = Millis(5000);
  TransportResult r = transport.Post(
      HttpRequest{server.base_url(),
                  {{"X-Note", "a\r\nContent-Length: 0\r\n\r\nGET / HTTP/1.1"}},
                  "{}"},
      options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, TransportErrorKind::kOther);
  EXPECT_NE(r.error().message.find("line break"), std::string::npos);
  EXPECT_EQ(server.connections(), 0);
}

// A chunked answer reaches the reader decoded, piece by piece as sent.
TEST(PlainHttpWireTest, AChunkedAnswerIsReadAsItComes) {
  RawHttpServer server([](int, const std::string&) {
    return RawHttpServer::Reply{
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        "6\r\ndata: \r\n3\r\n{}\n\r\n1\r\n\n\r\n0\r\n\r\n",
        false};
  });
  CurlTransport transport;
  TransferOptions options;
  options.time_limit = Millis(5000);
  std::string read;
  options.reader = [&](std::string_view piece) {
    read.append(piece);
    return true;
  };
  TransportResult r =
      transport.Post(HttpRequest{server.base_url(), {}, "{}"}, options);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(read, "data: {}\n\n");
  EXPECT_EQ(r.response().body, "data: {}\n\n");
  EXPECT_TRUE(r.response().reused_connection == false);
}

// A child holding copies of the transport's sockets (a task's, between its
// fork and its exec) keeps a closed connection's socket alive: it must not
// wake the loop any more. The server's handler forks such a child while
// the first connection is open, then closes that connection; twenty more
// requests, each on a connection of its own, all succeed (under ASan, an
// event naming the freed connection is a use after free).
TEST(PlainHttpWireTest, ASocketAChildStillHoldsNoLongerWakesTheLoop) {
  int hold[2];
  ASSERT_EQ(pipe(hold), 0);
  std::atomic<pid_t> child{0};
  std::atomic<int> server_port{0};
  RawHttpServer server([&](int i, const std::string&) {
    if (i == 0) {
      const pid_t pid = fork();
      if (pid == 0) {
        // The child keeps the client's sockets only: the server's end of
        // the connection closes with the server's close, which wakes the
        // client's end the child holds.
        for (int fd = 3; fd < 1024; ++fd) {
          sockaddr_in a{};
          socklen_t len = sizeof a;
          if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0 &&
              a.sin_family == AF_INET && ntohs(a.sin_port) == server_port)
            close(fd);
        }
        close(hold[1]);
        char c;
        while (read(hold[0], &c, 1) > 0) {
        }
        _exit(0);
      }
      child = pid;
    }
    return RawHttpServer::Reply{RawHttpServer::Response("{\"n\":1}"), true};
  });
  server_port = std::stoi(server.base_url().substr(17));
  CurlTransport transport;
  for (int i = 0; i < 21; ++i) {
    TransportResult r = PostTo(transport, server.base_url() + "/v1/x");
    ASSERT_TRUE(r.ok()) << i << ": " << r.error().message;
    EXPECT_EQ(r.response().body, "{\"n\":1}");
  }
  close(hold[1]);
  close(hold[0]);
  ASSERT_GT(child.load(), 0);
  int status = 0;
  waitpid(child.load(), &status, 0);
}

// A server that answers with a body without end, as fast as the socket
// takes it.
class FloodServer {
 public:
  FloodServer() {
    fd_ = test_support::ListenOnLoopback(4, &port_);
    if (fd_ < 0) std::abort();
    thread_ = std::thread([this] {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char request[4096];
      if (read(c, request, sizeof request) > 0) {
        const std::string head = "HTTP/1.1 200 OK\r\n\r\n";
        send(c, head.data(), head.size(), MSG_NOSIGNAL);
        const std::string chunk(64 * 1024, 'f');
        while (!stop_ && send(c, chunk.data(), chunk.size(), MSG_NOSIGNAL) > 0) {
        }
      }
      close(c);
    });
  }
  ~FloodServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/v1";
  }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A flood keeps the socket ready at every round: the time limit still
// ends the request on time, not when the size bound is reached.
TEST(PlainHttpWireTest, AFloodIsCutAtTheTimeLimit) {
  FloodServer server;
  CurlTransport transport;
  TransferOptions options;
  options.time_limit = Millis(500);
  options.max_response_bytes = size_t{3} << 30;
  const auto start = std::chrono::steady_clock::now();
  TransportResult r =
      transport.Post(HttpRequest{server.url(), {}, "{}"}, options);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, TransportErrorKind::kTimedOut) << r.error().message;
  // Tolerance: the limit, plus 1.5 s for a loaded machine (reading the
  // 3 GiB bound would take tens of seconds).
  EXPECT_LT(took, std::chrono::milliseconds(2000));
}

// What goes by plain HTTP and what by libcurl.
TEST(PlainHttpTargetTest, OnlyPlainUrlsToAnAddressWithoutAProxy) {
  HttpChoice choice(false);
  EXPECT_TRUE(PlainTargetOf("http://127.0.0.1:8080/v1"));
  EXPECT_TRUE(PlainTargetOf("http://[::1]:11434/v1"));
  EXPECT_FALSE(PlainTargetOf("http://localhost:8080/v1"));
  EXPECT_FALSE(PlainTargetOf("https://127.0.0.1:8443/v1"));
  EXPECT_FALSE(PlainTargetOf("http://999.0.0.1/v1"));
  setenv("http_proxy", "http://proxy.internal:3128", 1);
  EXPECT_FALSE(PlainTargetOf("http://127.0.0.1:8080/v1"));
  unsetenv("http_proxy");
  setenv("ALL_PROXY", "socks5://p:1080", 1);
  EXPECT_FALSE(PlainTargetOf("http://127.0.0.1:8080/v1"));
  unsetenv("ALL_PROXY");
  setenv("STEPS_HTTP", "libcurl", 1);
  EXPECT_FALSE(PlainTargetOf("http://127.0.0.1:8080/v1"));
}

}  // namespace
}  // namespace steps
