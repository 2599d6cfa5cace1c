#include "tools/mcp_http_transfer.h"

#include <algorithm>
#include <cctype>
#include <memory>

#include "core/libcurl.h"
#include "core/trim.h"

namespace steps {
namespace {

// The longest single wait for the socket: cancellation and the deadline are
// looked at again after it.
constexpr Millis kMaxPollWait{50};

struct EasyDeleter {
  void operator()(CURL* easy) const { libcurl::easy_cleanup(easy); }
};
struct MultiDeleter {
  void operator()(CURLM* multi) const { libcurl::multi_cleanup(multi); }
};
struct SlistDeleter {
  void operator()(curl_slist* list) const { libcurl::slist_free_all(list); }
};

// What the callbacks share with the loop.
struct Transfer {
  const HttpTransferRequest* request = nullptr;
  HttpReply reply;
  bool stopped = false;
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {
    // A new status line: a 1xx's headers are forgotten.
    t->reply.headers.clear();
    size_t space = line.find(' ');
    t->reply.status =
        space == std::string_view::npos ? 0 : std::atoi(data + space + 1);
    return size * count;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return size * count;
  std::string name(line.substr(0, colon));
  for (char& c : name) c = static_cast<char>(std::tolower(c));
  t->reply.headers.emplace_back(std::move(name),
                                std::string(TrimSpace(line.substr(colon + 1))));
  return size * count;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  if (t->request->on_body &&
      !t->request->on_body(t->reply, std::string_view(data, size * count))) {
    t->stopped = true;
    return 0;  // libcurl ends the transfer with CURLE_WRITE_ERROR.
  }
  return size * count;
}

void Configure(CURL* easy, const HttpTransferRequest& request, Transfer& t,
               curl_slist* headers, char* error_buffer) {
  libcurl::easy_setopt(easy, CURLOPT_URL, request.url.c_str());
  if (request.method == "POST") {
    libcurl::easy_setopt(easy, CURLOPT_POST, 1L);
    libcurl::easy_setopt(easy, CURLOPT_POSTFIELDS, request.body.data());
    libcurl::easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                         static_cast<curl_off_t>(request.body.size()));
  } else {
    libcurl::easy_setopt(easy, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  libcurl::easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  libcurl::easy_setopt(easy, CURLOPT_HEADERFUNCTION, OnHeader);
  libcurl::easy_setopt(easy, CURLOPT_HEADERDATA, &t);
  libcurl::easy_setopt(easy, CURLOPT_WRITEFUNCTION, OnBody);
  libcurl::easy_setopt(easy, CURLOPT_WRITEDATA, &t);
  libcurl::easy_setopt(easy, CURLOPT_ERRORBUFFER, error_buffer);
  libcurl::easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
  libcurl::easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  libcurl::easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  libcurl::easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
}

// Drives the transfer until it is done, stopped, cut by the deadline or
// cancelled. Returns the ending and, when it is done, libcurl's result.
HttpTransferResult::Ending Drive(CURLM* multi, Transfer& t, Clock& clock,
                                 Deadline deadline, const CancelToken& cancel,
                                 CURLcode& code) {
  using Ending = HttpTransferResult::Ending;
  while (true) {
    int running = 0;
    libcurl::multi_perform(multi, &running);
    int queued = 0;
    while (CURLMsg* msg = libcurl::multi_info_read(multi, &queued)) {
      if (msg->msg == CURLMSG_DONE) {
        code = msg->data.result;
        return t.stopped ? Ending::kStopped : Ending::kComplete;
      }
    }
    if (t.stopped) return Ending::kStopped;
    if (t.request->on_idle) t.request->on_idle();
    if (cancel.cancelled()) return Ending::kCancelled;
    Millis wait = kMaxPollWait;
    if (deadline.is_set()) {
      SteadyTime now = clock.Now();
      if (now >= deadline.at()) return Ending::kDeadline;
      wait = std::min(wait, std::chrono::ceil<Millis>(deadline.at() - now));
    }
    libcurl::multi_poll(multi, nullptr, 0, static_cast<int>(wait.count()),
                        nullptr);
  }
}

}  // namespace

std::string HttpReply::Header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return value;
  }
  return "";
}

HttpTransferResult RunHttpTransfer(const HttpTransferRequest& request,
                                   Clock& clock, Deadline deadline,
                                   const CancelToken& cancel) {
  using Ending = HttpTransferResult::Ending;
  HttpTransferResult result;
  std::unique_ptr<CURL, EasyDeleter> easy(libcurl::easy_init());
  std::unique_ptr<CURLM, MultiDeleter> multi(libcurl::multi_init());
  if (!easy || !multi) {
    result.error = libcurl::Loaded() ? "libcurl could not start a transfer"
                                     : libcurl::Error();
    return result;
  }
  curl_slist* list = nullptr;
  for (const std::string& h : request.headers) {
    list = libcurl::slist_append(list, h.c_str());
  }
  std::unique_ptr<curl_slist, SlistDeleter> headers(list);
  Transfer t;
  t.request = &request;
  char error_buffer[CURL_ERROR_SIZE] = {0};
  Configure(easy.get(), request, t, headers.get(), error_buffer);
  libcurl::multi_add_handle(multi.get(), easy.get());
  CURLcode code = CURLE_OK;
  result.ending = Drive(multi.get(), t, clock, deadline, cancel, code);
  libcurl::multi_remove_handle(multi.get(), easy.get());
  if (result.ending == Ending::kComplete && code != CURLE_OK) {
    result.ending = Ending::kFailed;
    result.error =
        error_buffer[0] ? error_buffer : libcurl::easy_strerror(code);
  }
  result.reply = std::move(t.reply);
  return result;
}

}  // namespace steps
