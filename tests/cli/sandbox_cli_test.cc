// `sandbox: bwrap` through the real `steps` binary: a sandboxed run_shell
// (scripted by a mock: block) and a sandboxed task cannot read the state
// folder, write outside their directory or open a socket, while the same
// commands without the sandbox can; `network: true` gives the socket back.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/loopback.h"
#include "common/steps_cli.h"
#include "common/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using steps::test_support::TempDir;

using Ran = steps::test_support::CliResult;
using steps::test_support::RunInShell;
using steps::test_support::RunSteps;

// Why bwrap cannot run here, or "" when it can.
std::string BwrapUnusable() {
  Ran r =
      RunInShell("/", "bwrap --ro-bind / / --unshare-pid --unshare-net true");
  if (r.exit_code == 0) return "";
  return "bwrap cannot run on this machine (install Debian's bubblewrap; it "
         "needs user namespaces or root): " +
         r.out;
}

// A loopback TCP port that accepts connections (the kernel completes them
// from the backlog; nobody needs to accept).
class Listener {
 public:
  Listener() { fd_ = steps::test_support::ListenOnLoopback(16, &port_); }
  ~Listener() {
    if (fd_ >= 0) close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// What the probes managed to do, read from the marker files they leave in
// their working directory (somewhere under the state folder).
struct Probes {
  bool ran = false;         // Wrote inside its own directory.
  bool read_state = false;  // Read the state folder's secret.
  // Wrote the file outside its directory, as found outside the sandbox
  // (inside, a write under /tmp lands in the sandbox's own tmpfs and
  // vanishes: that the command succeeded proves nothing).
  bool wrote_outside = false;
  bool connected = false;
};

class SandboxCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = BwrapUnusable(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_GT(listener_.port(), 0);
    fs::create_directories(state_);
    std::ofstream(state_ + "/secret.txt") << "state-folder-secret\n";
  }

  // The three probes and a control, as bash commands. Each leaves a marker
  // in the current directory when it succeeds.
  std::vector<std::string> ProbeCommands() const {
    return {
        "echo yes > inside.ok",
        "cat " + state_ + "/secret.txt > read.out && echo yes > read.ok",
        "echo escaped > " + outside_,
        "echo > /dev/tcp/127.0.0.1/" + std::to_string(listener_.port()) +
            " && echo yes > net.ok",
    };
  }

  // An agent step whose mock script calls run_shell once per probe.
  std::string AgentPipeline(const std::string& sandbox) const {
    std::string y =
        "agents:\n- name: prober\n  source: { model: mock/m }\n"
        "  tools: [run_shell]\n" +
        sandbox +
        "jobs:\n- name: j\n  plan:\n"
        "  - agent: prober\n    messages: [probe]\n"
        "mock:\n  prober:\n";
    for (const std::string& c : ProbeCommands()) {
      y += "  - call: {name: run_shell, arguments: {command: \"" + c + "\"}}\n";
    }
    y += "  - say: done\n";
    return y;
  }

  // A task running the probes (each may fail; the script does not).
  std::string TaskPipeline(const std::string& sandbox) const {
    std::string y =
        "jobs:\n- name: j\n  plan:\n  - task: t\n" + sandbox + "    run: |\n";
    for (const std::string& c : ProbeCommands()) y += "      " + c + "\n";
    y += "      true\n";
    return y;
  }

  Ran Steps(const std::string& args, const std::string& env = "") const {
    steps::test_support::StepsOptions options;
    options.prefix = env;
    return RunSteps(dir_.path(), args, options);
  }

  // Runs `yaml` (with --mock) and reads back the markers.
  Probes RunProbes(const std::string& yaml) {
    dir_.Write("p.yaml", yaml);
    fs::remove_all(state_ + "/runs");
    fs::remove(outside_);
    const bool mock = yaml.find("\nmock:") != std::string::npos;
    last_ = Steps(mock ? "run p.yaml --mock --plain" : "run p.yaml --plain");
    EXPECT_EQ(last_.exit_code, 0) << last_.out;
    Probes p;
    std::error_code ec;
    for (const auto& e :
         fs::recursive_directory_iterator(state_ + "/runs", ec)) {
      const std::string name = e.path().filename().string();
      p.ran |= name == "inside.ok";
      p.read_state |= name == "read.ok";
      p.connected |= name == "net.ok";
      if (name == "read.out") {
        std::ifstream in(e.path());
        std::string text((std::istreambuf_iterator<char>(in)), {});
        p.read_state |= text.find("state-folder-secret") != std::string::npos;
      }
    }
    p.wrote_outside |= fs::exists(outside_);
    return p;
  }

  // Under the build folder rather than the system's temp folder, so the
  // probes name paths that are not in the sandbox's private /tmp unless
  // the checkout itself is under /tmp (then the write and read probes
  // fail for that reason too, and the test still holds).
  TempDir dir_{STEPS_BINARY_DIR};
  const std::string state_ = dir_ / ".steps";
  const std::string outside_ = dir_ / "outside.txt";
  Listener listener_;
  Ran last_;
};

TEST_F(SandboxCliTest, RunShellUnsandboxedReachesEverything) {
  Probes p = RunProbes(AgentPipeline(""));
  EXPECT_TRUE(p.ran) << last_.out;
  EXPECT_TRUE(p.read_state);
  EXPECT_TRUE(p.wrote_outside);
  EXPECT_TRUE(p.connected);
}

TEST_F(SandboxCliTest, SandboxedRunShellSeesOnlyItsDirectory) {
  Probes p = RunProbes(AgentPipeline("  sandbox: bwrap\n"));
  EXPECT_TRUE(p.ran) << last_.out;
  EXPECT_FALSE(p.read_state) << last_.out;
  EXPECT_FALSE(p.wrote_outside) << last_.out;
  EXPECT_FALSE(p.connected) << last_.out;
}

TEST_F(SandboxCliTest, NetworkTrueGivesRunShellTheSocketOnly) {
  Probes p =
      RunProbes(AgentPipeline("  sandbox: { kind: bwrap, network: true }\n"));
  EXPECT_TRUE(p.ran) << last_.out;
  EXPECT_FALSE(p.read_state);
  EXPECT_FALSE(p.wrote_outside);
  EXPECT_TRUE(p.connected) << last_.out;
}

TEST_F(SandboxCliTest, TaskUnsandboxedReachesEverything) {
  Probes p = RunProbes(TaskPipeline(""));
  EXPECT_TRUE(p.ran) << last_.out;
  EXPECT_TRUE(p.read_state);
  EXPECT_TRUE(p.wrote_outside);
  EXPECT_TRUE(p.connected);
}

TEST_F(SandboxCliTest, SandboxedTaskFromDefaultsSeesOnlyItsDirectory) {
  Probes p = RunProbes("defaults:\n  sandbox: bwrap\n" + TaskPipeline(""));
  EXPECT_TRUE(p.ran) << last_.out;
  EXPECT_FALSE(p.read_state) << last_.out;
  EXPECT_FALSE(p.wrote_outside) << last_.out;
  EXPECT_FALSE(p.connected) << last_.out;
}

TEST_F(SandboxCliTest, StepSandboxNoneOverridesDefaults) {
  Probes p = RunProbes("defaults:\n  sandbox: bwrap\n" +
                       TaskPipeline("    sandbox: none\n"));
  EXPECT_TRUE(p.read_state) << last_.out;
  EXPECT_TRUE(p.connected);
}

TEST_F(SandboxCliTest, NetworkTrueGivesTaskTheSocketOnly) {
  Probes p =
      RunProbes(TaskPipeline("    sandbox: { kind: bwrap, network: true }\n"));
  EXPECT_TRUE(p.ran) << last_.out;
  EXPECT_FALSE(p.read_state);
  EXPECT_FALSE(p.wrote_outside);
  EXPECT_TRUE(p.connected) << last_.out;
}

TEST_F(SandboxCliTest, SandboxedGetScriptSeesOnlyItsFolder) {
  std::string y =
      "resource_types:\n- name: probe\n  config:\n"
      "    check: |\n      echo '[{\"ref\": \"1\"}]'\n    in: |\n";
  for (const std::string& c : ProbeCommands()) y += "      " + c + "\n";
  y += "      true\n"
       "resources:\n- { name: r, type: probe }\n"
       "jobs:\n- name: j\n  plan:\n  - get: r\n    sandbox: bwrap\n";
  Probes p = RunProbes(y);
  EXPECT_TRUE(p.ran) << last_.out;
  EXPECT_FALSE(p.read_state) << last_.out;
  EXPECT_FALSE(p.wrote_outside) << last_.out;
  EXPECT_FALSE(p.connected) << last_.out;
}

TEST_F(SandboxCliTest, TimeoutKillsEverythingInsideTheSandbox) {
  dir_.Write("p.yaml",
             "jobs:\n- name: j\n  plan:\n  - task: t\n    sandbox: bwrap\n"
             "    timeout: 1s\n    run: sleep 987654 & sleep 987654\n");
  Ran r = Steps("run p.yaml --plain");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("STEP_TIMEOUT"), std::string::npos) << r.out;
  // bwrap went with the process group; its pid namespace took the rest,
  // the background sleep included.
  // (The bracket keeps pgrep from matching the shell that runs it.)
  EXPECT_NE(RunInShell(dir_.path(), "pgrep -f 'sleep 98765[4]'").exit_code, 0);
}

