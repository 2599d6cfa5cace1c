// Where the web UI listens: parsing `--listen HOST:PORT` and naming the
// page's address. Apart from the server (ui/server.h), so that `steps`
// itself, which leaves serving to the `steps-ui` program, links no HTTP
// server.
#ifndef STEPS_UI_ADDRESS_H_
#define STEPS_UI_ADDRESS_H_

#include <string>

#include "core/status.h"

namespace steps::ui {

struct ListenAddress {
  std::string host;
  int port = 0;  // 0: any free port.
};

// "HOST:PORT" (e.g. "127.0.0.1:8080", "[::1]:0"); InvalidArgument with a
// message naming the expected form otherwise.
Result<ListenAddress> ParseListenAddress(const std::string& text);

// "http://HOST:PORT/" ("http://[::1]:8080/" for an IPv6 host).
std::string BaseUrl(const std::string& host, int port);
// The page with the server's token: BaseUrl + "?token=TOKEN". Whoever
// opens it may decide gates (ui/server.h).
std::string PageUrl(const std::string& host, int port,
                    const std::string& token);

}  // namespace steps::ui

#endif  // STEPS_UI_ADDRESS_H_
