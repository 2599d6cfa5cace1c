#include "pipeline/step_assert.h"

#include <cctype>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/json_text.h"
#include "core/pattern.h"
#include "core/trim.h"
#include "tools/json_schema.h"

namespace steps::pipeline {
namespace {

using nlohmann::json;

std::string Trim(std::string_view s) { return std::string(TrimSpace(s)); }

// "\"text\"", cut to a readable length.
std::string Quoted(const std::string& s) {
  constexpr size_t kShown = 120;
  if (s.size() <= kShown) return "\"" + s + "\"";
  return "\"" + s.substr(0, kShown) + "...\" (" + std::to_string(s.size()) +
         " bytes)";
}

std::string QuotedList(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items)
    out += (out.empty() ? "" : ", ") + Quoted(s);
  return out;
}

AssertionResult Verdict(std::string name, std::optional<std::string> miss) {
  AssertionResult r;
  r.name = std::move(name);
  r.passed = !miss;
  if (miss) r.detail = *miss;
  return r;
}

std::optional<std::string> RegexMiss(const std::string& pattern,
                                     const std::string& output) {
  // The loader refused a pattern that does not compile.
  Result<Pattern> re = Pattern::Compile(pattern);
  if (!re.ok()) return "/" + pattern + "/: " + re.status().message();
  std::string_view rest = output;
  while (!rest.empty()) {
    size_t end = rest.find('\n');
    if (re->Search(rest.substr(0, end))) return std::nullopt;
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return "no line of the output matches /" + pattern + "/";
}

// Schema messages speak of "argument X" (they were written for tool
// arguments); here the value is the output.
std::string AboutOutput(std::string message) {
  if (message.rfind("the arguments", 0) == 0)
    return "the output" + message.substr(13);
  if (message.rfind("argument ", 0) == 0) return "field " + message.substr(9);
  return message;
}

std::optional<std::string> JsonMiss(const StepAssert& check,
                                    const std::string& output) {
  const json j = json::parse(output, nullptr, false);
  if (j.is_discarded()) {
    return "the output is not JSON: " + Quoted(output);
  }
  if (!check.json_schema) return std::nullopt;
  std::vector<std::string> errors = ValidateArguments(*check.json_schema, j, 5);
  if (errors.empty()) return std::nullopt;
  std::string miss = "the output does not match the schema: ";
  for (size_t i = 0; i < errors.size(); ++i)
    miss += (i ? "; " : "") + AboutOutput(errors[i]);
  return miss;
}

// Whether `actual` holds every key of `expected` with an equal value
// (mappings compared the same way, lists and scalars whole).
bool HoldsSubset(const json& actual, const json& expected) {
  if (!expected.is_object()) return actual == expected;
  if (!actual.is_object()) return false;
  for (const auto& [k, v] : expected.items()) {
    auto it = actual.find(k);
    if (it == actual.end() || !HoldsSubset(*it, v)) return false;
  }
  return true;
}

// Tells apart several entries for one tool: "tool_called read_file
// {"path":"a"} count=1".
std::string ToolCallLabel(const ToolCalledCheck& c) {
  std::string label = "tool_called " + c.name;
  if (c.arguments) label += " " + DumpJson(*c.arguments);
  if (c.count) label += " count=" + std::to_string(*c.count);
  if (c.min) label += " min=" + std::to_string(*c.min);
  if (c.max) label += " max=" + std::to_string(*c.max);
  return label;
}

std::optional<std::string> ToolCallMiss(const ToolCalledCheck& c,
                                        const agent::AgentResult& conv) {
  int64_t calls = 0;
  for (const agent::AgentTurnRecord& t : conv.turn_records) {
    for (const agent::ToolCallRecord& call : t.tool_calls) {
      if (call.name != c.name) continue;
      if (c.arguments) {
        const json args = json::parse(call.arguments, nullptr, false);
        if (args.is_discarded() || !HoldsSubset(args, *c.arguments)) continue;
      }
      ++calls;
    }
  }
  const int64_t min = c.count ? *c.count : c.min.value_or(c.max ? 0 : 1);
  const std::optional<int64_t> max = c.count ? c.count : c.max;
  if (calls >= min && (!max || calls <= *max)) return std::nullopt;
  std::string expected;
  if (c.count) {
    expected = "exactly " + std::to_string(*c.count);
  } else if (max && min > 0) {
    expected = std::to_string(min) + " to " + std::to_string(*max);
  } else if (max) {
    expected = "at most " + std::to_string(*max);
  } else {
    expected = "at least " + std::to_string(min);
  }
  return "tool '" + c.name + "' was called " + std::to_string(calls) +
         (calls == 1 ? " time" : " times") +
         (c.arguments ? " with arguments holding " + DumpJson(*c.arguments)
                      : "") +
         ", expected " + expected;
}

std::string Usd(double usd) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "$%.4f", usd);
  return buf;
}

