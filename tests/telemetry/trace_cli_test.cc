// A run's trace through the binary, received by a collector on loopback
// that decodes it with the official OTLP definitions (otlp_receiver.mjs):
// the span tree of a pipeline, TRACEPARENT in and out; and a collector that
// is down, slow or failing costs the run nothing but one warning.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/listening_child.h"
#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace steps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test_support::CliResult;
using test_support::ListeningChild;
using test_support::RunSteps;
using test_support::StepsOptions;
using test_support::TempDir;

const std::string kModules =
    std::string(STEPS_SOURCE_DIR) + "/tests/telemetry/node_modules";
const std::string kReceiver =
    std::string(STEPS_SOURCE_DIR) + "/tests/telemetry/otlp_receiver.mjs";
constexpr const char* kParent =
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

class TraceCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kModules + "/@opentelemetry/otlp-transformer")) {
      GTEST_SKIP() << "the OTLP definitions are not installed: run "
                      "scripts/install-deps (npm ci in tests/telemetry)";
    }
  }

  // A collector writing what it decodes to `out`; `mode` as the receiver's.
  std::unique_ptr<ListeningChild> Collector(const std::string& out,
                                            const std::string& mode = "ok") {
    auto c = std::make_unique<ListeningChild>(
        std::vector<std::string>{"/usr/bin/env", "node", kReceiver, "--out",
                                 out, "--mode", mode, "--delay-ms", "20000"});
    port_ = c->Port();
    return c;
  }

  std::string Endpoint() const {
    return "http://127.0.0.1:" + std::to_string(port_);
  }

  // Every span the collector decoded, by name (the last of a name wins;
  // `all` keeps every one in order).
  std::vector<json> Spans(const std::string& out) {
    std::vector<json> all;
    std::ifstream in(out);
    for (std::string l; std::getline(in, l);) {
      json j = json::parse(l);
      EXPECT_FALSE(j.contains("error")) << l;
      for (const json& s : j["spans"]) all.push_back(s);
    }
    return all;
  }

  int port_ = 0;
};

const json* Named(const std::vector<json>& spans, const std::string& name) {
  for (const json& s : spans)
    if (s["name"] == name) return &s;
  return nullptr;
}

std::vector<const json*> ChildrenOf(const std::vector<json>& spans,
                                    const json& parent) {
  std::vector<const json*> out;
  for (const json& s : spans)
    if (s["parentSpanId"] == parent["spanId"]) out.push_back(&s);
  return out;
}

constexpr const char* kPipeline = R"(jobs:
- name: build
  plan:
  - task: compile
    run: echo "traceparent=$TRACEPARENT"
  - task: flaky
    timeout: 30s
    retry: {max_attempts: 2, backoff: fixed, base_delay_ms: 300}
    run: exit 3
    on_failure:
      task: page
      run: echo paged
)";

