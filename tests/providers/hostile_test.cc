// Hostile answers from a model server: every reproducer in
// fuzz/corpus/{openai,anthropic} is a classified kMalformed error, parsed
// directly and through the real libcurl transport on loopback; numbers on
// the wire of any size are clamped; an adapter that throws costs an error,
// not the process; a dropped keep-alive request is never re-sent behind
// the retry policy's back; running out of descriptors is said as such.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/raw_http_server.h"
#include "providers/anthropic.h"
#include "providers/curl_transport.h"
#include "providers/exchange.h"
#include "providers/openai.h"
#include "providers/retry.h"
#include "providers/wire_json.h"

namespace steps {
namespace {

using test_support::RawHttpServer;

struct CorpusFile {
  std::string name;
  std::string body;
  bool sse = false;
};

// The reproducers of fuzz/corpus/PROVIDER: every file but the fuzzers' own
// seeds (seed-*), which hold well-formed answers too.
std::vector<CorpusFile> Corpus(const std::string& provider) {
  std::vector<CorpusFile> files;
  std::filesystem::path dir =
      std::filesystem::path(STEPS_SOURCE_DIR) / "fuzz/corpus" / provider;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("seed-", 0) == 0) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    files.push_back({entry.path().filename().string(), text.str(),
                     entry.path().extension() == ".sse"});
  }
  return files;
}

template <typename Assembler>
ChatResult AssembleStream(const std::string& body) {
  SseParser parser;
  Assembler assembler;
  for (const SseEvent& e : parser.Feed(body)) {
    if (!assembler.Add(e)) break;
  }
  return assembler.Finish();
}

ChatRequest Hello() {
  ChatRequest r;
  r.model = "m";
  r.messages = {Message::User("hello")};
  return r;
}

RetryPolicy Attempts(int n) {
  RetryPolicy p;
  p.attempts = n;
  p.jitter = [] { return 1.0; };
  return p;
}

TEST(HostileAnswerTest, EveryOpenAiReproducerIsMalformed) {
  std::vector<CorpusFile> files = Corpus("openai");
  ASSERT_GE(files.size(), 10u);
  for (const CorpusFile& f : files) {
    SCOPED_TRACE(f.name);
    ChatResult r = f.sse ? AssembleStream<OpenAiStreamAssembler>(f.body)
                         : ParseOpenAiResponse(f.body);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind, ProviderErrorKind::kMalformed)
        << r.error().message;
    EXPECT_TRUE(r.error().retryable());
  }
}

TEST(HostileAnswerTest, EveryAnthropicReproducerIsMalformed) {
  std::vector<CorpusFile> files = Corpus("anthropic");
  ASSERT_GE(files.size(), 8u);
  for (const CorpusFile& f : files) {
    SCOPED_TRACE(f.name);
    ChatResult r = f.sse ? AssembleStream<AnthropicStreamAssembler>(f.body)
                         : ParseAnthropicResponse(f.body);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind, ProviderErrorKind::kMalformed)
        << r.error().message;
  }
}

TEST(HostileAnswerTest, MessagesSayWhatWasWrong) {
  auto message = [](const std::string& name, bool anthropic) {
    for (const CorpusFile& f : Corpus(anthropic ? "anthropic" : "openai")) {
      if (f.name != name) continue;
      ChatResult r = anthropic
                         ? AssembleStream<AnthropicStreamAssembler>(f.body)
                     : f.sse ? AssembleStream<OpenAiStreamAssembler>(f.body)
                             : ParseOpenAiResponse(f.body);
      return r.ok() ? std::string("ok") : r.error().message;
    }
    return std::string("no such file");
  };
  EXPECT_EQ(message("tool_index_negative.sse", false),
            "malformed answer: tool call index is not a whole number in "
            "0..1048576");
  EXPECT_EQ(message("deep_error.json", false),
            "malformed answer: body is not a JSON object (nested deeper than "
            "128 levels)");
  EXPECT_EQ(message("prompt_tokens_1e300.json", false),
            "malformed answer: usage.prompt_tokens is not a token count");
  EXPECT_EQ(message("many_tool_calls.json", false),
            "malformed answer: more than 256 tool calls");
  EXPECT_EQ(message("output_tokens_many.sse", true),
            "malformed answer: usage.output_tokens is not a token count");
}

