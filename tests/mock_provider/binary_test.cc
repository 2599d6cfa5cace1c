// The mock_provider binary: serves a script file until SIGTERM; refuses a
// bad script with its line.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "providers/curl_transport.h"
#include "providers/openai.h"

extern char** environ;

namespace steps {
namespace {

const std::string kBinary =
    std::string(STEPS_BINARY_DIR) + "/mock_provider/mock_provider";

struct Child {
  pid_t pid = -1;
  int out = -1;  // Read end of its stdout.
  int err = -1;  // Read end of its stderr.
};

Child Spawn(const std::vector<std::string>& args) {
  int out[2], err[2];
  EXPECT_EQ(pipe(out), 0);
  EXPECT_EQ(pipe(err), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addclose(&actions, err[0]);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(kBinary.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  Child child;
  EXPECT_EQ(posix_spawn(&child.pid, kBinary.c_str(), &actions, nullptr,
                        argv.data(), environ),
            0);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  close(err[1]);
  child.out = out[0];
  child.err = err[0];
  return child;
}

// Reads up to the first newline (or EOF).
std::string ReadLine(int fd) {
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') line += c;
  return line;
}

std::string ReadAll(int fd) {
  std::string all;
  char buf[512];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) all.append(buf, n);
  return all;
}

int WaitExit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string WriteScript(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() /
              (name + "-" + std::to_string(getpid()) + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

TEST(MockProviderBinaryTest, ServesAScriptUntilSigterm) {
  std::string script =
      WriteScript("serve", "reviewer:\n  - say: from the binary\n");
  Child child = Spawn({"--script", script, "--listen", "127.0.0.1:0"});
  std::string line = ReadLine(child.out);
  ASSERT_EQ(line.rfind("listening on http://127.0.0.1:", 0), 0u) << line;
  std::string base = line.substr(std::string("listening on ").size()) + "/v1";

  CurlTransport transport;
  OpenAiConfig config;
  config.base_url = base;
  OpenAiProvider provider(config, transport);
  ChatRequest request;
  request.model = "m";
  request.messages = {Message::User("hi")};
  CallContext context;
  context.agent = "reviewer";
  ChatResult r = provider.Send(request, context);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.answer().text, "from the binary");

  kill(child.pid, SIGTERM);
  EXPECT_EQ(WaitExit(child.pid), 0);
  close(child.out);
  close(child.err);
  std::filesystem::remove(script);
}

// Scripts are bytes: a say text and a call argument that are not UTF-8 (a
// raw 0xFF byte in the file) are served with U+FFFD in their place, as
// valid JSON, instead of aborting the server.
TEST(MockProviderBinaryTest, ServesInvalidUtf8AsReplacementCharacters) {
  std::string script = WriteScript(
      "bytes",
      "reviewer:\n"
      "  - call: { name: read_file, arguments: { path: \"a\xff.txt\" } }\n"
      "  - say: \"caf\xff\xfe done\"\n");
  Child child = Spawn({"--script", script, "--listen", "127.0.0.1:0"});
  std::string line = ReadLine(child.out);
  ASSERT_EQ(line.rfind("listening on http://127.0.0.1:", 0), 0u) << line;
  std::string base = line.substr(std::string("listening on ").size()) + "/v1";

  CurlTransport transport;
  OpenAiConfig config;
  config.base_url = base;
  OpenAiProvider provider(config, transport);
  ChatRequest request;
  request.model = "m";
  request.messages = {Message::User("hi")};
  CallContext context;
  context.agent = "reviewer";
  ChatResult call = provider.Send(request, context);
  ASSERT_TRUE(call.ok()) << call.error().message;
  ASSERT_EQ(call.answer().tool_calls.size(), 1u);
  auto args = nlohmann::json::parse(call.answer().tool_calls[0].arguments,
                                    nullptr, false);
  ASSERT_TRUE(args.is_object()) << call.answer().tool_calls[0].arguments;
  EXPECT_EQ(args["path"], "a\xEF\xBF\xBD.txt");
  ChatResult say = provider.Send(request, context);
  ASSERT_TRUE(say.ok()) << say.error().message;
  EXPECT_EQ(say.answer().text, "caf\xEF\xBF\xBD\xEF\xBF\xBD done");

  kill(child.pid, SIGTERM);
  EXPECT_EQ(WaitExit(child.pid), 0);
  close(child.out);
  close(child.err);
  std::filesystem::remove(script);
}

TEST(MockProviderBinaryTest, RefusesABadScriptWithItsLine) {
  std::string script =
      WriteScript("bad", "reviewer:\n  - say: ok\n  - sing: no\n");
  Child child = Spawn({"--script", script});
  std::string err = ReadAll(child.err);
  EXPECT_EQ(WaitExit(child.pid), 65);
  EXPECT_EQ(err.rfind(script + ":3: unknown key 'sing'", 0), 0u) << err;
  close(child.out);
  close(child.err);
  std::filesystem::remove(script);
}

TEST(MockProviderBinaryTest, RefusesARecursiveAliasWithItsLine) {
  // yaml-cpp makes this a cyclic node graph; reading it used to recurse
  // until the stack ran out.
  std::string script =
      WriteScript("loop", "reviewer: &r\n  - say: hi\n    expect: *r\n");
  Child child = Spawn({"--script", script});
  std::string err = ReadAll(child.err);
  EXPECT_EQ(WaitExit(child.pid), 65);
  EXPECT_EQ(err.rfind(script + ":3: alias *r is inside the node it names", 0),
            0u)
      << err;
  close(child.out);
  close(child.err);
  std::filesystem::remove(script);
}

TEST(MockProviderBinaryTest, RefusesAnAliasBomb) {
  std::string text = "l0: &l0 [{say: hi}]\n";
  for (int i = 1; i <= 8; ++i) {
    std::string prev = "*l" + std::to_string(i - 1);
    text += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) text += (k ? "," : "") + prev;
    text += "]\n";
  }
  std::string script = WriteScript("bomb", text);
  Child child = Spawn({"--script", script});
  std::string err = ReadAll(child.err);
  EXPECT_EQ(WaitExit(child.pid), 65);
  EXPECT_NE(err.find(":6: alias *l4 takes the document past 200000 YAML nodes"),
            std::string::npos)
      << err;
  close(child.out);
  close(child.err);
  std::filesystem::remove(script);
}

TEST(MockProviderBinaryTest, RefusesABadCommandLine) {
  Child child = Spawn({"--bogus"});
  ReadAll(child.err);
  EXPECT_EQ(WaitExit(child.pid), 64);
  close(child.out);
  close(child.err);
}

}  // namespace
}  // namespace steps
