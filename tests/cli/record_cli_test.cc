// `steps run --record` through the binary (docs/mock.md#recording): a run
// against a loopback server is recorded request by request (retried 500s,
// a fallback, tool round trips, a streamed Anthropic source), the server
// stops, and `steps test` replays the recording with `mock: {file:}` and
// passes; a changed prompt then fails, naming the field and how to record
// again. No secret value reaches the recorded file.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "../common/steps_cli.h"
#include "../common/temp_dir.h"
#include "mock_provider/script.h"
#include "mock_provider/server.h"

namespace steps {
namespace {

using test_support::Has;
using test_support::RunSteps;
using test_support::TempDir;

// Every secret below holds this; it must appear nowhere in a recording.
constexpr const char* kNeedle = "SECRETVALUE";
const std::string kEnv =
    "OPENAI_API_KEY=sk-test-SECRETVALUE-123 "
    "ANTHROPIC_API_KEY=sk-ant-SECRETVALUE-456 "
    "DEPLOY_TOKEN=deploy-SECRETVALUE-789";

// A loopback server answering from `script` (the mock provider over HTTP:
// to `steps run` it is a real OpenAI or Anthropic endpoint).
std::unique_ptr<MockHttpServer> Serve(const std::string& script) {
  auto parsed = ParseMockScriptText(script);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  auto server = std::make_unique<MockHttpServer>(
      std::make_shared<MockEngine>(std::move(*parsed)));
  EXPECT_TRUE(server->Start().ok());
  return server;
}

// The pipeline: a task writes a note holding the deploy token (a
// `secrets:` value) and the OpenAI key, the agent reads it with a tool (so
// both are in the next request) and answers.
std::string Pipeline(const std::string& sources, const std::string& prompt) {
  return "secrets: [DEPLOY_TOKEN]\n"
         "agents:\n"
         "- name: coder\n" +
         sources +
         "  tools: [read_file]\n"
         "  attempts: 2\n"
         "jobs:\n"
         "- name: notes\n"
         "  plan:\n"
         "  - task: write\n"
         "    outputs: [notes]\n"
         "    env: [OPENAI_API_KEY]\n"
         "    run: printf 'TODO ship it\\ntoken %s key %s\\n' "
         "\"$DEPLOY_TOKEN\" \"$OPENAI_API_KEY\" > notes/todo.txt\n"
         "  - agent: coder\n"
         "    messages: [\"" +
         prompt +
         "\"]\n"
         "    assert: {contains_all: [\"ship it\"]}\n";
}

// The server's answers: the primary model fails twice (its two attempts),
// the fallback once, then reads the note and answers, echoing the keys.
const char* const kServerScript = R"(
primary:
  - status: 500
  - status: 503
backup:
  - status: 500
  - call: {name: read_file, arguments: {path: notes/todo.txt}}
  - say: "Left: ship it. Echo sk-test-SECRETVALUE-123 deploy-SECRETVALUE-789"
)";

TEST(RecordCliTest, ARecordedRunReplaysUnderStepsTestAndAChangedPromptFails) {
  TempDir dir;
  auto server = Serve(kServerScript);
  const std::string url = server->base_url();
  const std::string sources =
      "  source: {model: openai/primary, base_url: " + url +
      "}\n"
      "  fallback:\n"
      "  - {model: openai/backup, base_url: " +
      url + ", stream: true}\n";
  const std::string prompt = "Read notes/todo.txt and say what is left.";
  dir.Write("p.yaml", Pipeline(sources, prompt));

  auto run =
      RunSteps(dir.path(), "run p.yaml --plain --record", {.prefix = kEnv});
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(Has(run.out, "recorded 5 requests of 1 agent to p.mock.yaml"))
      << run.out;
  EXPECT_TRUE(Has(run.out, "mock: {file: p.mock.yaml}")) << run.out;
  // The secrets were in a request (the tool result) and in an answer...
  int holding = 0;
  for (const MockRequestRecord& request : server->engine().Requests()) {
    if (Has(request.body, "deploy-SECRETVALUE-789") &&
        Has(request.body, "sk-test-SECRETVALUE-123")) {
      ++holding;
    }
  }
  EXPECT_EQ(holding, 1);
  // ... and are in the recording nowhere.
  const std::string recorded = dir.Read("p.mock.yaml");
  EXPECT_FALSE(Has(recorded, kNeedle)) << recorded;
  EXPECT_TRUE(Has(recorded, "status: 500")) << recorded;
  EXPECT_TRUE(Has(recorded, "status: 503")) << recorded;
  EXPECT_TRUE(Has(recorded, "from openai/backup (fallback 1), streamed"))
      << recorded;
  EXPECT_TRUE(Has(recorded, "Echo *** ***")) << recorded;
  auto script = LoadMockScriptFile(dir / "p.mock.yaml");
  ASSERT_TRUE(script.ok()) << script.status().message() << "\n" << recorded;
  const auto& entries = script->scripts.at("coder");
  ASSERT_EQ(entries.size(), 5u) << recorded;
  EXPECT_EQ(*entries[0].expect->model, "primary");
  EXPECT_EQ(*entries[0].expect->last_is, prompt);
  EXPECT_EQ(*entries[0].expect->tools, std::vector<std::string>{"read_file"});
  EXPECT_EQ(*entries[2].expect->model, "backup");
  EXPECT_EQ(entries[3].calls.at(0).name, "read_file");
  // The tool result held the token: expected by its secret-free part.
  EXPECT_EQ(*entries[4].expect->tool_result, true);
  EXPECT_EQ(*entries[4].expect->last_contains, "TODO ship it") << recorded;

  // A second --record onto the file is refused before anything runs.
  auto again =
      RunSteps(dir.path(), "run p.yaml --plain --record", {.prefix = kEnv});
  EXPECT_EQ(again.exit_code, 64) << again.out;
  EXPECT_TRUE(Has(again.out,
                  "p.mock.yaml: the file exists; add "
                  "--record-overwrite"))
      << again.out;

  // Nothing answers any more: the replay stays in the process.
  server->Stop();
  server.reset();
  dir.Write("p.yaml",
            Pipeline(sources, prompt) + "mock: {file: p.mock.yaml}\n");
  auto replay = RunSteps(dir.path(), "test p.yaml", {.prefix = kEnv});
  EXPECT_EQ(replay.exit_code, 0) << replay.out;
  EXPECT_TRUE(Has(replay.out, "1 passed, 0 failed")) << replay.out;

  // A changed prompt: the replay says which request, which field, what was
  // recorded against what is asked now, and how to record again.
  dir.Write("p.yaml",
            Pipeline(sources, "Read notes/todo.txt and list what is left.") +
                "mock: {file: p.mock.yaml}\n");
  auto changed = RunSteps(dir.path(), "test p.yaml", {.prefix = kEnv});
  EXPECT_EQ(changed.exit_code, 1) << changed.out;
  EXPECT_TRUE(Has(changed.out,
                  "expect last_is: the last message expected 'Read "
                  "notes/todo.txt and say what is left.', now 'Read "
                  "notes/todo.txt and list what is left.' (they differ from "
                  "byte 25)"))
      << changed.out;
  EXPECT_TRUE(Has(changed.out, "agent 'coder', step 'coder'")) << changed.out;
  EXPECT_TRUE(Has(changed.out,
                  "record the script again: steps run p.yaml --record "
                  "p.mock.yaml --record-overwrite"))
      << changed.out;
}

// Two steps of one agent that ran side by side are recorded each under its
// own key (AGENT@STEP), so a replay matches each step with its own
// conversation whatever order their requests come in: run again and again
// side by side, and with the steps swapped.
TEST(RecordCliTest, StepsOfOneAgentReplayTheirOwnConversations) {
  TempDir dir;
  auto server = Serve("m:\n  - say: first answer\n  - say: second answer\n");
  const std::string url = server->base_url();
  auto pipeline = [&](const std::string& first, const std::string& second,
                      const std::string& mock) {
    return "agents:\n"
           "- name: coder\n"
           "  source: {model: openai/m, base_url: " +
           url +
           "}\n"
           "jobs:\n"
           "- name: j\n"
           "  plan:\n"
           "  - in_parallel:\n" +
           first + second + mock;
  };
  const std::string north =
      "    - {agent: coder, name: north, messages: [Go north.]}\n";
  const std::string south =
      "    - {agent: coder, name: south, messages: [Go south.]}\n";
  dir.Write("p.yaml", pipeline(north, south, ""));
  auto run = RunSteps(dir.path(), "run p.yaml --plain --record --state-dir s",
                      {.prefix = kEnv});
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const std::string recorded = dir.Read("p.mock.yaml");
  EXPECT_TRUE(Has(recorded, "\"coder@north\":")) << recorded;
  EXPECT_TRUE(Has(recorded, "\"coder@south\":")) << recorded;
  EXPECT_TRUE(Has(recorded, "last_is: \"Go north.\"")) << recorded;
  // Which step got which answer, as recorded.
  auto answer_of = [&](const std::string& step, const std::string& text) {
    size_t at = text.find("\"coder@" + step + "\":");
    size_t end = text.find("\n\"coder@", at + 1);
    std::string part = text.substr(
        at, end == std::string::npos ? std::string::npos : end - at);
    return Has(part, "first answer") ? "first answer" : "second answer";
  };
  const std::string north_answer = answer_of("north", recorded);
  EXPECT_NE(north_answer, answer_of("south", recorded)) << recorded;

  server->Stop();
  server.reset();
  for (bool swapped : {false, true}) {
    SCOPED_TRACE(swapped);
    dir.Write("p.yaml",
              swapped ? pipeline(south, north, "mock: {file: p.mock.yaml}\n")
                      : pipeline(north, south, "mock: {file: p.mock.yaml}\n"));
    auto replay = RunSteps(dir.path(), "test p.yaml --repeat 5");
    EXPECT_EQ(replay.exit_code, 0) << replay.out;
    EXPECT_TRUE(Has(replay.out, "1 passed, 0 failed")) << replay.out;
    auto shown = RunSteps(dir.path(), "run p.yaml --plain --mock --state-dir " +
                                          std::string(swapped ? "s2" : "s1"));
    EXPECT_TRUE(Has(shown.out, "north ▸ turn 1  " + north_answer) ||
                Has(shown.out, "north | " + north_answer))
        << shown.out;
    EXPECT_FALSE(Has(shown.out, "cached")) << shown.out;
  }
}

// A conversation that asks for more than its recording holds (a changed
// tool result leads the model on) fails saying how many entries the script
// has and how to record it again.
TEST(RecordCliTest, AReplayThatRunsPastItsScriptSaysHowToRecordAgain) {
  TempDir dir;
  dir.Write("p.yaml",
            "agents:\n"
            "- { name: a, source: { model: mock/a }, tools: [run_shell] }\n"
            "jobs:\n"
            "- name: j\n"
            "  plan:\n"
            "  - agent: a\n"
            "    messages: [go]\n"
            "mock: { file: p.mock.yaml }\n");
  dir.Write("p.mock.yaml",
            "a:\n"
            "  - call: {name: run_shell, arguments: {command: 'echo hi'}}\n");
  auto r = RunSteps(dir.path(), "test p.yaml");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "mock: nothing scripted for agent 'a', model 'a' (request "
                  "2; its script has 1 entry)"))
      << r.out;
  EXPECT_TRUE(Has(r.out,
                  "record the script again: steps run p.yaml --record "
                  "p.mock.yaml --record-overwrite"))
      << r.out;
  // An inline script is no recording: no hint to record it.
  dir.Write("q.yaml",
            "agents:\n"
            "- { name: a, source: { model: mock/a }, tools: [run_shell] }\n"
            "jobs:\n"
            "- name: j\n"
            "  plan:\n"
            "  - agent: a\n"
            "    messages: [go]\n"
            "mock:\n"
            "  a: [{call: {name: run_shell, arguments: {command: x}}}]\n");
  auto inline_script = RunSteps(dir.path(), "test q.yaml");
  EXPECT_EQ(inline_script.exit_code, 1) << inline_script.out;
  EXPECT_TRUE(Has(inline_script.out, "its script has 1 entry"))
      << inline_script.out;
  EXPECT_FALSE(Has(inline_script.out, "--record")) << inline_script.out;
}

