// Secrets through the real binary (docs/secrets.md): provider keys and
// declared secrets never reach stdout, stderr, the store, the web UI's API
// or JUnit XML, whatever echoes them (a model server's error body, a stream
// error event, a task); provider keys reach a task only when its `env:`
// passes them, and a CLI source sees only its minimal base and its `env:`.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/listening_child.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;

const std::string kSteps = std::string(STEPS_BINARY_DIR) + "/src/cli/steps";
const std::string kMockProvider =
    std::string(STEPS_BINARY_DIR) + "/mock_provider/mock_provider";

// The fake values; every one holds "SECRETVALUE", which must appear nowhere.
constexpr const char* kOpenAiKey = "sk-test-SECRETVALUE-123";
constexpr const char* kAnthropicKey = "sk-ant-SECRETVALUE-456";
constexpr const char* kDeployToken = "deploy-SECRETVALUE-789";
constexpr const char* kNeedle = "SECRETVALUE";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

using Server = steps::test_support::ListeningChild;

class SecretsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/steps-secrets-XXXXXX";
    dir_ = mkdtemp(tmpl);
    setenv("OPENAI_API_KEY", kOpenAiKey, 1);
    setenv("ANTHROPIC_API_KEY", kAnthropicKey, 1);
    setenv("OPENROUTER_API_KEY", "sk-or-SECRETVALUE-000", 1);
    setenv("DEPLOY_TOKEN", kDeployToken, 1);
    setenv("OTHER_VAR", "visible-to-tasks", 1);
  }
  void TearDown() override {
    for (const char* v : {"OPENAI_API_KEY", "ANTHROPIC_API_KEY",
                          "OPENROUTER_API_KEY", "DEPLOY_TOKEN", "OTHER_VAR"})
      unsetenv(v);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  struct Result {
    int exit_code = -1;
    std::string out;
    std::string err;
  };

  // Runs steps in the temporary folder; stdout and stderr kept apart.
  Result Steps(const std::string& args) {
    std::string cmd = "cd '" + dir_ + "' && '" + kSteps + "' " + args +
                      " >stdout.txt 2>stderr.txt";
    int status = std::system(cmd.c_str());
    Result r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = ReadFile(dir_ + "/stdout.txt");
    r.err = ReadFile(dir_ + "/stderr.txt");
    return r;
  }

  // Every row of every table of the store, as `sqlite3 .dump` prints it.
  std::string DumpStore(const std::string& state_dir) {
    std::string out = dir_ + "/dump.sql";
    std::string cmd = "sqlite3 '" + dir_ + "/" + state_dir +
                      "/steps.db' .dump > '" + out + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return ReadFile(out);
  }

  std::string dir_;
};

// What a model server does to leak a key: a 200 whose body is an error
// object quoting the Authorization header, stream error events (OpenAI and
// Anthropic), and a 401 body quoting it. Each answers twice: once for
// `steps run`, once for `steps test`.
std::string LeakyScript() {
  const std::string openai = kOpenAiKey;
  const std::string anthropic = kAnthropicKey;
  std::string script;
  for (const auto& [agent, entry] :
       std::vector<std::pair<std::string, std::string>>{
           {"leaky-body",
            "error_event: 'invalid header Authorization: Bearer " + openai +
                "'"},
           {"leaky-stream",
            "error_event: 'stream failed for key " + openai + "'"},
           {"leaky-anthropic",
            "error_event: 'x-api-key " + anthropic + " is not valid'"},
           {"leaky-401",
            "{status: 401, body: '{\"error\": {\"message\": \"Incorrect API "
            "key provided: " +
                openai + "\"}}'}"}}) {
    script += agent + ":\n  - " + entry + "\n  - " + entry + "\n";
  }
  return script;
}

