// Who runs CurlTransport's loop: a lone Post runs its transfer on its own
// thread; once a second Post comes, the loop's own thread runs both; and
// after a lull the loop goes back to the next lone Post. The body reader
// runs on the thread leading the loop, so it tells which one did.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "common/raw_http_server.h"
#include "providers/curl_transport.h"

namespace steps {
namespace {

using test_support::RawHttpServer;

// Posts to `url`; returns the thread the body reader ran on.
std::thread::id PostFrom(CurlTransport& transport, const std::string& url,
                         bool* ok) {
  std::thread::id reader_thread;
  TransferOptions options;
  options.time_limit = Millis(20000);
  options.reader = [&](std::string_view) {
    reader_thread = std::this_thread::get_id();
    return true;
  };
  HttpRequest request{url, {}, "{}"};
  TransportResult result = transport.Post(request, options);
  *ok = result.ok() && result.response().status == 200 &&
        result.response().body == "{\"n\":1}";
  return reader_thread;
}

TEST(TransportLoopTest, ALonePostRunsItsTransferOnItsOwnThread) {
  RawHttpServer server([](int, const std::string&) {
    return RawHttpServer::Reply{RawHttpServer::Response("{\"n\":1}"), false};
  });
  CurlTransport transport;
  for (int i = 0; i < 3; ++i) {
    bool ok = false;
    EXPECT_EQ(PostFrom(transport, server.base_url(), &ok),
              std::this_thread::get_id());
    EXPECT_TRUE(ok);
  }
  EXPECT_EQ(transport.connections_opened(), 1);
}

size_t OpenDescriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry :
       std::filesystem::directory_iterator("/proc/self/fd")) {
    ++n;
  }
  return n;
}

// A lone conversation's transport holds what it uses: its epoll and
// wake-up descriptors, one multi handle's pair of wake-up sockets, and
// its connection (the server's end of it is counted too), not a pair per
// shard the fan-outs spread over.
TEST(TransportLoopTest, ALonePostHoldsAFewDescriptors) {
  RawHttpServer server([](int, const std::string&) {
    return RawHttpServer::Reply{RawHttpServer::Response("{\"n\":1}"), false};
  });
  const size_t before = OpenDescriptors();
  CurlTransport transport;
  for (int i = 0; i < 3; ++i) {
    bool ok = false;
    PostFrom(transport, server.base_url(), &ok);
    EXPECT_TRUE(ok);
  }
  EXPECT_EQ(transport.connections_opened(), 1);
  EXPECT_LE(OpenDescriptors(), before + 6);
}

// The first request is answered only once the second has arrived, so the
// second Post comes while the first leads: the loop's thread takes both.
// Then, the fan-out over, a lone Post leads again (within a bound: the
// loop's thread keeps the loop through a lull of 100 ms first).
TEST(TransportLoopTest, ASecondPostTakesTheLoopToItsThreadAndBack) {
  std::atomic<int> arrived{0};
  RawHttpServer server([&](int, const std::string&) {
    const int index = arrived.fetch_add(1);
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (index == 0 && arrived.load() < 2 &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::yield();
    }
    return RawHttpServer::Reply{RawHttpServer::Response("{\"n\":1}"), false};
  });
  CurlTransport transport;
  std::thread::id first_thread, first_reader;
  bool first_ok = false;
  std::thread first([&] {
    first_thread = std::this_thread::get_id();
    first_reader = PostFrom(transport, server.base_url(), &first_ok);
  });
  while (arrived.load() < 1) std::this_thread::yield();
  bool second_ok = false;
  const std::thread::id second_reader =
      PostFrom(transport, server.base_url(), &second_ok);
  first.join();
  ASSERT_EQ(arrived.load(), 2);
  EXPECT_TRUE(first_ok);
  EXPECT_TRUE(second_ok);
  EXPECT_EQ(first_reader, second_reader);
  EXPECT_NE(first_reader, first_thread);
  EXPECT_NE(second_reader, std::this_thread::get_id());

  bool led = false;
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!led && std::chrono::steady_clock::now() < give_up) {
    bool ok = false;
    led = PostFrom(transport, server.base_url(), &ok) ==
          std::this_thread::get_id();
    ASSERT_TRUE(ok);
  }
  EXPECT_TRUE(led) << "the loop's thread never gave the loop back";
}

}  // namespace
}  // namespace steps