TEST(HostileAnswerTest, WellFormedAnswersAtTheLimitsStillPass) {
  // Whole floats are counts; exactly 256 calls and 128 levels are allowed.
  std::string calls;
  for (int i = 0; i < 256; ++i) {
    calls +=
        std::string(i ? "," : "") +
        R"({"id":"c","type":"function","function":{"name":"f","arguments":"{}"}})";
  }
  std::string deep = std::string(124, '[') + std::string(124, ']');
  ChatResult r = ParseOpenAiResponse(
      R"({"choices":[{"message":{"content":)" + deep + R"(,"tool_calls":[)" +
      calls +
      R"(]}}],"usage":{"prompt_tokens":12.0,"completion_tokens":1000000000}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.answer().tool_calls.size(), 256u);
  EXPECT_EQ(r.answer().usage.prompt_tokens, 12);
  EXPECT_EQ(r.answer().usage.completion_tokens, kMaxTokenCount);
}

TEST(HostileAnswerTest, StreamIndexesNeedNotBeDense) {
  // Index 7 then 2: two calls in order of appearance, no empty slots.
  std::string body =
      "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":7,\"id\":"
      "\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":2,\"id\":"
      "\"b\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]}}]}\n\n"
      "data: [DONE]\n\n";
  ChatResult r = AssembleStream<OpenAiStreamAssembler>(body);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r.answer().tool_calls.size(), 2u);
  EXPECT_EQ(r.answer().tool_calls[0].name, "f");
  EXPECT_EQ(r.answer().tool_calls[1].name, "g");
}

TEST(HostileAnswerTest, ThreeHundredThousandToolCallsAreRefused) {
  std::string body = "data: {\"choices\":[{\"delta\":{\"role\":\"a\"}}]}\n\n";
  for (int i = 0; i < 300000; ++i) {
    body += "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":" +
            std::to_string(i) +
            ",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\n";
  }
  body += "data: [DONE]\n\n";
  ChatResult r = AssembleStream<OpenAiStreamAssembler>(body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "malformed answer: more than 256 tool calls");
}

// Each reproducer through the real transport: retried once, then the
// malformed error, with the server having seen exactly two requests.
TEST(HostileAnswerTest, ReproducersOverLoopbackAreRetriedThenMalformed) {
  for (const std::string& provider :
       {std::string("openai"), std::string("anthropic")}) {
    for (const CorpusFile& f : Corpus(provider)) {
      SCOPED_TRACE(provider + "/" + f.name);
      RawHttpServer server([&](int, const std::string&) {
        return RawHttpServer::Reply{f.sse ? RawHttpServer::Stream(f.body)
                                          : RawHttpServer::Response(f.body)};
      });
      CurlTransport transport;
      std::unique_ptr<Provider> adapter;
      if (provider == "openai") {
        OpenAiConfig config;
        config.base_url = server.base_url();
        config.stream = f.sse;
        adapter = std::make_unique<OpenAiProvider>(config, transport);
      } else {
        AnthropicConfig config;
        config.base_url = server.base_url();
        config.stream = f.sse;
        adapter = std::make_unique<AnthropicProvider>(config, transport);
      }
      RetryPolicy policy = Attempts(2);
      policy.initial_backoff = Millis(1);
      RetryingProvider retrying(*adapter, policy);
      ChatResult r = retrying.Send(Hello(), CallContext());
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().kind, ProviderErrorKind::kMalformed)
          << r.error().message;
      EXPECT_EQ(r.error().requests, 2);
      EXPECT_EQ(server.requests(), 2);
    }
  }
}

class ThrowingAdapter : public Provider {
 public:
  ChatResult Send(const ChatRequest&, const CallContext&) override {
    ++calls;
    // What the documented Acme example does on a missing `tokens` field.
    throw std::runtime_error(
        "[json.exception.type_error.306] cannot use "
        "value() with null");
  }
  int calls = 0;
};

class NegativeTokensAdapter : public Provider {
 public:
  ChatResult Send(const ChatRequest&, const CallContext&) override {
    ChatAnswer a;
    a.text = "cheap";
    a.usage.prompt_tokens = -1000000;
    return a;
  }
};

