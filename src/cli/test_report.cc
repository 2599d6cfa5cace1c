#include "cli/test_report.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>

#include "core/json_text.h"
#include "core/redact.h"
#include "core/utf8.h"

namespace steps::cli {
namespace {

// `text` as XML character data or an attribute value. Output is bytes until
// shown: invalid UTF-8 becomes U+FFFD, and the control characters XML 1.0
// cannot hold even as references are written visibly as \xNN, so a task that
// prints colour codes or binary still gives a well-formed file. Also the
// JUnit writer's mask: secret values (core/redact.h) never reach the XML,
// whatever the text came from.
std::string XmlEscape(const std::string& text) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::string s = RedactSecrets(text);
  std::string out;
  for (char c : SanitizeUtf8(s)) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        if (byte < 0x20 && c != '\n' && c != '\t' && c != '\r') {
          out += "\\x";
          out += kHex[byte >> 4];
          out += kHex[byte & 0xF];
        } else {
          out += c;
        }
    }
  }
  // U+FFFE and U+FFFF are valid UTF-8 but not XML characters.
  for (const char* bad : {"\xEF\xBF\xBE", "\xEF\xBF\xBF"}) {
    for (size_t at = out.find(bad); at != std::string::npos;
         at = out.find(bad, at)) {
      out.replace(at, 3, "\xEF\xBF\xBD");
    }
  }
  return out;
}

std::string Label(const AssertionTally& t) { return t.step + ": " + t.check; }

std::string Fraction(int passed, int of) {
  return std::to_string(passed) + "/" + std::to_string(of);
}

}  // namespace

std::string CaseResult::Rate() const { return Fraction(passes, runs); }

void TallyAssertions(const pipeline::JobRecord& job,
                     std::vector<AssertionTally>& tallies) {
  // This run's verdict per (step, check): held every time it was judged.
  std::map<std::pair<std::string, std::string>, std::pair<bool, std::string>>
      run;
  std::vector<std::pair<std::string, std::string>> order;
  for (const pipeline::StepRecord& s : job.steps) {
    const pipeline::AttemptRecord* judged = nullptr;
    for (const pipeline::AttemptRecord& a : s.attempts)
      if (!a.assertions.empty()) judged = &a;
    if (!judged) continue;
    const std::string step =
        s.ref.cell.empty() ? s.ref.name : s.ref.name + " [" + s.ref.cell + "]";
    for (const pipeline::AssertionResult& r : judged->assertions) {
      auto key = std::make_pair(step, r.name);
      auto [it, fresh] = run.emplace(key, std::make_pair(true, std::string()));
      if (fresh) order.push_back(key);
      if (!r.passed) it->second = {false, r.detail};
    }
  }
  for (const auto& key : order) {
    auto found = std::find_if(tallies.begin(), tallies.end(), [&](auto& t) {
      return t.step == key.first && t.check == key.second;
    });
    if (found == tallies.end()) {
      AssertionTally fresh;
      fresh.step = key.first;
      fresh.check = key.second;
      tallies.push_back(std::move(fresh));
      found = tallies.end() - 1;
    }
    const auto& [held, detail] = run[key];
    ++found->judged;
    if (held) {
      ++found->passed;
    } else {
      found->last_miss = detail;
    }
  }
}

std::string DescribeFailedAssertions(const std::vector<AssertionTally>& t) {
  std::string out;
  for (const AssertionTally& a : t) {
    if (a.passed == a.judged) continue;
    out += "check '" + Label(a) + "' passed " + Fraction(a.passed, a.judged) +
           ": " + a.last_miss + "\n";
  }
  return out;
}

void PrintAssertionTable(std::ostream& out,
                         const std::vector<CaseResult>& cases) {
  bool header = false;
  for (const CaseResult& c : cases) {
    if (c.assertions.empty()) continue;
    if (!header) out << "assertions:\n";
    header = true;
    out << "  " << c.file << "  " << c.name << "\n";
    size_t width = 0;
    for (const AssertionTally& t : c.assertions)
      width = std::max(width, Label(t).size());
    width = std::min<size_t>(width, 60);
    for (const AssertionTally& t : c.assertions) {
      std::string label = Label(t);
      if (label.size() < width) label.append(width - label.size(), ' ');
      out << "    " << label << "  " << Fraction(t.passed, t.judged);
      if (t.passed != t.judged) out << "  last miss: " << t.last_miss;
      out << "\n";
    }
  }
}

