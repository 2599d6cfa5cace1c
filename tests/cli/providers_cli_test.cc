// The providers a `steps` binary has, as a pipeline author meets them:
// `steps providers` (what each needs, never a key's value), a source's
// `headers:` on the wire, and a model parameter a provider cannot take
// refused at load, for the built-in adapters and for the example adapter
// of docs/providers.md compiled in as one more file.
#include <gtest/gtest.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "common/raw_http_server.h"
#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace {

using steps::test_support::Has;
using steps::test_support::RawHttpServer;
using steps::test_support::RunSteps;
using steps::test_support::ShellQuote;
using steps::test_support::StepsOptions;
using steps::test_support::Streams;
using steps::test_support::TempDir;

const std::string kExampleSteps = std::string(STEPS_BINARY_DIR) +
                                  "/tests/providers/steps_with_example_adapter";

// The line of `table` that starts with `name` and a space.
std::string RowOf(const std::string& table, const std::string& name) {
  size_t at = 0;
  while (at < table.size()) {
    size_t end = table.find('\n', at);
    if (end == std::string::npos) end = table.size();
    std::string line = table.substr(at, end - at);
    if (line.rfind(name + " ", 0) == 0) return line;
    at = end + 1;
  }
  return "";
}

TEST(ProvidersCliTest, ListsEachProviderWithWhatItNeeds) {
  TempDir dir;
  StepsOptions opts;
  opts.prefix = "env -u OPENAI_API_KEY ANTHROPIC_API_KEY=sk-ant-not-shown";
  opts.streams = Streams::kStdoutOnly;
  auto r = RunSteps(dir.path(), "providers", opts);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(Has(r.out, "sk-ant-not-shown")) << r.out;
  const std::string anthropic = RowOf(r.out, "anthropic");
  EXPECT_TRUE(Has(anthropic, "https://api.anthropic.com/v1")) << r.out;
  EXPECT_TRUE(Has(anthropic, "ANTHROPIC_API_KEY (set)")) << r.out;
  EXPECT_TRUE(Has(anthropic, "on the wire (anthropic)")) << r.out;
  EXPECT_TRUE(Has(anthropic, "temperature, top_p, max_output_tokens, stop"))
      << r.out;
  const std::string openai = RowOf(r.out, "openai");
  EXPECT_TRUE(Has(openai, "OPENAI_API_KEY (not set)")) << r.out;
  EXPECT_TRUE(Has(openai, "on the wire (openai_chat)")) << r.out;
  EXPECT_TRUE(Has(openai, " all")) << r.out;
  EXPECT_TRUE(Has(RowOf(r.out, "ollama"), "optional")) << r.out;
  EXPECT_TRUE(Has(RowOf(r.out, "openrouter"), "https://openrouter.ai/api/v1"))
      << r.out;
  EXPECT_TRUE(Has(RowOf(r.out, "mock"), "answers from mock:")) << r.out;

  auto js = RunSteps(dir.path(), "providers --json", opts);
  ASSERT_EQ(js.exit_code, 0) << js.out;
  nlohmann::json list = nlohmann::json::parse(js.out, nullptr, false);
  ASSERT_TRUE(list.is_array()) << js.out;
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& p : list) by_name[p.at("name")] = p;
  ASSERT_EQ(by_name.size(), 5u) << js.out;
  EXPECT_EQ(by_name["anthropic"]["key_set"], true);
  EXPECT_EQ(by_name["openai"]["key_set"], false);
  EXPECT_EQ(by_name["ollama"]["key_required"], false);
  EXPECT_EQ(by_name["openai"]["mock"], "wire");
  EXPECT_EQ(by_name["openai"]["mock_wire"], "openai_chat");
  EXPECT_EQ(by_name["mock"]["default_base_url"], nullptr);
  EXPECT_EQ(by_name["anthropic"]["parameters"],
            nlohmann::json({"temperature", "top_p", "max_output_tokens",
                            "stop"}));
}

