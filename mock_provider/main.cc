// mock_provider --script FILE [--listen 127.0.0.1:PORT] [--by-conversation]
// Serves a mock script (docs/mock.md) until SIGINT or SIGTERM. Prints
// "listening on http://HOST:PORT" once ready (PORT 0 picks a free port).
#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "mock_provider/server.h"

namespace {

void Usage() {
  std::fprintf(
      stderr,
      "usage: mock_provider --script FILE [--listen HOST:PORT] "
      "[--by-conversation]\n"
      "  --listen HOST:PORT  where to listen (default 127.0.0.1:0, a free "
      "port)\n"
      "  --by-conversation   each conversation (known by its first user "
      "message)\n"
      "                      goes through its script from the first entry\n");
}

// Every held request is a connection: take all the descriptors allowed.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

// jemalloc's options, where it is linked (CMakeLists.txt, STEPS_JEMALLOC):
// one arena. Each thread keeps its own cache, so threads rarely meet on the
// arena's lock, and the memory taken stays what glibc's malloc takes (more
// arenas cost a 2000-wide fan-out 14% more memory for no less CPU).
// MALLOC_CONF adds to this or overrides it.
extern "C" {
extern const char* malloc_conf;
const char* malloc_conf = "narenas:1";
}

int main(int argc, char** argv) {
  std::string script_path;
  std::string listen = "127.0.0.1:0";
  steps::MockEngineOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--by-conversation") {
      options.by_conversation = true;
    } else if ((arg == "--script" || arg == "--listen") && i + 1 < argc) {
      (arg == "--script" ? script_path : listen) = argv[++i];
    } else if (arg == "--help" || arg == "-h") {
      Usage();
      return 0;
    } else {
      Usage();
      return 64;
    }
  }
  if (script_path.empty()) {
    Usage();
    return 64;
  }
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    std::fprintf(stderr, "mock_provider: --listen wants HOST:PORT\n");
    return 64;
  }
  std::string host = listen.substr(0, colon);
  int port = 0;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (...) {
    std::fprintf(stderr, "mock_provider: bad port in '%s'\n", listen.c_str());
    return 64;
  }

  auto script = steps::LoadMockScriptFile(script_path);
  if (!script.ok()) {
    std::fprintf(stderr, "%s\n", script.status().message().c_str());
    return 65;
  }
  // Signals are taken synchronously by a waiting thread, so the server
  // shuts down from ordinary code.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  RaiseOpenFileLimit();
  auto engine =
      std::make_shared<steps::MockEngine>(std::move(*script), options);
  steps::MockHttpServer server(engine);
  steps::Status started = server.Start(host, port);
  if (!started.ok()) {
    std::fprintf(stderr, "%s\n", started.message().c_str());
    return 1;
  }
  std::printf("listening on http://%s:%d\n", host.c_str(), server.port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  server.Stop();
  return 0;
}
