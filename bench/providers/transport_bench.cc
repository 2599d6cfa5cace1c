// N sequential chat requests to the mock provider over loopback, through
// steps' CurlTransport and through a bare libcurl loop doing the same POST;
// prints both costs per request and their ratio (target: <= 1.1).
//   transport_bench [N]      (default 500)
#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "mock_provider/server.h"
#include "providers/curl_transport.h"
#include "providers/openai.h"

namespace steps {
namespace {

using Clock = std::chrono::steady_clock;

size_t Discard(char*, size_t size, size_t n, void* out) {
  *static_cast<size_t*>(out) += size * n;
  return size * n;
}

// Microseconds for n requests through one reused easy handle.
double BareCurl(const std::string& url, const std::string& body, int n) {
  CURL* curl = curl_easy_init();
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, "X-Steps-Agent: bench");
  headers = curl_slist_append(headers, "Expect:");
  size_t received = 0;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Discard);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &received);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    if (curl_easy_perform(curl) != CURLE_OK) {
      std::fprintf(stderr, "bare libcurl request failed\n");
      std::exit(1);
    }
  }
  double us =
      std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return us;
}

double Transport(CurlTransport& transport, const std::string& url,
                 const std::string& body, int n) {
  HttpRequest request;
  request.url = url;
  request.headers = {{"Content-Type", "application/json"},
                     {"X-Steps-Agent", "bench"}};
  request.body = body;
  TransferOptions options;
  options.time_limit = Millis(10000);
  auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    TransportResult r = transport.Post(request, options);
    if (!r.ok() || r.response().status != 200) {
      std::fprintf(stderr, "transport request failed\n");
      std::exit(1);
    }
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - start)
      .count();
}

int Main(int argc, char** argv) {
  int n = argc > 1 ? std::max(1, std::atoi(argv[1])) : 500;
  auto script = ParseMockScriptText("default:\n  say: benchmark answer\n");
  auto engine = std::make_shared<MockEngine>(std::move(*script));
  MockHttpServer server(engine);
  if (!server.Start().ok()) return 1;
  std::string url = server.base_url() + "/chat/completions";
  ChatRequest chat;
  chat.model = "bench-model";
  chat.messages = {Message::System("You are a benchmark."),
                   Message::User("Say something short.")};
  std::string body = BuildOpenAiRequestBody(chat, false, false);

  CurlTransport transport;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  // Warm up both paths (connections, allocator), then alternate rounds and
  // keep each path's best round, so one noisy moment does not decide.
  BareCurl(url, body, 20);
  Transport(transport, url, body, 20);
  double bare = 1e300, ours = 1e300;
  for (int round = 0; round < 3; ++round) {
    bare = std::min(bare, BareCurl(url, body, n));
    ours = std::min(ours, Transport(transport, url, body, n));
  }
  server.Stop();
  double ratio = ours / bare;
  std::printf("requests per round:      %d\n", n);
  std::printf("bare libcurl:            %.1f us/request\n", bare / n);
  std::printf("steps CurlTransport:     %.1f us/request\n", ours / n);
  std::printf("ratio:                   %.3f (target <= 1.1)\n", ratio);
  std::printf("connections opened:      %lld\n",
              static_cast<long long>(transport.connections_opened()));
  return 0;
}

}  // namespace
}  // namespace steps

int main(int argc, char** argv) { return steps::Main(argc, argv); }