void CheckText(const StepAssert& c, const AssertSubject& s,
               std::vector<AssertionResult>& out) {
  const std::string text = Trim(s.output);
  if (c.stdout_contains) {
    std::optional<std::string> miss;
    if (text.find(*c.stdout_contains) == std::string::npos) {
      miss = std::string(s.kind == StepKind::kAgent
                             ? "the answer does not contain \""
                             : "stdout does not contain \"") +
             *c.stdout_contains + "\"";
    }
    out.push_back(Verdict("stdout", miss));
  }
  if (c.equals) {
    out.push_back(Verdict("equals", text == *c.equals
                                        ? std::nullopt
                                        : std::optional<std::string>(
                                              "the output is " + Quoted(text) +
                                              ", not " + Quoted(*c.equals))));
  }
  if (c.contains_all) {
    std::vector<std::string> lacking;
    for (const std::string& t : *c.contains_all)
      if (text.find(t) == std::string::npos) lacking.push_back(t);
    out.push_back(Verdict(
        "contains_all", lacking.empty()
                            ? std::nullopt
                            : std::optional<std::string>("the output lacks " +
                                                         QuotedList(lacking))));
  }
  if (c.contains_any) {
    bool any = false;
    for (const std::string& t : *c.contains_any)
      any |= text.find(t) != std::string::npos;
    out.push_back(Verdict(
        "contains_any",
        any ? std::nullopt
            : std::optional<std::string>("the output contains none of " +
                                         QuotedList(*c.contains_any))));
  }
  if (c.not_contains) {
    std::vector<std::string> found;
    for (const std::string& t : *c.not_contains)
      if (text.find(t) != std::string::npos) found.push_back(t);
    out.push_back(Verdict(
        "not_contains", found.empty()
                            ? std::nullopt
                            : std::optional<std::string>(
                                  "the output contains " + QuotedList(found))));
  }
  if (c.regex) out.push_back(Verdict("regex", RegexMiss(*c.regex, text)));
  if (c.json) out.push_back(Verdict("json", JsonMiss(c, text)));
}

void CheckConversation(const StepAssert& c, const AssertSubject& s,
                       std::vector<AssertionResult>& out) {
  static const agent::AgentResult kNone;
  const agent::AgentResult& conv = s.conversation ? *s.conversation : kNone;
  for (const ToolCalledCheck& t : c.tool_called)
    out.push_back(Verdict(ToolCallLabel(t), ToolCallMiss(t, conv)));
  if (c.max_turns_used) {
    std::optional<std::string> miss;
    if (conv.turns > *c.max_turns_used)
      miss = "used " + std::to_string(conv.turns) + " turns, at most " +
             std::to_string(*c.max_turns_used) + " allowed";
    out.push_back(Verdict("max_turns_used", miss));
  }
  if (c.max_tokens) {
    const int64_t tokens = conv.prompt_tokens + conv.completion_tokens;
    std::optional<std::string> miss;
    if (tokens > *c.max_tokens)
      miss = "spent " + std::to_string(tokens) + " tokens, at most " +
             std::to_string(*c.max_tokens) + " allowed";
    out.push_back(Verdict("max_tokens", miss));
  }
  if (c.max_cost) {
    std::optional<std::string> miss;
    if (conv.usd > *c.max_cost)
      miss = "cost " + Usd(conv.usd) + ", at most " + Usd(*c.max_cost) +
             " allowed";
    out.push_back(Verdict("max_cost", miss));
  }
}

}  // namespace

