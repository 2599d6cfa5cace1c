// The OTLP exporter: its batching, its bounds and its one warning through a
// scripted transport; its encodings decoded by the official OTLP
// definitions (otlp_receiver.mjs) over real HTTP; the OTEL_* variables; the
// W3C traceparent.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/listening_child.h"
#include "common/log_capture.h"
#include "common/temp_dir.h"
#include "core/cancel.h"
#include "core/trace.h"
#include "telemetry/otlp_exporter.h"

namespace steps::telemetry {
namespace {

namespace fs = std::filesystem;
using test_support::ListeningChild;
using test_support::LogCapture;
using test_support::TempDir;

// ---- traceparent ----

TEST(TraceparentTest, ReadsTheW3CFormAndRefusesWhatItIsNot) {
  const std::string good =
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  auto c = trace::ParseTraceparent(good);
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->sampled);
  EXPECT_EQ(c->Traceparent(), good);
  auto unsampled = trace::ParseTraceparent(
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  ASSERT_TRUE(unsampled.has_value());
  EXPECT_FALSE(unsampled->sampled);
  // A later version may carry more after a dash; version 00 may not.
  EXPECT_TRUE(trace::ParseTraceparent(
      "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"));
  for (const char* bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
           "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
       }) {
    EXPECT_FALSE(trace::ParseTraceparent(bad).has_value()) << bad;
  }
}

TEST(TraceparentTest, DerivedIdsDependOnTheTraceAndTheKeyAlone) {
  trace::TraceId a = trace::NewTraceId(), b = trace::NewTraceId();
  EXPECT_EQ(trace::DerivedSpanId(a, "job/1#1"),
            trace::DerivedSpanId(a, "job/1#1"));
  EXPECT_NE(trace::DerivedSpanId(a, "job/1#1"),
            trace::DerivedSpanId(a, "job/1#2"));
  EXPECT_NE(trace::DerivedSpanId(a, "job/1#1"),
            trace::DerivedSpanId(b, "job/1#1"));
}

// ---- spans without an exporter ----

TEST(SpanTest, WithoutAnExporterASpanRecordsNothing) {
  ASSERT_FALSE(trace::Enabled());
  trace::Span s = trace::Span::Start("x", trace::SpanContext{});
  EXPECT_FALSE(s.recording());
  EXPECT_FALSE(s.context().valid());
  s.Set("k", "v");
  s.AddEvent("e");
  s.End();  // No exporter to reach: nothing happens.
}

// ---- the exporter, through a scripted transport ----

struct Posted {
  std::vector<std::string> bodies;
  std::vector<std::vector<std::string>> headers;
};

// Spans in a JSON body.
size_t SpansIn(const std::string& body) {
  auto j = nlohmann::json::parse(body);
  return j["resourceSpans"][0]["scopeSpans"][0]["spans"].size();
}

trace::SpanData Data(std::string name) {
  trace::SpanData d;
  d.name = std::move(name);
  d.context.trace_id = trace::NewTraceId();
  d.context.span_id = trace::NewSpanId();
  d.start_ns = 1000;
  d.end_ns = 2000;
  return d;
}

OtlpConfig JsonConfig() {
  OtlpConfig c;
  c.endpoint = "http://127.0.0.1:1/v1/traces";
  c.json = true;
  c.schedule_delay = Millis(3600000);  // Only a full batch or the end sends.
  return c;
}

TEST(OtlpExporterTest, SendsFullBatchesAndTheRestAtTheEnd) {
  Posted posted;
  std::mutex mu;
  OtlpConfig config = JsonConfig();
  config.max_batch = 3;
  config.headers = {"x-api-key: k1"};
  OtlpExporter exporter(
      config, [&](const PostRequest& r, SteadyTime, const std::atomic<bool>&) {
        std::lock_guard<std::mutex> lock(mu);
        posted.bodies.push_back(r.body);
        posted.headers.push_back(r.headers);
        return PostResult{200, ""};
      });
  for (int i = 0; i < 7; ++i) exporter.Export(Data("s" + std::to_string(i)));
  exporter.Shutdown(Millis(5000));
  ASSERT_EQ(posted.bodies.size(), 3u);
  EXPECT_EQ(SpansIn(posted.bodies[0]), 3u);
  EXPECT_EQ(SpansIn(posted.bodies[1]), 3u);
  EXPECT_EQ(SpansIn(posted.bodies[2]), 1u);
  EXPECT_EQ(posted.headers[0],
            (std::vector<std::string>{"x-api-key: k1",
                                      "Content-Type: application/json"}));
  EXPECT_EQ(exporter.stats().exported, 7);
  EXPECT_EQ(exporter.stats().dropped, 0);
  exporter.Export(Data("late"));  // After the end: dropped, not sent.
  EXPECT_EQ(exporter.stats().dropped, 1);
}

TEST(OtlpExporterTest, AFullQueueDropsWhatComesNextWithoutWaiting) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> posts{0};
  OtlpConfig config = JsonConfig();
  config.max_batch = 2;
  config.max_queue = 4;
  OtlpExporter exporter(
      config, [&](const PostRequest&, SteadyTime, const std::atomic<bool>&) {
        ++posts;
        released.wait();  // The collector holds the first batch.
        return PostResult{200, ""};
      });
  exporter.Export(Data("a"));
  exporter.Export(Data("b"));  // A full batch: the worker takes it.
  while (posts.load() == 0) std::this_thread::yield();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) exporter.Export(Data("c"));
  const auto took = std::chrono::steady_clock::now() - t0;
  // Ten Exports while the collector holds the worker: four queued, six
  // dropped, and none of them waited (generous: 1 s for ten calls).
  EXPECT_LT(took, std::chrono::seconds(1));
  EXPECT_EQ(exporter.stats().dropped, 6);
  release.set_value();
  exporter.Shutdown(Millis(5000));
  EXPECT_EQ(exporter.stats().exported, 6);
}

