// SseParser's bound: what it holds for an event not yet complete.
#include "core/sse.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace steps