// The example adapter, one more file in a test build, is listed like the
// built-in ones; the mock answers it at the provider interface, and a
// parameter it does not list is refused when the pipeline loads.
TEST(ProvidersCliTest, AnAdapterFileIsListedAndItsParametersHeld) {
  TempDir dir;
  auto r = steps::test_support::RunInShell(
      dir.path(), "env -u ACME_API_KEY " + ShellQuote(kExampleSteps) +
                      " providers 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string acme = RowOf(r.out, "acme");
  EXPECT_TRUE(Has(acme, "https://api.acme.example/v1")) << r.out;
  EXPECT_TRUE(Has(acme, "ACME_API_KEY (not set)")) << r.out;
  EXPECT_TRUE(Has(acme, "at the interface")) << r.out;
  EXPECT_TRUE(Has(acme, "temperature, max_output_tokens")) << r.out;

  dir.Write("p.yml",
            "agents:\n"
            "- name: a\n"
            "  source: { model: acme/big, seed: 7, temperature: 0.5 }\n"
            "jobs:\n- name: j\n  plan:\n  - agent: a\n    messages: [hi]\n");
  auto v = steps::test_support::RunInShell(
      dir.path(), ShellQuote(kExampleSteps) + " validate p.yml 2>&1");
  EXPECT_EQ(v.exit_code, 65) << v.out;
  EXPECT_TRUE(Has(v.out, "p.yml:3: error: 'seed' cannot be honoured by "
                         "provider 'acme'"))
      << v.out;
  EXPECT_FALSE(Has(v.out, "'temperature' cannot")) << v.out;
}

// A source's headers go with every request, `${NAME}` expanded from the
// environment, after the adapter's own.
TEST(ProvidersCliTest, SourceHeadersReachTheWire) {
  std::mutex mu;
  std::string seen;
  const std::string ok =
      R"({"choices":[{"message":{"content":"fine"},"finish_reason":"stop"}]})";
  RawHttpServer server([&](int, const std::string& request) {
    std::lock_guard<std::mutex> lock(mu);
    seen = request;
    return RawHttpServer::Reply{RawHttpServer::Response(ok)};
  });
  TempDir dir;
  dir.Write("p.yml",
            "agents:\n- name: a\n  source:\n    model: openai/m\n"
            "    base_url: \"" + server.base_url() + "\"\n"
            "    headers:\n"
            "      HTTP-Referer: https://example.org/app\n"
            "      X-Gateway-Token: \"tok-${GATEWAY_TOKEN}\"\n"
            "jobs:\n- name: j\n  plan:\n  - agent: a\n    messages: [hi]\n");
  StepsOptions opts;
  opts.prefix = "GATEWAY_TOKEN=abc123";
  auto r = RunSteps(dir.path(), "run p.yml --plain", opts);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(Has(seen, "HTTP-Referer: https://example.org/app\r\n")) << seen;
  EXPECT_TRUE(Has(seen, "X-Gateway-Token: tok-abc123\r\n")) << seen;
}

TEST(ProvidersCliTest, BadSourceHeadersAreRefusedWithTheirLine) {
  TempDir dir;
  dir.Write("p.yml",
            "agents:\n"
            "- name: a\n"
            "  source:\n"
            "    model: openai/m\n"
            "    headers:\n"
            "      \"Bad Name\": x\n"            // line 6
            "      content-type: text/plain\n"  // line 7
            "      X-Ok: \"a\\nb\"\n"            // line 8
            "      X-Ref: \"${1X}\"\n"           // line 9
            "- name: c\n"
            "  source: { cli: \"cat\", headers: { X-A: b } }\n"  // line 11
            "jobs:\n- name: j\n  plan:\n  - agent: a\n    messages: [hi]\n");
  auto r = RunSteps(dir.path(), "validate p.yml");
  EXPECT_EQ(r.exit_code, 65) << r.out;
  EXPECT_TRUE(Has(r.out, "p.yml:6: error: 'source.headers' names 'Bad Name'"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "p.yml:7: error: 'source.headers.content-type' is "
                         "set by steps itself"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "p.yml:8: error: 'source.headers.X-Ok' holds a line "
                         "break"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "p.yml:9: error: 'source.headers.X-Ref'")) << r.out;
  EXPECT_TRUE(Has(r.out, "p.yml:11: error: 'source.headers' is for a hosted "
                         "model"))
      << r.out;
}

// libcurl is loaded by the first request that needs it, not when `steps`
// starts: a task before the run's first request finds neither libcurl nor
// a TLS library in its parent's address space (the web UI's HTTP server,
// which links OpenSSL, is a program of its own), a task after it does. A
// request to an IP address over plain http needs none: with it, the task
// after finds none either (plain_http.h); STEPS_HTTP=libcurl sends it by
// libcurl.
TEST(ProvidersCliTest, LibcurlIsLoadedByTheFirstRequestThatNeedsIt) {
  const std::string ok =
      R"({"choices":[{"message":{"content":"fine"},"finish_reason":"stop"}]})";
  RawHttpServer server([&](int, const std::string&) {
    return RawHttpServer::Reply{RawHttpServer::Response(ok)};
  });
  TempDir dir;
  const std::string count =
      "    run: 'echo \"$(cat /proc/$PPID/comm) $(grep -c -e libcurl "
      "-e libssl -e libcrypto -e libgnutls /proc/$PPID/maps)\"'\n";
  dir.Write("p.yml",
            "agents:\n- name: a\n  source:\n    model: openai/m\n"
            "    base_url: \"" + server.base_url() + "\"\n"
            "jobs:\n- name: j\n  plan:\n"
            "  - task: before\n" + count +
            "  - agent: a\n    messages: [hi]\n"
            "  - task: after\n" + count);
  StepsOptions by_libcurl;
  by_libcurl.prefix = "STEPS_HTTP=libcurl";
  auto r = RunSteps(dir.path(), "run p.yml --plain --no-cache", by_libcurl);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "before | steps 0\n")) << r.out;
  EXPECT_FALSE(Has(r.out, "after | steps 0\n")) << r.out;
  EXPECT_TRUE(Has(r.out, "after | steps ")) << r.out;
  EXPECT_EQ(server.requests(), 1);

  r = RunSteps(dir.path(), "run p.yml --plain --no-cache");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "before | steps 0\n")) << r.out;
  EXPECT_TRUE(Has(r.out, "after | steps 0\n")) << r.out;
  EXPECT_EQ(server.requests(), 2);
}

