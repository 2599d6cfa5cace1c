#include "core/duration.h"

#include <cctype>
#include <cstdint>
#include <cstdio>

namespace steps {
namespace {

// About 292 years in ms fits in int64 many times over; cap far below that so
// sums of durations never overflow.
constexpr int64_t kMaxMillis = int64_t{1} << 52;

struct Unit {
  std::string_view name;
  int64_t millis;
};
// Longest names first so "ms" is not read as "m" followed by garbage.
constexpr Unit kUnits[] = {
    {"h", 3600000}, {"ms", 1}, {"m", 60000}, {"s", 1000}};
// Order in which units may appear.
int UnitRank(std::string_view name) {
  if (name == "h") return 0;
  if (name == "m") return 1;
  if (name == "s") return 2;
  return 3;  // ms
}

Status Bad(std::string_view text, const char* why) {
  return InvalidArgument("invalid duration '" + std::string(text) + "': " +
                         why + " (write e.g. 500ms, 30s, 2m, 1h, 1h30m)");
}

}  // namespace

Result<Millis> ParseDuration(std::string_view text) {
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return Bad(text, "empty");
  int64_t total = 0;
  int last_rank = -1;
  while (!s.empty()) {
    if (!std::isdigit(static_cast<unsigned char>(s[0]))) {
      return Bad(text, "expected a number");
    }
    int64_t n = 0;
    while (!s.empty() && std::isdigit(static_cast<unsigned char>(s[0]))) {
      n = n * 10 + (s[0] - '0');
      if (n > kMaxMillis) return Bad(text, "too large");
      s.remove_prefix(1);
    }
    if (s.empty()) return Bad(text, "missing unit after the number");
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
      if (s.substr(0, u.name.size()) == u.name) {
        unit = &u;
        break;
      }
    }
    if (unit == nullptr) return Bad(text, "unknown unit");
    int rank = UnitRank(unit->name);
    if (rank <= last_rank)
      return Bad(text, "units must go h, m, s, ms, each once");
    last_rank = rank;
    s.remove_prefix(unit->name.size());
    if (n > kMaxMillis / unit->millis) return Bad(text, "too large");
    total += n * unit->millis;
    if (total > kMaxMillis) return Bad(text, "too large");
  }
  return Millis(negative ? -total : total);
}

Result<Millis> ParseDurationWithUnit(std::string_view text, Millis bare_unit) {
  std::string_view s = text;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  bool all_digits = !s.empty();
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) all_digits = false;
  }
  if (!all_digits) return ParseDuration(text);
  if (s.size() > 16) return Bad(text, "too large");
  int64_t n = std::stoll(std::string(s));
  if (n > kMaxMillis / bare_unit.count()) return Bad(text, "too large");
  int64_t ms = n * bare_unit.count();
  return Millis(text[0] == '-' ? -ms : ms);
}

std::string FormatDuration(Millis d) {
  int64_t ms = d.count();
  std::string out;
  if (ms < 0) {
    out = "-";
    ms = -ms;
  }
  if (ms == 0) return "0s";
  if (ms < 1000) return out + std::to_string(ms) + "ms";
  int64_t h = ms / 3600000;
  int64_t m = (ms / 60000) % 60;
  int64_t s = (ms / 1000) % 60;
  int64_t rest = ms % 1000;
  if (h) out += std::to_string(h) + "h";
  if (m) out += std::to_string(m) + "m";
  if (s || rest) {
    out += std::to_string(s);
    if (rest) {
      char frac[8];
      std::snprintf(frac, sizeof frac, ".%03lld", static_cast<long long>(rest));
      std::string f = frac;
      while (f.back() == '0') f.pop_back();
      out += f;
    }
    out += "s";
  }
  return out;
}

}  // namespace steps
