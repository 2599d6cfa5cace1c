#include "providers/http1.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace steps::http1 {
namespace {

using State = ResponseParser::State;

// What a parser made of a response fed in one piece, or one byte at a
// time, or split anywhere: the same.
struct Parsed {
  State state = State::kMore;
  int status = 0;
  HttpHeaders headers;
  std::string body;
  std::string error;
  bool keep_alive = false;
  size_t extra = 0;
};

Parsed ParseIn(const std::vector<std::string_view>& pieces, bool end = false,
               ResponseParser::Limits limits = {}) {
  Parsed p;
  ResponseParser parser(limits, [&](std::string_view piece) {
    p.body.append(piece);
    return true;
  });
  for (std::string_view piece : pieces) p.state = parser.Feed(piece);
  if (end) p.state = parser.End();
  p.status = parser.status();
  p.headers = parser.headers();
  p.error = parser.error();
  p.keep_alive = parser.keep_alive();
  p.extra = parser.extra_bytes();
  return p;
}

Parsed Parse(std::string_view bytes, bool end = false) {
  return ParseIn({bytes}, end);
}

// Every split of `bytes` in two, and byte by byte, parse as the whole.
void ExpectSplitsAgree(std::string_view bytes, bool end = false) {
  const Parsed whole = Parse(bytes, end);
  for (size_t at = 0; at <= bytes.size(); ++at) {
    const Parsed split = ParseIn({bytes.substr(0, at), bytes.substr(at)}, end);
    ASSERT_EQ(split.state, whole.state) << "split at " << at;
    ASSERT_EQ(split.body, whole.body) << "split at " << at;
    ASSERT_EQ(split.status, whole.status) << "split at " << at;
    ASSERT_EQ(split.headers, whole.headers) << "split at " << at;
  }
  std::vector<std::string_view> bytewise;
  for (size_t i = 0; i < bytes.size(); ++i) bytewise.push_back(bytes.substr(i, 1));
  const Parsed single = ParseIn(bytewise, end);
  EXPECT_EQ(single.state, whole.state);
  EXPECT_EQ(single.body, whole.body);
}

TEST(Http1ParserTest, AResponseWithALengthEndsAtItsLength) {
  const std::string r =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
      "Content-Length: 11\r\n\r\n{\"ok\":true}";
  const Parsed p = Parse(r);
  EXPECT_EQ(p.state, State::kDone);
  EXPECT_EQ(p.status, 200);
  EXPECT_EQ(p.body, "{\"ok\":true}");
  ASSERT_EQ(p.headers.size(), 2u);
  EXPECT_EQ(p.headers[0].first, "Content-Type");
  EXPECT_EQ(p.headers[0].second, "application/json");
  EXPECT_TRUE(p.keep_alive);
  EXPECT_EQ(p.extra, 0u);
  ExpectSplitsAgree(r);
  // One byte short is not done, and a close there is an error.
  EXPECT_EQ(Parse(r.substr(0, r.size() - 1)).state, State::kMore);
  const Parsed cut = Parse(r.substr(0, r.size() - 1), /*end=*/true);
  EXPECT_EQ(cut.state, State::kError);
  EXPECT_NE(cut.error.find("before the response's end"), std::string::npos);
}

TEST(Http1ParserTest, AChunkedBodyIsDecodedWithExtensionsAndTrailers) {
  const std::string r =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;name=value\r\nhello\r\n"
      "1\r\n \r\n"
      "A\r\n0123456789\r\n"
      "0\r\nX-Trailer: yes\r\n\r\n";
  const Parsed p = Parse(r);
  EXPECT_EQ(p.state, State::kDone);
  EXPECT_EQ(p.body, "hello 0123456789");
  EXPECT_TRUE(p.keep_alive);
  ExpectSplitsAgree(r);
}

TEST(Http1ParserTest, BareLineFeedsEndLinesToo) {
  const Parsed p = Parse(
      "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n");
  EXPECT_EQ(p.state, State::kDone);
  EXPECT_EQ(p.body, "abc");
}

TEST(Http1ParserTest, ABodyWithoutFramingEndsWithTheConnection) {
  const std::string r = "HTTP/1.1 200 OK\r\n\r\nstreamed until close";
  const Parsed open = Parse(r);
  EXPECT_EQ(open.state, State::kMore);
  EXPECT_EQ(open.body, "streamed until close");
  const Parsed closed = Parse(r, /*end=*/true);
  EXPECT_EQ(closed.state, State::kDone);
  EXPECT_FALSE(closed.keep_alive);
  ExpectSplitsAgree(r, /*end=*/true);
}

TEST(Http1ParserTest, InterimAnswersAreSkipped) {
  const std::string r =
      "HTTP/1.1 100 Continue\r\n\r\n"
      "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
      "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\n"
      "Content-Length: 2\r\n\r\n{}";
  const Parsed p = Parse(r);
  EXPECT_EQ(p.state, State::kDone);
  EXPECT_EQ(p.status, 429);
  ASSERT_EQ(p.headers.size(), 2u);
  EXPECT_EQ(p.headers[0].first, "Retry-After");
  EXPECT_EQ(p.body, "{}");
  ExpectSplitsAgree(r);
}

TEST(Http1ParserTest, NoContentHasNoBody) {
  const Parsed p = Parse("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n");
  EXPECT_EQ(p.state, State::kDone);
  EXPECT_TRUE(p.body.empty());
}

TEST(Http1ParserTest, WhetherTheConnectionIsKept) {
  EXPECT_FALSE(Parse("HTTP/1.1 200 OK\r\nConnection: close\r\n"
                     "Content-Length: 0\r\n\r\n")
                   .keep_alive);
  EXPECT_FALSE(Parse("HTTP/1.1 200 OK\r\nConnection: Upgrade, CLOSE\r\n"
                     "Content-Length: 0\r\n\r\n")
                   .keep_alive);
  EXPECT_FALSE(Parse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").keep_alive);
  EXPECT_TRUE(Parse("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n"
                    "Content-Length: 0\r\n\r\n")
                  .keep_alive);
  // Bytes past the response: the server answered what was not asked.
  const Parsed extra =
      Parse("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK");
  EXPECT_EQ(extra.state, State::kDone);
  EXPECT_EQ(extra.body, "x");
  EXPECT_EQ(extra.extra, 15u);
  EXPECT_FALSE(extra.keep_alive);
  // Both framings: the chunks are read, and the connection is not kept.
  const Parsed both = Parse(
      "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked"
      "\r\n\r\n2\r\nab\r\n0\r\n\r\n");
  EXPECT_EQ(both.state, State::kDone);
  EXPECT_EQ(both.body, "ab");
  EXPECT_FALSE(both.keep_alive);
}

TEST(Http1ParserTest, MalformedAnswersAreErrorsThatSayWhy) {
  struct Case {
    std::string bytes;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"SSH-2.0-OpenSSH_9.2\r\n", "not HTTP/1.x"},
      {"HTTP/3 200\r\n\r\n", "not HTTP/1.x"},
      {"HTTP/1.2 200 OK\r\n\r\n", "not HTTP/1.x"},
      {"HTTP/1.1 20x OK\r\n\r\n", "is not a number"},
      {"HTTP/1.1 099 Low\r\n\r\n", "is not a number"},
      {"HTTP/1.1\r\n\r\n", "is not a number"},
      {"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "no header"},
      {"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", "no header"},
      {"HTTP/1.1 200 OK\r\n folded\r\n\r\n", "folded line"},
      {std::string("HTTP/1.1 200 OK\r\nA: b\0c\r\n\r\n", 27), "NUL"},
      {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n", "Content-Length"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
       "Content-Length"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
       "Content-Length"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
       "Transfer-Encoding"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
       "Transfer-Encoding: chunked\r\n\r\n",
       "Transfer-Encoding"},
      {"HTTP/1.1 101 Switching Protocols\r\n\r\n", "switched protocols"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
       "hexadecimal"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n",
       "hexadecimal"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
       "1000000000000000\r\n",
       "hexadecimal"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
       "not followed by a line end"},
  };
  for (const Case& c : cases) {
    const Parsed p = Parse(c.bytes);
    EXPECT_EQ(p.state, State::kError) << c.bytes;
    EXPECT_NE(p.error.find(c.says), std::string::npos)
        << c.bytes << " -> " << p.error;
  }
}

// What libcurl reads, this parser reads too: a request that succeeds by
// one client succeeds by the other.
TEST(Http1ParserTest, AnswersLibcurlReadsAreRead) {
  struct Case {
    std::string bytes;
    int status;
    std::string header;  // The first header's value.
    std::string body;
  };
  const std::vector<Case> cases = {
      {"http/1.1 200 OK\r\nA: v\r\nContent-Length: 1\r\n\r\nx", 200, "v",
       "x"},
      {"HTTP/2 201\r\nA: v\r\nContent-Length: 1\r\n\r\nx", 201, "v", "x"},
      {"HTTP/1.1 200OK\r\nA: v\r\nContent-Length: 1\r\n\r\nx", 200, "v",
       "x"},
      {"HTTP/1.1 200 OK\r\nA: one\r\n  two\r\n\tthree\r\n"
       "Content-Length: 1\r\n\r\nx",
       200, "one two three", "x"},
      {"HTTP/1.1 200 OK\r\nA: v\r\nContent-Length: 2, 2\r\n\r\nxy", 200,
       "v", "xy"},
      {"HTTP/1.1 200 OK\r\nA: v\r\nTransfer-Encoding: identity\r\n"
       "Content-Length: 1\r\n\r\nx",
       200, "v", "x"},
  };
  for (const Case& c : cases) {
    const Parsed p = Parse(c.bytes);
    ASSERT_EQ(p.state, State::kDone) << c.bytes << " -> " << p.error;
    EXPECT_EQ(p.status, c.status) << c.bytes;
    ASSERT_FALSE(p.headers.empty());
    EXPECT_EQ(p.headers[0].second, c.header) << c.bytes;
    EXPECT_EQ(p.body, c.body) << c.bytes;
  }
}

// What a server sent is quoted in a message only as printable ASCII.
TEST(Http1ParserTest, AMessageQuotesNoControlBytes) {
  const Parsed p = Parse("HTTP/1.1 200 OK\r\nContent-Length: \x1b[2J\xff\r\n\r\n");
  EXPECT_EQ(p.state, State::kError);
  EXPECT_NE(p.error.find("\"?[2J?\""), std::string::npos) << p.error;
  const Parsed status = Parse("\x1b]0;owned\x07 200\r\n\r\n");
  EXPECT_EQ(status.state, State::kError);
  EXPECT_EQ(status.error.find('\x1b'), std::string::npos) << status.error;
}

// One line of a head may hold 100 KiB (libcurl's limit), the head 300 KiB.
TEST(Http1ParserTest, ALineOfTheHeadAtItsLimitIsReadAndOneByteMoreIsNot) {
  const std::string start = "HTTP/1.1 200 OK\r\n";
  const std::string end = "\r\nContent-Length: 0\r\n\r\n";
  const std::string name = "X: ";
  const std::string fits =
      start + name + std::string(100 * 1024 - name.size(), 'a') + end;
  EXPECT_EQ(Parse(fits).state, State::kDone);
  const Parsed over =
      Parse(start + name + std::string(100 * 1024 + 1 - name.size(), 'a') + end);
  EXPECT_EQ(over.state, State::kError);
  EXPECT_NE(over.error.find("a line of the response's head is longer than "
                            "102400 bytes"),
            std::string::npos)
      << over.error;
  // Three lines of 100 KiB less a little: under 300 KiB in all, read.
  std::string three = start;
  for (int i = 0; i < 3; ++i)
    three += "X" + std::to_string(i) + ": " + std::string(100 * 1024 - 100, 'a') +
             "\r\n";
  EXPECT_EQ(Parse(three + "Content-Length: 0\r\n\r\n").state, State::kDone);
  EXPECT_EQ(Parse(three + "X3: " + std::string(1024, 'a') +
                  "\r\nContent-Length: 0\r\n\r\n")
                .state,
            State::kError);
}

TEST(Http1ParserTest, AHeadAtItsLimitIsReadAndOneByteMoreIsNot) {
  ResponseParser::Limits limits;
  const std::string start = "HTTP/1.1 200 OK\r\nX: ";
  const std::string end = "\r\nContent-Length: 0\r\n\r\n";
  limits.max_head_bytes = 200;
  const std::string fits =
      start + std::string(200 - start.size() - end.size(), 'a') + end;
  ASSERT_EQ(fits.size(), 200u);
  EXPECT_EQ(ParseIn({fits}, false, limits).state, State::kDone);
  const std::string over =
      start + std::string(201 - start.size() - end.size(), 'a') + end;
  const Parsed p = ParseIn({over}, false, limits);
  EXPECT_EQ(p.state, State::kError);
  EXPECT_NE(p.error.find("longer than 200 bytes"), std::string::npos);
  // Fed in small pieces, a head without end stops at the limit, not at
  // the memory's end.
  std::vector<std::string_view> endless(1000, std::string_view("abcdefgh"));
  EXPECT_EQ(ParseIn(endless, false, limits).state, State::kError);
  // Endless interim answers are bounded by the same limit.
  std::string interims;
  for (int i = 0; i < 20; ++i) interims += "HTTP/1.1 100 Continue\r\n\r\n";
  EXPECT_EQ(ParseIn({interims}, false, limits).state, State::kError);
}

TEST(Http1ParserTest, AnEndlessChunkSizeLineFails) {
  std::vector<std::string_view> pieces = {
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1"};
  for (int i = 0; i < 2000; ++i) pieces.push_back(";");
  const Parsed p = ParseIn(pieces);
  EXPECT_EQ(p.state, State::kError);
  EXPECT_NE(p.error.find("1024 bytes"), std::string::npos);
}

TEST(Http1ParserTest, ASinkThatSaysStopStopsTheParser) {
  int calls = 0;
  ResponseParser parser([&](std::string_view) { return ++calls < 2; });
  EXPECT_EQ(parser.Feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "1\r\na\r\n1\r\nb\r\n1\r\nc\r\n0\r\n\r\n"),
            State::kStopped);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(parser.Feed("more"), State::kStopped);
  EXPECT_FALSE(parser.keep_alive());
}

TEST(Http1ParserTest, ACloseBeforeAnyByteSaysSo) {
  const Parsed p = Parse("", /*end=*/true);
  EXPECT_EQ(p.state, State::kError);
  EXPECT_NE(p.error.find("without answering"), std::string::npos);
}

TEST(Http1UrlTest, PlainUrlsAreTakenApart) {
  std::optional<PlainUrl> u = ParsePlainUrl("http://127.0.0.1:8080/v1/chat?x=1");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->authority, "127.0.0.1:8080");
  EXPECT_EQ(u->target, "/v1/chat?x=1");
  u = ParsePlainUrl("HTTP://[::1]:11434");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 11434);
  EXPECT_EQ(u->authority, "[::1]:11434");
  EXPECT_EQ(u->target, "/");
  u = ParsePlainUrl("http://localhost?q");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->target, "/?q");
  u = ParsePlainUrl("http://a:65535/");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->port, 65535);
}