// STEPS_LIBCURL names the libcurl to load; one that cannot be loaded fails
// the request at once (no retry can help) with the loader's reason and the
// way out.
TEST(ProvidersCliTest, ALibcurlThatCannotBeLoadedFailsTheRequestClearly) {
  RawHttpServer server([&](int, const std::string&) {
    return RawHttpServer::Reply{RawHttpServer::Response("{}")};
  });
  TempDir dir;
  dir.Write("p.yml",
            "agents:\n- name: a\n  source:\n    model: openai/m\n"
            "    base_url: \"" + server.base_url() + "\"\n"
            "jobs:\n- name: j\n  plan:\n"
            "  - agent: a\n    messages: [hi]\n");
  StepsOptions opts;
  opts.prefix = "STEPS_HTTP=libcurl STEPS_LIBCURL=/nonexistent/libcurl-x.so.4";
  auto r = RunSteps(dir.path(), "run p.yml --plain", opts);
  EXPECT_EQ(r.exit_code, 2) << r.out;  // Errored.
  EXPECT_TRUE(Has(r.out, "agent: a errored in ")) << r.out;
  EXPECT_TRUE(Has(r.out, "libcurl could not be loaded (/nonexistent/"
                         "libcurl-x.so.4: cannot open shared object file"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "STEPS_LIBCURL names it: unset it for "
                         "libcurl.so.4"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "provider_requests=1 ")) << r.out;
  EXPECT_FALSE(Has(r.out, "agent.request_retry")) << r.out;
  EXPECT_EQ(server.requests(), 0) << r.out;
}

}  // namespace
