#include "providers/curl_transport.h"

#include <curl/curl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>

namespace steps {
namespace {

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// Owns a curl_slist.
class HeaderList {
 public:
  HeaderList() = default;
  ~HeaderList() { curl_slist_free_all(list_); }
  HeaderList(const HeaderList&) = delete;
  HeaderList& operator=(const HeaderList&) = delete;
  void Add(const std::string& line) {
    list_ = curl_slist_append(list_, line.c_str());
  }
  curl_slist* get() const { return list_; }

 private:
  curl_slist* list_ = nullptr;
};

// Shared between a transfer and its cancel callback, which may run on
// another thread, even just after the transfer ended.
struct WakeState {
  std::mutex mu;
  CURLM* multi = nullptr;  // Null once the transfer is over.
  std::atomic<bool> cancelled{false};
};

// Per-transfer state reached from libcurl's callbacks.
struct Transfer {
  CURL* easy = nullptr;
  const TransferOptions* options = nullptr;
  HttpResponse response;
  // The request body and how much of it libcurl has read.
  std::string_view body;
  size_t body_sent = 0;
  // libcurl wanted to re-send the request on a fresh connection after a
  // reused one died; refused (see OnSeek).
  bool resend_refused = false;
  // errno of a socket() that failed (EMFILE, ...); 0 when none did.
  int socket_errno = 0;
  bool too_large = false;
  bool headers_done = false;
  std::chrono::steady_clock::time_point last_data;
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  std::string_view line(data, n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
    line.remove_suffix(1);
  }
  t->last_data = std::chrono::steady_clock::now();
  if (line.rfind("HTTP/", 0) == 0) {
    // A new response (after 100 Continue, say): start over.
    t->response.headers.clear();
    t->headers_done = false;
  } else if (line.empty()) {
    t->headers_done = true;
  } else if (auto colon = line.find(':'); colon != std::string_view::npos) {
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
      value.remove_prefix(1);
    }
    t->response.headers.emplace_back(std::string(line.substr(0, colon)),
                                     std::string(value));
  }
  return n;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  t->last_data = std::chrono::steady_clock::now();
  if (t->response.body.size() + n > t->options->max_response_bytes) {
    t->too_large = true;
    return 0;  // Aborts the transfer.
  }
  t->response.body.append(data, n);
  if (t->options->reader) {
    long status = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300 &&
        !t->options->reader(std::string_view(data, n))) {
      t->response.stopped_by_reader = true;
      return 0;
    }
  }
  return n;
}

size_t OnRead(char* buffer, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = std::min(size * count, t->body.size() - t->body_sent);
  std::memcpy(buffer, t->body.data() + t->body_sent, n);
  t->body_sent += n;
  return n;
}

// libcurl rewinds the body only to send the request again: after a reused
// keep-alive connection died with no answer it silently retries on a new
// one. That second request would escape `attempts` and every log, so it is
// refused here; the transfer fails (kClosed) and the retry policy decides.
int OnSeek(void* user, curl_off_t offset, int origin) {
  auto* t = static_cast<Transfer*>(user);
  if (offset == 0 && origin == SEEK_SET && t->body_sent == 0) {
    return CURL_SEEKFUNC_OK;  // Nothing was sent: nothing is re-sent.
  }
  t->resend_refused = true;
  return CURL_SEEKFUNC_FAIL;
}

// Opens the transfer's sockets: close-on-exec, so tasks started while a
// request is in flight do not inherit them, and with socket()'s errno kept,
// since libcurl reports a descriptor shortage as "Couldn't connect".
curl_socket_t OnOpenSocket(void* user, curlsocktype, curl_sockaddr* address) {
  auto* t = static_cast<Transfer*>(user);
  curl_socket_t fd = socket(address->family, address->socktype | SOCK_CLOEXEC,
                            address->protocol);
  if (fd == CURL_SOCKET_BAD) t->socket_errno = errno;
  return fd;
}

// The one place a CURLcode becomes an error kind.
TransportErrorKind KindOf(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
      return TransportErrorKind::kConnect;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return TransportErrorKind::kClosed;
    case CURLE_OPERATION_TIMEDOUT:
      return TransportErrorKind::kTimedOut;
    default:
      return TransportErrorKind::kOther;
  }
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

}  // namespace

struct CurlTransport::Channel {
  CURLM* multi = nullptr;
  CURL* easy = nullptr;
  Channel() : multi(curl_multi_init()), easy(curl_easy_init()) {}
  ~Channel() {
    if (easy) curl_easy_cleanup(easy);
    if (multi) curl_multi_cleanup(multi);
  }
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
};

CurlTransport::CurlTransport() : CurlTransport(Options()) {}
CurlTransport::CurlTransport(Options options) : options_(options) {
  GlobalInitOnce();
}
CurlTransport::~CurlTransport() = default;

std::unique_ptr<CurlTransport::Channel> CurlTransport::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      auto channel = std::move(idle_.back());
      idle_.pop_back();
      return channel;
    }
  }
  return std::make_unique<Channel>();
}

void CurlTransport::Release(std::unique_ptr<Channel> channel) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < options_.max_idle_channels) {
    idle_.push_back(std::move(channel));
  }
}

