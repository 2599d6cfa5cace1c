// `steps mcp` through the real binary over pipes: the handshake and version
// negotiation, tools/list, a malformed line, an unknown method and bad
// params answered while the server keeps going, paths outside the root
// refused, a broken pipeline's errors with their lines, a run started in
// the background and followed to its outcome (recorded `via mcp`), a
// waiting status call cancelled (no answer; the next call works), the
// busy answer past the bound of calls at once, end of input ending the
// server while its run goes on, and the hidden flags of `steps run` that
// the server passes (--run-id, --via) checked like any option.
//
// Timing: every read is bounded (kReadTimeout, far above what any case
// needs); runs wait on gate files the test creates, each bounded at 60 s.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/steps_cli.h"
#include "common/temp_dir.h"
#include "mcp_session.h"

namespace {

using nlohmann::json;
using steps::test_support::Has;
using steps::test_support::IsError;
using steps::test_support::kStepsBinary;
using steps::test_support::McpSession;
using steps::test_support::RunSteps;
using steps::test_support::TempDir;
using steps::test_support::Text;

// A pipeline whose first step waits for the file GATE (60 s at most), then
// an agent step answered by the mock.
std::string GatedPipeline(const std::string& gate) {
  return "agents:\n"
         "- name: helper\n"
         "  source: { model: openai/gpt-4o-mini }\n"
         "jobs:\n"
         "- name: build\n"
         "  plan:\n"
         "  - task: wait-for-gate\n"
         "    run: |\n"
         "      for _ in $(seq 600); do [ -e '" +
         gate +
         "' ] && break; "
         "sleep 0.1; done\n"
         "      echo gate open\n"
         "  - agent: helper\n"
         "    messages: [\"Say done.\"]\n"
         "mock:\n"
         "  helper:\n"
         "  - say: done\n";
}

TEST(McpServerCliTest, HandshakeNegotiatesTheVersionAndListsTheTools) {
  TempDir dir;
  McpSession s(dir.path());
  json init = s.Initialize();
  EXPECT_EQ(init["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(init["result"]["serverInfo"]["name"], "steps");
  EXPECT_EQ(init["result"]["serverInfo"]["version"], STEPS_VERSION);
  EXPECT_TRUE(init["result"]["capabilities"].contains("tools"));
  json older = s.Request(1, "initialize", {{"protocolVersion", "2024-11-05"}});
  EXPECT_EQ(older["result"]["protocolVersion"], "2024-11-05");
  json unknown =
      s.Request(2, "initialize", {{"protocolVersion", "1999-01-01"}});
  EXPECT_EQ(unknown["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(s.Request(3, "ping")["result"], json::object());
  json list = s.Request(4, "tools/list");
  std::vector<std::string> names;
  for (const json& t : list["result"]["tools"]) {
    names.push_back(t["name"]);
    EXPECT_FALSE(t["description"].get<std::string>().empty()) << t["name"];
    EXPECT_EQ(t["inputSchema"]["type"], "object") << t["name"];
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"validate", "explain", "run", "status",
                                      "show", "runs", "approve", "reject"}));
}

TEST(McpServerCliTest, BadMessagesGetErrorsAndTheServerKeepsGoing) {
  TempDir dir;
  McpSession s(dir.path());
  s.Initialize();
  s.SendLine("{not json");
  std::optional<json> parse = s.Next();
  ASSERT_TRUE(parse);
  EXPECT_EQ((*parse)["error"]["code"], -32700);
  EXPECT_TRUE((*parse)["id"].is_null());
  s.SendLine("[1, 2]");
  std::optional<json> batch = s.Next();
  ASSERT_TRUE(batch);
  EXPECT_EQ((*batch)["error"]["code"], -32600);
  EXPECT_EQ(s.Request(1, "resources/list")["error"]["code"], -32601);
  EXPECT_EQ(s.Call(2, "nonesuch", json::object())["error"]["code"], -32602);
  json missing = s.Call(3, "validate", json::object());
  EXPECT_EQ(missing["error"]["code"], -32602);
  EXPECT_TRUE(Has(missing["error"]["message"], "\"file\"")) << missing;
  json wrong_type = s.Call(4, "status", {{"wait_seconds", "soon"}});
  EXPECT_EQ(wrong_type["error"]["code"], -32602);
  EXPECT_EQ(s.Request(5, "tools/call", json::array())["error"]["code"], -32602);
  EXPECT_EQ(s.Call(6, "runs", 3)["error"]["code"], -32602);
  // A line over the bound (4 MiB) is answered once and skipped to its end.
  s.SendLine("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\",\"x\":\"" +
             std::string(4 << 20, 'a') + "\"}");
  std::optional<json> too_long = s.Next();
  ASSERT_TRUE(too_long);
  EXPECT_EQ((*too_long)["error"]["code"], -32700);
  EXPECT_TRUE(Has((*too_long)["error"]["message"], "more than 4194304 bytes"))
      << *too_long;
  EXPECT_EQ(s.Request(8, "ping")["result"], json::object());
  for (const json& m : s.seen()) EXPECT_NE(m.value("id", json()), 7) << m;
}

TEST(McpServerCliTest, PathsOutsideTheRootAreRefused) {
  TempDir outside;
  outside.Write("p.yaml", "jobs: []\n");
  TempDir dir;
  symlink((outside / "p.yaml").c_str(), (dir / "link.yaml").c_str());
  McpSession s(dir.path());
  s.Initialize();
  int id = 1;
  for (const std::string& path :
       {outside / "p.yaml", std::string("../p.yaml"), std::string("link.yaml"),
        std::string("-"), std::string("")}) {
    for (const char* tool : {"validate", "explain", "run"}) {
      json r = s.Call(id++, tool, {{"file", path}});
      EXPECT_TRUE(IsError(r)) << tool << " " << path << ": " << r;
      EXPECT_FALSE(Has(Text(r), "Valid:")) << Text(r);
    }
  }
  json r = s.Call(id++, "validate", {{"file", outside / "p.yaml"}});
  EXPECT_TRUE(Has(Text(r), "is outside " + std::filesystem::canonical(
                                                 dir.path())
                                                 .string()))
      << Text(r);
}

TEST(McpServerCliTest, ValidateAndExplainAnswerAsTheCommandsPrint) {
  TempDir dir;
  dir.Write("broken.yaml",
            "jobs:\n- name: j\n  plan:\n  - task: t\n    timeout: soon\n"
            "    run: echo hi\n");
  dir.Write("good.yaml",
            "jobs:\n- name: j\n  plan:\n  - task: t\n"
            "    run: echo hi\n");
  McpSession s(dir.path());
  s.Initialize();
  json broken = s.Call(1, "validate", {{"file", "broken.yaml"}});
  EXPECT_TRUE(IsError(broken));
  EXPECT_TRUE(Has(Text(broken), "broken.yaml:5: error:")) << Text(broken);
  EXPECT_TRUE(Has(Text(broken), "Invalid: broken")) << Text(broken);
  json good = s.Call(2, "validate", {{"file", "good.yaml"}});
  EXPECT_FALSE(IsError(good));
  EXPECT_EQ(Text(good), "Valid: good (1 step)\n");
  json explain = s.Call(3, "explain", {{"file", "good.yaml"}});
  EXPECT_FALSE(IsError(explain));
  EXPECT_EQ(Text(explain), RunSteps(dir.path(), "explain good.yaml").out);
  json no_job = s.Call(4, "explain", {{"file", "good.yaml"}, {"job", "x"}});
  EXPECT_TRUE(IsError(no_job));
  EXPECT_TRUE(Has(Text(no_job), "no job named 'x'")) << Text(no_job);
  json refused_run = s.Call(5, "run", {{"file", "broken.yaml"}});
  EXPECT_TRUE(IsError(refused_run));
  EXPECT_TRUE(Has(Text(refused_run), "broken.yaml:5:")) << Text(refused_run);
}

TEST(McpServerCliTest,
     ARunGoesOnInTheBackgroundAndACancelledWaitIsNotAnswered) {
  TempDir dir;
  const std::string gate = dir / "gate";
  dir.Write("p.yaml", GatedPipeline(gate));
  McpSession s(dir.path());
  s.Initialize();
  json started = s.Call(1, "run", {{"file", "p.yaml"}, {"mock", true}});
  ASSERT_FALSE(IsError(started)) << started;
  const std::string run = started["result"]["structuredContent"]["run"];
  // A status call that waits for the run's end, cancelled: no answer, and
  // the calls after it are answered.
  s.Send({{"jsonrpc", "2.0"},
          {"id", 2},
          {"method", "tools/call"},
          {"params",
           {{"name", "status"},
            {"arguments", {{"run", run}, {"wait_seconds", 60}}}}}});
  s.Send({{"jsonrpc", "2.0"},
          {"method", "notifications/cancelled"},
          {"params", {{"requestId", 2}, {"reason", "test"}}}});
  EXPECT_EQ(s.Request(3, "ping")["result"], json::object());
  json now = s.Call(4, "status", {{"run", run}});
  EXPECT_FALSE(IsError(now)) << now;
  EXPECT_FALSE(now["result"]["structuredContent"]["finished"].get<bool>());
  // Cancelling a call that has answered does nothing.
  s.Send({{"jsonrpc", "2.0"},
          {"method", "notifications/cancelled"},
          {"params", {{"requestId", 1}}}});
  dir.Write("gate", "");
  json done = s.Call(5, "status", {{"run", run}, {"wait_seconds", 60}});
  EXPECT_EQ(done["result"]["structuredContent"]["status"], "succeeded")
      << Text(done);
  EXPECT_TRUE(Has(Text(done), "wait-for-gate (task)  succeeded")) << Text(done);
  EXPECT_TRUE(Has(Text(done), "(via mcp)")) << Text(done);
  s.CloseInput();
  EXPECT_EQ(s.WaitExit(), 0);
  for (const json& m : s.seen()) EXPECT_NE(m.value("id", json()), 2) << m;
  EXPECT_TRUE(Has(RunSteps(dir.path(), "show " + run).out, "Taken by: "))
      << RunSteps(dir.path(), "show " + run).out;
  EXPECT_TRUE(Has(RunSteps(dir.path(), "show " + run).out, "(via mcp)"));
}

TEST(McpServerCliTest, AFailedStepShowsItsErrorAndLogTail) {
  TempDir dir;
  dir.Write("-fails.yaml",
            "jobs:\n- name: j\n  plan:\n  - task: t\n"
            "    run: |\n      echo first line\n"
            "      printf 'not utf-8: \\377\\n'\n"
            "      echo the reason >&2\n      exit 3\n");
  McpSession s(dir.path());
  s.Initialize();
  json started = s.Call(1, "run", {{"file", "-fails.yaml"}});
  ASSERT_FALSE(IsError(started)) << started;
  const std::string run = started["result"]["structuredContent"]["run"];
  json done = s.Call(2, "status", {{"run", run}, {"wait_seconds", 60}});
  EXPECT_EQ(done["result"]["structuredContent"]["status"], "failed")
      << Text(done);
  EXPECT_TRUE(Has(Text(done), "| first line")) << Text(done);
  // A byte that is not UTF-8 reaches the client as U+FFFD in valid JSON.
  EXPECT_TRUE(Has(Text(done), "| not utf-8: \xEF\xBF\xBD")) << Text(done);
  EXPECT_TRUE(Has(Text(done), "[stderr] the reason")) << Text(done);
  json show = s.Call(3, "show", {{"run", run}});
  EXPECT_EQ(Text(show), RunSteps(dir.path(), "show " + run).out);
  json runs = s.Call(4, "runs", {{"limit", 1}});
  EXPECT_TRUE(Has(Text(runs), run)) << Text(runs);
  json unknown = s.Call(5, "status", {{"run", "nonesuch"}});
  EXPECT_TRUE(IsError(unknown)) << unknown;
  // Not the shape of a run id: no run to wait for, answered at once.
  json never =
      s.Call(6, "status", {{"run", "nonesuch"}, {"wait_seconds", 600}});
  EXPECT_TRUE(IsError(never)) << never;
}

TEST(McpServerCliTest, PastEightCallsAtOnceTheServerIsBusy) {
  TempDir dir;
  const std::string gate = dir / "gate";
  dir.Write("p.yaml", GatedPipeline(gate));
  McpSession s(dir.path());
  s.Initialize();
  json started = s.Call(1, "run", {{"file", "p.yaml"}, {"mock", true}});
  const std::string run = started["result"]["structuredContent"]["run"];
  for (int id = 10; id < 18; ++id) {
    s.Send({{"jsonrpc", "2.0"},
            {"id", id},
            {"method", "tools/call"},
            {"params",
             {{"name", "status"},
              {"arguments", {{"run", run}, {"wait_seconds", 60}}}}}});
  }
  json busy = s.Call(18, "runs", json::object());
  EXPECT_EQ(busy["error"]["code"], -32000) << busy << json(s.seen()).dump(1);
  EXPECT_TRUE(Has(busy["error"]["message"], "busy")) << busy;
  // Protocol requests are answered by the reader itself, busy or not.
  EXPECT_EQ(s.Request(19, "ping")["result"], json::object());
  s.Send({{"jsonrpc", "2.0"},
          {"method", "notifications/cancelled"},
          {"params", {{"requestId", 10}}}});
  dir.Write("gate", "");
  for (int id = 11; id < 18; ++id) {
    json answer = s.AnswerTo(id);
    EXPECT_EQ(answer["result"]["structuredContent"]["status"], "succeeded")
        << answer;
  }
  EXPECT_FALSE(IsError(s.Call(20, "runs", json::object())));
}

TEST(McpServerCliTest, EndOfInputEndsTheServerAndTheRunGoesOn) {
  TempDir dir;
  const std::string gate = dir / "gate";
  dir.Write("p.yaml", GatedPipeline(gate));
  std::string run;
  {
    McpSession s(dir.path());
    s.Initialize();
    json started = s.Call(1, "run", {{"file", "p.yaml"}, {"mock", true}});
    run = started["result"]["structuredContent"]["run"];
    // A waiting call in flight does not hold the server up at end of input.
    s.Send({{"jsonrpc", "2.0"},
            {"id", 2},
            {"method", "tools/call"},
            {"params",
             {{"name", "status"},
              {"arguments", {{"run", run}, {"wait_seconds", 60}}}}}});
    s.CloseInput();
    EXPECT_EQ(s.WaitExit(), 0);
  }
  dir.Write("gate", "");
  McpSession later(dir.path());
  later.Initialize();
  json done = later.Call(1, "status", {{"run", run}, {"wait_seconds", 60}});
  EXPECT_EQ(done["result"]["structuredContent"]["status"], "succeeded")
      << Text(done);
}

// What `steps mcp` passes the runs it starts is checked like any option.
TEST(McpServerCliTest, TheRunFlagsOfMcpAreChecked) {
  TempDir dir;
  dir.Write("p.yaml",
            "jobs:\n- name: j\n  plan:\n  - task: t\n"
            "    run: echo hi\n");
  auto bad_id = RunSteps(dir.path(), "run p.yaml --run-id ../../etc");
  EXPECT_EQ(bad_id.exit_code, 64) << bad_id.out;
  EXPECT_TRUE(Has(bad_id.out, "--run-id '../../etc' is not a run id"))
      << bad_id.out;
  auto bad_via = RunSteps(dir.path(), "run p.yaml --via ui");
  EXPECT_EQ(bad_via.exit_code, 64) << bad_via.out;
  auto ok = RunSteps(dir.path(),
                     "run p.yaml --via mcp --run-id 20261201-063000-3f2a "
                     "&& \"$STEPS\" show 20261201-063000-3f2a");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_TRUE(Has(ok.out, "Run 20261201-063000-3f2a  succeeded")) << ok.out;
  EXPECT_TRUE(Has(ok.out, "(via mcp)\n")) << ok.out;
  EXPECT_FALSE(Has(RunSteps(dir.path(), "run --help").out, "--run-id"));
}

// Opening a FIFO for reading blocks until a writer comes: a call that did
// would never answer, and the server could not end at end of input.
TEST(McpServerCliTest, AFifoUnderTheRootIsRefusedNotOpened) {
  TempDir dir;
  ASSERT_EQ(mkfifo((dir / "pipe.yaml").c_str(), 0644), 0);
  McpSession s(dir.path());
  s.Initialize();
  int id = 1;
  for (const char* tool : {"validate", "explain", "run"}) {
    json r = s.Call(id++, tool, {{"file", "pipe.yaml"}});
    ASSERT_TRUE(r.contains("result")) << tool << ": " << r;
    EXPECT_TRUE(IsError(r)) << tool;
    EXPECT_EQ(Text(r),
              "file 'pipe.yaml' is not a regular file (a FIFO, socket or "
              "device); name a pipeline file")
        << tool;
  }
  s.CloseInput();
  EXPECT_EQ(s.WaitExit(), 0);
}

// MCP forbids a null id: such a request is refused with an error (whose
// id is null too), not taken for a notification and left unanswered.
TEST(McpServerCliTest, ARequestWithANullIdIsRefusedNotLeftUnanswered) {
  TempDir dir;
  McpSession s(dir.path());
  s.Initialize();
  s.Send({{"jsonrpc", "2.0"}, {"id", nullptr}, {"method", "tools/list"}});
  s.Send({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "ping"}});
  std::optional<json> refused = s.Next();
  ASSERT_TRUE(refused);
  EXPECT_TRUE((*refused)["id"].is_null()) << *refused;
  EXPECT_EQ((*refused)["error"]["code"], -32600) << *refused;
  EXPECT_EQ(s.AnswerTo(1)["result"], json::object());
}

// A client may ignore the server's standard error by closing its end of
// the pipe: the log lines written there then fail, and must not kill the
// server (SIGPIPE) before it has answered anything.
TEST(McpServerCliTest, AStandardErrorNobodyReadsDoesNotKillTheServer) {
  TempDir dir;
  int err[2];
  ASSERT_EQ(pipe2(err, O_CLOEXEC), 0);
  close(err[0]);
  McpSession s(dir.path(), {}, err[1]);
  close(err[1]);
  json init = s.Initialize();
  EXPECT_EQ(init["result"]["protocolVersion"], "2025-06-18") << init;
  EXPECT_EQ(s.Request(1, "ping")["result"], json::object());
  s.CloseInput();
  EXPECT_EQ(s.WaitExit(), 0);
}

// The pid of the `steps run` process started for run `run_id` (found by
// its --run-id= argument under /proc); -1 when there is none.
pid_t RunProcess(const std::string& run_id) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)),
                        std::istreambuf_iterator<char>());
    if (Has(cmdline, std::string("\0run\0", 5)) &&
        Has(cmdline, "--run-id=" + run_id))
      return static_cast<pid_t>(std::stoi(name));
  }
  return -1;
}

