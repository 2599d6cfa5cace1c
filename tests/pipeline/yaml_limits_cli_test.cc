// Hostile pipeline files through the real `steps` binary: alias bombs and
// recursive aliases are refused by validate, explain and run with
// FILE:LINE, exit 65, quickly and in bounded memory; bytes that are not
// UTF-8 never crash the loader.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/temp_dir.h"

extern char** environ;

namespace {

using steps::test_support::TempDir;

const std::string kSteps = std::string(STEPS_BINARY_DIR) + "/src/cli/steps";

struct Finished {
  int exit_code = -1;
  std::string output;  // stdout and stderr together.
  double seconds = 0;
  long max_rss_kb = 0;
  double cpu_seconds = 0;  // User and system time of the child.
};

// Runs `steps ARGS...` under coreutils' `timeout 120` (so a regression ends
// as exit 124 instead of hanging the suite), with the child's peak memory.
Finished RunSteps(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"timeout", "120", kSteps};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::string out_path = dir / "output.txt";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  Finished f;
  int rc =
      posix_spawnp(&pid, "timeout", &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return f;
  int status = 0;
  struct rusage usage = {};
  wait4(pid, &status, 0, &usage);
  f.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  f.max_rss_kb = usage.ru_maxrss;
  f.cpu_seconds = usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
                  (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  f.exit_code =
      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(out_path);
  std::stringstream text;
  text << in.rdbuf();
  f.output = text.str();
  return f;
}

// 8 levels of ten aliases each: 10^8 task steps in about 500 bytes.
std::string AliasBomb() {
  std::string text =
      "jobs:\n- name: bomb\n  plan:\n  - &s0 {task: t, run: 'true'}\n";
  for (int level = 1; level <= 8; ++level) {
    std::string prev = "*s" + std::to_string(level - 1);
    text += "  - &s" + std::to_string(level) + " {do: [";
    for (int i = 0; i < 10; ++i) text += (i ? "," : "") + prev;
    text += "]}\n";
  }
  return text;
}

// Generous bounds: the bomb took over 60 s and 2.9 GB before the limit,
// and a sanitizer build spends several times the memory of a plain one.
constexpr double kQuickSeconds = 20;
constexpr long kBoundedKb = 600 * 1024;

void ExpectRefused(const TempDir& dir, const std::string& file,
                   const std::string& message) {
  for (const char* command : {"validate", "explain", "run"}) {
    SCOPED_TRACE(command);
    Finished f = RunSteps(dir, {command, dir / file});
    EXPECT_EQ(f.exit_code, 65) << f.output;
    EXPECT_NE(f.output.find(message), std::string::npos) << f.output;
    EXPECT_LT(f.seconds, kQuickSeconds);
    EXPECT_LT(f.max_rss_kb, kBoundedKb);
  }
}

TEST(YamlLimitsCliTest, AliasBombIsRefusedAtTheAliasThatBreaksTheBudget) {
  TempDir dir;
  dir.Write("bomb.yaml", AliasBomb());
  // *s4 on line 9 is the first alias whose expansion passes 200,000 nodes.
  ExpectRefused(dir, "bomb.yaml",
                dir / "bomb.yaml" +
                    ":9: error: alias *s4 takes the document past 200000 "
                    "YAML nodes once aliases are expanded");
}

TEST(YamlLimitsCliTest, RecursiveAliasIsRefused) {
  TempDir dir;
  dir.Write("loop.yaml", "jobs:\n- name: j\n  plan: &x [ {do: *x} ]\n");
  ExpectRefused(dir, "loop.yaml",
                dir / "loop.yaml" +
                    ":3: error: alias *x is inside the node it names (&x at "
                    "line 3): a recursive alias");
}

TEST(YamlLimitsCliTest, RecursiveAliasInAMockBlockIsRefused) {
  TempDir dir;
  dir.Write("mock.yaml",
            "jobs:\n- name: j\n  plan:\n  - { task: t, run: 'true' }\n"
            "mock:\n  a: &m\n  - say: hi\n    expect: *m\n");
  ExpectRefused(dir, "mock.yaml", dir / "mock.yaml" + ":8: error: alias *m");
}

TEST(YamlLimitsCliTest, DeepNestingThroughAliasesIsRefused) {
  // Each alias adds the depth of the node it names: 20 levels of 4 reach
  // past the 64-level limit with only a few nodes.
  std::string text = "jobs:\n- name: j\n  plan:\n  - &d0 {task: t, run: x}\n";
  for (int i = 1; i <= 20; ++i) {
    text += "  - &d" + std::to_string(i) + " {do: [{do: [*d" +
            std::to_string(i - 1) + "]}]}\n";
  }
  TempDir dir;
  dir.Write("deep.yaml", text);
  ExpectRefused(dir, "deep.yaml", "levels deep; the limit is 64 levels");
}

TEST(YamlLimitsCliTest, DeepPlainNestingIsRefusedWithItsLine) {
  std::string text =
      "jobs:\n- name: j\n  plan:\n  - task: t\n    run: x\n"
      "    env: {a: ";
  for (int i = 0; i < 100; ++i) text += "[";
  for (int i = 0; i < 100; ++i) text += "]";
  text += "}\n";
  TempDir dir;
  dir.Write("nest.yaml", text);
  ExpectRefused(dir, "nest.yaml",
                dir / "nest.yaml" +
                    ":6: error: lists and mappings are nested more than 64 "
                    "levels deep here");
}

TEST(YamlLimitsCliTest, AliasesWithinTheLimitsStillLoad) {
  TempDir dir;
  dir.Write("ok.yaml",
            "jobs:\n- name: j\n  plan:\n  - &t {task: t, run: 'true'}\n"
            "  - {do: [*t, *t]}\n");
  Finished f = RunSteps(dir, {"validate", dir / "ok.yaml"});
  EXPECT_EQ(f.exit_code, 0) << f.output;
}

TEST(YamlLimitsCliTest, MockArgumentsThatAreNotUtf8AreReadNotFatal) {
  // A raw 0xFF in a scripted tool call's arguments made the JSON writer
  // throw, and validate abort.
  TempDir dir;
  dir.Write("bytes.yaml",
            "agents: [{ name: a, source: { model: mock/a }, tools: "
            "[read_file] }]\n"
            "jobs:\n- name: j\n  plan:\n  - { agent: a, messages: [go] }\n"
            "mock:\n  a:\n  - call: {name: read_file, arguments: {path: "
            "\"\xff\"}}\n  - say: done\n");
  Finished f = RunSteps(dir, {"validate", dir / "bytes.yaml"});
  EXPECT_EQ(f.exit_code, 0) << f.output;
  EXPECT_NE(f.output.find("Valid: bytes (1 step)"), std::string::npos)
      << f.output;
}

TEST(YamlLimitsCliTest, AMappingWithManyKeysIsReadInLinearTime) {
  // 99,000 keys fit the node budget; each key was looked up by a scan over
  // the others (for duplicates, and on every read), which took minutes.
  std::string text = "jobs: [{name: j, plan: [{task: t, run: x}]}]\n";
  for (int i = 0; i < 99000; ++i) text += "k" + std::to_string(i) + ": 1\n";
  TempDir dir;
  dir.Write("wide.yaml", text);
  Finished f = RunSteps(dir, {"validate", dir / "wide.yaml"});
  EXPECT_EQ(f.exit_code, 0);
  EXPECT_NE(f.output.find("99000 warnings"), std::string::npos);
  // CPU time, not wall time: a loaded machine cannot make this flaky. About
  // 1.5 s in a plain build; the scans alone took well over a minute.
  EXPECT_LT(f.cpu_seconds, 30);
}

}  // namespace
