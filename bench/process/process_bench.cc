// The cost of running a command through LocalProcessLauncher, next to the
// floor: posix_spawn + waitpid of the same `bash -c true`, with no pipes,
// no process group handling and no deadline.
//
//   process_bench [RUNS] [THREADS]     defaults: 500 runs, 50 threads
//
// Prints one line per measurement and the ratio launcher/floor.
#include <spawn.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "process/local_launcher.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

bool SpawnFloor() {
  char bash[] = "/bin/bash", c[] = "-c", cmd[] = "true";
  char* argv[] = {bash, c, cmd, nullptr};
  pid_t pid;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv, environ) != 0) {
    return false;
  }
  int status;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

bool ViaLauncher(steps::ProcessLauncher& launcher) {
  steps::ProcessRequest request = steps::ProcessRequest::Shell("true");
  request.deadline =
      steps::Deadline::After(steps::RealClock(), std::chrono::seconds(30));
  return launcher.Run(request).succeeded();
}

// Runs `one` `runs` times over `threads` threads; returns wall seconds.
template <typename Fn>
double Measure(int runs, int threads, Fn one) {
  std::atomic<int> next{0};
  std::atomic<int> failures{0};
  auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      while (next.fetch_add(1) < runs) {
        if (!one()) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& t : pool) t.join();
  double secs = Seconds(Clock::now() - start);
  if (failures > 0) std::fprintf(stderr, "%d runs failed\n", failures.load());
  return secs;
}

void Report(const char* what, int runs, int threads, double floor,
            double launcher) {
  std::printf(
      "%-10s runs=%d threads=%d  floor %.1f us/run  launcher %.1f us/run  "
      "ratio %.2f\n",
      what, runs, threads, floor / runs * 1e6, launcher / runs * 1e6,
      launcher / floor);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = argc > 1 ? std::atoi(argv[1]) : 500;
  int threads = argc > 2 ? std::atoi(argv[2]) : 50;
  steps::LocalProcessLauncher launcher;

  double floor_seq = Measure(runs, 1, SpawnFloor);
  double launcher_seq = Measure(runs, 1, [&] { return ViaLauncher(launcher); });
  Report("sequential", runs, 1, floor_seq, launcher_seq);

  double floor_par = Measure(runs, threads, SpawnFloor);
  double launcher_par =
      Measure(runs, threads, [&] { return ViaLauncher(launcher); });
  Report("parallel", runs, threads, floor_par, launcher_par);
  return 0;
}
