// SseParser's bound: what it holds for an event not yet complete.
#include "core/sse.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace steps {
namespace {

TEST(SseParserTest, BufferedBytesCountTheUnfinishedEventOnly) {
  SseParser parser;
  EXPECT_EQ(parser.buffered_bytes(), 0u);
  EXPECT_TRUE(parser.Feed("data: abc").empty());
  EXPECT_EQ(parser.buffered_bytes(), 9u);  // The unfinished line.
  EXPECT_TRUE(parser.Feed("\ndata: de\n").empty());
  EXPECT_EQ(parser.buffered_bytes(), 6u);  // "abc\nde" of the pending event.
  std::vector<SseEvent> events = parser.Feed("\n");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "abc\nde");
  EXPECT_EQ(parser.buffered_bytes(), 0u);
}

// A line ends at CRLF, LF or a lone CR (the SSE spec's three), whichever
// piece the CR and LF of a CRLF arrive in; comments and fields other than
// data and event are skipped.
TEST(SseParserTest, LinesEndAtCrLfLfOrALoneCr) {
  const std::string stream =
      ": comment\r\nretry: 10\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n"
      "id: 7\rdata: two\r\rdata: three\n\n";
  // Whole, and cut at every byte.
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    SseParser parser;
    std::vector<SseEvent> events = parser.Feed(stream.substr(0, cut));
    for (SseEvent& e : parser.Feed(stream.substr(cut)))
      events.push_back(std::move(e));
    ASSERT_EQ(events.size(), 3u) << "cut at " << cut;
    EXPECT_EQ(events[0].data, "{\"a\":\n1}") << "cut at " << cut;
    EXPECT_EQ(events[1].data, "two") << "cut at " << cut;
    EXPECT_EQ(events[2].data, "three") << "cut at " << cut;
    EXPECT_EQ(parser.buffered_bytes(), 0u) << "cut at " << cut;
  }
  // Byte by byte.
  SseParser parser;
  std::vector<SseEvent> events;
  for (char c : stream)
    for (SseEvent& e : parser.Feed(std::string_view(&c, 1)))
      events.push_back(std::move(e));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].data, "three");
}

// A long line fed a byte at a time is searched once, not once per piece:
// 1 MiB here would take minutes if every piece rescanned what is buffered.
TEST(SseParserTest, ALongLineInTinyPiecesIsScannedOnce) {
  SseParser parser;
  const std::string line = "data: " + std::string(1 << 20, 'x');
  for (char c : line) {
    ASSERT_TRUE(parser.Feed(std::string_view(&c, 1)).empty());
  }
  std::vector<SseEvent> events = parser.Feed("\r\n\r\n");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data.size(), size_t{1} << 20);
}

}  // namespace
}  // namespace steps