TEST(OtlpExporterTest, AFailingCollectorIsSaidOnceAndItsSpansDropped) {
  LogCapture log;
  std::atomic<int> posts{0};
  OtlpConfig config = JsonConfig();
  config.max_batch = 1;
  OtlpExporter exporter(
      config, [&](const PostRequest&, SteadyTime, const std::atomic<bool>&) {
        ++posts;
        return PostResult{500, "HTTP 500: down"};
      });
  for (int i = 0; i < 3; ++i) {
    exporter.Export(Data("s"));
    while (posts.load() <= i) std::this_thread::yield();
  }
  const auto t0 = std::chrono::steady_clock::now();
  exporter.Shutdown(Millis(10000));
  // A collector that failed is not waited for at the end.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  auto lines = log.LinesWith("telemetry.export_failed");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("error=\"HTTP 500: down\""), std::string::npos)
      << lines[0];
  EXPECT_EQ(exporter.stats().batches_failed, 3);
  EXPECT_EQ(exporter.stats().dropped, 3);
}

TEST(OtlpExporterTest, AtTheEndASlowCollectorIsAbandonedAfterTheGrace) {
  std::atomic<bool> saw_abort{false};
  OtlpConfig config = JsonConfig();
  OtlpExporter exporter(config, [&](const PostRequest&, SteadyTime limit,
                                    const std::atomic<bool>& abort) {
    // A collector that never answers: the transport returns at the limit
    // or when told to give up, as CurlPost does.
    while (!abort.load() && std::chrono::steady_clock::now() < limit)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    saw_abort = abort.load();
    return PostResult{0, "timed out"};
  });
  for (int i = 0; i < 5; ++i) exporter.Export(Data("s"));
  const auto t0 = std::chrono::steady_clock::now();
  exporter.Shutdown(Millis(100));
  const auto took = std::chrono::steady_clock::now() - t0;
  // The grace is 100 ms; the transport gives up at its limit. Generous
  // upper bound for a loaded machine: 1 s.
  EXPECT_GE(took, std::chrono::milliseconds(95));
  EXPECT_LT(took, std::chrono::seconds(1));
  EXPECT_EQ(exporter.stats().dropped, 5);
  EXPECT_EQ(exporter.stats().exported, 0);
  (void)saw_abort;
}