// A run of this server's that dies without recording its end (killed) is
// reported interrupted at once: its process is reaped before the record is
// read, so it does not pass for alive as a zombie would, and a waiting
// status does not wait out its whole wait_seconds.
TEST(McpServerCliTest, ARunKilledUnderTheServerIsReportedInterrupted) {
  TempDir dir;
  const std::string up = dir / "up";
  ASSERT_EQ(mkfifo(up.c_str(), 0644), 0);
  dir.Write("p.yaml",
            "jobs:\n- name: j\n  plan:\n  - task: hold\n    run: |\n"
            "      echo up > '" +
                up + "'\n      sleep 60\n");
  McpSession s(dir.path());
  s.Initialize();
  json started = s.Call(1, "run", {{"file", "p.yaml"}});
  ASSERT_FALSE(IsError(started)) << started;
  const std::string run = started["result"]["structuredContent"]["run"];
  // The task writes to the FIFO once it runs: the run is recorded then.
  int fifo = open(up.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(fifo, 0);
  pollfd p{fifo, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 60000), 1) << "the task did not start";
  close(fifo);
  const pid_t pid = RunProcess(run);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  const auto start = std::chrono::steady_clock::now();
  json status = s.Call(2, "status", {{"run", run}, {"wait_seconds", 60}});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(status["result"]["structuredContent"]["status"], "interrupted")
      << status;
  EXPECT_TRUE(status["result"]["structuredContent"]["finished"].get<bool>());
  EXPECT_TRUE(Has(Text(s.Call(3, "show", {{"run", run}})),
                  "Run " + run + "  interrupted"));
  EXPECT_TRUE(Has(Text(s.Call(4, "runs", json::object())), "interrupted"));
}