// Dot segments are resolved as libcurl resolves them; a query is kept.
TEST(Http1UrlTest, DotSegmentsAreResolved) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"http://h/ok/v1/../x", "/ok/x"},
      {"http://h/ok/./v1/./y", "/ok/v1/y"},
      {"http://h/a/..", "/"},
      {"http://h/a/.", "/a/"},
      {"http://h/../../a", "/a"},
      {"http://h/a/b/", "/a/b/"},
      {"http://h//x", "//x"},
      {"http://h/a/../b?q=/../c", "/b?q=/../c"},
      {"http://h/.hidden/x", "/.hidden/x"},
  };
  for (const auto& [url, target] : cases) {
    std::optional<PlainUrl> u = ParsePlainUrl(url);
    ASSERT_TRUE(u) << url;
    EXPECT_EQ(u->target, target) << url;
  }
}

TEST(Http1UrlTest, WhatIsNotAPlainUrlIsRefused) {
  for (const char* url :
       {"https://api.openai.com/v1", "http://", "http:///x", "http://:80/",
        "http://user:pw@host/", "http://host:/", "http://host:0/",
        "http://host:65536/", "http://host:8o/", "http://host/a#frag",
        "http://host/a b", "http://h\xc3\xa9st/", "http://[::1/",
        "http://[::1]x/", "http://[::g]/", "http://a:1:2/", "http://a%2e/",
        "ftp://host/", "http:/host", "http://host\r\nX: y/"}) {
    EXPECT_FALSE(ParsePlainUrl(url)) << url;
  }
}