TEST(HostileAnswerTest, AnAdapterThatThrowsIsAMalformedAnswer) {
  ThrowingAdapter adapter;
  FakeClock clock(/*auto_advance=*/true);
  RetryingProvider retrying(adapter, Attempts(3));
  CallContext context;
  context.clock = &clock;
  ChatResult r = retrying.Send(Hello(), context);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ProviderErrorKind::kMalformed);
  EXPECT_EQ(adapter.calls, 3);
  EXPECT_EQ(r.error().message,
            "gave up after 3 requests: malformed answer: the provider adapter "
            "failed: [json.exception.type_error.306] cannot use value() with "
            "null");
}

TEST(HostileAnswerTest, AnyAdaptersTokenCountsAreChecked) {
  NegativeTokensAdapter adapter;
  RetryingProvider retrying(adapter, Attempts(1));
  ChatResult r = retrying.Send(Hello(), CallContext());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "gave up after 1 request: malformed answer: a token count outside "
            "0..1000000000");
}

TEST(WireNumberTest, RetryAfterOfAnySizeIsClampedToAYear) {
  const Millis year = std::chrono::hours(24 * 365);
  WallTime now = std::chrono::system_clock::from_time_t(1700000000);
  auto wait = [&](const std::string& name, const std::string& value) {
    return ParseRetryAfter({{name, value}}, now);
  };
  EXPECT_EQ(wait("Retry-After", "99999999999999999999999"), year);
  EXPECT_EQ(wait("retry-after-ms", std::string(40, '9')), year);
  EXPECT_EQ(wait("Retry-After", std::string(300, '9') + ".5"), year);
  EXPECT_EQ(wait("Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"), year);
  EXPECT_EQ(wait("Retry-After", "2.5"), Millis(2500));
  EXPECT_EQ(wait("retry-after-ms", "1500"), Millis(1500));
  EXPECT_EQ(wait("Retry-After", "1.2.3"), std::nullopt);
  EXPECT_EQ(wait("Retry-After", "-5"), std::nullopt);
}

// The reproduction: a 23-digit Retry-After used to overflow into three
// requests in 0.3 s. It is past the deadline: one request, no wait.
TEST(WireNumberTest, AHugeRetryAfterGivesUpAtOnce) {
  for (const std::string& header :
       {std::string("Retry-After: 99999999999999999999999"),
        "retry-after-ms: " + std::string(40, '9')}) {
    for (bool with_deadline : {true, false}) {
      SCOPED_TRACE(header + (with_deadline ? " with" : " without") +
                   " a deadline");
      RawHttpServer server([&](int, const std::string&) {
        return RawHttpServer::Reply{
            RawHttpServer::Response(R"({"error":{"message":"slow down"}})",
                                    "application/json", 429, header + "\r\n")};
      });
      CurlTransport transport;
      OpenAiConfig config;
      config.base_url = server.base_url();
      OpenAiProvider adapter(config, transport);
      RetryingProvider retrying(adapter, Attempts(3));
      FakeClock clock(/*auto_advance=*/true);
      CallContext context;
      context.clock = &clock;
      if (with_deadline)
        context.deadline = Deadline::After(clock, Millis(60000));
      ChatResult r = retrying.Send(Hello(), context);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().http_status, 429);
      EXPECT_EQ(server.requests(), 1);
      EXPECT_EQ(clock.total_slept(), Millis(0));
      EXPECT_NE(r.error().message.find("not retried: the server asked to wait "
                                       "8760h"),
                std::string::npos)
          << r.error().message;
    }
  }
}

