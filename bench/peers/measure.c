/* Runs one contender as a child process and writes what it cost.
 *
 *   bench_peers_measure OUT.json COMMAND [ARG...]
 *
 * The child inherits stdin, stdout and stderr. When it ends, OUT.json gets
 * one JSON object: {"wall_s":..,"user_s":..,"sys_s":..,"cpu_s":..,
 * "max_rss_kib":..,"exit":..}, from wait4's rusage: CPU is the child's own
 * user + system time together with that of the descendants it waited for,
 * and max_rss_kib is the high-water mark of the largest of them. Exits with
 * the child's status (128 + signal when it was killed). */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double seconds(struct timeval t) { return t.tv_sec + t.tv_usec / 1e6; }

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_peers_measure OUT.json COMMAND [ARG...]\n");
    return 64;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return 71;
  }
  if (pid == 0) {
    execvp(argv[2], argv + 2);
    perror(argv[2]);
    _exit(127);
  }
  int status = 0;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) < 0) {
    perror("wait4");
    return 71;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  double wall = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  double user = seconds(ru.ru_utime), sys = seconds(ru.ru_stime);
  FILE* out = fopen(argv[1], "w");
  if (out == NULL) {
    perror(argv[1]);
    return 73;
  }
  fprintf(out,
          "{\"wall_s\":%.4f,\"user_s\":%.4f,\"sys_s\":%.4f,\"cpu_s\":%.4f,"
          "\"max_rss_kib\":%ld,\"exit\":%d}\n",
          wall, user, sys, user + sys, ru.ru_maxrss, code);
  fclose(out);
  return code;
}