TEST_F(TraceCliTest, ARunIsATreeOfJobStepsAttemptsWaitsAndHooks) {
  TempDir dir;
  dir.Write("p.yaml", kPipeline);
  const std::string out = dir.path() + "/spans.jsonl";
  auto collector = Collector(out);
  ASSERT_GT(port_, 0);
  StepsOptions opts;
  opts.prefix = "OTEL_EXPORTER_OTLP_ENDPOINT=" + Endpoint() +
                " OTEL_SERVICE_NAME=ci-pipelines TRACEPARENT=" + kParent +
                " STEPS_TRACE_END_GRACE=10s";
  opts.kill_after = std::chrono::seconds(60);
  CliResult r = RunSteps(dir.path(), "run p.yaml --plain", opts);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.out.find("telemetry."), std::string::npos) << r.out;

  std::vector<json> spans = Spans(out);
  ASSERT_EQ(spans.size(), 10u);  // run, job, 3 steps, 4 attempts, 1 wait.
  const json* run = Named(spans, "run p.yaml");
  ASSERT_NE(run, nullptr);
  // A child of the CI job's span, in its trace.
  EXPECT_EQ((*run)["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ((*run)["parentSpanId"], "00f067aa0ba902b7");
  for (const json& s : spans)
    EXPECT_EQ(s["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736") << s;
  EXPECT_EQ((*run)["attributes"]["steps.outcome"], "failed");
  EXPECT_EQ((*run)["status"]["code"], 2);

  const json* job = Named(spans, "job build");
  ASSERT_NE(job, nullptr);
  EXPECT_EQ((*job)["parentSpanId"], (*run)["spanId"]);
  auto steps = ChildrenOf(spans, *job);
  ASSERT_EQ(steps.size(), 3u);

  const json* compile = Named(spans, "task compile");
  ASSERT_NE(compile, nullptr);
  EXPECT_EQ((*compile)["parentSpanId"], (*job)["spanId"]);
  auto compile_attempts = ChildrenOf(spans, *compile);
  ASSERT_EQ(compile_attempts.size(), 1u);
  // The task's TRACEPARENT names its attempt's span.
  const std::string told = "traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-" +
                           (*compile_attempts[0])["spanId"].get<std::string>() +
                           "-01";
  EXPECT_NE(r.out.find(told), std::string::npos) << r.out;

  const json* flaky = Named(spans, "task flaky");
  ASSERT_NE(flaky, nullptr);
  EXPECT_EQ((*flaky)["status"]["code"], 2);
  EXPECT_NE((*flaky)["status"]["message"].get<std::string>().find(
                "failed after 2 attempts"),
            std::string::npos);
  auto flaky_children = ChildrenOf(spans, *flaky);
  ASSERT_EQ(flaky_children.size(), 3u);  // attempt 1, the wait, attempt 2.
  std::map<std::string, const json*> by_name;
  for (const json* c : flaky_children) by_name[(*c)["name"]] = c;
  ASSERT_TRUE(by_name.count("attempt 1") && by_name.count("attempt 2") &&
              by_name.count("retry wait"));
  const json& a1 = *by_name["attempt 1"];
  const json& wait = *by_name["retry wait"];
  const json& a2 = *by_name["attempt 2"];
  EXPECT_EQ(a1["attributes"]["process.exit.code"], 3);
  EXPECT_EQ(a1["attributes"]["steps.attempts"], 2);
  EXPECT_EQ(a2["attributes"]["steps.attempt"], 2);
  EXPECT_EQ(a2["status"]["message"], "exited with code 3");
  // The wait lies between the attempts and lasts the backoff (300 ms; at
  // most 2 s more on a loaded machine).
  auto ns = [](const json& v) { return std::stoll(v.get<std::string>()); };
  EXPECT_EQ(ns(wait["start"]), ns(a1["end"]));
  EXPECT_EQ(ns(wait["end"]), ns(a2["start"]));
  const int64_t waited_ms = (ns(wait["end"]) - ns(wait["start"])) / 1000000;
  EXPECT_GE(waited_ms, 290);
  EXPECT_LT(waited_ms, 2300);

  const json* hook = Named(spans, "on_failure page");
  ASSERT_NE(hook, nullptr);
  EXPECT_EQ((*hook)["attributes"]["steps.hook"], "on_failure");
  EXPECT_EQ((*hook)["attributes"]["steps.outcome"], "succeeded");
  // Every span starts before it ends, inside the run (to the millisecond:
  // a record's duration is whole milliseconds, so an end may lie up to one
  // past its parent's).
  for (const json& s : spans) {
    EXPECT_LE(ns(s["start"]), ns(s["end"])) << s;
    EXPECT_GE(ns(s["start"]), ns((*run)["start"])) << s;
    EXPECT_LE(ns(s["end"]), ns((*run)["end"]) + 1000000) << s;
  }
}

// An agent whose first request is answered 500 (retried after the 100 ms
// the server asks for), which then calls a tool (its answer comes 4.3 s
// in: less than a fifth of the 5 s deadline is left) and is nudged, and
// answers; an agent whose primary source is
// down and whose fallback answers; a task that fails. The GenAI spans hang
// under the attempts of their steps.
constexpr const char* kAgentPipeline = R"(agents:
- name: coder
  source: { model: openai/gpt-test }
  tools: [read_file]
  timeout: 5s
- name: down
  source: { model: openai/first }
  fallback: [{ model: openai/second }]
jobs:
- name: j
  plan:
  - task: prepare
    run: echo data > "$STEPS_ARTIFACTS/notes.txt"
  - agent: coder
    messages: [go]
    attempts: 2
  - agent: down
    messages: [go]
    attempts: 1
  - task: broken
    run: exit 5
mock:
  coder:
  - status: 500
    headers: {retry-after-ms: "100"}
  - call: {name: read_file, arguments: {path: notes.txt}}
    delay: 4300ms
  - say: done
  first:
  - status: 503
  second:
  - say: from the fallback
    usage: {prompt_tokens: 11, completion_tokens: 7}
)";

TEST_F(TraceCliTest, AgentsAreGenAiSpansUnderTheirAttempts) {
  TempDir dir;
  dir.Write("p.yaml", kAgentPipeline);
  const std::string out = dir.path() + "/spans.jsonl";
  auto collector = Collector(out);
  ASSERT_GT(port_, 0);
  StepsOptions opts;
  opts.prefix = "OTEL_EXPORTER_OTLP_ENDPOINT=" + Endpoint() +
                " STEPS_TRACE_END_GRACE=10s";
  opts.kill_after = std::chrono::seconds(60);
  CliResult r = RunSteps(dir.path(), "run p.yaml --mock --plain", opts);
  EXPECT_EQ(r.exit_code, 1) << r.out;  // The broken task.
  std::vector<json> spans = Spans(out);

  // The coder: its conversation under its attempt, two chat spans (the
  // 500, then the answer with a tool call), the wait between them, the
  // tool, and the last chat; the nudge an event of the conversation.
  const json* coder_step = Named(spans, "agent coder");
  ASSERT_NE(coder_step, nullptr);
  auto coder_attempts = ChildrenOf(spans, *coder_step);
  ASSERT_EQ(coder_attempts.size(), 1u);
  auto under_attempt = ChildrenOf(spans, *coder_attempts[0]);
  ASSERT_EQ(under_attempt.size(), 1u);
  const json& conv = *under_attempt[0];
  EXPECT_EQ(conv["name"], "invoke_agent coder");
  EXPECT_EQ(conv["attributes"]["gen_ai.operation.name"], "invoke_agent");
  EXPECT_EQ(conv["attributes"]["gen_ai.agent.name"], "coder");
  EXPECT_EQ(conv["attributes"]["steps.turns"], 2);
  EXPECT_EQ(conv["attributes"]["steps.provider_requests"], 3);
  EXPECT_EQ(conv["attributes"]["steps.retries"], 1);
  bool nudged = false;
  for (const json& e : conv["events"])
    if (e["name"] == "agent.nudge") nudged = true;
  EXPECT_TRUE(nudged) << conv.dump();

  std::vector<const json*> chats, tools, waits;
  for (const json* c : ChildrenOf(spans, conv)) {
    const std::string name = (*c)["name"];
    if (name == "chat gpt-test") chats.push_back(c);
    if (name == "execute_tool read_file") tools.push_back(c);
    if (name == "retry wait") waits.push_back(c);
  }
  ASSERT_EQ(chats.size(), 3u);
  ASSERT_EQ(tools.size(), 1u);
  ASSERT_EQ(waits.size(), 1u);
  auto ns = [](const json& v) { return std::stoll(v.get<std::string>()); };
  std::sort(chats.begin(), chats.end(), [&](const json* a, const json* b) {
    return ns((*a)["start"]) < ns((*b)["start"]);
  });
  const json& failed = *chats[0];
  EXPECT_EQ(failed["kind"], 3);  // CLIENT.
  EXPECT_EQ(failed["attributes"]["gen_ai.operation.name"], "chat");
  EXPECT_EQ(failed["attributes"]["gen_ai.provider.name"], "openai");
  EXPECT_EQ(failed["attributes"]["gen_ai.request.model"], "gpt-test");
  EXPECT_EQ(failed["attributes"]["error.type"], "500");
  EXPECT_EQ(failed["attributes"]["http.response.status_code"], 500);
  EXPECT_EQ(failed["status"]["code"], 2);
  const json& called = *chats[1];
  EXPECT_EQ(called["attributes"]["steps.request.attempt"], 2);
  EXPECT_EQ(called["attributes"]["gen_ai.response.finish_reasons"],
            json::array({"tool_calls"}));
  EXPECT_TRUE(called["attributes"]["gen_ai.usage.input_tokens"].is_number());
  EXPECT_FALSE(called["attributes"].contains("gen_ai.input.messages"));
  EXPECT_GE(ns((*waits[0])["start"]), ns(failed["end"]));
  EXPECT_LE(ns((*waits[0])["end"]), ns(called["start"]));
  const json& tool = *tools[0];
  EXPECT_EQ(tool["attributes"]["gen_ai.operation.name"], "execute_tool");
  EXPECT_EQ(tool["attributes"]["gen_ai.tool.name"], "read_file");
  EXPECT_TRUE(tool["attributes"].contains("gen_ai.tool.call.id"));
  EXPECT_FALSE(tool["attributes"].contains("gen_ai.tool.call.arguments"));
  EXPECT_GE(ns(tool["start"]), ns(called["end"]));
  EXPECT_LE(ns(tool["end"]), ns((*chats[2])["start"]));
  EXPECT_EQ((*chats[2])["attributes"]["gen_ai.response.finish_reasons"],
            json::array({"stop"}));

  // The fallback: a chat to the primary that failed, the fallback event,
  // a chat to the fallback that answered, with the usage it reported.
  const json* down_step = Named(spans, "agent down");
  ASSERT_NE(down_step, nullptr);
  auto down_attempts = ChildrenOf(spans, *down_step);
  ASSERT_EQ(down_attempts.size(), 1u);
  auto down_conv = ChildrenOf(spans, *down_attempts[0]);
  ASSERT_EQ(down_conv.size(), 1u);
  bool fell_back = false;
  for (const json& e : (*down_conv[0])["events"]) {
    if (e["name"] == "agent.fallback") {
      fell_back = true;
      EXPECT_EQ(e["attributes"]["to"], "openai/second");
    }
  }
  EXPECT_TRUE(fell_back) << down_conv[0]->dump();
  const json* second = Named(spans, "chat second");
  ASSERT_NE(second, nullptr);
  EXPECT_EQ((*second)["parentSpanId"], (*down_conv[0])["spanId"]);
  EXPECT_EQ((*second)["attributes"]["gen_ai.usage.input_tokens"], 11);
  EXPECT_EQ((*second)["attributes"]["gen_ai.usage.output_tokens"], 7);
  const json* first = Named(spans, "chat first");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ((*first)["attributes"]["error.type"], "503");

  // The failed task.
  const json* broken = Named(spans, "task broken");
  ASSERT_NE(broken, nullptr);
  EXPECT_EQ((*broken)["status"]["code"], 2);
  auto broken_attempts = ChildrenOf(spans, *broken);
  ASSERT_EQ(broken_attempts.size(), 1u);
  EXPECT_EQ((*broken_attempts[0])["attributes"]["process.exit.code"], 5);
}

TEST_F(TraceCliTest, MessageContentsOnlyWhenAskedForAndMasked) {
  TempDir dir;
  dir.Write("p.yaml", R"(secrets: [DEPLOY_TOKEN]
agents:
- name: a
  source: { model: openai/m }
  tools: [read_file]
jobs:
- name: j
  plan:
  - agent: a
    messages: ["the token is deploy-SECRETVALUE-42"]
mock:
  a:
  - call: {name: read_file, arguments: {path: nothing.txt}}
  - say: done with deploy-SECRETVALUE-42
)");
  const std::string out = dir.path() + "/spans.jsonl";
  auto collector = Collector(out);
  StepsOptions opts;
  opts.prefix = "OTEL_EXPORTER_OTLP_ENDPOINT=" + Endpoint() +
                " OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true"
                " DEPLOY_TOKEN=deploy-SECRETVALUE-42 STEPS_TRACE_END_GRACE=10s";
  CliResult r = RunSteps(dir.path(), "run p.yaml --mock --plain", opts);
  std::ifstream in(out);
  std::stringstream all;
  all << in.rdbuf();
  std::vector<json> spans = Spans(out);
  const json* chat = Named(spans, "chat m");
  ASSERT_NE(chat, nullptr) << r.out;
  EXPECT_TRUE((*chat)["attributes"].contains("gen_ai.input.messages"));
  EXPECT_TRUE((*chat)["attributes"].contains("gen_ai.output.messages"));
  const json* tool = Named(spans, "execute_tool read_file");
  ASSERT_NE(tool, nullptr);
  EXPECT_EQ((*tool)["attributes"]["gen_ai.tool.call.arguments"],
            "{\"path\":\"nothing.txt\"}");
  EXPECT_EQ((*tool)["attributes"]["error.type"], "tool_error");
  EXPECT_EQ(all.str().find("SECRETVALUE"), std::string::npos) << all.str();
  EXPECT_NE(all.str().find("***"), std::string::npos);
}

// Wall time of one run of `steps ARGS` with `prefix` in its environment.
struct Timed {
  CliResult result;
  double seconds;
};
Timed TimeRun(const TempDir& dir, const std::string& prefix) {
  StepsOptions opts;
  opts.prefix = prefix;
  opts.kill_after = std::chrono::seconds(60);
  auto t0 = std::chrono::steady_clock::now();
  CliResult r = RunSteps(dir.path(), "run p.yaml --plain --no-cache", opts);
  return {r,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count()};
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1))
    ++n;
  return n;
}

