// Fuzz target: the bytes a plain-HTTP server sends back (providers/http1.h).
// The first byte picks where the rest is split in two; the parser must
// reach the same state, status, headers and body as when fed in one piece
// (and one byte at a time for short inputs), never read past a limit, and
// never crash. The input also goes through ParsePlainUrl and PostHead: a
// URL that parses must give a head without a stray line break.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "providers/http1.h"

namespace {

using steps::http1::ResponseParser;

struct Outcome {
  ResponseParser::State state;
  int status = 0;
  steps::HttpHeaders headers;
  std::string body;
  bool keep_alive = false;
};

template <typename Feeder>
Outcome Run(Feeder feed, bool end) {
  Outcome o;
  ResponseParser::Limits limits;
  limits.max_head_bytes = 4096;
  ResponseParser parser(limits, [&](std::string_view piece) {
    o.body.append(piece);
    return o.body.size() < (1u << 20);
  });
  feed(parser);
  o.state = end ? parser.End() : parser.state();
  o.status = parser.status();
  o.headers = parser.headers();
  o.keep_alive = parser.keep_alive();
  return o;
}

void Same(const Outcome& a, const Outcome& b) {
  if (a.state != b.state || a.status != b.status || a.headers != b.headers ||
      a.body != b.body || a.keep_alive != b.keep_alive)
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool end = (data[0] & 0x80) != 0;
  std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t at = bytes.empty() ? 0 : (data[0] & 0x7f) % (bytes.size() + 1);
  const Outcome whole =
      Run([&](ResponseParser& p) { p.Feed(bytes); }, end);
  Same(whole, Run(
                  [&](ResponseParser& p) {
                    p.Feed(bytes.substr(0, at));
                    p.Feed(bytes.substr(at));
                  },
                  end));
  if (bytes.size() <= 512) {
    Same(whole, Run(
                    [&](ResponseParser& p) {
                      for (size_t i = 0; i < bytes.size(); ++i)
                        p.Feed(bytes.substr(i, 1));
                    },
                    end));
  }
  if (std::optional<steps::http1::PlainUrl> url =
          steps::http1::ParsePlainUrl(bytes)) {
    steps::Result<std::string> head = steps::http1::PostHead(*url, {}, 0);
    if (!head.ok()) std::abort();
    // Request line, Host, Content-Length, the empty line: four line ends.
    size_t breaks = 0;
    for (char c : *head) breaks += c == '\n' || c == '\r';
    if (breaks != 8) std::abort();
  }
  return 0;
}
