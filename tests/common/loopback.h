// A TCP socket listening on 127.0.0.1, at a port the kernel picks: for the
// tests' own servers and for ports a test needs taken.
#ifndef STEPS_TESTS_COMMON_LOOPBACK_H_
#define STEPS_TESTS_COMMON_LOOPBACK_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace steps::test_support {

// The listening socket (close-on-exec) with `backlog`, its port in *port;
// -1 when it could not be made.
inline int ListenOnLoopback(int backlog, int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

}  // namespace steps::test_support

#endif  // STEPS_TESTS_COMMON_LOOPBACK_H_