// Down (nothing listens), slow (answers after 20 s) or failing (500): the
// outcome is the same, the run takes no longer than without a collector
// by more than 5% or 100 ms (whichever is larger; the fastest of five runs
// of each, against load on the machine), and one warning says so.
TEST_F(TraceCliTest, ACollectorDownSlowOrFailingCostsTheRunNothing) {
  TempDir dir;
  dir.Write("p.yaml",
            "jobs:\n- name: j\n  plan:\n  - task: work\n    run: sleep 1; "
            "echo done\n  - task: more\n    run: exit 4\n");
  auto slow = Collector(dir.path() + "/slow.jsonl", "slow");
  const std::string slow_endpoint = Endpoint();
  auto fail = Collector(dir.path() + "/fail.jsonl", "fail");
  const std::string fail_endpoint = Endpoint();
  const std::map<std::string, std::string> prefixes = {
      {"none", ""},
      {"down", "http://127.0.0.1:9"},  // discard: nothing listens.
      {"slow", slow_endpoint},
      {"failing", fail_endpoint}};
  // Rounds of one run each, so that load on the machine falls on all alike.
  std::map<std::string, double> fastest;
  std::map<std::string, CliResult> last;
  for (int round = 0; round < 5; ++round) {
    for (const auto& [what, endpoint] : prefixes) {
      Timed t = TimeRun(dir, endpoint.empty()
                                 ? ""
                                 : "OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint +
                                       " OTEL_BSP_SCHEDULE_DELAY=100");
      if (!fastest.count(what) || t.seconds < fastest[what])
        fastest[what] = t.seconds;
      last[what] = t.result;
    }
  }
  const CliResult& plain = last["none"];
  EXPECT_EQ(plain.exit_code, 1) << plain.out;
  const double base = fastest["none"];
  const double allowed = std::max(0.1, base * 0.05);
  for (const char* what : {"down", "slow", "failing"}) {
    const CliResult& traced = last[what];
    EXPECT_EQ(traced.exit_code, plain.exit_code) << what << "\n" << traced.out;
    EXPECT_NE(traced.out.find("work | done"), std::string::npos) << what;
    EXPECT_LE(fastest[what], base + allowed)
        << what << ": " << fastest[what] << " s against " << base << " s";
    EXPECT_EQ(Count(traced.out, "WRN telemetry."), 1) << what << "\n"
                                                      << traced.out;
  }
}