TEST(Http1RequestTest, TheHeadCarriesHostLengthAndTheRequestsHeaders) {
  const PlainUrl url = *ParsePlainUrl("http://127.0.0.1:9/v1/chat/completions");
  Result<std::string> head = PostHead(
      url, {{"Content-Type", "application/json"}, {"Authorization", "Bearer k"}},
      42);
  ASSERT_TRUE(head.ok()) << head.status().message();
  EXPECT_EQ(*head,
            "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:9\r\n"
            "Content-Length: 42\r\nContent-Type: application/json\r\n"
            "Authorization: Bearer k\r\n\r\n");
}

TEST(Http1RequestTest, AHeaderThatWouldBreakTheHeadIsRefused) {
  const PlainUrl url = *ParsePlainUrl("http://127.0.0.1:9/");
  EXPECT_FALSE(PostHead(url, {{"X", "a\r\nGET /admin HTTP/1.1"}}, 0).ok());
  EXPECT_FALSE(PostHead(url, {{"X", "a\nb"}}, 0).ok());
  EXPECT_FALSE(PostHead(url, {{"X", std::string("a\0b", 3)}}, 0).ok());
  EXPECT_FALSE(PostHead(url, {{"Bad Name", "v"}}, 0).ok());
  EXPECT_FALSE(PostHead(url, {{"", "v"}}, 0).ok());
  EXPECT_FALSE(PostHead(url, {{"content-length", "5"}}, 0).ok());
  EXPECT_FALSE(PostHead(url, {{"Host", "evil"}}, 0).ok());
  EXPECT_TRUE(PostHead(url, {{"X-Tab", "a\tb"}}, 0).ok());
}

}  // namespace
}  // namespace steps::http1
