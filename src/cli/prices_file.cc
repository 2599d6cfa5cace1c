#include "cli/prices_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace steps::cli {

namespace {

constexpr off_t kMaxPricesBytes = off_t{64} << 20;

}  // namespace

const char* const kPricesHelp =
    "Price agents' answers from this table in LiteLLM's JSON format "
    "(model_prices_and_context_window.json) when their source has no "
    "price: and the provider reports no cost";

Result<std::shared_ptr<const agent::PriceTable>> LoadPrices(
    const std::string& path) {
  if (path.empty()) return std::shared_ptr<const agent::PriceTable>();
  // Non-blocking: opening a FIFO with no writer returns at once.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return InvalidArgument(path + ": " + std::strerror(errno));
  struct stat st {};
  std::string text;
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "not a regular file";
  } else if (st.st_size > kMaxPricesBytes) {
    problem = "over 64 MiB; a prices table is a few MB at most";
  } else {
    text.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < text.size()) {
      const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    text.resize(got);
  }
  ::close(fd);
  if (!problem.empty()) return InvalidArgument(path + ": " + problem);
  Result<agent::PriceTable> table = agent::PriceTable::Parse(text, path);
  if (!table.ok()) return table.status();
  return std::shared_ptr<const agent::PriceTable>(
      std::make_shared<agent::PriceTable>(std::move(*table)));
}

}  // namespace steps::cli