TEST_F(TraceCliTest, WithoutACollectorTasksKeepTheTraceparentTheyWereGiven) {
  TempDir dir;
  dir.Write("p.yaml", kPipeline);
  StepsOptions opts;
  opts.prefix = std::string("TRACEPARENT=") + kParent;
  CliResult r = RunSteps(dir.path(), "run p.yaml --plain", opts);
  EXPECT_NE(r.out.find(std::string("traceparent=") + kParent),
            std::string::npos)
      << r.out;
}

// A parent that is not sampled: nothing of the run is exported (the
// parent's sampling is followed), and tasks still get the trace, flagged 00.
TEST_F(TraceCliTest, AParentNotSampledIsFollowed) {
  TempDir dir;
  dir.Write("p.yaml", kPipeline);
  const std::string out = dir.path() + "/spans.jsonl";
  auto collector = Collector(out);
  StepsOptions opts;
  opts.prefix = "OTEL_EXPORTER_OTLP_ENDPOINT=" + Endpoint() +
                " TRACEPARENT=00-4bf92f3577b34da6a3ce929d0e0e4736-"
                "00f067aa0ba902b7-00 STEPS_TRACE_END_GRACE=10s";
  opts.kill_after = std::chrono::seconds(60);
  CliResult r = RunSteps(dir.path(), "run p.yaml --plain", opts);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-"),
            std::string::npos)
      << r.out;
  const size_t at = r.out.find("traceparent=00-");
  ASSERT_NE(at, std::string::npos);
  // "traceparent=" + 55 characters: the flags are its last two.
  EXPECT_EQ(r.out.substr(at + 12 + 53, 2), "00") << r.out;
  EXPECT_EQ(r.out.find("00f067aa0ba902b7"), std::string::npos)
      << "the task's parent is its attempt's span\n"
      << r.out;
  EXPECT_TRUE(Spans(out).empty());
}