std::string LeakyPipeline(int port) {
  const std::string base =
      "base_url: http://127.0.0.1:" + std::to_string(port) + "/v1";
  return "secrets: [DEPLOY_TOKEN]\n"
         "agents:\n"
         "- { name: leaky-body, attempts: 1, source: { model: openai/m, " +
         base +
         ", api_key_env: OPENAI_API_KEY } }\n"
         "- { name: leaky-stream, attempts: 1, source: { model: openai/m, " +
         base +
         ", api_key_env: OPENAI_API_KEY, stream: true } }\n"
         "- { name: leaky-anthropic, attempts: 1, source: { model: "
         "anthropic/m, " +
         base +
         ", api_key_env: ANTHROPIC_API_KEY, stream: true } }\n"
         "- { name: leaky-401, attempts: 1, source: { model: openai/m, " +
         base +
         ", api_key_env: OPENAI_API_KEY } }\n"
         "jobs:\n"
         "- name: leaks\n"
         "  plan:\n"
         "  - try: { agent: leaky-body, messages: [hi] }\n"
         "  - try: { agent: leaky-stream, messages: [hi] }\n"
         "  - try: { agent: leaky-anthropic, messages: [hi] }\n"
         "  - try: { agent: leaky-401, messages: [hi] }\n"
         "  - task: echo\n"
         "    env: { OPENAI_API_KEY: \"${OPENAI_API_KEY}\" }\n"
         "    run: |\n"
         "      echo \"token=$DEPLOY_TOKEN key=$OPENAI_API_KEY\"\n"
         "      echo \"on stderr $DEPLOY_TOKEN\" >&2\n"
         "  - task: fail\n"
         "    run: echo \"failing with $DEPLOY_TOKEN\"; exit 1\n";
}

void ExpectMasked(const std::string& where, const std::string& text) {
  EXPECT_EQ(text.find(kNeedle), std::string::npos)
      << "a secret leaked into " << where << ":\n"
      << text;
  EXPECT_NE(text.find("***"), std::string::npos)
      << "no mask in " << where << ":\n"
      << text;
}