// An Anthropic source asked to stream: the assembled answers are recorded
// and replayed (streamed again, as the source asks).
TEST(RecordCliTest, AStreamedAnthropicSourceIsRecordedAndReplayed) {
  TempDir dir;
  auto server = Serve(R"(
claude-x:
  - status: 529
  - call: {name: read_file, arguments: {path: notes/todo.txt}}
  - say: "Left: ship it."
)");
  const std::string sources =
      "  source: {model: anthropic/claude-x, "
      "base_url: " +
      server->base_url() + ", stream: true}\n";
  const std::string prompt = "Say what is left in notes/todo.txt.";
  dir.Write("a.yaml", Pipeline(sources, prompt));
  auto run = RunSteps(dir.path(), "run a.yaml --plain --record=a.rec.yaml",
                      {.prefix = kEnv});
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const std::string recorded = dir.Read("a.rec.yaml");
  EXPECT_TRUE(Has(recorded, "status: 529")) << recorded;
  EXPECT_TRUE(Has(recorded, "from anthropic/claude-x, streamed")) << recorded;
  EXPECT_TRUE(Has(recorded, "say: \"Left: ship it.\"")) << recorded;
  EXPECT_FALSE(Has(recorded, kNeedle)) << recorded;

  server->Stop();
  server.reset();
  dir.Write("a.yaml", Pipeline(sources, prompt) + "mock: {file: a.rec.yaml}\n");
  auto replay = RunSteps(dir.path(), "test a.yaml", {.prefix = kEnv});
  EXPECT_EQ(replay.exit_code, 0) << replay.out;
  EXPECT_TRUE(Has(replay.out, "1 passed, 0 failed")) << replay.out;

  // A tool granted since: every request offers it, and the replay says so.
  std::string more_tools = Pipeline(sources, prompt);
  more_tools.replace(more_tools.find("[read_file]"), 11,
                     "[read_file, list_files]");
  dir.Write("a.yaml", more_tools + "mock: {file: a.rec.yaml}\n");
  auto changed = RunSteps(dir.path(), "test a.yaml", {.prefix = kEnv});
  EXPECT_EQ(changed.exit_code, 1) << changed.out;
  EXPECT_TRUE(Has(changed.out,
                  "expect tools: expected [read_file], now [read_file, "
                  "list_files] (request 1, agent 'coder', step 'coder')"))
      << changed.out;
}

