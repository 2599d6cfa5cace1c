// A run whose state folder fills up: the real binary on a small tmpfs of
// its own (a mount namespace, so no root is needed), with a task printing
// more than the disk holds. The run still records how each step, the job
// and the run ended, with the output that fitted.
#include <gtest/gtest.h>

#include <string>

#include "common/steps_cli.h"
#include "common/store_sql.h"
#include "common/temp_dir.h"

namespace steps {
namespace {

using test_support::Has;
using test_support::RunInShell;
using test_support::StoreSql;
using test_support::TempDir;

// Runs `script` with a tmpfs of `megabytes` mounted on ./disk, in a mount
// namespace of its own; the mount is gone when it returns. Exit code 77
// when no such namespace can be made here.
test_support::CliResult WithSmallDisk(const std::string& dir, int megabytes,
                                      const std::string& script) {
  return RunInShell(
      dir, "mkdir -p disk && unshare --mount --map-root-user bash -c " +
               test_support::ShellQuote(
                   "mount -t tmpfs -o size=" + std::to_string(megabytes) +
                   "m tmpfs disk || exit 77\n" + script));
}

// Whether this machine lets a test mount a small disk of its own.
bool CanFillADisk(const TempDir& dir) {
  return WithSmallDisk(dir.path(), 1, "true").exit_code == 0;
}

constexpr const char* kCannotFillADisk =
    "needs `unshare --mount --map-root-user` and a tmpfs mount to fill a "
    "disk; this machine refuses them";

TEST(FullDiskCliTest, AStateFolderThatFillsUpStillRecordsHowTheRunEnded) {
  TempDir dir;
  if (!CanFillADisk(dir)) GTEST_SKIP() << kCannotFillADisk;
  // 20,000 lines of 2 KB: the store keeps the first 10,000 of a step, 20 MB
  // (twice over while in its log), and the disk has 40 MB, 16 of them kept
  // in reserve.
  dir.Write("flood.yaml",
            "jobs:\n"
            "- name: flood\n"
            "  plan:\n"
            "  - task: print\n"
            "    run: |\n"
            "      line=$(head -c 2000 /dev/zero | tr '\\0' x)\n"
            "      for i in $(seq 20000); do echo \"$i $line\"; done\n"
            "  - task: after\n"
            "    run: echo after the flood\n");
  const test_support::CliResult r =
      WithSmallDisk(dir.path(), 40,
                    "\"$STEPS\" run --plain --state-dir disk/state flood.yaml"
                    " > run.txt 2>&1; echo $? > run.rc\n"
                    "\"$STEPS\" show --state-dir disk/state > show.txt 2>&1\n"
                    "df -k disk | tail -n 1 > df.txt\n"
                    "mkdir -p copy && cp disk/state/steps.db* copy/\n");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string run = dir.Read("run.txt");
  const std::string show = dir.Read("show.txt");
  const std::string diag =
      run + "\n--- show:\n" + show + "\n--- df:\n" + dir.Read("df.txt");
  EXPECT_EQ(dir.Read("run.rc"), "0\n") << diag;
  EXPECT_TRUE(Has(run, "WRN store.disk_full")) << diag;
  EXPECT_TRUE(Has(run, "reserve_freed=16777216")) << diag;

  const std::string db = dir.path() + "/copy/steps.db";
  EXPECT_EQ(StoreSql(db, "SELECT status FROM runs"), "succeeded") << diag;
  EXPECT_EQ(StoreSql(db, "SELECT status FROM jobs"), "succeeded") << diag;
  EXPECT_EQ(StoreSql(db,
                     "SELECT group_concat(name || '=' || status, ' ')"
                     " FROM (SELECT name, status FROM steps"
                     " ORDER BY start_seq)"),
            "print=succeeded after=succeeded")
      << diag;
  EXPECT_EQ(StoreSql(db, "SELECT group_concat(status) FROM attempts"),
            "succeeded,succeeded")
      << diag;
  // What fitted before the disk filled is kept, in order from the first.
  const int lines =
      std::stoi(StoreSql(db,
                         "SELECT count(*) FROM output_lines WHERE step_id ="
                         " (SELECT step_id FROM steps WHERE name = 'print')"));
  EXPECT_GT(lines, 100) << diag;
  EXPECT_LT(lines, 10000) << diag;
  EXPECT_EQ(StoreSql(db,
                     "SELECT max(seq) FROM output_lines WHERE step_id ="
                     " (SELECT step_id FROM steps WHERE name = 'print')"),
            std::to_string(lines));
  // Read back on the full disk, the run shows as it ended.
  EXPECT_TRUE(Has(show, "succeeded")) << diag;
  EXPECT_FALSE(Has(show, "running")) << diag;
}

// Once the disk is full, each end keeps the last 4 KiB of its output, so
// that a dozen steps printing close to the most a step keeps (1 MiB) all
// end in the record, with the run.
TEST(FullDiskCliTest, EndsAfterTheDiskFilledKeepTheTailOfTheirOutput) {
  TempDir dir;
  if (!CanFillADisk(dir)) GTEST_SKIP() << kCannotFillADisk;
  std::string yaml =
      "jobs:\n"
      "- name: big\n"
      "  plan:\n"
      "  - task: flood\n"
      "    run: |\n"
      "      line=$(head -c 2000 /dev/zero | tr '\\0' x)\n"
      "      for i in $(seq 20000); do echo \"$i $line\"; done\n";
  for (int i = 1; i <= 12; ++i) {
    yaml += "  - task: big-" + std::to_string(i) +
            "\n"
            "    run: head -c 1000000 /dev/zero | tr '\\0' y; echo; echo end " +
            std::to_string(i) + "\n";
  }
  dir.Write("big.yaml", yaml);
  const test_support::CliResult r =
      WithSmallDisk(dir.path(), 40,
                    "\"$STEPS\" run --plain --state-dir disk/state big.yaml"
                    " > run.txt 2>&1; echo $? > run.rc\n"
                    "mkdir -p copy && cp disk/state/steps.db* copy/\n");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string run = dir.Read("run.txt");
  EXPECT_EQ(dir.Read("run.rc"), "0\n") << run.substr(0, 4000);
  EXPECT_TRUE(Has(run, "WRN store.disk_full")) << run.substr(0, 4000);
  EXPECT_FALSE(Has(run, "store.write_failed")) << run.substr(0, 4000);
  const std::string db = dir.path() + "/copy/steps.db";
  EXPECT_EQ(StoreSql(db, "SELECT status FROM runs"), "succeeded");
  EXPECT_EQ(StoreSql(db,
                     "SELECT count(*) FROM steps WHERE status ="
                     " 'succeeded'"),
            "13");
  EXPECT_EQ(StoreSql(db,
                     "SELECT count(*) FROM attempts WHERE status ="
                     " 'succeeded'"),
            "13");
  // The last one's end: the tail of what it printed, its last line kept.
  const std::string kept =
      StoreSql(db, "SELECT output FROM steps WHERE name = 'big-12'");
  EXPECT_LE(kept.size(), 4096u);
  EXPECT_GT(kept.size(), 4000u);
  EXPECT_TRUE(Has(kept, "end 12")) << kept.substr(kept.size() - 100);
}

// A disk that filled between runs, with the reserve a run left beside the
// store: the next run gets that room, and is recorded.
TEST(FullDiskCliTest, ARunOnADiskThatFilledSinceTheLastIsRecorded) {
  TempDir dir;
  if (!CanFillADisk(dir)) GTEST_SKIP() << kCannotFillADisk;
  dir.Write("p.yaml",
            "jobs:\n"
            "- name: j\n"
            "  plan:\n"
            "  - task: t\n"
            "    run: echo hello\n");
  const test_support::CliResult r = WithSmallDisk(
      dir.path(), 40,
      "\"$STEPS\" run --plain --state-dir disk/state p.yaml > first.txt 2>&1\n"
      "head -c 100000000 /dev/zero > disk/filler 2>/dev/null\n"
      "df -k disk | tail -n 1 > df.txt\n"
      "\"$STEPS\" run --plain --state-dir disk/state p.yaml > run.txt 2>&1;"
      " echo $? > run.rc\n"
      "mkdir -p copy && cp disk/state/steps.db* copy/\n");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string run = dir.Read("run.txt");
  const std::string diag = run + "\n--- df:\n" + dir.Read("df.txt");
  EXPECT_EQ(dir.Read("run.rc"), "0\n") << diag;
  EXPECT_TRUE(Has(run, "WRN store.disk_full")) << diag;
  EXPECT_FALSE(Has(run, "store.unavailable")) << diag;
  const std::string db = dir.path() + "/copy/steps.db";
  EXPECT_EQ(StoreSql(db, "SELECT group_concat(status) FROM runs"),
            "succeeded,succeeded")
      << diag;
  EXPECT_EQ(StoreSql(db,
                     "SELECT count(*) FROM steps WHERE status ="
                     " 'succeeded'"),
            "2")
      << diag;
}

// A conversation that goes on after the disk filled stores no more
// checkpoints (said once), so that its tool results (300 of 60 KB took all
// 16 MiB of the reserve) do not take the room its step's end needs.
TEST(FullDiskCliTest, AConversationAfterTheDiskFilledLeavesRoomForItsEnd) {
  TempDir dir;
  if (!CanFillADisk(dir)) GTEST_SKIP() << kCannotFillADisk;
  std::string yaml =
      "agents:\n"
      "- name: a\n"
      "  source: {model: openai/m}\n"
      "  tools: [run_shell]\n"
      "jobs:\n"
      "- name: j\n"
      "  plan:\n"
      "  - task: flood\n"
      "    run: |\n"
      "      line=$(head -c 2000 /dev/zero | tr '\\0' x)\n"
      "      for i in $(seq 20000); do echo \"$i $line\"; done\n"
      "  - agent: a\n"
      "    max_turns: 400\n"
      "    messages: [go]\n"
      "  - task: after\n"
      "    run: echo after\n"
      "mock:\n"
      "  a:\n";
  for (int i = 0; i < 20; ++i) {
    yaml +=
        "    - call: {name: run_shell, arguments: {command: \"head -c 60000"
        " /dev/zero | tr '\\\\0' q; echo turn" +
        std::to_string(i) + "\"}}\n";
  }
  yaml += "    - say: all done\n";
  dir.Write("agent.yaml", yaml);
  const test_support::CliResult r = WithSmallDisk(
      dir.path(), 40,
      "\"$STEPS\" run --mock --plain --state-dir disk/state agent.yaml"
      " > run.txt 2>&1; echo $? > run.rc\n"
      "mkdir -p copy && cp disk/state/steps.db* copy/\n");
  ASSERT_EQ(r.exit_code, 0) << r.out << dir.Read("run.txt");
  const std::string run = dir.Read("run.txt");
  const std::string tail =
      run.substr(run.size() > 3000 ? run.size() - 3000 : 0);
  EXPECT_EQ(dir.Read("run.rc"), "0\n") << tail;
  EXPECT_TRUE(Has(run, "WRN store.disk_full")) << tail;
  EXPECT_TRUE(Has(run, "WRN store.checkpoints_dropped step=j:2")) << tail;
  EXPECT_FALSE(Has(run, "store.write_failed")) << tail;
  const std::string db = dir.path() + "/copy/steps.db";
  EXPECT_EQ(StoreSql(db, "SELECT status FROM runs"), "succeeded") << tail;
  EXPECT_EQ(StoreSql(db,
                     "SELECT group_concat(status) FROM (SELECT status"
                     " FROM steps ORDER BY start_seq)"),
            "succeeded,succeeded,succeeded")
      << tail;
  EXPECT_EQ(StoreSql(db,
                     "SELECT agent_turns FROM steps WHERE step_id ="
                     " 'j:2'"),
            "21")
      << tail;
  EXPECT_EQ(StoreSql(db, "SELECT count(*) FROM conversation_log"), "0") << tail;
}

}  // namespace
}  // namespace steps
