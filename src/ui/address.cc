#include "ui/address.h"

namespace steps::ui {

Result<ListenAddress> ParseListenAddress(const std::string& text) {
  const size_t colon = text.rfind(':');
  int port = -1;
  if (colon != std::string::npos && colon + 1 < text.size() &&
      text.find_first_not_of("0123456789", colon + 1) == std::string::npos &&
      text.size() - colon - 1 <= 5) {
    port = std::stoi(text.substr(colon + 1));
  }
  std::string host = colon == std::string::npos ? "" : text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty() || port < 0 || port > 65535) {
    return InvalidArgument("expected HOST:PORT, e.g. 127.0.0.1:8080 (got '" +
                           text + "')");
  }
  return ListenAddress{host, port};
}

std::string BaseUrl(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host + "]" : host) + ":" +
         std::to_string(port) + "/";
}

std::string PageUrl(const std::string& host, int port,
                    const std::string& token) {
  return BaseUrl(host, port) + "?token=" + token;
}

}  // namespace steps::ui