// TRACESTATE goes with the trace it came with: tasks get it when the run
// joined TRACEPARENT's trace, not when the run started one of its own.
TEST_F(TraceCliTest, TraceStateGoesOnlyWithTheTraceItBelongsTo) {
  TempDir dir;
  dir.Write("p.yaml",
            "jobs:\n- name: j\n  plan:\n  - task: t\n    run: echo "
            "\"tracestate=${TRACESTATE:-none}\"\n");
  StepsOptions opts;
  opts.kill_after = std::chrono::seconds(60);
  const std::string base =
      "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9 TRACESTATE=vendor=abc ";
  opts.prefix = base;
  CliResult own = RunSteps(dir.path(), "run p.yaml --plain --no-cache", opts);
  EXPECT_NE(own.out.find("tracestate=none"), std::string::npos) << own.out;
  opts.prefix = base + "TRACEPARENT=" + kParent;
  CliResult joined =
      RunSteps(dir.path(), "run p.yaml --plain --no-cache", opts);
  EXPECT_NE(joined.out.find("tracestate=vendor=abc"), std::string::npos)
      << joined.out;
  // Without a collector nothing of the environment is touched.
  opts.prefix = "TRACESTATE=vendor=abc";
  CliResult plain = RunSteps(dir.path(), "run p.yaml --plain --no-cache", opts);
  EXPECT_NE(plain.out.find("tracestate=vendor=abc"), std::string::npos)
      << plain.out;
}