std::vector<AssertionResult> CheckAssert(const StepAssert& check,
                                         const AssertSubject& subject) {
  std::vector<AssertionResult> out;
  if (subject.kind != StepKind::kAgent && check.code) {
    std::optional<std::string> miss;
    if (subject.exit_code != check.code) {
      miss = "exit code " +
             (subject.exit_code ? std::to_string(*subject.exit_code)
                                : std::string("none")) +
             ", expected " + std::to_string(*check.code);
    }
    out.push_back(Verdict("code", miss));
  }
  CheckText(check, subject, out);
  if (subject.kind == StepKind::kAgent) CheckConversation(check, subject, out);
  if (check.max_duration) {
    std::optional<std::string> miss;
    if (!subject.duration) {
      miss = "no duration was recorded";
    } else if (*subject.duration > *check.max_duration) {
      miss = "took " + FormatDuration(*subject.duration) + ", at most " +
             FormatDuration(*check.max_duration) + " allowed";
    }
    out.push_back(Verdict("max_duration", miss));
  }
  return out;
}

std::optional<std::string> DescribeMisses(
    const std::vector<AssertionResult>& results) {
  std::string out;
  for (const AssertionResult& r : results) {
    if (r.passed) continue;
    out += (out.empty() ? "assert: " : "; ") + r.detail;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

std::string JudgePrompt(const std::string& rubric, const std::string& output) {
  std::string shown = output;
  if (shown.size() > kMaxJudgedOutputBytes) {
    shown = shown.substr(0, kMaxJudgedOutputBytes) +
            "\n[... cut: the output is " + std::to_string(output.size()) +
            " bytes]";
  }
  return "You are grading the output of a pipeline step against a rubric.\n\n"
         "Rubric:\n" +
         rubric + "\n\nOutput:\n<<<\n" + shown +
         "\n>>>\n\nAnswer with PASS or FAIL alone on the first line, then "
         "one short line saying why.";
}

namespace {

std::optional<AssertionResult> JsonVerdict(const std::string& answer) {
  std::string text = Trim(answer);
  if (text.rfind("```", 0) == 0) {
    const size_t open = text.find('\n');
    const size_t close = text.rfind("```");
    if (open == std::string::npos || close <= open) return std::nullopt;
    text = Trim(text.substr(open + 1, close - open - 1));
  }
  if (text.empty() || text[0] != '{') return std::nullopt;
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  auto pass = j.find("pass");
  if (pass == j.end() || !pass->is_boolean()) return std::nullopt;
  std::string reason;
  if (auto r = j.find("reason"); r != j.end() && r->is_string())
    reason = r->get<std::string>();
  AssertionResult out;
  out.name = "judge";
  out.passed = pass->get<bool>();
  if (!out.passed)
    out.detail = "the judge says FAIL" + (reason.empty() ? "" : ": " + reason);
  return out;
}

std::string Upper(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

AssertionResult ParseJudgeVerdict(const std::string& answer) {
  if (std::optional<AssertionResult> j = JsonVerdict(answer)) return *j;
  const std::string text = Trim(answer);
  const size_t eol = text.find('\n');
  // The first line, without markdown emphasis around the verdict.
  std::string first = Trim(text.substr(0, eol));
  while (!first.empty() && (first[0] == '*' || first[0] == '#'))
    first = Trim(first.substr(1));
  const std::string head = Upper(first.substr(0, 4));
  const bool pass = head == "PASS";
  const bool fail = head == "FAIL";
  // The word must stand alone: "PASSED" or "Passing" is no verdict.
  const char after = first.size() > 4 ? first[4] : ' ';
  const bool alone = after == ' ' || after == ':' || after == '-' ||
                     after == '.' || after == '*' || after == ',';
  AssertionResult out;
  out.name = "judge";
  if ((!pass && !fail) || !alone) {
    out.passed = false;
    out.detail =
        "the judge answered no verdict (expected a first line PASS or FAIL): " +
        Quoted(text);
    return out;
  }
  std::string reason = Trim(first.substr(4));
  while (!reason.empty() &&
         (reason[0] == ':' || reason[0] == '-' || reason[0] == '.' ||
          reason[0] == '*' || reason[0] == ','))
    reason = Trim(reason.substr(1));
  if (reason.empty() && eol != std::string::npos)
    reason = Trim(text.substr(eol + 1));
  out.passed = pass;
  if (fail) {
    const size_t nl = reason.find('\n');
    out.detail = "the judge says FAIL" +
                 (reason.empty() ? "" : ": " + reason.substr(0, nl));
  }
  return out;
}

}  // namespace steps::pipeline
