// core/libcurl.h: libcurl loaded at first use. A load that fails for want
// of file descriptors is not kept: once descriptors are back, the next call
// loads it.
#include "core/libcurl.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace steps {
namespace {

// The child loads libcurl for the first time in its life, so the test
// forks before anything of the parent's could have loaded it.
TEST(LibcurlTest, ALoadShortOfDescriptorsIsTriedAgain) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(60);  // A child that hangs ends in SIGALRM, not in ctest's limit.
    rlimit limit{64, 64};
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(10);
    std::vector<int> taken;
    for (int fd = dup(0); fd >= 0; fd = dup(0)) taken.push_back(fd);
    if (libcurl::Loaded()) _exit(11);
    if (libcurl::DescriptorShortage() != EMFILE) _exit(12);
    if (libcurl::Error().find("out of file descriptors") == std::string::npos)
      _exit(13);
    if (libcurl::easy_init() != nullptr) _exit(14);
    for (int fd : taken) close(fd);
    if (!libcurl::Loaded()) _exit(15);
    if (libcurl::DescriptorShortage() != 0 || !libcurl::Error().empty())
      _exit(16);
    CURL* easy = libcurl::easy_init();
    if (easy == nullptr) _exit(17);
    libcurl::easy_cleanup(easy);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child ended by signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0)
                                 << " (14, SIGALRM: it hung for 60 s)";
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "11: loaded without descriptors, 12: no shortage said, 13: the "
         "message does not say so, 14: a handle without libcurl, 15: not "
         "loaded once descriptors were back, 16: the shortage still said, "
         "17: no handle once loaded";
}

}  // namespace
}  // namespace steps