// A mock script named by `mock: {file: ...}` is read at load: a FIFO would
// block validate forever and a device such as /dev/zero never ends (its
// memory grows until it fails). Both are refused before they are read.
TEST(McpServerCliTest, AMockScriptThatIsNoRegularFileIsRefusedUnread) {
  TempDir dir;
  ASSERT_EQ(mkfifo((dir / "script.yaml").c_str(), 0644), 0);
  const std::string plan =
      "jobs:\n- name: j\n  plan:\n  - task: t\n    run: echo hi\n";
  dir.Write("fifo.yaml", plan + "mock: {file: script.yaml}\n");
  dir.Write("zero.yaml", plan + "mock: {file: /dev/zero}\n");
  McpSession s(dir.path());
  s.Initialize();
  json fifo = s.Call(1, "validate", {{"file", "fifo.yaml"}});
  ASSERT_TRUE(fifo.contains("result")) << fifo;
  EXPECT_TRUE(Has(Text(fifo),
                  "fifo.yaml:6: error: mock: file: 'script.yaml' is not a "
                  "regular file"))
      << Text(fifo);
  json zero = s.Call(2, "validate", {{"file", "zero.yaml"}});
  ASSERT_TRUE(zero.contains("result")) << zero;
  EXPECT_TRUE(Has(Text(zero),
                  "zero.yaml:6: error: mock: file: '/dev/zero' is not a "
                  "regular file"))
      << Text(zero);
  s.CloseInput();
  EXPECT_EQ(s.WaitExit(), 0);
}

}  // namespace
