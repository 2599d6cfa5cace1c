// The Slurm cluster the Slurm tests run on: the one-node cluster of
// scripts/slurm-up, started here when Slurm is installed but not running.
#ifndef STEPS_TESTS_COMMON_SLURM_CLUSTER_H_
#define STEPS_TESTS_COMMON_SLURM_CLUSTER_H_

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <array>
#include <string>

namespace steps::test_support {

struct SlurmCluster {
  // False when Slurm's packages are absent: the tests skip, saying so.
  bool installed = false;
  // Why the cluster is not usable although installed; empty when it is.
  std::string error;
  // The node's name.
  std::string node;
};

// What `command` printed on stdout, trimmed of the last newline.
inline std::string CommandOutput(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
    out.append(buf.data(), n);
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
    out.pop_back();
  return out;
}

// Starts the cluster once per process (scripts/slurm-up is idempotent, and
// serialised with flock across test processes).
inline const SlurmCluster& TestSlurmCluster() {
  static const SlurmCluster cluster = [] {
    SlurmCluster c;
    const char* probe =
        "command -v sbatch >/dev/null && command -v slurmctld >/dev/null && "
        "command -v slurmd >/dev/null && command -v munged >/dev/null";
    if (system(probe) != 0) return c;
    c.installed = true;
    // -o: the lock's descriptor is closed for slurm-up, so the daemons it
    // starts do not hold the lock for ever.
    const std::string up = "flock -o /tmp/steps-slurm-up.lock " STEPS_SOURCE_DIR
                           "/scripts/slurm-up >/tmp/steps-slurm-up.log 2>&1";
    if (system(up.c_str()) != 0) {
      c.error = "scripts/slurm-up failed: " +
                CommandOutput("tail -n 20 /tmp/steps-slurm-up.log");
      return c;
    }
    c.node = CommandOutput("sinfo -h -o %N");
    if (c.node.empty()) c.error = "sinfo names no node";
    return c;
  }();
  return cluster;
}

#define STEPS_REQUIRE_SLURM()                                               \
  do {                                                                      \
    const auto& slurm_cluster_ = ::steps::test_support::TestSlurmCluster(); \
    if (!slurm_cluster_.installed)                                          \
      GTEST_SKIP() << "Slurm is not installed: scripts/install-deps "       \
                      "installs slurm-wlm and munge";                       \
    ASSERT_EQ(slurm_cluster_.error, "");                                    \
  } while (0)

}  // namespace steps::test_support

#endif  // STEPS_TESTS_COMMON_SLURM_CLUSTER_H_