// `steps test` of several files to a collector that fails: said once.
TEST_F(TraceCliTest, ACollectorFailingIsSaidOncePerProcess) {
  TempDir dir;
  const char* file =
      "jobs:\n- name: j\n  plan:\n  - task: t\n    run: "
      "echo hi\n";
  dir.Write("a.yaml", file);
  dir.Write("b.yaml", file);
  auto fail = Collector(dir.path() + "/fail.jsonl", "fail");
  StepsOptions opts;
  opts.prefix = "OTEL_EXPORTER_OTLP_ENDPOINT=" + Endpoint() +
                " STEPS_TRACE_END_GRACE=10s";
  opts.kill_after = std::chrono::seconds(60);
  CliResult r = RunSteps(dir.path(), "test a.yaml b.yaml --repeat 2", opts);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(Count(r.out, "WRN telemetry.export_failed"), 1) << r.out;
}

// A gate's end is an event of its step, as the log line gate.ended.
TEST_F(TraceCliTest, AGatesDecisionIsAnEventOfItsStep) {
  TempDir dir;
  dir.Write("p.yaml",
            "jobs:\n- name: j\n  plan:\n  - gate: ship\n    message: "
            "Ship it?\nmock:\n  gates: {ship: approve}\n");
  const std::string out = dir.path() + "/spans.jsonl";
  auto collector = Collector(out);
  StepsOptions opts;
  opts.prefix = "OTEL_EXPORTER_OTLP_ENDPOINT=" + Endpoint() +
                " STEPS_TRACE_END_GRACE=10s";
  opts.kill_after = std::chrono::seconds(60);
  CliResult r = RunSteps(dir.path(), "run p.yaml --mock --plain", opts);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  std::vector<json> spans = Spans(out);
  std::vector<std::string> names;
  json ended;
  for (const json& s : spans) {
    for (const json& e : s["events"]) {
      names.push_back(e["name"]);
      if (e["name"] == "gate.ended") ended = e;
    }
  }
  ASSERT_FALSE(ended.is_null()) << r.out;
  EXPECT_EQ(ended["attributes"]["steps.gate.how"], "approve") << ended.dump();
  EXPECT_EQ(ended["attributes"]["steps.gate.via"], "mock");
  EXPECT_NE(std::find(names.begin(), names.end(), "gate.waiting"), names.end());
}