// A CLI source's run is recorded as its mocked source replays it: the
// output as the answer, a failure as a final status the fallback follows.
TEST(RecordCliTest, CliSourcesAreRecordedAsTheirMockedSourcesAnswer) {
  TempDir dir;
  auto server = Serve("backup:\n  - say: from the fallback\n");
  const std::string body =
      "agents:\n"
      "- name: flaky\n"
      "  source: {cli: \"cat > /dev/null; exit 3\"}\n"
      "  fallback:\n"
      "  - {model: openai/backup, base_url: " +
      server->base_url() +
      "}\n"
      "- name: writer\n"
      "  source: {cli: \"cat > /dev/null; echo written by the cli\"}\n"
      "jobs:\n"
      "- name: j\n"
      "  plan:\n"
      "  - agent: flaky\n"
      "    messages: [Go.]\n"
      "    assert: {contains_all: [from the fallback]}\n"
      "  - agent: writer\n"
      "    messages: [Write.]\n"
      "    assert: {contains_all: [written by the cli]}\n";
  dir.Write("c.yaml", body);
  auto run =
      RunSteps(dir.path(), "run c.yaml --plain --record", {.prefix = kEnv});
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const std::string recorded = dir.Read("c.mock.yaml");
  EXPECT_TRUE(Has(recorded, "HTTP 400 from cli: cat > /dev/null; exit 3"))
      << recorded;
  EXPECT_TRUE(Has(recorded, "say: |\n      written by the cli\n")) << recorded;

  server->Stop();
  server.reset();
  dir.Write("c.yaml", body + "mock: {file: c.mock.yaml}\n");
  auto replay = RunSteps(dir.path(), "test c.yaml", {.prefix = kEnv});
  EXPECT_EQ(replay.exit_code, 0) << replay.out;
  EXPECT_TRUE(Has(replay.out, "1 passed, 0 failed")) << replay.out;
}

