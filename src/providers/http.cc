#include "providers/http.h"

#include <strings.h>

#include <cerrno>

namespace steps {

std::optional<std::string> FindHeader(const HttpHeaders& headers,
                                      std::string_view name) {
  for (const auto& [key, value] : headers) {
    if (key.size() == name.size() &&
        strncasecmp(key.data(), name.data(), name.size()) == 0) {
      return value;
    }
  }
  return std::nullopt;
}

bool IsDescriptorShortage(long os_errno) {
  return os_errno == EMFILE || os_errno == ENFILE;
}

TransportError DescriptorShortage(long os_errno) {
  return TransportError{
      TransportErrorKind::kNoDescriptors,
      std::string("out of file descriptors (") +
          (os_errno == ENFILE ? "ENFILE: the system's table is full"
                              : "EMFILE: this process's limit, ulimit -n") +
          "); no connection was attempted"};
}

}  // namespace steps
