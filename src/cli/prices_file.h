// `--prices FILE` (or STEPS_PRICES): the prices table of `steps run`,
// `steps resume` and `steps test`, read and checked before anything runs.
#ifndef STEPS_CLI_PRICES_FILE_H_
#define STEPS_CLI_PRICES_FILE_H_

#include <memory>
#include <string>

#include "agent/prices.h"
#include "core/status.h"

namespace steps::cli {

// The table in `path`; null for an empty path (no table). Refused: a path
// that is not a regular file (a FIFO would hold the run before it starts),
// a file over 64 MiB, text PriceTable::Parse refuses.
Result<std::shared_ptr<const agent::PriceTable>> LoadPrices(
    const std::string& path);

// The help text of the option, shared by the commands that take it.
extern const char* const kPricesHelp;

}  // namespace steps::cli

#endif  // STEPS_CLI_PRICES_FILE_H_