TEST(RecordCliTest, RecordIsRefusedWhereItCannotWork) {
  TempDir dir;
  dir.Write("m.yaml",
            "agents:\n- name: a\n  source: {model: mock/x}\njobs:\n- name: j\n"
            "  plan:\n  - agent: a\n    messages: [hi]\nmock:\n  a: {say: "
            "ok}\n");
  auto mocked = RunSteps(dir.path(), "run m.yaml --mock --record");
  EXPECT_EQ(mocked.exit_code, 64) << mocked.out;
  EXPECT_TRUE(Has(mocked.out, "under --mock there is nothing to record"))
      << mocked.out;
  auto stray = RunSteps(dir.path(), "run m.yaml --record-overwrite");
  EXPECT_EQ(stray.exit_code, 64) << stray.out;
  EXPECT_TRUE(Has(stray.out, "--record-overwrite goes with --record"))
      << stray.out;
}

// `mock: {file: PATH}`: read next to the pipeline; a missing, unreadable or
// malformed file is refused at load with the pipeline's line and the
// file's own.
TEST(RecordCliTest, MockFileErrorsNameTheLines) {
  TempDir dir;
  const std::string head =
      "agents:\n- name: a\n  source: {model: mock/x}\njobs:\n- name: j\n"
      "  plan:\n  - agent: a\n    messages: [hi]\n";
  dir.Write("missing.yaml", head + "mock: {file: nowhere.mock.yaml}\n");
  auto missing = RunSteps(dir.path(), "validate missing.yaml");
  EXPECT_EQ(missing.exit_code, 65) << missing.out;
  EXPECT_TRUE(Has(missing.out,
                  "missing.yaml:9: error: mock: file: 'nowhere.mock.yaml' "
                  "does not exist"))
      << missing.out;

  dir.Write("bad.mock.yaml", "a:\n  - say: ok\n  - sing: no\n");
  dir.Write("bad.yaml", head + "mock:\n  file: bad.mock.yaml\n");
  auto bad = RunSteps(dir.path(), "validate bad.yaml");
  EXPECT_EQ(bad.exit_code, 65) << bad.out;
  EXPECT_TRUE(Has(bad.out,
                  "bad.yaml:10: error: mock: file: bad.mock.yaml:3: unknown "
                  "key 'sing'"))
      << bad.out;

  dir.Write("broken.mock.yaml", "a: [say: {\n");
  dir.Write("broken.yaml", head + "mock: {file: broken.mock.yaml}\n");
  auto broken = RunSteps(dir.path(), "validate broken.yaml");
  EXPECT_EQ(broken.exit_code, 65) << broken.out;
  EXPECT_TRUE(Has(broken.out,
                  "broken.yaml:9: error: mock: file: "
                  "broken.mock.yaml:"))
      << broken.out;

  dir.Write("mixed.yaml",
            head + "mock:\n  file: bad.mock.yaml\n  a: {say: hi}\n");
  auto mixed = RunSteps(dir.path(), "validate mixed.yaml");
  EXPECT_EQ(mixed.exit_code, 65) << mixed.out;
  EXPECT_TRUE(Has(mixed.out,
                  "mixed.yaml:10: error: mock: 'file' names a script file "
                  "and stands alone"))
      << mixed.out;

  // Relative to the pipeline's folder, not the working directory.
  std::filesystem::create_directory(dir / "sub");
  dir.Write("sub/good.mock.yaml", "a:\n  - say: from the file\n");
  dir.Write("sub/good.yaml", head +
                                 "    assert: {contains_all: [from the file]}\n"
                                 "mock: {file: good.mock.yaml}\n");
  auto good = RunSteps(dir.path(), "test sub/good.yaml");
  EXPECT_EQ(good.exit_code, 0) << good.out;
}

}  // namespace
}  // namespace steps