bool WriteJunit(const std::string& path, const std::vector<CaseResult>& cases) {
  int failures = 0, errors = 0, skipped = 0;
  double total = 0;
  for (const CaseResult& c : cases) {
    failures += c.verdict == CaseResult::kFail && !c.errored;
    errors += c.verdict == CaseResult::kFail && c.errored;
    skipped += c.verdict == CaseResult::kSkip;
    total += static_cast<double>(c.duration.count()) / 1000.0;
  }
  std::ofstream out(path);
  if (!out) return false;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << "<testsuites name=\"steps test\" tests=\"" << cases.size()
      << "\" failures=\"" << failures << "\" errors=\"" << errors
      << "\" skipped=\"" << skipped << "\" time=\"" << total << "\">\n";
  out << "  <testsuite name=\"steps\" tests=\"" << cases.size()
      << "\" failures=\"" << failures << "\" errors=\"" << errors
      << "\" skipped=\"" << skipped << "\" time=\"" << total << "\">\n";
  for (const CaseResult& c : cases) {
    out << "    <testcase classname=\"" << XmlEscape(c.file) << "\" name=\""
        << XmlEscape(c.name) << "\" time=\""
        << static_cast<double>(c.duration.count()) / 1000.0 << "\"";
    if (c.verdict == CaseResult::kPass) {
      out << "/>\n";
      continue;
    }
    out << ">\n";
    if (c.verdict == CaseResult::kSkip) {
      out << "      <skipped message=\"" << XmlEscape(c.reason) << "\"/>\n";
    } else {
      const char* tag = c.errored ? "error" : "failure";
      const std::string failed = DescribeFailedAssertions(c.assertions);
      out << "      <" << tag << " message=\"" << XmlEscape(c.reason) << "\">"
          << XmlEscape(failed.empty() ? c.log : failed + "\n" + c.log) << "</"
          << tag << ">\n";
    }
    out << "    </testcase>\n";
  }
  out << "  </testsuite>\n</testsuites>\n";
  return static_cast<bool>(out);
}

std::string TestJson(const std::vector<CaseResult>& cases, int repeat,
                     double min_pass_rate) {
  nlohmann::json j;
  int passed = 0, failed = 0, skipped = 0;
  nlohmann::json list = nlohmann::json::array();
  for (const CaseResult& c : cases) {
    passed += c.verdict == CaseResult::kPass;
    failed += c.verdict == CaseResult::kFail;
    skipped += c.verdict == CaseResult::kSkip;
    nlohmann::json k;
    k["file"] = c.file;
    k["name"] = c.name;
    k["line"] = c.line;
    k["verdict"] = c.verdict == CaseResult::kPass   ? "pass"
                   : c.verdict == CaseResult::kSkip ? "skip"
                                                    : "fail";
    k["reason"] = RedactSecrets(c.reason);
    k["errored"] = c.errored;
    k["duration_ms"] = c.duration.count();
    k["runs"] = c.runs;
    k["passes"] = c.passes;
    k["pass_rate"] = c.runs ? static_cast<double>(c.passes) / c.runs : 0.0;
    nlohmann::json checks = nlohmann::json::array();
    for (const AssertionTally& t : c.assertions) {
      checks.push_back({{"step", t.step},
                        {"check", t.check},
                        {"judged", t.judged},
                        {"passed", t.passed},
                        {"pass_rate", t.judged ? static_cast<double>(t.passed) /
                                                     t.judged
                                               : 0.0},
                        {"last_miss", RedactSecrets(t.last_miss)}});
    }
    k["assertions"] = checks;
    list.push_back(k);
  }
  j["repeat"] = repeat;
  j["min_pass_rate"] = min_pass_rate;
  j["passed"] = passed;
  j["failed"] = failed;
  j["skipped"] = skipped;
  j["cases"] = list;
  return DumpJson(j, 2);
}

}  // namespace steps::cli
