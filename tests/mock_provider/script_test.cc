#include "mock_provider/script.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "mock_provider/engine.h"

namespace steps {
namespace {

TEST(MockScriptTest, ReadsEveryKindOfEntry) {
  auto script = ParseMockScriptText(R"(
reviewer:
  - say: Looks good
    usage: {prompt_tokens: 10, completion_tokens: 3, cost: 0.5}
  - call: read_file
  - call:
      - {name: read_file, arguments: {path: a.txt}}
      - {name: run_shell, arguments: '{"command": "ls"', id: call_x}
  - status: 429
    headers: {Retry-After: "2"}
    body: {error: {message: slow down}}
  - delay: 1500ms
    say: late
  - hang: true
  - drop: true
  - garbage: true
  - garbage: "<html>"
  - error_event: overloaded
  - expect: {system_contains: terse, last_contains: a.txt, tool_result: true, request: 11, messages: 4}
gpt-4o:
  say: by model
default:
  say: fallback
)");
  ASSERT_TRUE(script.ok()) << script.status().message();
  const auto& e = script->scripts.at("reviewer");
  ASSERT_EQ(e.size(), 11u);
  EXPECT_EQ(e[0].action, MockEntry::Action::kSay);
  EXPECT_EQ(e[0].text, "Looks good");
  EXPECT_EQ(e[0].line, 3);
  ASSERT_TRUE(e[0].usage.has_value());
  EXPECT_EQ(e[0].usage->prompt_tokens, 10);
  EXPECT_EQ(e[0].usage->cost, 0.5);
  ASSERT_EQ(e[1].calls.size(), 1u);
  EXPECT_EQ(e[1].calls[0].name, "read_file");
  EXPECT_EQ(e[1].calls[0].arguments, "{}");
  ASSERT_EQ(e[2].calls.size(), 2u);
  EXPECT_EQ(e[2].calls[0].arguments, R"({"path":"a.txt"})");
  EXPECT_EQ(e[2].calls[1].arguments, R"({"command": "ls")");  // Verbatim.
  EXPECT_EQ(e[2].calls[1].id, "call_x");
  EXPECT_EQ(e[3].action, MockEntry::Action::kStatus);
  EXPECT_EQ(e[3].status, 429);
  EXPECT_EQ(e[3].headers, (HttpHeaders{{"Retry-After", "2"}}));
  EXPECT_EQ(*e[3].body, R"({"error":{"message":"slow down"}})");
  EXPECT_EQ(e[4].delay, Millis(1500));
  EXPECT_EQ(e[5].action, MockEntry::Action::kHang);
  EXPECT_EQ(e[6].action, MockEntry::Action::kDrop);
  EXPECT_EQ(e[7].action, MockEntry::Action::kGarbage);
  EXPECT_EQ(e[8].text, "<html>");
  EXPECT_EQ(e[9].action, MockEntry::Action::kErrorEvent);
  EXPECT_EQ(e[10].action, MockEntry::Action::kDefault);
  ASSERT_TRUE(e[10].expect.has_value());
  EXPECT_EQ(*e[10].expect->system_contains, "terse");
  EXPECT_EQ(*e[10].expect->tool_result, true);
  EXPECT_EQ(*e[10].expect->request, 11);
  EXPECT_EQ(*e[10].expect->messages, 4);
  EXPECT_EQ(script->scripts.at("gpt-4o").size(), 1u);
  ASSERT_TRUE(script->default_entry.has_value());
  EXPECT_EQ(script->default_entry->text, "fallback");
}

TEST(MockScriptTest, ErrorsNameTheLine) {
  struct Case {
    const char* yaml;
    const char* error;
  };
  const Case cases[] = {
      {"a:\n  - sing: hi\n",
       "2: unknown key 'sing' (known: say, call, status, headers, body, "
       "delay, hang, drop, garbage, usage, expect, error_event)"},
      {"a:\n  - say: hi\n  - status: 700\n",
       "3: 'status' must be an HTTP status (100-599)"},
      {"a:\n  - status: 500\n    drop: true\n",
       "2: an entry answers one way; it has both 'status' and 'drop'"},
      {"a:\n  - say: x\n    status: 500\n",
       "2: 'say'/'call' cannot be combined with 'status'"},
      {"a:\n  - delay: 5\n",
       "2: 'delay': invalid duration '5': missing unit after the number "
       "(write e.g. 500ms, 30s, 2m, 1h, 1h30m)"},
      {"a:\n  - body: x\n", "2: 'body' belongs with 'status'"},
      {"a:\n  - expect: {request: 0}\n", "2: 'request' counts from 1"},
      {"a:\n  - expect: {sytem_contains: x}\n",
       "2: unknown key 'sytem_contains' in expect (known: system_contains, "
       "last_contains, last_is, tool_result, request, messages, model, tools, "
       "body)"},
      {"a:\n  - expect: {tools: read_file}\n",
       "2: 'tools' must be a list of tool names, e.g. [read_file]"},
      {"a:\n  - expect: {body: 3}\n",
       "2: 'body' must be a mapping of the keys the request's wire body must "
       "hold, e.g. {temperature: 0.2}"},
      {"a:\n  - call: {arguments: {}}\n", "2: a call needs a 'name'"},
      {"a: 3\n", "1: the script for 'a' must be a list of entries"},
      {"default:\n  delay: 1s\n",
       "2: 'default' needs an answer (say, call, status, hang, drop, garbage "
       "or error_event)"},
      {"- say: hi\n",
       "1: a mock script is a mapping of agent or model names to lists of "
       "entries (and an optional 'default')"},
      {"a: [say: hi\n", nullptr},  // A YAML syntax error, with its line.
  };
  for (const Case& c : cases) {
    auto script = ParseMockScriptText(c.yaml);
    ASSERT_FALSE(script.ok()) << c.yaml;
    EXPECT_EQ(script.status().code(), StatusCode::kInvalidArgument);
    if (c.error) {
      EXPECT_EQ(script.status().message(), c.error) << c.yaml;
    } else {
      EXPECT_EQ(script.status().message().rfind("2: ", 0), 0u)
          << script.status().message();
    }
  }
}

TEST(MockScriptTest, LinesCountWithinTheEnclosingFile) {
  // A pipeline hands over its `mock:` node; lines are the file's.
  YAML::Node pipeline = YAML::Load(
      "jobs: []\nmock:\n  reviewer:\n    - say: ok\n    - status: 1\n");
  auto script = ParseMockScript(pipeline["mock"]);
  ASSERT_FALSE(script.ok());
  EXPECT_EQ(script.status().message(),
            "5: 'status' must be an HTTP status (100-599)");
}

TEST(MockScriptTest, FileErrorsCarryThePath) {
  auto missing = LoadMockScriptFile("/nonexistent/script.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "/nonexistent/script.yaml: cannot read the script");
}

// WriteMockScript's text reads back to the same entries, whatever bytes
// the texts hold: quotes, colons, '#', leading spaces, blank lines,
// trailing newlines, tabs, control characters.
TEST(MockScriptTest, AWrittenScriptReadsBackToTheSameEntries) {
  const std::vector<std::string> texts = {
      "plain",
      "",
      "key: value # not a comment",
      "\"quoted\" and 'single'",
      " leading space",
      "two\nlines",
      "ends with one newline\n",
      "ends with two\n\n",
      "blank\n\nline inside",
      "tab\tinside\n\tand leading a line",
      "control \x01 byte",
      "- looks like a list\n- item",
      "|\nliteral marker first",
      "ünïcödé\nnext",
      "true",
      "42",
  };
  MockScript script;
  for (size_t i = 0; i < texts.size(); ++i) {
    MockEntry say;
    say.action = MockEntry::Action::kSay;
    say.text = texts[i];
    say.note = "answered by openai/gpt-4o\nsecond note line";
    MockExpect e;
    e.last_is = texts[i];
    e.system_contains = texts[i];
    e.model = "gpt-4o";
    e.tools = std::vector<std::string>{"read_file", texts[i]};
    say.expect = e;
    script.scripts["agent: " + std::to_string(i)].push_back(say);
  }
  MockEntry call;
  call.action = MockEntry::Action::kSay;
  call.calls = {{"", "read_file", R"({"path": "a.txt"})"},
                {"id_1", "run_shell", R"({"command": "ls")"}};
  call.usage = MockUsage{12, 3, 0.25};
  MockEntry status;
  status.action = MockEntry::Action::kStatus;
  status.status = 500;
  status.headers = {{"Retry-After", "2"}};
  status.delay = Millis(1500);
  MockEntry drop;
  drop.action = MockEntry::Action::kDrop;
  MockEntry hang;
  hang.action = MockEntry::Action::kHang;
  hang.text = "starts";
  MockEntry garbage;
  garbage.action = MockEntry::Action::kGarbage;
  garbage.text = "true";
  MockEntry event;
  event.action = MockEntry::Action::kErrorEvent;
  event.text = "overloaded";
  MockEntry only_expect;
  only_expect.expect = MockExpect{};
  only_expect.expect->tools = std::vector<std::string>{};
  only_expect.expect->tool_result = true;
  script.scripts["coder"] = {call,    status, drop,       hang,
                             garbage, event,  only_expect};
  MockEntry fallback;
  fallback.action = MockEntry::Action::kSay;
  fallback.text = "the default";
  script.default_entry = fallback;

  std::string text =
      WriteMockScript(script, {"coder"}, "Recorded by a test.\n\nSecond.");
  EXPECT_EQ(text.rfind("# Recorded by a test.\n#\n# Second.\n\"coder\":\n", 0),
            0u)
      << text;
  auto back = ParseMockScriptText(text);
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
  ASSERT_EQ(back->scripts.size(), script.scripts.size()) << text;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto& entries = back->scripts.at("agent: " + std::to_string(i));
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].text, texts[i]) << text;
    ASSERT_TRUE(entries[0].expect.has_value());
    EXPECT_EQ(*entries[0].expect->last_is, texts[i]) << text;
    EXPECT_EQ(*entries[0].expect->system_contains, texts[i]);
    EXPECT_EQ(*entries[0].expect->model, "gpt-4o");
    EXPECT_EQ(*entries[0].expect->tools,
              (std::vector<std::string>{"read_file", texts[i]}));
  }
  const auto& c = back->scripts.at("coder");
  ASSERT_EQ(c.size(), 7u);
  ASSERT_EQ(c[0].calls.size(), 2u);
  EXPECT_EQ(c[0].calls[0].arguments, R"({"path": "a.txt"})");
  EXPECT_EQ(c[0].calls[1].arguments, R"({"command": "ls")");
  EXPECT_EQ(c[0].calls[1].id, "id_1");
  EXPECT_EQ(c[0].usage->prompt_tokens, 12);
  EXPECT_EQ(*c[0].usage->cost, 0.25);
  EXPECT_EQ(c[1].action, MockEntry::Action::kStatus);
  EXPECT_EQ(c[1].status, 500);
  EXPECT_EQ(c[1].headers, status.headers);
  EXPECT_EQ(c[1].delay, Millis(1500));
  EXPECT_EQ(c[2].action, MockEntry::Action::kDrop);
  EXPECT_EQ(c[3].action, MockEntry::Action::kHang);
  EXPECT_EQ(c[3].text, "starts");
  EXPECT_EQ(c[4].action, MockEntry::Action::kGarbage);
  EXPECT_EQ(c[4].text, "true");
  EXPECT_EQ(c[5].action, MockEntry::Action::kErrorEvent);
  EXPECT_EQ(c[6].action, MockEntry::Action::kDefault);
  EXPECT_TRUE(c[6].expect->tools->empty());
  ASSERT_TRUE(back->default_entry.has_value());
  EXPECT_EQ(back->default_entry->text, "the default");
}

}  // namespace
}  // namespace steps

namespace steps {
namespace {

// AGENT@STEP scripts answer that step of the agent before the agent's own
// script; other steps of it fall back to the agent's script.
TEST(MockEngineKeyTest, AStepsOwnScriptComesBeforeItsAgents) {
  auto script = ParseMockScriptText(
      "coder@north: [{say: north}]\n"
      "coder: [{say: any}]\n");
  ASSERT_TRUE(script.ok()) << script.status().message();
  MockEngine engine(std::move(*script));
  auto answer = [&](const std::string& step) {
    HttpHeaders headers = {{"X-Steps-Agent", "coder"}};
    if (!step.empty()) headers.emplace_back("X-Steps-Step", step);
    MockReply r = engine.Handle(
        "/v1/chat/completions", headers,
        R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})");
    return nlohmann::json::parse(r.body)["choices"][0]["message"]["content"]
        .get<std::string>();
  };
  EXPECT_EQ(answer("south"), "any");
  EXPECT_EQ(answer("north"), "north");
}

}  // namespace
}  // namespace steps
