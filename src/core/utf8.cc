#include "core/utf8.h"

#include <cstdint>
#include <iterator>

namespace steps {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";

// Length of the well-formed sequence starting at text[i], or 0 if none.
size_t SequenceLength(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  uint8_t lead = byte(i);
  if (lead < 0x80) return 1;
  size_t len;
  uint8_t min_second = 0x80, max_second = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    len = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    len = 3;
    if (lead == 0xE0) min_second = 0xA0;  // Overlong.
    if (lead == 0xED) max_second = 0x9F;  // Surrogates.
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    len = 4;
    if (lead == 0xF0) min_second = 0x90;  // Overlong.
    if (lead == 0xF4) max_second = 0x8F;  // Past U+10FFFF.
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  if (byte(i + 1) < min_second || byte(i + 1) > max_second) return 0;
  for (size_t k = 2; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  return len;
}

// The code point of the well-formed sequence of `len` bytes at text[i].
uint32_t DecodeAt(std::string_view text, size_t i, size_t len) {
  static constexpr uint8_t kLeadMask[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  uint32_t cp = static_cast<uint8_t>(text[i]) & kLeadMask[len];
  for (size_t k = 1; k < len; ++k)
    cp = (cp << 6) | (static_cast<uint8_t>(text[i + k]) & 0x3F);
  return cp;
}

struct Range {
  uint32_t first, last;
};

bool InRanges(uint32_t cp, const Range* ranges, size_t n) {
  for (size_t k = 0; k < n; ++k) {
    if (cp >= ranges[k].first && cp <= ranges[k].last) return true;
  }
  return false;
}

// Columns of one code point (after Unicode's East Asian Width and general
// category tables, in broad ranges).
size_t CodePointColumns(uint32_t cp) {
  static constexpr Range kZero[] = {
      {0x0300, 0x036F}, {0x0483, 0x0489}, {0x0591, 0x05BD}, {0x0610, 0x061A},
      {0x064B, 0x065F}, {0x1AB0, 0x1AFF}, {0x1DC0, 0x1DFF}, {0x200B, 0x200F},
      {0x2028, 0x202E}, {0x2060, 0x2064}, {0x20D0, 0x20FF}, {0xFE00, 0xFE0F},
      {0xFE20, 0xFE2F}, {0xFEFF, 0xFEFF}, {0xE0100, 0xE01EF}};
  static constexpr Range kWide[] = {
      {0x1100, 0x115F},   {0x231A, 0x231B},   {0x2329, 0x232A},
      {0x23E9, 0x23EC},   {0x23F0, 0x23F0},   {0x23F3, 0x23F3},
      {0x25FD, 0x25FE},   {0x2614, 0x2615},   {0x2648, 0x2653},
      {0x267F, 0x267F},   {0x2693, 0x2693},   {0x26A1, 0x26A1},
      {0x26AA, 0x26AB},   {0x26BD, 0x26BE},   {0x26C4, 0x26C5},
      {0x26CE, 0x26CE},   {0x26D4, 0x26D4},   {0x26EA, 0x26EA},
      {0x26F2, 0x26F5},   {0x26FA, 0x26FD},   {0x2705, 0x2705},
      {0x270A, 0x270B},   {0x2728, 0x2728},   {0x274C, 0x274E},
      {0x2753, 0x2757},   {0x2795, 0x2797},   {0x27B0, 0x27BF},
      {0x2B1B, 0x2B1C},   {0x2B50, 0x2B55},   {0x2E80, 0x303E},
      {0x3041, 0x33FF},   {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},
      {0xA000, 0xA4CF},   {0xA960, 0xA97F},   {0xAC00, 0xD7A3},
      {0xF900, 0xFAFF},   {0xFE10, 0xFE19},   {0xFE30, 0xFE6F},
      {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},   {0x16FE0, 0x18AFF},
      {0x1B000, 0x1B2FF}, {0x1F000, 0x1FAFF}, {0x20000, 0x3FFFD}};
  if (InRanges(cp, kZero, std::size(kZero))) return 0;
  if (InRanges(cp, kWide, std::size(kWide))) return 2;
  return 1;
}

// Bytes and columns of the character at text[i].
struct Character {
  size_t bytes;
  size_t columns;
};

Character CharacterAt(std::string_view text, size_t i) {
  size_t len = SequenceLength(text, i);
  if (len == 0) return {1, 1};  // Shown as U+FFFD, one column.
  return {len, CodePointColumns(DecodeAt(text, i, len))};
}

}  // namespace

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t len = SequenceLength(text, i);
    if (len == 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

bool IsValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    size_t len = SequenceLength(text, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

size_t ControlCharacterAt(std::string_view text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x20 || c == 0x7f) return 1;
  if (c == 0xc2 && i + 1 < text.size()) {
    const auto next = static_cast<unsigned char>(text[i + 1]);
    if (next >= 0x80 && next <= 0x9f) return 2;
  }
  return 0;
}

size_t Utf8PrefixLength(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text.size();
  size_t n = max_bytes;
  // Step back over continuation bytes (at most three) to a lead byte, and
  // drop that lead byte too when its sequence would not fit.
  size_t back = 0;
  while (n > 0 && back < 3 && (static_cast<uint8_t>(text[n]) & 0xC0) == 0x80) {
    --n;
    ++back;
  }
  return n;
}

size_t TerminalColumns(std::string_view text) {
  size_t columns = 0;
  for (size_t i = 0; i < text.size();) {
    Character c = CharacterAt(text, i);
    columns += c.columns;
    i += c.bytes;
  }
  return columns;
}

std::string FitTerminalColumns(std::string_view text, size_t columns) {
  if (TerminalColumns(text) <= columns) return std::string(text);
  if (columns == 0) return "";
  // Whole characters while they leave a column for the ellipsis.
  size_t used = 0, end = 0;
  while (end < text.size()) {
    Character c = CharacterAt(text, end);
    if (used + c.columns > columns - 1) break;
    used += c.columns;
    end += c.bytes;
  }
  return std::string(text.substr(0, end)) + "…";
}

std::string CutText(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  return std::string(text.substr(0, Utf8PrefixLength(text, max_bytes))) + "...";
}

}  // namespace steps
