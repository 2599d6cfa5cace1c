// `steps run` against model servers that misbehave, served from loopback:
// a hostile answer errors its step (exit 2) with its hooks run and the
// process alive; a dropped keep-alive request is sent once, as counted.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "common/raw_http_server.h"
#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace {

namespace test_support = steps::test_support;
using steps::test_support::RawHttpServer;

std::string ReadCorpus(const std::string& name) {
  std::ifstream in(std::string(STEPS_SOURCE_DIR) + "/fuzz/corpus/" + name,
                   std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class HostileCliTest : public ::testing::Test {
 protected:
  struct Result {
    int exit_code = -1;
    bool signalled = false;
    std::string output;
  };

  // Writes p.yml and runs `steps run p.yml` in the temporary folder, after
  // `prelude` (a shell command, e.g. a ulimit).
  Result Run(const std::string& yaml, const std::string& prelude = "true") {
    dir_.Write("p.yml", yaml);
    test_support::CliResult ran =
        test_support::RunInShell(dir_.path(), prelude + " && $STEPS run p.yml");
    // A signalled child is reported as 128+N.
    return {ran.exit_code, ran.exit_code > 128, ran.out};
  }

  test_support::TempDir dir_;
};

// "1, 2, ..., n": the values of an `across`.
std::string OneTo(int n) {
  std::string values;
  for (int i = 1; i <= n; ++i) {
    values += (i > 1 ? ", " : "") + std::to_string(i);
  }
  return values;
}

// A pipeline whose one step fans out `cells` conversations with `url`,
// each one request (attempts: 1).
std::string FanOutPipeline(const std::string& url, int cells) {
  return "agents:\n- name: a\n  source: { model: openai/m, base_url: \"" +
         url +
         "\" }\n"
         "jobs:\n- name: j\n  plan:\n"
         "  - across: [{ var: i, values: [" +
         OneTo(cells) +
         "] }]\n"
         "    do:\n"
         "    - { agent: a, messages: [\"cell {{ .i }}\"], attempts: 1 }\n";
}

std::string AgentPipeline(const std::string& model, const std::string& url,
                          bool stream) {
  return "agents:\n- name: a\n  source: { model: " + model + ", base_url: \"" +
         url + "\"" + (stream ? ", stream: true" : "") +
         " }\n"
         "jobs:\n- name: j\n  plan:\n"
         "  - agent: a\n    messages: [hi]\n    attempts: 2\n"
         "    on_error: { task: hook, run: echo HOOK-RAN }\n"
         "  ensure: { task: tidy, run: echo ENSURE-RAN }\n";
}

// The reproductions of the process-killing answers: each one now errors
// the step after its two attempts, and the hooks run.
TEST_F(HostileCliTest, AHostileAnswerErrorsTheStepAndHooksRun) {
  struct Case {
    std::string file;
    std::string model;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"openai/tool_index_string.sse", "openai/m", "tool call index"},
      {"openai/tool_index_1_5e300.sse", "openai/m", "tool call index"},
      {"openai/tool_index_negative.sse", "openai/m", "tool call index"},
      {"openai/deep_arguments.json", "openai/m", "nested deeper than 128"},
      {"openai/deep_error.json", "openai/m", "nested deeper than 128"},
      {"openai/prompt_tokens_1e300.json", "openai/m", "prompt_tokens"},
      {"anthropic/index_string.sse", "anthropic/m", "content block index"},
      {"anthropic/output_tokens_many.sse", "anthropic/m", "output_tokens"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string body = ReadCorpus(c.file);
    const bool sse =
        c.file.size() > 4 && c.file.compare(c.file.size() - 4, 4, ".sse") == 0;
    RawHttpServer server([&](int, const std::string&) {
      return RawHttpServer::Reply{sse ? RawHttpServer::Stream(body)
                                      : RawHttpServer::Response(body)};
    });
    std::string url = server.base_url();
    Result r = Run(AgentPipeline(c.model, url, sse));
    EXPECT_FALSE(r.signalled) << r.output;
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("malformed answer"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("HOOK-RAN"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("ENSURE-RAN"), std::string::npos) << r.output;
    EXPECT_EQ(server.requests(), 2);
  }
}

// Two agents in a row on one kept-alive connection; the server reads the
// second request and hangs up. With attempts: 1 the server must see that
// request once: libcurl used to send it again on a new connection, and the
// step then succeeded with one request recorded.
TEST_F(HostileCliTest, AttemptsOneSendsExactlyOneRequest) {
  const std::string ok =
      R"({"choices":[{"message":{"content":"fine"},"finish_reason":"stop"}]})";
  RawHttpServer server([&](int index, const std::string&) {
    if (index == 1) return RawHttpServer::Reply{"", true};
    return RawHttpServer::Reply{RawHttpServer::Response(ok), false};
  });
  Result r =
      Run("agents:\n- name: a\n  source: { model: openai/m, base_url: \"" +
          server.base_url() +
          "\" }\n"
          "jobs:\n- name: j\n  plan:\n"
          "  - { agent: a, name: first, messages: [hi], attempts: 1 }\n"
          "  - { agent: a, name: second, messages: [again], attempts: 1 }\n");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(server.requests(), 2) << r.output;
  EXPECT_NE(r.output.find("closed a reused connection"), std::string::npos)
      << r.output;
}

// 400 conversations at once in a process allowed 256 descriptors (soft and
// hard): they used to fail with EMFILE, reported as "Couldn't connect".
// Now the excess waits for a descriptor slot and every one succeeds.
TEST_F(HostileCliTest, AWideFanOutWaitsForDescriptorsInsteadOfFailing) {
  const std::string ok =
      R"({"choices":[{"message":{"content":"fine"},"finish_reason":"stop"}]})";
  // Keep-alive, as model servers do.
  RawHttpServer server([&](int, const std::string&) {
    return RawHttpServer::Reply{RawHttpServer::Response(ok), false};
  });
  Result r = Run(FanOutPipeline(server.base_url(), 400), "ulimit -n 256");
  EXPECT_EQ(r.exit_code, 0) << r.output.substr(0, 4000);
  EXPECT_EQ(server.requests(), 400);
  EXPECT_EQ(r.output.find("Couldn't connect"), std::string::npos);
  EXPECT_EQ(r.output.find("descriptors"), std::string::npos);
}

// Under a limit of 64 descriptors a run used to fail before its first
// step (the HTTP transport took two per shard up front, 64 in all): the
// lock, the store and the guardian found none left. Now a fan-out of 40
// conversations runs, waiting for descriptors as it goes, with nothing to
// warn about.
TEST_F(HostileCliTest, AFanOutRunsUnderALimitOfSixtyFourDescriptors) {
  const std::string ok =
      R"({"choices":[{"message":{"content":"fine"},"finish_reason":"stop"}]})";
  RawHttpServer server([&](int, const std::string&) {
    return RawHttpServer::Reply{RawHttpServer::Response(ok), false};
  });
  Result r = Run(FanOutPipeline(server.base_url(), 40), "ulimit -n 64");
  EXPECT_EQ(r.exit_code, 0) << r.output.substr(0, 4000);
  EXPECT_EQ(server.requests(), 40);
  EXPECT_EQ(r.output.find("Too many open files"), std::string::npos)
      << r.output.substr(0, 4000);
  EXPECT_EQ(r.output.find("WRN "), std::string::npos)
      << r.output.substr(0, 4000);
}

// Tasks hold descriptors too (pipes, pidfd, eventfd): 400 of them at once
// under a limit of 256 wait for a slot, none fails to start with EMFILE.
TEST_F(HostileCliTest, AWideTaskFanOutWaitsForDescriptorsInsteadOfFailing) {
  Result r = Run("jobs:\n- name: j\n  plan:\n"
                 "  - across: [{ var: i, values: [" +
                     OneTo(400) +
                     "] }]\n"
                     "    do:\n"
                     "    - { task: t, run: \"sleep 0.05; echo cell {{ .i | shellquote }}\" }\n",
                 "ulimit -n 256");
  EXPECT_EQ(r.exit_code, 0) << r.output.substr(0, 4000);
  EXPECT_EQ(r.output.find("Too many open files"), std::string::npos);
  size_t cells = 0;
  for (size_t at = r.output.find("| cell "); at != std::string::npos;
       at = r.output.find("| cell ", at + 1)) {
    ++cells;
  }
  EXPECT_EQ(cells, 400u);
}

}  // namespace