// A server that answers the first request and keeps the connection, then
// reads the second and closes without a word. libcurl used to send that
// request again on a new connection, unseen by `attempts`.
TEST(KeepAliveTest, ADroppedReusedConnectionIsNotResentBehindTheBudget) {
  const std::string ok =
      R"({"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}]})";
  RawHttpServer server([&](int index, const std::string&) {
    if (index == 0) {
      return RawHttpServer::Reply{RawHttpServer::Response(ok), false};
    }
    if (index == 1) return RawHttpServer::Reply{"", true};
    return RawHttpServer::Reply{RawHttpServer::Response(ok), true};
  });
  CurlTransport transport;
  OpenAiConfig config;
  config.base_url = server.base_url();
  OpenAiProvider adapter(config, transport);
  RetryingProvider retrying(adapter, Attempts(1));
  ASSERT_TRUE(retrying.Send(Hello(), CallContext()).ok());
  ChatResult second = retrying.Send(Hello(), CallContext());
  EXPECT_EQ(server.requests(), 2);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().kind, ProviderErrorKind::kConnection);
  EXPECT_EQ(second.error().requests, 1);
  EXPECT_NE(second.error().message.find("closed a reused connection"),
            std::string::npos)
      << second.error().message;
  // With attempts: 2 the retry policy sends it again, counted and logged.
  RetryingProvider twice(adapter, [] {
    RetryPolicy p = Attempts(2);
    p.initial_backoff = Millis(1);
    return p;
  }());
  ChatResult third = twice.Send(Hello(), CallContext());
  ASSERT_TRUE(third.ok()) << third.error().message;
  EXPECT_EQ(third.answer().requests, 1);
  EXPECT_EQ(server.requests(), 3);
}

// In a child whose descriptors are all taken, a request fails as
// kNoDescriptors with a message that says so, never "Couldn't connect".
//
// The child does everything, the server included, so the test forks with
// no other thread running: a lock a server thread held at the fork (the
// allocator's, the sanitizers' thread registry) would stay held in the
// child for ever. A server made before the fork once hung the child past
// ctest's 600 s.
TEST(DescriptorTest, EmfileIsNotAConnectionFailure) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // A child that hangs all the same ends in SIGALRM, not in ctest's
    // limit.
    alarm(60);
    RawHttpServer server([](int, const std::string&) {
      return RawHttpServer::Reply{RawHttpServer::Response("{}")};
    });
    // Everything is constructed, and one request sent, before the
    // descriptors run out: the sanitizers' own checks need a pipe the first
    // time they meet a type. The request that meets EMFILE goes through a
    // second transport, which has no connection yet.
    OpenAiConfig config;
    config.base_url = server.base_url();
    CurlTransport warm_transport;
    OpenAiProvider warm(config, warm_transport);
    // The server's "{}" is no answer; the request only has to be sent.
    if (warm.Send(Hello(), CallContext()).error().kind !=
        ProviderErrorKind::kMalformed)
      _exit(15);
    CurlTransport transport;
    OpenAiProvider adapter(config, transport);
    // The request that meets EMFILE never reaches a socket, so the server
    // is done: stopped here, none of its threads starts a thread once the
    // descriptors are gone (the sanitizers check a thread's type the first
    // time with a pipe, and report a false error without one).
    server.Stop();
    rlimit limit{64, 64};
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(10);
    std::vector<int> taken;
    for (int fd = dup(0); fd >= 0; fd = dup(0)) taken.push_back(fd);
    ChatResult r = adapter.Send(Hello(), CallContext());
    if (r.ok()) _exit(11);
    if (r.error().kind != ProviderErrorKind::kNoDescriptors) _exit(12);
    if (r.error().message.find("out of file descriptors (EMFILE") != 0) {
      _exit(13);
    }
    if (!r.error().retryable()) _exit(14);
    // The transport met EMFILE before its first transfer, while making its
    // loop: with descriptors back, its next request goes out.
    for (int fd : taken) close(fd);
    RawHttpServer again([](int, const std::string&) {
      return RawHttpServer::Reply{RawHttpServer::Response("{}")};
    });
    OpenAiConfig again_config;
    again_config.base_url = again.base_url();
    OpenAiProvider retried(again_config, transport);
    if (retried.Send(Hello(), CallContext()).error().kind !=
        ProviderErrorKind::kMalformed)
      _exit(16);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child ended by signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0)
                                 << " (14, SIGALRM: it hung for 60 s)";
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "11: succeeded, 12: wrong kind, 13: wrong message, 14: final, "
         "15: the first request did not reach the server, 16: the request "
         "after descriptors came back did not reach the server";
}

}  // namespace
}  // namespace steps