TransportResult CurlTransport::Post(const HttpRequest& request,
                                    const TransferOptions& options) {
  if (options.cancel.cancelled()) {
    return TransportError{TransportErrorKind::kCancelled, "cancelled"};
  }
  std::unique_ptr<Channel> channel = Acquire();
  if (!channel->multi || !channel->easy) {
    // curl_multi_init opens a wakeup socket pair.
    if (IsDescriptorShortage(errno)) return DescriptorShortage(errno);
    return TransportError{TransportErrorKind::kOther,
                          "could not create a curl handle"};
  }
  CURL* easy = channel->easy;
  curl_easy_reset(easy);

  Transfer t;
  t.easy = easy;
  t.options = &options;
  t.last_data = std::chrono::steady_clock::now();

  HeaderList headers;
  for (const auto& [name, value] : request.headers) {
    headers.Add(name + ": " + value);
  }
  headers.Add("Expect:");  // No 100-continue round trip for large bodies.

  char error_buffer[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(easy, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(easy, CURLOPT_POST, 1L);
  // The body comes through a read callback, not CURLOPT_POSTFIELDS, so
  // that a re-send needs a rewind, which OnSeek refuses.
  t.body = request.body;
  curl_easy_setopt(easy, CURLOPT_READFUNCTION, OnRead);
  curl_easy_setopt(easy, CURLOPT_READDATA, &t);
  curl_easy_setopt(easy, CURLOPT_SEEKFUNCTION, OnSeek);
  curl_easy_setopt(easy, CURLOPT_SEEKDATA, &t);
  curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, OnOpenSocket);
  curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, &t);
  curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                   static_cast<curl_off_t>(request.body.size()));
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout.count()));
  if (options.time_limit) {
    // libcurl reads 0 as "no limit"; a spent limit must still fail.
    long ms =
        static_cast<long>(std::max<int64_t>(1, options.time_limit->count()));
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, ms);
  }

  auto wake = std::make_shared<WakeState>();
  wake->multi = channel->multi;
  CancelCallback on_cancel(options.cancel, [wake] {
    wake->cancelled = true;
    std::lock_guard<std::mutex> lock(wake->mu);
    if (wake->multi) curl_multi_wakeup(wake->multi);
  });

  curl_multi_add_handle(channel->multi, easy);
  bool idle_cut = false;
  int running = 1;
  while (true) {
    CURLMcode mc = curl_multi_perform(channel->multi, &running);
    if (mc != CURLM_OK || running == 0) break;
    if (wake->cancelled || t.too_large || t.response.stopped_by_reader) break;
    int wait_ms = 1000;
    if (options.idle_limit.count() > 0 && t.headers_done) {
      auto silent = std::chrono::steady_clock::now() - t.last_data;
      if (silent >= options.idle_limit) {
        idle_cut = true;
        break;
      }
      auto left = std::chrono::ceil<Millis>(options.idle_limit - silent);
      wait_ms = std::min<int>(wait_ms, static_cast<int>(left.count()));
    }
    curl_multi_poll(channel->multi, nullptr, 0, std::max(1, wait_ms), nullptr);
  }

  CURLcode code = CURLE_OK;
  bool finished = false;
  int left_in_queue = 0;
  while (CURLMsg* msg = curl_multi_info_read(channel->multi, &left_in_queue)) {
    if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy) {
      code = msg->data.result;
      finished = true;
    }
  }
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  long new_connections = 0;
  curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &new_connections);
  long os_errno = 0;
  curl_easy_getinfo(easy, CURLINFO_OS_ERRNO, &os_errno);
  // Removing an unfinished transfer aborts it and closes its connection.
  curl_multi_remove_handle(channel->multi, easy);
  {
    std::lock_guard<std::mutex> lock(wake->mu);
    wake->multi = nullptr;
  }
  Release(std::move(channel));
  connections_opened_ += new_connections;

  t.response.status = static_cast<int>(status);
  t.response.reused_connection = new_connections == 0;
  if (wake->cancelled) {
    return TransportError{TransportErrorKind::kCancelled, "request cancelled"};
  }
  if (t.too_large) {
    return TransportError{TransportErrorKind::kTooLarge,
                          "response larger than " +
                              std::to_string(options.max_response_bytes) +
                              " bytes"};
  }
  if (t.response.stopped_by_reader) return std::move(t.response);
  if (idle_cut) {
    return TransportError{
        TransportErrorKind::kIdle,
        "stream silent for " + FormatDuration(options.idle_limit)};
  }
  if (!finished) {
    return TransportError{TransportErrorKind::kOther,
                          "transfer loop ended unexpectedly"};
  }
  if (t.resend_refused) {
    return TransportError{TransportErrorKind::kClosed,
                          "the server closed a reused connection without "
                          "answering (the request is not re-sent)"};
  }
  if (code != CURLE_OK && IsDescriptorShortage(t.socket_errno)) {
    return DescriptorShortage(t.socket_errno);
  }
  if (code != CURLE_OK && IsDescriptorShortage(os_errno)) {
    return DescriptorShortage(os_errno);
  }
  if (code != CURLE_OK) {
    std::string detail =
        error_buffer[0] ? error_buffer : curl_easy_strerror(code);
    if (code == CURLE_OPERATION_TIMEDOUT && options.time_limit) {
      detail =
          "no complete answer within " + FormatDuration(*options.time_limit);
    }
    return TransportError{KindOf(code), detail};
  }
  return std::move(t.response);
}

CurlTransport& SharedCurlTransport() {
  static CurlTransport* transport = new CurlTransport();
  return *transport;
}

}  // namespace steps