TEST(OtlpExporterTest, ASignalEndsTheGraceAtOnce) {
  OtlpConfig config = JsonConfig();
  OtlpExporter exporter(config, [&](const PostRequest&, SteadyTime limit,
                                    const std::atomic<bool>& abort) {
    while (!abort.load() && std::chrono::steady_clock::now() < limit)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return PostResult{0, "timed out"};
  });
  exporter.Export(Data("s"));
  CancelToken signal;
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    signal.Cancel(CancelReason::kAbort);
  });
  const auto t0 = std::chrono::steady_clock::now();
  exporter.Shutdown(Millis(8000), signal);
  const auto took = std::chrono::steady_clock::now() - t0;
  sender.join();
  // The grace was 8 s; the signal came at 100 ms (generous bound: 2 s).
  EXPECT_LT(took, std::chrono::seconds(2));
  EXPECT_EQ(exporter.stats().dropped, 1);
}

TEST(OtlpExporterTest, AWorkerThatCannotBeCutIsLeftBehind) {
  // A transport that does not heed the abort (libcurl waiting for a name
  // lookup does not): Shutdown returns anyway.
  auto release = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = release->get_future().share();
  OtlpConfig config = JsonConfig();
  {
    OtlpExporter exporter(config, [released](const PostRequest&, SteadyTime,
                                             const std::atomic<bool>&) {
      released.wait_for(std::chrono::seconds(5));
      return PostResult{0, "resolver timed out"};
    });
    exporter.Export(Data("s"));
    const auto t0 = std::chrono::steady_clock::now();
    exporter.Shutdown(Millis(100));
    const auto took = std::chrono::steady_clock::now() - t0;
    // 100 ms of grace and 40 ms more (generous bound: 1 s), not 5 s.
    EXPECT_LT(took, std::chrono::seconds(1));
  }
  release->set_value();  // The left worker ends on its own.
}

// ---- the OTEL_* variables ----

