// What stands between the UI's handlers and the network: which Host names
// it answers (a page on another site that rebinds its DNS name to 127.0.0.1
// must not read runs), and how long a client may take to send its request
// (clients that trickle their headers must not hold the threads that serve
// everyone else).
#ifndef STEPS_UI_HTTP_GUARD_H_
#define STEPS_UI_HTTP_GUARD_H_

#include <httplib.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace steps::ui {

// The Host header values a server answers.
class HostAllowList {
 public:
  // Answers `listen_host`, localhost, 127.0.0.1 and [::1] with `port`
  // (no port in the header means 80), and each of `extra`: "NAME" with any
  // port, "NAME:PORT" or "[V6]:PORT" with that port. Names compare without
  // case.
  HostAllowList(std::string listen_host, int port,
                std::vector<std::string> extra);

  // Whether a request whose Host header is `header` is for this server.
  // An empty or malformed header is not.
  bool Allows(std::string_view header) const;

 private:
  struct Entry {
    std::string name;  // Lower case; an IPv6 address without brackets.
    int port = -1;     // -1: any port.
  };
  std::vector<Entry> entries_;
};

// An httplib::Server that reads each connection's request under one
// deadline and answers one request per connection (Connection: close), so
// a connection holds a worker for at most `read_deadline` before its
// request is complete, however slowly its bytes arrive, and for at most
// `answer_deadline` in all, however slowly it reads the answer.
class GuardedServer : public httplib::Server {
 public:
  struct Options {
    // From accept until the request line, headers and body are in; a
    // client still sending then is cut off. Default: 5 s.
    std::chrono::milliseconds read_deadline{5000};
    // How long one write may wait for a client that does not read before
    // the connection is dropped. Default: 10 s.
    std::chrono::milliseconds write_stall{10000};
    // From accept until the answer is written in full; a client still
    // reading then is cut off, so clients that read slowly hold the
    // workers for this long at most. Default: 20 s.
    std::chrono::milliseconds answer_deadline{20000};
    // Worker threads: this many connections are served at once; more wait
    // in the accept queue. Default: 32.
    size_t threads = 32;
  };

  GuardedServer();
  explicit GuardedServer(Options options);

 private:
  // Called by the library on a worker thread for each accepted socket.
  bool process_and_close_socket(socket_t sock) override;

  Options options_;
};

}  // namespace steps::ui

#endif  // STEPS_UI_HTTP_GUARD_H_