// Whatever the machine: a pipeline that asks for bwrap where it cannot be
// started is refused step by step with the fix, and validate warns.
class SandboxMissingTest : public ::testing::Test {
 protected:
  Ran Steps(const std::string& args) const {
    fs::create_directories(dir_ / "empty-path");
    steps::test_support::StepsOptions options;
    options.prefix =
        "PATH=" + steps::test_support::ShellQuote(dir_ / "empty-path");
    return RunSteps(dir_.path(), args, options);
  }
  TempDir dir_;
};

TEST_F(SandboxMissingTest, StepErrorsWithTheFixAndValidateWarns) {
  dir_.Write("p.yaml",
             "jobs:\n- name: j\n  plan:\n  - task: t\n"
             "    sandbox: bwrap\n    run: echo ran\n");
  Ran run = Steps("run p.yaml --plain");
  EXPECT_EQ(run.exit_code, 2) << run.out;
  EXPECT_NE(run.out.find("install bubblewrap"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("| ran"), std::string::npos) << run.out;

  Ran validate = Steps("validate p.yaml");
  EXPECT_EQ(validate.exit_code, 0) << validate.out;
  EXPECT_NE(validate.out.find("p.yaml:5: warning: sandbox: bwrap"),
            std::string::npos)
      << validate.out;
  EXPECT_EQ(Steps("validate --strict p.yaml").exit_code, 65);
}

TEST(SandboxKeyTest, ExplainShowsEachSandboxAndWhereItCameFrom) {
  TempDir dir;
  dir.Write("p.yaml",
            "defaults:\n"
            "  sandbox: bwrap\n"
            "agents:\n"
            "- name: a\n"
            "  source: { model: mock/m }\n"
            "  sandbox: { kind: bwrap, network: true }\n"
            "jobs:\n"
            "- name: j\n"
            "  plan:\n"
            "  - task: from-defaults\n"
            "    run: 'true'\n"
            "  - task: off\n"
            "    run: 'true'\n"
            "    sandbox: none\n"
            "  - agent: a\n"
            "    messages: [hi]\n");
  Ran r = RunSteps(dir.path(), "explain p.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* want :
       {"bwrap (no network)", "defaults (line 2)", "step (line 14)",
        "bwrap (network)", "agent entry (line 6)"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
}

TEST(SandboxKeyTest, BadValuesAreRefusedWithTheirLine) {
  TempDir dir;
  dir.Write("kind.yaml",
            "jobs:\n- name: j\n  plan:\n  - task: t\n    run: 'true'\n"
            "    sandbox: docker\n");
  dir.Write("block.yaml",
            "jobs:\n- name: j\n  plan:\n  - do:\n    - task: t\n"
            "      run: 'true'\n    sandbox: bwrap\n");
  dir.Write("network.yaml",
            "jobs:\n- name: j\n  plan:\n  - task: t\n    run: 'true'\n"
            "    sandbox: { kind: bwrap, network: maybe }\n");
  Ran kind = RunSteps(dir.path(), "validate kind.yaml");
  EXPECT_EQ(kind.exit_code, 65);
  EXPECT_NE(kind.out.find(":6: error: 'sandbox' must be bwrap or none"),
            std::string::npos)
      << kind.out;
  Ran block = RunSteps(dir.path(), "validate block.yaml");
  EXPECT_EQ(block.exit_code, 65);
  EXPECT_NE(block.out.find(":7: error: 'sandbox' applies to task"),
            std::string::npos)
      << block.out;
  Ran network = RunSteps(dir.path(), "validate network.yaml");
  EXPECT_EQ(network.exit_code, 65);
  EXPECT_NE(network.out.find("sandbox.network"), std::string::npos)
      << network.out;
}

}  // namespace