OtlpSetup FromEnv(const std::map<std::string, std::string>& env) {
  return OtlpConfigFromEnvironment(
      [&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      "9.9.9");
}

std::string Attr(const OtlpConfig& c, const std::string& key) {
  for (const trace::Attribute& a : c.resource.attributes)
    if (a.key == key) return std::get<std::string>(a.value);
  return "<absent>";
}

TEST(OtlpConfigTest, TheStandardVariablesSayWhereAndHow) {
  EXPECT_FALSE(FromEnv({}).config.has_value());
  auto s = FromEnv({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"}});
  ASSERT_TRUE(s.config.has_value());
  EXPECT_EQ(s.config->endpoint, "http://collector:4318/v1/traces");
  EXPECT_FALSE(s.config->json);
  EXPECT_EQ(s.config->timeout, Millis(10000));
  EXPECT_EQ(Attr(*s.config, "service.name"), "steps");
  EXPECT_EQ(Attr(*s.config, "telemetry.sdk.version"), "9.9.9");
  EXPECT_FALSE(s.config->capture_content);
  EXPECT_TRUE(s.problems.empty());

  s = FromEnv({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:4318"},
               {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://c.example/x"},
               {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
               {"OTEL_EXPORTER_OTLP_HEADERS", "a=1, api-key=s%3Dcret ,bad"},
               {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2500"},
               {"OTEL_SERVICE_NAME", "ci-agents"},
               {"OTEL_RESOURCE_ATTRIBUTES",
                "service.name=lost,deployment.environment=ci"},
               {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "TRUE"}});
  ASSERT_TRUE(s.config.has_value());
  EXPECT_EQ(s.config->endpoint, "https://c.example/x");  // As it is.
  EXPECT_TRUE(s.config->json);
  EXPECT_EQ(s.config->headers,
            (std::vector<std::string>{"a: 1", "api-key: s=cret"}));
  EXPECT_EQ(s.config->timeout, Millis(2500));
  EXPECT_EQ(Attr(*s.config, "service.name"), "ci-agents");
  EXPECT_EQ(Attr(*s.config, "deployment.environment"), "ci");
  EXPECT_TRUE(s.config->capture_content);
  ASSERT_EQ(s.problems.size(), 1u);  // "bad" has no '='.
  EXPECT_NE(s.problems[0].find("OTEL_EXPORTER_OTLP_HEADERS"),
            std::string::npos);
}

TEST(OtlpConfigTest, CredentialsAreSecrets) {
  std::map<std::string, std::string> env = {
      {"OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20tok-123,x=y"},
      {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
       "https://admin:pa%24ss@collector:4318/v1/traces"}};
  std::vector<std::string> secrets =
      OtlpSecretsFromEnvironment([&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      });
  auto has = [&](const std::string& v) {
    return std::find(secrets.begin(), secrets.end(), v) != secrets.end();
  };
  EXPECT_TRUE(has("Bearer%20tok-123"));
  EXPECT_TRUE(has("Bearer tok-123"));
  EXPECT_TRUE(has("pa%24ss"));
  EXPECT_TRUE(has("pa$ss"));
  EXPECT_FALSE(has("admin"));
}

TEST(OtlpConfigTest, ExportIsOffWhenTheVariablesSaySoOrCannotBeMet) {
  const std::string url = "http://127.0.0.1:4318";
  EXPECT_FALSE(FromEnv({{"OTEL_EXPORTER_OTLP_ENDPOINT", url},
                        {"OTEL_SDK_DISABLED", "true"}})
                   .config);
  EXPECT_FALSE(FromEnv({{"OTEL_EXPORTER_OTLP_ENDPOINT", url},
                        {"OTEL_TRACES_EXPORTER", "none"}})
                   .config);
  auto grpc = FromEnv({{"OTEL_EXPORTER_OTLP_ENDPOINT", url},
                       {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}});
  EXPECT_FALSE(grpc.config);
  ASSERT_EQ(grpc.problems.size(), 1u);
  EXPECT_NE(grpc.problems[0].find("http/protobuf and http/json"),
            std::string::npos);
  for (const char* bad : {"http://", "http://:4318", "http://h:99999",
                          "http://h:0", "http://h:x", "http://[::1"}) {
    auto s = FromEnv({{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", bad}});
    EXPECT_FALSE(s.config) << bad;
    EXPECT_EQ(s.problems.size(), 1u) << bad;
  }
  auto upper = FromEnv(
      {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "HTTP://[::1]:4318/v1/traces"}});
  ASSERT_TRUE(upper.config);
  EXPECT_EQ(upper.config->endpoint, "http://[::1]:4318/v1/traces");
  auto disabled = FromEnv(
      {{"OTEL_EXPORTER_OTLP_ENDPOINT", url}, {"OTEL_SDK_DISABLED", "1"}});
  EXPECT_TRUE(disabled.config);  // Only "true" disables; "1" is said.
  EXPECT_EQ(disabled.problems.size(), 1u);
  // The exporter frames its requests itself; names and values that are
  // not header text are refused.
  auto headers = FromEnv(
      {{"OTEL_EXPORTER_OTLP_ENDPOINT", url},
       {"OTEL_EXPORTER_OTLP_HEADERS",
        "Content-Length=5,Host=evil,X Y=1,ok=1,crlf=a%0d%0aX-Evil: 1"}});
  ASSERT_TRUE(headers.config);
  EXPECT_EQ(headers.config->headers, (std::vector<std::string>{"ok: 1"}));
  EXPECT_EQ(headers.problems.size(), 4u);
  auto ftp = FromEnv({{"OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://x"}});
  EXPECT_FALSE(ftp.config);
  ASSERT_EQ(ftp.problems.size(), 1u);
  // A bad number keeps the default and says so.
  for (const char* t : {"-1", "0", "abc", "3600001", "99999999999999999999"}) {
    auto s = FromEnv({{"OTEL_EXPORTER_OTLP_ENDPOINT", url},
                      {"OTEL_EXPORTER_OTLP_TIMEOUT", t}});
    ASSERT_TRUE(s.config) << t;
    EXPECT_EQ(s.config->timeout, Millis(10000)) << t;
    EXPECT_EQ(s.problems.size(), 1u) << t;
  }
  auto edge = FromEnv({{"OTEL_EXPORTER_OTLP_ENDPOINT", url},
                       {"OTEL_EXPORTER_OTLP_TIMEOUT", "3600000"},
                       {"OTEL_BSP_MAX_QUEUE_SIZE", "10"},
                       {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "50"}});
  ASSERT_TRUE(edge.config);
  EXPECT_EQ(edge.config->timeout, Millis(3600000));
  EXPECT_EQ(edge.config->max_batch, 10u);  // Never more than the queue.
  EXPECT_TRUE(edge.problems.empty());
}

// ---- real HTTP, decoded by the official definitions ----

const std::string kModules =
    std::string(STEPS_SOURCE_DIR) + "/tests/telemetry/node_modules";

class OtlpReceiverTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (!fs::exists(kModules + "/@opentelemetry/otlp-transformer")) {
      GTEST_SKIP() << "the OTLP definitions are not installed: run "
                      "scripts/install-deps (npm ci in tests/telemetry)";
    }
  }
  std::vector<nlohmann::json> Received(const std::string& path) {
    std::vector<nlohmann::json> out;
    std::ifstream in(path);
    for (std::string l; std::getline(in, l);)
      out.push_back(nlohmann::json::parse(l));
    return out;
  }
};

TEST_P(OtlpReceiverTest, TheCollectorReadsEverySpanAsItWasMade) {
  TempDir dir;
  const std::string out = dir.path() + "/received.jsonl";
  ListeningChild receiver(
      {"/usr/bin/env", "node",
       std::string(STEPS_SOURCE_DIR) + "/tests/telemetry/otlp_receiver.mjs",
       "--out", out});
  const int port = receiver.Port();
  ASSERT_GT(port, 0);
  OtlpConfig config;
  config.endpoint = "http://127.0.0.1:" + std::to_string(port) + "/v1/traces";
  config.json = GetParam();
  config.resource.attributes = {{"service.name", "steps-test"}};
  config.resource.scope_version = "1.2.3";
  config.headers = {"x-team: agents"};
  auto exporter = std::make_shared<OtlpExporter>(config);
  auto previous = trace::SetSpanExporter(exporter);
  trace::SpanContext parent_ctx;
  {
    trace::Span root = trace::Span::Start("run", trace::SpanContext{});
    root.Set("steps.run.id", "r-1");
    trace::Span child =
        trace::Span::Start("chat m", root.context(), trace::SpanKind::kClient);
    child.Set("gen_ai.usage.input_tokens", int64_t{1234567890123});
    child.Set("ratio", 0.25);
    child.Set("ok", false);
    child.Set("gen_ai.response.finish_reasons",
              std::vector<std::string>{"stop", "tool_calls"});
    child.Set("bytes", std::string("a\xff") + "b");  // Not UTF-8.
    child.AddEvent("retry", {{"wait_ms", int64_t{250}}, {"status", "500"}});
    child.SetError("HTTP 500");
    parent_ctx = root.context();
  }
  exporter->Shutdown(Millis(5000));
  trace::SetSpanExporter(previous);
  EXPECT_EQ(exporter->stats().exported, 2);
  auto got = Received(out);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_FALSE(got[0].contains("error")) << got[0].dump();
  const nlohmann::json& r = got[0];
  EXPECT_EQ(r["contentType"],
            GetParam() ? "application/json" : "application/x-protobuf");
  EXPECT_EQ(r["headers"]["x-team"], "agents");
  EXPECT_EQ(r["resource"]["service.name"], "steps-test");
  EXPECT_EQ(r["scope"]["name"], "steps");
  EXPECT_EQ(r["scope"]["version"], "1.2.3");
  ASSERT_EQ(r["spans"].size(), 2u);
  const nlohmann::json& chat = r["spans"][0];  // Ended first.
  const nlohmann::json& run = r["spans"][1];
  EXPECT_EQ(run["name"], "run");
  EXPECT_EQ(run["parentSpanId"], "");
  EXPECT_EQ(run["kind"], 1);
  EXPECT_EQ(run["traceId"], trace::Hex(parent_ctx.trace_id.data(), 16));
  EXPECT_EQ(run["spanId"], trace::Hex(parent_ctx.span_id.data(), 8));
  EXPECT_EQ(run["attributes"]["steps.run.id"], "r-1");
  EXPECT_EQ(chat["name"], "chat m");
  EXPECT_EQ(chat["kind"], 3);
  EXPECT_EQ(chat["traceId"], run["traceId"]);
  EXPECT_EQ(chat["parentSpanId"], run["spanId"]);
  EXPECT_EQ(chat["attributes"]["gen_ai.usage.input_tokens"], 1234567890123);
  EXPECT_EQ(chat["attributes"]["ratio"], 0.25);
  EXPECT_EQ(chat["attributes"]["ok"], false);
  EXPECT_EQ(chat["attributes"]["gen_ai.response.finish_reasons"],
            nlohmann::json::array({"stop", "tool_calls"}));
  EXPECT_EQ(chat["attributes"]["bytes"],
            "a\xEF\xBF\xBD"
            "b");
  ASSERT_EQ(chat["events"].size(), 1u);
  EXPECT_EQ(chat["events"][0]["name"], "retry");
  EXPECT_EQ(chat["events"][0]["attributes"]["wait_ms"], 250);
  EXPECT_EQ(chat["status"]["code"], 2);
  EXPECT_EQ(chat["status"]["message"], "HTTP 500");
  const int64_t start = std::stoll(chat["start"].get<std::string>());
  const int64_t end = std::stoll(chat["end"].get<std::string>());
  EXPECT_LE(start, end);
  EXPECT_GT(start, int64_t{1700000000} * 1000000000);  // A Unix time in ns.
}

INSTANTIATE_TEST_SUITE_P(Encodings, OtlpReceiverTest, ::testing::Bool(),
                         [](const auto& info) {
                           return info.param ? "Json" : "Protobuf";
                         });

TEST(OtlpCurlTest, ADeadCollectorFailsAtOnce) {
  PostRequest request;
  request.url = "http://127.0.0.1:9/v1/traces";  // discard: nothing listens.
  std::atomic<bool> abort{false};
  auto t0 = std::chrono::steady_clock::now();
  PostResult r = CurlPost(request, t0 + std::chrono::seconds(5), abort);
  EXPECT_FALSE(r.error.empty());
  EXPECT_EQ(r.status, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

TEST(OtlpCurlTest, ASlowCollectorIsLeftAtTheLimitOrWhenTold) {
  if (!fs::exists(kModules + "/@opentelemetry/otlp-transformer")) {
    GTEST_SKIP() << "the OTLP definitions are not installed: run "
                    "scripts/install-deps (npm ci in tests/telemetry)";
  }
  TempDir dir;
  ListeningChild receiver(
      {"/usr/bin/env", "node",
       std::string(STEPS_SOURCE_DIR) + "/tests/telemetry/otlp_receiver.mjs",
       "--out", dir.path() + "/out", "--mode", "slow", "--delay-ms", "20000"});
  const int port = receiver.Port();
  ASSERT_GT(port, 0);
  PostRequest request;
  request.url = "http://127.0.0.1:" + std::to_string(port) + "/v1/traces";
  request.body = "{}";
  request.headers = {"Content-Type: application/json"};
  std::atomic<bool> abort{false};
  auto t0 = std::chrono::steady_clock::now();
  PostResult r = CurlPost(request, t0 + std::chrono::milliseconds(300), abort);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(r.error.empty());
  // At its limit, 300 ms (generous upper bound on a loaded machine: 2 s).
  EXPECT_GE(took, std::chrono::milliseconds(290));
  EXPECT_LT(took, std::chrono::seconds(2));

  // Told to give up: within a poll (20 ms) of being told, long before the
  // limit (generous: 1 s).
  std::thread teller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abort = true;
  });
  t0 = std::chrono::steady_clock::now();
  r = CurlPost(request, t0 + std::chrono::seconds(30), abort);
  took = std::chrono::steady_clock::now() - t0;
  teller.join();
  EXPECT_EQ(r.error, "abandoned at the end of the run");
  EXPECT_LT(took, std::chrono::seconds(1));
}

}  // namespace
}  // namespace steps::telemetry