TEST_F(SecretsTest, NoSecretReachesAnyOutput) {
  Write("script.yaml", LeakyScript());
  Server mock({kMockProvider, "--script", dir_ + "/script.yaml", "--listen",
               "127.0.0.1:0"});
  const int mock_port = mock.Port();
  ASSERT_GT(mock_port, 0);
  Write("leaks.yaml", LeakyPipeline(mock_port));

  Result run = Steps("run leaks.yaml --plain --state-dir state");
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  ExpectMasked("steps run's stdout", run.out);
  ExpectMasked("steps run's stderr", run.err);
  // The leaks really happened, and were masked where they landed.
  EXPECT_NE(run.out.find("token=*** key=***"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Bearer ***"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("WRN agent.conversation_failed"), std::string::npos)
      << run.err;

  Result test = Steps("test leaks.yaml --junit report.xml --state-dir state");
  EXPECT_EQ(test.exit_code, 1) << test.out << test.err;
  ExpectMasked("steps test's stdout", test.out);
  EXPECT_EQ(test.err.find(kNeedle), std::string::npos) << test.err;
  const std::string junit = ReadFile(dir_ + "/report.xml");
  ExpectMasked("the JUnit XML", junit);
  EXPECT_NE(junit.find("x-api-key ***"), std::string::npos) << junit;

  const std::string dump = DumpStore("state");
  ExpectMasked("the store", dump);
  EXPECT_NE(dump.find("Incorrect API key provided"), std::string::npos) << dump;

  Result show = Steps("show --state-dir state");
  ExpectMasked("steps show", show.out);

  Server ui({kSteps, "ui", "--state-dir", dir_ + "/state", "--listen",
             "127.0.0.1:0"});
  const int ui_port = ui.Port();
  ASSERT_GT(ui_port, 0);
  httplib::Client client("127.0.0.1", ui_port);
  auto latest = client.Get("/api/runs/latest");
  ASSERT_TRUE(latest && latest->status == 200);
  ExpectMasked("/api/runs/latest", latest->body);
  // Every step's log.txt.
  std::string logs;
  std::smatch m;
  std::string body = latest->body;
  std::regex step_id(R"re("id":"(leaks:[^"]+)")re");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), step_id);
       it != std::sregex_iterator(); ++it) {
    auto log = client.Get("/api/runs/latest/log.txt?step=" +
                          httplib::detail::encode_query_param((*it)[1]));
    ASSERT_TRUE(log && log->status == 200);
    logs += log->body;
  }
  ExpectMasked("log.txt", logs);
  EXPECT_NE(logs.find("token=*** key=***"), std::string::npos) << logs;
}

TEST_F(SecretsTest, TasksSeeProviderKeysOnlyWhenPassed) {
  Write("p.yaml",
        "agents:\n"
        "- { name: shell, source: { model: mock/m, api_key_env: MY_KEY }, "
        "tools: [run_shell] }\n"
        "jobs:\n"
        "- name: j\n"
        "  plan:\n"
        "  - task: bare\n"
        "    run: echo \"openai=[${OPENAI_API_KEY:-unset}] "
        "router=[${OPENROUTER_API_KEY:-unset}] mine=[${MY_KEY:-unset}] "
        "other=[$OTHER_VAR] token=[${DEPLOY_TOKEN:+set}]\"\n"
        "  - task: passed\n"
        "    env: [OPENAI_API_KEY]\n"
        "    run: test \"$OPENAI_API_KEY\" = sk-test-SECRETVALUE-123 && echo "
        "passed-ok\n"
        "  - task: renamed\n"
        "    env: { K: \"prefix-${MY_KEY}\", LITERAL: \"$${MY_KEY}\" }\n"
        "    run: echo \"K=[$K] LITERAL=[$LITERAL]\"\n"
        "  - agent: shell\n"
        "    messages: [go]\n"
        "mock:\n"
        "  shell:\n"
        "    - call: {name: run_shell, arguments: {command: 'echo "
        "shell-key=${OPENAI_API_KEY:-unset}'}}\n"
        "    - expect: {last_contains: 'shell-key=unset'}\n"
        "      say: done\n");
  setenv("MY_KEY", "my-own-key", 1);
  Result r = Steps("run p.yaml --plain --mock --state-dir state");
  unsetenv("MY_KEY");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("openai=[unset] router=[unset] mine=[unset] "
                       "other=[visible-to-tasks] token=[set]"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("passed-ok"), std::string::npos) << r.out;
  // MY_KEY is a provider key (api_key_env), so its value is masked too.
  EXPECT_NE(r.out.find("K=[prefix-***] LITERAL=[${MY_KEY}]"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.err.find("mock:"), std::string::npos)
      << "run_shell saw OPENAI_API_KEY: " << r.err;
}

// What a command tool, an MCP server and run_shell print goes back to the
// model as printed, and into the store and the log masked (record_cli_test
// covers recordings).
TEST_F(SecretsTest, ToolOutputIsMasked) {
  Write("p.yaml",
        "secrets: [DEPLOY_TOKEN]\n"
        "tools:\n"
        "- name: leak\n"
        "  description: Print the token.\n"
        "  parameters: { type: object }\n"
        "  env: [DEPLOY_TOKEN]\n"
        "  run: echo \"command-tool=$DEPLOY_TOKEN\"\n"
        "mcp_servers:\n"
        "- name: srv\n"
        "  env: [DEPLOY_TOKEN]\n"
        "  command: |\n"
        "    reply() { printf '{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\\n' "
        "\"$1\" \"$2\"; }\n"
        "    while IFS= read -r line; do\n"
        "      id=$(printf '%s' \"$line\" | sed -n "
        "'s/^{\"id\":\\([0-9]*\\),.*/\\1/p')\n"
        "      [ -n \"$id\" ] || continue\n"
        "      case \"$line\" in\n"
        "        *'\"method\":\"initialize\"'*) reply \"$id\" "
        "'{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
        "\"serverInfo\":{\"name\":\"s\",\"version\":\"1\"}}' ;;\n"
        "        *'\"method\":\"tools/list\"'*) reply \"$id\" "
        "'{\"tools\":[{\"name\":\"leak\",\"inputSchema\":{\"type\":"
        "\"object\"}}]}' ;;\n"
        "        *) reply \"$id\" \"{\\\"content\\\":[{\\\"type\\\":\\\"text\\\","
        "\\\"text\\\":\\\"mcp=$DEPLOY_TOKEN\\\"}]}\" ;;\n"
        "      esac\n"
        "    done\n"
        "agents:\n"
        "- { name: a, source: { model: mock/a }, tools: [leak, srv, run_shell] }\n"
        "jobs:\n"
        "- name: j\n"
        "  plan:\n"
        "  - agent: a\n"
        "    messages: [go]\n"
        "mock:\n"
        "  a:\n"
        "    - call: {name: leak, arguments: {}}\n"
        "    - expect: {last_contains: 'command-tool=deploy-'}\n"
        "      call: {name: srv__leak, arguments: {}}\n"
        "    - expect: {last_contains: 'mcp=deploy-'}\n"
        "      call: {name: run_shell, arguments: {command: 'echo "
        "shell=$DEPLOY_TOKEN'}}\n"
        "    - expect: {last_contains: 'shell=deploy-'}\n"
        "      say: done\n");
  Result r = Steps("run p.yaml --plain --mock --state-dir state");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find(kNeedle), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find(kNeedle), std::string::npos) << r.err;
  const std::string dump = DumpStore("state");
  ExpectMasked("the store", dump);
  for (const char* seen : {"command-tool=***", "mcp=***", "shell=***"}) {
    EXPECT_NE(dump.find(seen), std::string::npos) << seen << "\n" << dump;
  }
  const std::string json = Steps("show --json --state-dir state").out;
  ExpectMasked("steps show --json", json);
  EXPECT_NE(json.find("mcp=***"), std::string::npos) << json;
}

TEST_F(SecretsTest, CliSourceSeesOnlyItsBaseAndItsEnv) {
  Write("p.yaml",
        "agents:\n"
        "- name: cli\n"
        "  source:\n"
        "    cli: env > cli-env.txt && echo ok\n"
        "    env: { ANTHROPIC_API_KEY: \"${ANTHROPIC_API_KEY}\", MODE: fast }\n"
        "- name: bare\n"
        "  source: { cli: env > bare-env.txt && echo ok }\n"
        "jobs:\n"
        "- name: j\n"
        "  plan:\n"
        "  - { agent: cli, messages: [go] }\n"
        "  - { agent: bare, messages: [go] }\n");
  Result r = Steps("run p.yaml --plain --state-dir state");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::string env, bare;
  for (const auto& e : fs::recursive_directory_iterator(dir_ + "/state")) {
    if (e.path().filename() == "cli-env.txt") env = ReadFile(e.path());
    if (e.path().filename() == "bare-env.txt") bare = ReadFile(e.path());
  }
  ASSERT_FALSE(env.empty());
  EXPECT_NE(env.find(std::string("ANTHROPIC_API_KEY=") + kAnthropicKey),
            std::string::npos)
      << env;
  EXPECT_NE(env.find("\nMODE=fast\n"), std::string::npos) << env;
  EXPECT_NE(env.find("\nPATH="), std::string::npos) << env;
  for (const std::string& text : {env, bare}) {
    for (const char* hidden : {"OPENAI_API_KEY", "OPENROUTER_API_KEY",
                               "DEPLOY_TOKEN", "OTHER_VAR", "STEPS_TEST"}) {
      EXPECT_EQ(text.find(hidden), std::string::npos) << hidden << "\n" << text;
    }
  }
  EXPECT_EQ(bare.find("ANTHROPIC_API_KEY"), std::string::npos) << bare;
  EXPECT_EQ(bare.find("MODE="), std::string::npos) << bare;
}

TEST_F(SecretsTest, BadSecretsAndEnvAreRefusedWithTheirLine) {
  Write("bad.yaml",
        "secrets: [DEPLOY_TOKEN, 9LIVES]\n"
        "agents:\n"
        "- name: a\n"
        "  source: { model: openai/m, env: [OPENAI_API_KEY] }\n"
        "jobs:\n"
        "- name: j\n"
        "  plan:\n"
        "  - task: t\n"
        "    env: { GOOD: \"${UNCLOSED\" }\n"
        "    run: 'true'\n");
  Result r = Steps("validate bad.yaml");
  EXPECT_NE(r.exit_code, 0);
  const std::string all = r.out + r.err;
  EXPECT_NE(all.find("bad.yaml:1: error: 'secrets' names '9LIVES'"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("bad.yaml:4: error: 'source.env' is only for a CLI "
                     "source"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("bad.yaml:9: error: 'env.GOOD': '${UNCLOSED' has a "
                     "'${' that is not a reference"),
            std::string::npos)
      << all;
}

}  // namespace