// The collector's credentials (header values, a password in the URL) are
// masked in everything a run writes, a task's output included.
TEST_F(TraceCliTest, TheCollectorsCredentialsAreMaskedEverywhere) {
  TempDir dir;
  dir.Write("p.yaml",
            "jobs:\n- name: j\n  plan:\n  - task: t\n    run: echo "
            "\"h=$OTEL_EXPORTER_OTLP_HEADERS\"\n");
  StepsOptions opts;
  opts.prefix =
      "OTEL_EXPORTER_OTLP_ENDPOINT=http://admin:pw-SECRETVALUE@127.0.0.1:9 "
      "OTEL_EXPORTER_OTLP_HEADERS=api-key=hdr-SECRETVALUE%21";
  CliResult r = RunSteps(dir.path(), "run p.yaml --plain", opts);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("telemetry.export_failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("http://admin:***@127.0.0.1:9"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("h=api-key=***"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("SECRETVALUE"), std::string::npos) << r.out;
  CliResult show = RunSteps(dir.path(), "show --json");
  EXPECT_EQ(show.out.find("SECRETVALUE"), std::string::npos) << show.out;
}

TEST_F(TraceCliTest, BadVariablesAreSaidAndTheRunGoesOn) {
  TempDir dir;
  dir.Write("p.yaml",
            "jobs:\n- name: j\n  plan:\n  - task: t\n    run: "
            "echo \"tp=$TRACEPARENT\"\n");
  const std::string out = dir.path() + "/spans.jsonl";
  auto collector = Collector(out);
  StepsOptions opts;
  opts.prefix = "OTEL_EXPORTER_OTLP_ENDPOINT=" + Endpoint() +
                " TRACEPARENT=not-a-traceparent STEPS_TRACE_END_GRACE=10s";
  CliResult r = RunSteps(dir.path(), "run p.yaml --plain", opts);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("TRACEPARENT=not-a-traceparent is not a W3C "
                       "traceparent; the run starts a trace of its own"),
            std::string::npos)
      << r.out;
  std::vector<json> spans = Spans(out);
  const json* run = Named(spans, "run p.yaml");
  ASSERT_NE(run, nullptr);
  EXPECT_EQ((*run)["parentSpanId"], "");
  // The task is told its own attempt's span, in the run's new trace.
  EXPECT_NE(r.out.find("tp=00-" + (*run)["traceId"].get<std::string>()),
            std::string::npos)
      << r.out;

  opts.prefix = "OTEL_EXPORTER_OTLP_ENDPOINT=" + Endpoint() +
                " OTEL_EXPORTER_OTLP_PROTOCOL=grpc";
  r = RunSteps(dir.path(), "run p.yaml --plain", opts);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("OTEL_EXPORTER_OTLP_PROTOCOL=grpc: steps speaks "
                       "http/protobuf and http/json; no traces are exported"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace steps
